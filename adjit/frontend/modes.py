"""Enzyme's modes and activity annotations (`adjit.Forward`, `adjit.Duplicated`, ...): what a
derivative is asked for. Declarations of the API, MLIR-free: the autodiff entry points
(autodiff.py), the derivative compiler (derivative.py) and the GPU launcher all read them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..core.activity import Activity
from ..core.derivative_abi import DerivativeABI, Mode as Kind


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
    def kind(self) -> Kind:
        """The kind of derivative the pass generates for this mode (its `mode` attribute)."""
        return Kind.REVERSE if self.reverse else Kind.FORWARD


Forward = Mode("Forward", False, False)
ForwardWithPrimal = Mode("ForwardWithPrimal", False, True)
Reverse = Mode("Reverse", True, False)
ReverseWithPrimal = Mode("ReverseWithPrimal", True, True)
ReverseSplitWithPrimal = Mode("ReverseSplitWithPrimal", True, True, split=True)


# ---- activity annotations --------------------------------------------------------------
class Annotation:
    activity = ""
    # Made while compiling too (`adjit.Active(x)` inside an @adjit.jit function), holding
    # the code's values: codegen evaluates the constructor at compile time.
    _adjit_compile_time = True

    def __init__(self, val, dval=None):
        self.val, self.dval = val, dval

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.val!r})"


class Const(Annotation):
    activity = "const"

    def __init__(self, val):
        super().__init__(val)


class Active(Annotation):
    activity = "active"

    def __init__(self, val):
        super().__init__(val)


class Duplicated(Annotation):
    activity = "dup"

    def __init__(self, val, dval):
        super().__init__(val, dval)


class DuplicatedNoNeed(Duplicated):
    activity = "dupnoneed"


def derivative_abi(mode: Mode, anns: Sequence[Annotation], ret_activity: str = "const"
                   ) -> DerivativeABI:
    """The layout of the functions generated for `mode` and these annotations."""
    return DerivativeABI(mode.kind, tuple(Activity(a.activity) for a in anns),
                         Activity(ret_activity), mode.with_primal)
