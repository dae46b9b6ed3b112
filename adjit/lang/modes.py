"""Enzyme's modes and activity annotations (`adjit.Forward`, `adjit.Duplicated`, ...): what a
derivative is asked for. Declarations of the API, MLIR-free: the autodiff entry points
(autodiff.py), the derivative compiler (derivative.py) and the GPU launcher all read them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..core.activity import Activity
from ..core.derivative_abi import DerivativeABI, DerivativeMode


# ---- modes -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mode:
    name: str
    reverse: bool
    with_primal: bool
    split: bool = False

    def __repr__(self) -> str:
        return self.name

    @property
    def kind(self) -> DerivativeMode:
        """The kind of derivative the pass generates for this mode (its `mode` attribute)."""
        return DerivativeMode.REVERSE if self.reverse else DerivativeMode.FORWARD


Forward = Mode("Forward", False, False)
ForwardWithPrimal = Mode("ForwardWithPrimal", False, True)
Reverse = Mode("Reverse", True, False)
ReverseWithPrimal = Mode("ReverseWithPrimal", True, True)
ReverseSplitWithPrimal = Mode("ReverseSplitWithPrimal", True, True, split=True)


# ---- activity annotations --------------------------------------------------------------
class Annotation:
    activity = ""
    # (Made while compiling too, `adjit.Active(x)` inside an @adjit.jit function, holding
    # the code's values: compiler/lang_calls.py registers the constructors as evaluated.)

    def __init__(self, val, dval=None):
        self.val, self.dval = val, dval

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.val!r})"


class Const(Annotation):
    """``Const(x)``: an argument of :func:`adjit.autodiff` that is not differentiated (a
    bare argument is Const too).

    Example:
        ::

            import numpy as np
            import adjit


            @adjit.jit
            def weighted(x, w):
                return adjit.sum(x * w)


            x, dx = np.array([1.0, 2.0]), np.zeros(2)
            adjit.autodiff(adjit.Reverse, weighted, adjit.Duplicated(x, dx),
                           adjit.Const(np.array([3.0, 4.0])))
            print(dx)   # [3. 4.]: w is held constant
    """
    activity = "const"

    def __init__(self, val):
        super().__init__(val)


class Active(Annotation):
    """``Active(x)``: a float scalar (or small vector) argument whose derivative reverse mode
    returns, in the tuple :func:`adjit.autodiff` gives back. Arrays are not Active: give
    them a shadow, ``Duplicated(x, dx)``.

    Example:
        ::

            import adjit


            @adjit.jit
            def area(r):
                return 3.0 * r * r


            print(adjit.autodiff(adjit.Reverse, area, adjit.Active(2.0)))   # (12.0,)
    """
    activity = "active"

    def __init__(self, val):
        super().__init__(val)


class Duplicated(Annotation):
    """``Duplicated(x, dx)``: an argument with its shadow ``dx``. For an array, ``dx`` has
    its shape and dtype: reverse mode adds the gradient into it (``dx += d/dx``; zero it
    first), forward mode reads the tangent from it (and a kernel's written arrays' shadows
    receive the tangents). For a scalar in forward mode, ``dx`` is its tangent, a float
    (``Duplicated(3.0, 1.0)``).

    Example:
        ::

            import numpy as np
            import adjit


            @adjit.jit
            def energy(x):
                return adjit.sum(x * x)


            x, dx = np.array([1.0, 2.0]), np.zeros(2)
            adjit.autodiff(adjit.Reverse, energy, adjit.Duplicated(x, dx))
            print(dx)   # [2. 4.]: d energy / dx, added into dx


            @adjit.jit
            def cube(t):
                return t * t * t


            print(adjit.autodiff(adjit.Forward, cube, adjit.Duplicated(3.0, 1.0)))   # 27.0
    """
    activity = "dup"

    def __init__(self, val, dval):
        super().__init__(val, dval)


class DuplicatedNoNeed(Duplicated):
    """``DuplicatedNoNeed(x, dx)``: as :class:`Duplicated`, but the caller does not need the
    primal values the call writes into ``x`` (Enzyme's DuplicatedNoNeed), so the derivative
    may skip computing them.

    Example:
        ::

            import numpy as np
            import adjit


            @adjit.jit
            def energy(x):
                return adjit.sum(x * x)


            x, dx = np.array([1.0, 2.0]), np.zeros(2)
            adjit.autodiff(adjit.Reverse, energy, adjit.DuplicatedNoNeed(x, dx))
            print(dx)   # [2. 4.]
    """
    activity = "dupnoneed"


class BatchDuplicated(Duplicated):
    """Forward mode with N tangents at once (Enzyme's BatchDuplicated): `dval` is a tuple of
    N tangents (N arrays shaped like an array `val`, N floats for a float), and the result's
    tangent comes back as N of them. One pass over the primal computes all N (the pass's
    `width`): a Jacobian of n columns costs n/N passes, not n.

    In reverse mode (``adjit.autodiff(adjit.Reverse, ...)`` from Python, arrays only), N
    cotangents at one point: the primal and its tape run once, then the reverse sweep once
    per lane, lane k seeded by and adding into the k-th shadow of each BatchDuplicated
    argument (an Active scalar's derivative comes back as N of them), equal to N separate
    reverse calls at the cost of one primal.

    Raises:
        TypeError: (at :func:`adjit.autodiff`) an empty tuple of tangents, or Duplicated and
            BatchDuplicated arguments in one call.
        ValueError: BatchDuplicated arguments with different numbers of tangents.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import Array, f64

            @adjit.jit
            def f(x: Array[f64, 1]) -> f64:
                return x[0] * x[1]

            x = np.array([2.0, 3.0])
            t0, t1 = adjit.autodiff(adjit.Forward, f,
                                    adjit.BatchDuplicated(x, (np.array([1.0, 0.0]),
                                                              np.array([0.0, 1.0]))))
            print(t0, t1)   # 3.0 2.0: the gradient, in one pass
    """

    def __init__(self, val, dvals):
        super().__init__(val, tuple(dvals) if isinstance(dvals, (tuple, list)) else dvals)

    @property
    def width(self) -> int:
        return len(self.dval) if isinstance(self.dval, tuple) else 0


def batch_width(anns: Sequence[Annotation], where: str = "autodiff()") -> int:
    """The number of tangents per argument of a forward call (1 without BatchDuplicated):
    every BatchDuplicated argument must have the same number, at least one, and then no
    argument is plain Duplicated (its tangent would be missing in N - 1 lanes)."""
    batched = [a for a in anns if isinstance(a, BatchDuplicated)]
    if not batched:
        return 1
    widths = sorted({a.width for a in batched})
    if widths[0] < 1:
        raise TypeError(f"{where}: BatchDuplicated(x, (dx1, ..., dxN)) takes a tuple of at "
                        "least one tangent")
    if len(widths) > 1:
        raise ValueError(f"{where}: every BatchDuplicated argument has the same number of "
                         f"tangents; got {', '.join(map(str, widths))}")
    if any(isinstance(a, Duplicated) and not isinstance(a, BatchDuplicated) for a in anns):
        raise TypeError(f"{where}: Duplicated and BatchDuplicated arguments in one call; "
                        f"give every differentiated argument its {widths[0]} tangents")
    return widths[0]


def activity_key(anns: Sequence[Annotation]) -> tuple[str, ...]:
    """The activities of a call as a compiled derivative's key: with the width of batched
    tangents, which changes the generated functions."""
    acts = tuple(a.activity for a in anns)
    width = batch_width(anns)
    return acts if width == 1 else acts + (f"width={width}",)


def derivative_abi(mode: Mode, anns: Sequence[Annotation], ret_activity: str = "const"
                   ) -> DerivativeABI:
    """The layout of the functions generated for `mode` and these annotations."""
    return DerivativeABI(mode.kind, tuple(Activity(a.activity) for a in anns),
                         Activity(ret_activity), mode.with_primal,
                         1 if mode.reverse else batch_width(anns))
