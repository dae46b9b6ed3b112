"""`adjit.stop_gradient(x)`: x, through which no derivative flows (JAX's
`lax.stop_gradient`, Taichi's `stop_grad`, Enzyme's `__enzyme_ignore_derivatives`): a call
of an identity device function whose custom rules give a zero tangent (forward, every lane
of a batched one) and no adjoint (reverse), so every mode and the GPU treat it alike, and
the primal code inlines it away. Of an array, element-wise (builtin_calls.py).
"""
from __future__ import annotations

from . import rules
from .functions import device_function


@device_function
def no_derivative(x):
    return x


@rules.forward(no_derivative)
def _tangent(config, x):
    if config.width == 1:
        return x.val, 0.0
    return x.val, tuple(0.0 for _ in x.dval)


@rules.augmented_primal(no_derivative)
def _augmented(config, x):
    return rules.AugmentedReturn(x.val, None, None)


@rules.reverse(no_derivative)
def _adjoint(config, dret, tape, x):
    if x.is_const:
        return None
    return 0.0
