"""What a derivative call checks before anything runs (autodiff.py calls these; no MLIR, so a
GPU machine without the compiler checks the same):

- a read-only NumPy array where the derivative writes: the primal's written arguments, what
  the forward derivative writes (the tangents of those), and every shadow in reverse mode
  (the reverse pass adds the derivative into it). Plain calls refuse the same arrays
  (runtime/abi.py); writing them would crash on a read-only mapping or silently change an
  immutable buffer (`np.frombuffer(bytes)`).
- array arguments that overlap where the derivative writes one of them: the autodiff pass
  assumes distinct arguments do not alias (its activity analysis, what it tapes or reloads,
  whether shadows need atomics), so `k(x, x)` would get a silently wrong derivative.
- a split-mode tape used by a reverse call it was not recorded for: its layout (stack sizes,
  per-item slots) follows the shapes, the scalars and the compiled specialisation of the
  forward call, and a reverse call reading it with larger arrays would read past its end.

Plain (non-derivative) calls keep NumPy's and Numba's semantics: aliasing is allowed there.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..core.activity import SHADOWED
from ..runtime.device_array import DeviceArray


@dataclass(frozen=True)
class Slot:
    """One argument of the generated derivative functions, as messages name it: a primal
    (`param`), its shadow or tangent (`role`), or an ndrange extent."""
    param: str
    role: str = ""          # "", "shadow", "tangent", "ndrange", "cotangent"
    lane: int | None = None  # which of a batched argument's tangents (BatchDuplicated)

    def __str__(self) -> str:
        if self.role in ("shadow", "tangent"):
            lane = "" if self.lane is None else f" {self.lane}"
            return f"the {self.role}{lane} of {self.param!r}"
        if self.role == "ndrange":
            return self.param
        if self.role == "cotangent":
            return "the cotangent"
        return f"argument {self.param!r}"


def slots(params: Sequence[str], activity: Sequence[str], reverse: bool,
          ndim: int = 0, width: int = 1) -> list[Slot]:
    """The derivative functions' arguments in order (autodiff._flatten_args): each primal,
    followed by its shadow (reverse) or tangent (forward; `width` of them when batched) when
    Duplicated; then the extents of a kernel's ndrange."""
    out = []
    for p, a in zip(params, activity):
        out.append(Slot(p))
        if a in SHADOWED:
            if width == 1:
                out.append(Slot(p, "shadow" if reverse else "tangent"))
            else:
                out += [Slot(p, "tangent", k) for k in range(width)]
    return out + [Slot(f"ndrange[{k}]", "ndrange") for k in range(ndim)]


@dataclass(frozen=True)
class Plan:
    """What check_arrays checks for one kind of call: the slots' names, the positions this
    call writes (`writes`, sorted) and those the derivative writes in any of its calls
    (`writes_any`); shadows count as written in reverse mode (the reverse pass adds into
    them, whatever the analysis of one entry says)."""
    names: tuple[Slot, ...]
    writes: tuple[int, ...]
    writes_any: frozenset[int]


@functools.lru_cache(maxsize=4096)
def plan(params: tuple[str, ...], activity: tuple[str, ...], reverse: bool, ndim: int,
         extra: tuple[Slot, ...], writes: frozenset[int], writes_any: frozenset[int],
         width: int = 1) -> Plan:
    """The Plan of a call (made once per kind of call: a call's checks cost ~2 us)."""
    names = tuple(slots(params, activity, reverse, ndim, width)) + extra
    shadows = {k for k, s in enumerate(names) if s.role == "shadow"}
    return Plan(names, tuple(sorted(shadows | writes)), frozenset(shadows | writes_any))


_ARRAYS = (np.ndarray, DeviceArray)


