"""The calling convention of generated derivatives: one copy, for the frontend (entries,
rules, launches from Python) and the autodiff pass (the functions it generates).

A derivative of a function `f(x0, x1, ...) -> (r0, ...)` is, by mode:
- forward (`DerivativeMode.FORWARD`): `f_fwd(x0, [dx0], x1, [dx1], ...)` — each argument, then its
  tangent unless it is Const — returning the primal results if `with_primal`, then the
  tangents of the float results unless the result is Const. With `width` N > 1 (batched
  tangents, Enzyme's BatchDuplicated) each tangent is N of them, lane after lane: argument k is
  followed by N tangents, and each differentiable result's tangent is N results;
- reverse (`DerivativeMode.REVERSE`), split in two:
  `f_aug(x0, [sx0], x1, [sx1], ...)` — each argument, then its shadow if it is Duplicated
  or DuplicatedNoNeed — returning the primal results if `with_primal`, then the tape;
  `f_rev(<f_aug's parameters>, <the float results' adjoints if the result is Active>,
  <the tape>)` returning one adjoint per Active argument.

The types are whatever the caller works with (MLIR types in the pass, adjit's types in the
frontend): the layout is about positions, and a caller says which results are floats. The
same holds for the values a call returns: `split_results`, `lanes` and `per_argument` read
them (IR values in the pass and the code generator, Python values from compiled entries).

`DerivativeEntries` is a compiled derivative as Python calls it: the entry functions the
compiler builds around the generated ones (`fwd`, `rev_all`: augmented then reverse in one
call, and split mode's `aug` and `rev`), one method per mode.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

from .activity import SHADOWED, Activity
from .types import ArrayType

T = TypeVar("T")


class DerivativeMode(str, enum.Enum):
    """The two kinds of derivative the pass generates (the `mode` of `adj.autodiff`)."""
    FORWARD = "forward"
    REVERSE = "reverse"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class DerivativeABI:
    mode: DerivativeMode
    activity: tuple[Activity, ...]
    ret_activity: Activity = Activity.CONST
    with_primal: bool = False
    width: int = 1      # tangents per argument and result (forward mode only)

    def __post_init__(self) -> None:
        # Strings read back from IR attributes become the enums (they compare equal).
        object.__setattr__(self, "mode", DerivativeMode(self.mode))
        object.__setattr__(self, "activity", tuple(Activity(a) for a in self.activity))
        object.__setattr__(self, "ret_activity", Activity(self.ret_activity))
        if self.width < 1 or (self.width > 1 and self.mode is not DerivativeMode.FORWARD):
            raise ValueError(f"a derivative's width is 1, or more in forward mode; got "
                             f"{self.width} in {self.mode} mode")

    def to_record(self) -> dict:
        """The layout as plain data (a compiled derivative's record on disk)."""
        return {"mode": self.mode.value, "activity": [a.value for a in self.activity],
                "ret_activity": self.ret_activity.value, "with_primal": self.with_primal,
                "width": self.width}

    @classmethod
    def from_record(cls, record: dict) -> DerivativeABI:
        return cls(record["mode"], tuple(record["activity"]), record["ret_activity"],
                   bool(record["with_primal"]), int(record["width"]))

    def has_shadow(self, k: int) -> bool:
        """Whether argument k is followed by its tangent (forward) or shadow (reverse)."""
        act = self.activity[k]
        return act != Activity.CONST if self.mode is DerivativeMode.FORWARD else act in SHADOWED

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

    # -- the values a call returns ---------------------------------------------------------------
    def split_results(self, outs: Sequence[T], n_results: int) -> tuple[list[T], list[T]]:
        """A derivative's results as (the primal's `n_results` results if `with_primal`, the
        rest): the rest is the tangents of the forward function, the tape of the augmented
        one, the adjoints of the augmented and reverse ones called in one (combined)."""
        n = n_results if self.with_primal else 0
        return list(outs[:n]), list(outs[n:])

    def lanes(self, tangents: Sequence[T]) -> list[tuple[T, ...]]:
        """The forward function's tangents per differentiable result: `width` each."""
        w = self.width
        return [tuple(tangents[j:j + w]) for j in range(0, len(tangents), w)]

    def per_argument(self, adjoints: Sequence[T], absent: Any = None) -> tuple:
        """The reverse function's results as one derivative per argument: its adjoint if it
        is Active, else `absent` (a Duplicated argument's derivative is in its shadow)."""
        it = iter(adjoints)
        return tuple(next(it) if act == Activity.ACTIVE else absent for act in self.activity)


def _outputs(out: Any) -> list:
    """A compiled entry's results as a list (it returns None, one value, or a tuple)."""
    return list(out) if isinstance(out, tuple) else [] if out is None else [out]


class DerivativeEntries:
    """A compiled derivative as Python calls it: its entries (`calls`: name -> callable; a
    kernel's extents follow the arguments, a pullback's cotangent after them), the primal's
    result types (`results`, core/types.py's) and the layout (`abi`), read once here for each
    mode. The products (compiler/derivative.py's `Derivative`, compiler/compiled.py's
    `LoadedDerivative`, api/cuda_jit.py's `GpuDerivative`) give those three. A derivative
    per argument is one per entry in `abi.activity` (a kernel's extents and a pullback's
    cotangent included: Const, so None)."""
    FORWARD = "fwd"            # the forward function
    COMBINED = "rev_all"       # the augmented function, then the reverse one on its tape
    AUGMENTED = "aug"          # split mode's halves
    REVERSE = "rev"

    abi: DerivativeABI
    results: list
    calls: dict[str, Callable[..., Any]]
    # per result of the Python function, its VecType, StructType or None where it returns
    # structs or vectors (`results` are then their scalars; the API gathers them), else None
    layout: list | None = None
    # how many cotangent arguments a pullback's entries take after the arguments: one array
    # (an array result), or a struct's or vector's float scalars
    cotangents: int = 1
    # a tree result's structure (lang/pytrees.TreeDef; several results `return a, b`: a
    # tuple of them): `results` are its leaves, which the API gathers again
    result_tree: Any = None

    def forward(self, args: Sequence) -> tuple[list, list[tuple]]:
        """Forward mode: (the primal results if `with_primal`, the tangents of each
        differentiable result, `width` of them)."""
        primal, tangents = self.abi.split_results(_outputs(self.calls[self.FORWARD](*args)),
                                                  len(self.results))
        return primal, self.abi.lanes(tangents)

    def reverse(self, args: Sequence, dret: float = 1.0) -> tuple[list, tuple]:
        """Reverse mode in one call, `dret` the result's adjoint: (the primal results if
        `with_primal`, one derivative per argument)."""
        out = self.calls[self.COMBINED](*args, *self._dret(dret))
        primal, adjoints = self.abi.split_results(_outputs(out), len(self.results))
        return primal, self.abi.per_argument(adjoints)

    def split_forward(self, args: Sequence) -> tuple[list, list]:
        """Split mode's augmented half: (the primal results if `with_primal`, the tape)."""
        return self.abi.split_results(_outputs(self.calls[self.AUGMENTED](*args)),
                                      len(self.results))

    def split_reverse(self, args: Sequence, dret: float, tape: Sequence) -> tuple:
        """Split mode's reverse half on `tape`: one derivative per argument."""
        out = self.calls[self.REVERSE](*args, *self._dret(dret), *tape)
        return self.abi.per_argument(_outputs(out))

    def _dret(self, dret: float) -> list:
        """The result's adjoint where the reverse function takes one, of the result's type."""
        # (its scalar types read once per product: every grad call from Python comes here)
        makers = self.__dict__.get("_dret_makers")
        if makers is None:
            makers = self.__dict__["_dret_makers"] = [
                t.np_dtype.type for t in self.abi.dret(self.results, _is_float)]
        return [make(dret) for make in makers]


def _is_float(t) -> bool:
    """Whether a result of adjit type `t` (a scalar type, or an array's) is of floats."""
    return (t.dtype if isinstance(t, ArrayType) else t).is_float
