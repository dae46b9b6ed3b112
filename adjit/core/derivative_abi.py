"""The calling convention of generated derivatives: one copy, for the frontend (entries,
rules, launches from Python) and the autodiff pass (the functions it generates).

A derivative of a function `f(x0, x1, ...) -> (r0, ...)` is, by mode:
- forward (`Mode.FORWARD`): `f_fwd(x0, [dx0], x1, [dx1], ...)` — each argument, then its
  tangent unless it is Const — returning the primal results if `with_primal`, then the
  tangents of the float results unless the result is Const. With `width` N > 1 (batched
  tangents, Enzyme's BatchDuplicated) each tangent is N of them, lane after lane: argument k is
  followed by N tangents, and each differentiable result's tangent is N results;
- reverse (`Mode.REVERSE`), split in two:
  `f_aug(x0, [sx0], x1, [sx1], ...)` — each argument, then its shadow if it is Duplicated
  or DuplicatedNoNeed — returning the primal results if `with_primal`, then the tape;
  `f_rev(<f_aug's parameters>, <the float results' adjoints if the result is Active>,
  <the tape>)` returning one adjoint per Active argument.

The types are whatever the caller works with (MLIR types in the pass, adjit's types in the
frontend): the layout is about positions, and a caller says which results are floats.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

from .activity import SHADOWED, Activity

T = TypeVar("T")


class Mode(str, enum.Enum):
    """The two kinds of derivative the pass generates (the `mode` of `adj.autodiff`)."""
    FORWARD = "forward"
    REVERSE = "reverse"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class DerivativeABI:
    mode: Mode
    activity: tuple[Activity, ...]
    ret_activity: Activity = Activity.CONST
    with_primal: bool = False
    width: int = 1      # tangents per argument and result (forward mode only)

    def __post_init__(self) -> None:
        # Strings read back from IR attributes become the enums (they compare equal).
        object.__setattr__(self, "mode", Mode(self.mode))
        object.__setattr__(self, "activity", tuple(Activity(a) for a in self.activity))
        object.__setattr__(self, "ret_activity", Activity(self.ret_activity))
        if self.width < 1 or (self.width > 1 and self.mode is not Mode.FORWARD):
            raise ValueError(f"a derivative's width is 1, or more in forward mode; got "
                             f"{self.width} in {self.mode} mode")

    def has_shadow(self, k: int) -> bool:
        """Whether argument k is followed by its tangent (forward) or shadow (reverse)."""
        act = self.activity[k]
        return act != Activity.CONST if self.mode is Mode.FORWARD else act in SHADOWED

    # -- parameters ----------------------------------------------------------------------------
    def inputs(self, types: Sequence[T]) -> list[T]:
        """The parameters of the forward or augmented function: each argument's type, then
        again for its tangent or shadow (`width` times)."""
        out: list[T] = []
        for k, t in enumerate(types):
            out.append(t)
            if self.has_shadow(k):
                out += [t] * self.width
        return out

    def flatten(self, values: Sequence[T], shadows: Sequence[T | None]) -> list[T]:
        """`inputs` for values: each argument, then its shadow or tangent where it has one
        (with `width` N > 1, `shadows[k]` is a sequence of N)."""
        out: list[T] = []
        for k, (v, s) in enumerate(zip(values, shadows)):
            out.append(v)
            if self.has_shadow(k):
                out += [s] if self.width == 1 else list(s)
        return out

    def primal_positions(self) -> list[int]:
        """Where each argument is among `inputs`."""
        out, at = [], 0
        for k in range(len(self.activity)):
            out.append(at)
            at += 1 + self.width if self.has_shadow(k) else 1
        return out

    def shadow_positions(self) -> list[int | None]:
        """Where each argument's (first) tangent or shadow is among `inputs` (None: it has
        none)."""
        return [p + 1 if self.has_shadow(k) else None
                for k, p in enumerate(self.primal_positions())]

    def reverse_inputs(self, types: Sequence[T], results: Sequence[T],
                       is_float: Callable[[T], bool], tape: Sequence[T] = ()) -> list[T]:
        """The parameters of the reverse function: the augmented function's, the adjoints of
        the results (`dret`), the tape."""
        return [*self.inputs(types), *self.dret(results, is_float), *tape]

    # -- results -------------------------------------------------------------------------------
    def forward_results(self, results: Sequence[T], differentiable: Callable[[T], bool]
                        ) -> list[T]:
        """The results of the forward function: the primal ones if asked, then the tangents
        of the differentiable ones unless the result is Const (`width` each)."""
        out = list(results) if self.with_primal else []
        if self.ret_activity != Activity.CONST:
            out += [t for t in results if differentiable(t) for _ in range(self.width)]
        return out

    def dret(self, results: Sequence[T], is_float: Callable[[T], bool]) -> list[T]:
        """The adjoints the reverse function takes for the results (Active float ones)."""
        return ([t for t in results if is_float(t)] if self.ret_activity == Activity.ACTIVE
                else [])

    def adjoints(self, types: Sequence[T]) -> list[T]:
        """The results of the reverse function: one adjoint per Active argument."""
        return [t for t, act in zip(types, self.activity) if act == Activity.ACTIVE]