def _overlap(a: Any, b: Any) -> bool:
    """Whether two arrays' bytes may overlap: NumPy's bounds check, exact for C-contiguous
    arrays, conservative for strided views (x[::2] and x[1::2] count as overlapping)."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return bool(np.may_share_memory(a, b))
    if isinstance(a, DeviceArray) and isinstance(b, DeviceArray):
        return (a.nbytes > 0 and b.nbytes > 0 and a.ptr < b.ptr + b.nbytes
                and b.ptr < a.ptr + a.nbytes)
    return False     # host and device memory: copied separately


def check_arrays(fname: str, plan: Plan, values: Sequence[Any]) -> None:
    """Refuses a read-only NumPy array at a position `plan` says this call writes, and two
    array arguments that overlap where the derivative writes one of them in any of its calls
    (the augmented forward call of split mode writes the primals, its reverse call the
    shadows)."""
    n = len(values)
    for k in plan.writes:
        if k < n:
            v = values[k]
            if isinstance(v, np.ndarray) and not v.flags.writeable:
                raise ValueError(f"autodiff of {fname}: {plan.names[k]} "
                                 f"{_why_written(fname, plan.names[k])}, but this NumPy "
                                 "array is read-only; pass a writable array")
    written = plan.writes_any
    if not written:
        return
    arrays = [k for k, v in enumerate(values) if isinstance(v, _ARRAYS)]
    for at, i in enumerate(arrays):
        for j in arrays[at + 1:]:
            if (i in written or j in written) and _overlap(values[i], values[j]):
                raise ValueError(_alias_message(fname, plan.names[i], plan.names[j],
                                                j in written))


def _why_written(fname: str, slot: Slot) -> str:
    if slot.role == "shadow":
        return "receives the derivative (the reverse pass adds into it)"
    if slot.role == "tangent":
        return (f"is written by the forward derivative (it receives the tangent of what "
                f"{fname} writes into {slot.param!r})")
    return f"is written by {fname}"


def _alias_message(fname: str, a: Slot, b: Slot, b_written: bool) -> str:
    where = f"autodiff of {fname}: {a} and {b} share memory"
    if a.role == "" and b.role == "":
        written = b if b_written else a
        return (f"{where}, and {fname} writes {written}: a derivative assumes that distinct "
                "array arguments do not overlap (k(x, x) would get a wrong derivative "
                "silently); pass a copy of one of them")
    return (f"{where}: each shadow or tangent the derivative writes must be an array of its "
            "own, overlapping no other argument or shadow (np.zeros_like(x) makes one)")


# ---- split-mode tapes ----------------------------------------------------------------------
@dataclass(frozen=True)
class Recording:
    """What a tape was recorded for: the compiled derivative (its identity: which function,
    activities and argument types, hence dtypes and ranks), the function's name and argument
    types for messages, and per argument slot the shape of an array or a scalar's value."""
    derivative: object
    fname: str
    types: tuple
    activity: tuple
    debug: bool
    names: tuple
    facts: tuple


def facts(values: Sequence[Any]) -> tuple:
    """Per argument: ("shape", shape) for an array, ("value", v) for a scalar."""
    return tuple(("shape", tuple(v.shape)) if isinstance(v, _ARRAYS) else ("value", v)
                 for v in values)


def _same_value(a: Any, b: Any) -> bool:
    if a == b:
        return True
    try:
        return math.isnan(a) and math.isnan(b)
    except TypeError:
        return False


def check_tape(recording: Recording, derivative: object, fname: str, types: Sequence,
               activity: Sequence[str], debug: bool, values: Sequence[Any]) -> None:
    """Refuses a reverse call that `recording`'s tape was not made for: another function's
    or specialisation's derivative (ValueError naming both), or arrays of other shapes or
    other scalar arguments than the forward call had (ValueError naming the argument and
    both). Array contents may change between the two calls (the tape holds what the reverse
    pass needs of them)."""
    r = recording
    if r.derivative is not derivative:
        if r.fname != fname:
            what = f"the forward half of {r.fname}'s thunk, not {fname}'s"
        elif tuple(r.types) != tuple(types):
            what = (f"argument types ({', '.join(map(repr, r.types))}), not "
                    f"({', '.join(map(repr, types))})")
        elif tuple(r.activity) != tuple(activity):
            what = f"activities {list(r.activity)}, not {list(activity)}"
        elif r.debug != debug:
            what = f"code compiled with ADJIT_DEBUG={int(r.debug)}, this call's has {int(debug)}"
        else:
            what = "another compiled derivative"
        raise ValueError(f"the reverse half of {fname}'s thunk was given a tape recorded by "
                         f"{what}: a tape serves only the reverse calls of the derivative "
                         "that made it")
    for name, (kind, then), v in zip(r.names, r.facts, values):
        if kind == "shape":
            now = tuple(v.shape) if isinstance(v, _ARRAYS) else None
            if now != then:
                raise ValueError(f"{fname}: the tape was recorded for {name} of shape "
                                 f"{then}; this reverse call passes shape {now}: a tape serves "
                                 "reverse calls with the forward call's shapes (the arrays' "
                                 "contents may change)")
        elif not _same_value(v, then):
            raise ValueError(f"{fname}: the tape was recorded with {name} = {_show(then)}; "
                             f"this reverse call passes {_show(v)}: a tape serves reverse "
                             "calls with the forward call's scalar arguments")


def _show(v: Any) -> str:
    return repr(v.item() if isinstance(v, np.generic) else v)
