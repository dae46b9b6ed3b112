"""`adjit.debug`: seeing inside compiled code.

**print.** Python's own ``print(...)`` works inside ``@adjit.kernel``, ``@adjit.func`` and
``@adjit.jit`` code, on the CPU (C's ``printf``) and on a GPU (CUDA's ``vprintf``). It prints

- string constants and Python numbers as Python does; ``sep=`` and ``end=`` (constant
  strings); ``flush=`` is accepted (every print is flushed anyway);
- integers as Python does; floats as Python does (``2.0``, ``0.1``, ``nan``), with 16
  significant digits for f64 and 8 for f32 (C has no shortest round-trip conversion: a
  value needing Python's 17th digit shows 16; write ``f"{x:.17g}"`` for every digit); bools
  as ``True``/``False``;
- vectors, matrices and quaternions as NumPy prints the same array (``[1. 2. 3.]``), each
  component as a scalar, without NumPy's column padding; a tuple as Python does;
- a 1-D array as NumPy's ``str`` (``[0. 1. 2.]``), summarised above 1000 elements as NumPy does
  (``[0 1 2 ... 997 998 999]``); a 0-d array as its element; larger ranks are refused
  (print rows or elements);
- f-strings whose format specs printf can say: ``{x}``, ``{x:.3f}``, ``{x:e}``, ``{x:+8.2g}``,
  ``{i:5d}``, ``{i:x}``, ``{x:<10}`` (fill only with spaces or ``0``; no ``^``, ``=``, ``,``,
  ``_`` or ``%``). An integer printed with ``x``/``X``/``o`` shows a negative value in two's
  complement, as C does.

Anything else (``file=``, an array of rank 2, a struct, a spec printf cannot express) is a
``CompilationError`` at the line of the print.

On the CPU each print is one ``printf`` followed by ``fflush``, so its text has left C's
buffer before the call returns and shows in order with Python's own prints in a terminal,
and ``pytest``'s ``capfd`` captures it (``capsys``, which replaces ``sys.stdout`` only, does
not see C's output). On a GPU the text arrives when the host next synchronises with the
device (adjit's launches from Python do, after each launch); the device's printf buffer
holds 1 MiB by default, and lines past it are lost.

**Order.** The work items of a kernel run in no defined order (a thread pool on the CPU,
thousands of threads on a GPU), so neither do their prints: each print statement's text is
one piece and lines never mix, but their order differs from run to run. A 1-D array is
printed element by element, so two work items printing arrays may interleave.

**Derivatives.** Printing is a primal effect with no derivative. In reverse mode (``grad``,
``vjp``, ``value_and_grad``) the augmented forward pass prints and the reverse sweep does
not, so a grad prints once what the function prints; in forward mode (``jvp``, ``autodiff``
Forward) the primal prints once, also for a batch of tangents. A transform that runs several
passes prints once per pass: ``jacfwd`` per block of columns, ``jacrev`` per output element
(each may run the function once more for its result's shape), ``hessian`` per pass of its
inner and outer transforms. Code that reverse mode runs again prints again: the steps of an
``adjit.checkpointed`` loop that the reverse sweep recomputes from its snapshots, and the
step of ``adjit.fixed_point``, which its adjoint iterations run. To see derivative values,
use :func:`print_adjoint`.

Example:
    ::

        import numpy as np
        import adjit

        @adjit.kernel
        def scale(x, y, a: float):
            i = adjit.index()
            y[i] = a * x[i]
            print(f"item {i}: {x[i]:.2f} -> {y[i]:.2f}")   # three lines, in any order

        @adjit.jit
        def norm(v):
            print("norm of", v, "with", v.shape[0], "elements")   # norm of [0 1 2] with 3 elements
            return np.sqrt(np.sum(v * v))

        y = np.zeros(3)
        scale(np.arange(3.0), y, 2.0, ndrange=3)
        print(y, norm(np.arange(3.0)))   # [0. 2. 4.] 2.236...
"""
from __future__ import annotations

import functools

__all__ = ["print_adjoint"]


def print_adjoint(x, label: str = ""):
    """``x``, unchanged; in reverse mode the derivative prints the adjoint that arrives at
    ``x`` during the reverse sweep, as ``<label> adjoint: <value>``, and in forward mode the
    tangent of ``x`` as ``<label> tangent: <value>``. A float scalar of compiled code; the
    label a string constant. Called from Python, it returns ``x`` and prints nothing.

    The adjoint printed is the derivative of the differentiated result with respect to ``x``
    at that point of the program (the reverse sweep's running total for ``x``), so for
    ``y = u * u`` with ``u = print_adjoint(x)``, ``grad`` prints ``2 * x`` times the seed.
    The primal itself prints nothing. In a kernel every work item prints its own, in no
    defined order.

    Args:
        x: a float scalar (f32 or f64) of compiled code.
        label: a constant string that starts the printed line.

    Returns:
        ``x``.

    Example:
        ::

            import adjit

            @adjit.jit
            def f(x: adjit.f64) -> adjit.f64:
                u = adjit.debug.print_adjoint(x, label="x")
                return u * u

            print(adjit.grad(f)(3.0))   # prints "x adjoint: 6" (from C), then 6.0
    """
    return x


@functools.cache
def adjoint_printer(label: str):
    """The identity device function whose rules print the adjoint (reverse) or tangent
    (forward) arriving at its argument, `label` first. Made on first use of the label (as
    stop_gradient's identity is: parsing the rules' source costs `import adjit`)."""
    from . import rules
    from .functions import device_function

    adjoint_text = f"{label} adjoint:" if label else "adjoint:"
    tangent_text = f"{label} tangent:" if label else "tangent:"

    @device_function
    def print_adjoint_identity(x):
        return x

    @rules.forward(print_adjoint_identity)
    def _tangent(config, x):
        print(tangent_text, x.dval)
        return print_adjoint_identity(x.val), x.dval

    @rules.augmented_primal(print_adjoint_identity)
    def _augmented(config, x):
        return rules.AugmentedReturn(print_adjoint_identity(x.val), None, None)

    @rules.reverse(print_adjoint_identity)
    def _adjoint(config, dret, tape, x):
        print(adjoint_text, dret)
        if x.is_const:
            return None
        return dret

    return print_adjoint_identity
