"""`adjit.stop_gradient(x)`: x, through which no derivative flows (JAX's
`lax.stop_gradient`, Taichi's `stop_grad`, Enzyme's `__enzyme_ignore_derivatives`): a call
of an identity device function whose custom rules give a zero tangent (forward, every lane
of a batched one) and no adjoint (reverse), so every mode and the GPU treat it alike, and
the primal code inlines it away. The rules' primal is itself a stop_gradient call, not x:
the derivative code they become is differentiated again at higher order (grad(grad(f)),
hvp), and must still hold x constant there (JAX's second derivative of x * stop_gradient(x)
is 0). Of an array, element-wise (compiler/lang_calls.py compiles a call). The function and
its rules are made when code first uses stop_gradient (parsing their source costs `import
adjit` 3 ms).
"""
from __future__ import annotations

import functools


@functools.cache
def no_derivative():
    """The identity device function with zero-derivative rules."""
    from . import rules
    from .functions import device_function

    @device_function
    def stop_gradient_identity(x):
        return x

    @rules.forward(stop_gradient_identity)
    def _tangent(config, x):
        if config.width == 1:
            return stop_gradient(x.val), 0.0
        return stop_gradient(x.val), tuple(0.0 for _ in x.dval)

    @rules.augmented_primal(stop_gradient_identity)
    def _augmented(config, x):
        return rules.AugmentedReturn(stop_gradient(x.val), None, None)

    @rules.reverse(stop_gradient_identity)
    def _adjoint(config, dret, tape, x):
        if x.is_const:
            return None
        return 0.0

    return stop_gradient_identity


def stop_gradient(x):
    """``x``, through which no derivative flows: its derivative is zero in every mode (in
    compiled code; from Python, ``x`` itself).

    Args:
        x: a scalar, vector or array.

    Returns:
        ``x``'s value.

    Example:
        ::

            import adjit

            @adjit.jit
            def f(x: adjit.f64) -> adjit.f64:
                return x * adjit.stop_gradient(x)     # d/dx = stop_gradient(x) = x

            print(f(3.0), adjit.grad(f)(3.0))         # 9.0 3.0
    """
    return x
