"""Transforms called from Python: `g(*args)` for a transform compiled whole
(adjit.grad(adjit.grad(f)), jacfwd, jacrev, hessian) and `adjit.autodiff(mode, g, *args)` for
`g` an adjit.grad (what jvp and hvp of a function make, batched or not). Each runs an entry
that is a product of the compile service (service.transform): memoised by its key, kept in
the disk cache, loaded by a later process without MLIR.
"""
from __future__ import annotations

from typing import Any, Iterator, Sequence

from ..core.types import type_of_value
from ..runtime import profiling
from ..lang.modes import Annotation, BatchDuplicated, Const, Duplicated, Mode
from . import service


def call(g: Any, args: tuple) -> Any:
    """`g(*args)`, `args` NumPy arrays and scalars."""
    entry = service.transform(g, tuple(type_of_value(a) for a in args))
    if profiling.ACTIVE is None:
        return entry.call(*args)
    return _recorded(g.__name__, entry.call, args)


def _recorded(name: str, call, args) -> Any:
    """`call(*args)` recorded by the open profile: a transform compiled whole is one call,
    all its passes (forward, reverse, several of each) inside it."""
    with profiling.span(f"{name}: whole transform (one call)", "derivative") as s:
        out = call(*args)
        s.args["result_bytes"] = profiling.result_bytes(out)
    return out


def autodiff(mode: Mode, g: Any, args: Sequence) -> Any:
    """`adjit.autodiff(mode, g, *args)` (each argument an annotation, a bare value Const):
    what autodiff returns, the entry's values put where its meta's `returns` says."""
    anns = [a if isinstance(a, Annotation) else Const(a) for a in args]
    entry = service.transform(g, tuple(type_of_value(a.val) for a in anns), mode, anns)
    flat = [x for a in anns for x in (a.val, *_shadows(a))]
    got = (entry.call(*flat) if profiling.ACTIVE is None
           else _recorded(f"autodiff({mode.name}, {g.__name__})", entry.call, flat))
    out = _rebuild(entry.meta["returns"], iter(got if isinstance(got, tuple) else (got,)))
    return tuple(out) if len(out) > 1 else out[0]


def _shadows(a: Annotation) -> tuple:
    """An argument's shadow or tangent, or N tangents of a BatchDuplicated one, as the entry
    takes them after the argument (derivative_calls.compile_transform_autodiff)."""
    if isinstance(a, BatchDuplicated):
        return tuple(a.dval)
    return (a.dval,) if isinstance(a, Duplicated) else ()


def _rebuild(returns: Any, got: Iterator) -> Any:
    """`returns` (nested lists of 1, a value, and None) with the values from `got`: lists as
    tuples."""
    if isinstance(returns, list):
        return tuple(_rebuild(x, got) for x in returns)
    return None if returns is None else next(got)
