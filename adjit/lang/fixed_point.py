"""`adjit.fixed_point(step, x0, *params, tol=, max_iter=)`: the fixed point x* = step(x*,
*params) of an iteration, differentiated implicitly (Christianson's two-phase method, JAX's
`custom_root`/`fixed_point` recipe): the reverse pass solves the adjoint fixed point
lambda = xbar + (d step / d x)^T lambda at x* by the same iteration, then gives the
parameters (d step / d params)^T lambda; memory does not grow with the iteration count (the
tape holds x* alone).

In compiled code a call becomes a function of the unit marked `adj.fixed_point`, whose
reverse derivative the autodiff pass gives (compiler/fixed_point_calls.py compiles a call;
this module is the declaration and the iteration from Python). Primal and forward mode run
the iteration as it is (forward mode's tangent iteration converges with it).
"""
from __future__ import annotations

import numpy as np


def fixed_point(step, x0, *params, tol: float = 1e-10, max_iter: int = 1000,
                must_converge: bool = True):
    """``x* = step(x*, *params)``, iterating ``x <- step(x, *params)`` from ``x0`` until the
    largest change is at most ``tol``: ``max |x_new - x|`` over the elements (the infinity
    norm of the change between successive iterates, absolute, in x's units; NaN never
    converges).

    If `max_iter` steps run without that, it is a RuntimeError naming the iteration count
    and the last change (in @jit code, its decade), and so is an adjoint (reverse-mode)
    solve that does not converge within `max_iter` steps to the same `tol`; with
    `must_converge=False` the last iterate is returned as it is (and the gradient is the
    unconverged adjoint's). An empty x0 is its own fixed point.

    In @adjit.jit code, differentiable: the gradient solves the adjoint fixed point at x*
    (implicit differentiation), so it costs no memory per iteration. Components the step
    copies unchanged from x (a Dirichlet boundary, `out[0] = x[0]`) keep x0's values, and
    their adjoint goes to x0; a step that conserves some other combination of x (a sum)
    makes the adjoint system singular, a RuntimeError at the call. From Python, the
    iteration runs in Python (each step compiled).

    Args:
        step: an ``@adjit.jit`` function ``step(x, *params)`` returning the next iterate
            (of x's shape).
        x0: the first iterate (an array).
        *params: the step's other arguments, differentiated through the fixed point.
        tol: the largest change ``max |x_new - x|`` (absolute) at which it stops: a
            constant, or in @jit code a value given at run time (a function argument; the
            adjoint solve uses it too, and its own derivative is zero: it says when to
            stop, not what x* is). A negative or NaN run-time tol is a ValueError.
        max_iter: the most iterations (and adjoint iterations).
        must_converge: False returns the last iterate instead of raising.

    Returns:
        The fixed point x*.

    Raises:
        RuntimeError: no convergence within ``max_iter`` (``adjit.fixed_point did not
            converge: after max_iter=... iterations the largest change between successive
            iterates (max |x_new - x|, absolute) was ..., above tol=...``).

    Example:
        Newton's iteration for sqrt(a), and its derivative d sqrt(a)/da = 1/(2 sqrt(a))::

            import numpy as np
            import adjit
            from adjit import Array, f64

            @adjit.jit
            def newton(x: Array[f64, 1], a: f64) -> Array[f64, 1]:
                return 0.5 * (x + a / x)

            @adjit.jit
            def root(a: f64) -> f64:
                x = adjit.fixed_point(newton, adjit.ones(1), a, tol=1e-12)
                return x[0]

            print(root(2.0), adjit.grad(root)(2.0))   # 1.4142135... 0.3535533...
            assert np.isclose(adjit.grad(root)(2.0), 0.5 / np.sqrt(2.0))

            @adjit.jit
            def root_to(a: f64, tol: f64) -> f64:     # the tolerance given at run time
                return adjit.fixed_point(newton, adjit.ones(1), a, tol=tol)[0]

            print(root_to(2.0, 1e-4), adjit.grad(root_to)(2.0, 1e-12))
            assert abs(root_to(2.0, 1e-4) - np.sqrt(2.0)) < 1e-4
    """
    x, change = x0, float("inf")
    if np.size(x0) == 0:
        return x0
    for _ in range(max_iter):
        new = step(x, *params)
        change = float(np.max(np.abs(np.asarray(new) - np.asarray(x))))
        x = new
        if change <= tol:
            return x
    if must_converge:
        raise RuntimeError(f"adjit.fixed_point did not converge: after max_iter={max_iter} "
                           f"iterations the largest change between successive iterates "
                           f"(max |x_new - x|, absolute) was {change:g}, above tol={tol:g}; "
                           "raise max_iter, loosen tol, or pass must_converge=False to take "
                           "the last iterate as it is")
    return x
