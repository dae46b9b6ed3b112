"""Struct and vector arguments of derivatives called in compiled code (derivative_calls.py):
each is its leaves there, as in the differentiated function's IR (a struct parameter is its
leaf fields, a vector its components: struct_values.py, vectors.py), so the derivative call
takes scalars and arrays only; its derivatives are gathered again into a struct of the same
type (JAX's pytree dataclasses, Warp's adjoint structs: integer fields get zero) or a vector.

An annotation of a struct or vector applies to each leaf: `Active(s)` (what grad and a
pullback give) makes its float scalars Active and its float arrays Duplicated with fresh
zero shadows (@jit code only: they are new arrays); `Duplicated(s, ds)` in forward mode
(jvp) pairs each float leaf with `ds`'s; integer leaves are Const.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from . import arrays as A
from . import scalar_ops as S
from . import struct_values as SV
from . import vectors as V
from ..core.errors import UserError
from ..lang.modes import Active, Annotation, BatchDuplicated, Const, Duplicated
from .values import Array, Literal, PyObj, Scalar, StructValue, Vec, VecArray


@dataclass
class Expanded:
    """`anns` over scalars and arrays; `types`, the differentiated function's argument types
    (a struct's leaves, a vector as its VecType: what a call of it specialises on);
    `gather(flat)`: per-leaf derivatives (as derivative_call reads them) to per-argument
    ones."""
    anns: list
    types: list
    gather: Callable[[list], list]


def structured(anns: Sequence[Annotation]) -> bool:
    return any(isinstance(a.val, (StructValue, Vec)) for a in anns)


def _flat(v) -> list:
    """A leaf's values as the IR has them: a vector's components, an array of vectors'
    array."""
    if isinstance(v, Vec):
        return list(v.items)
    if isinstance(v, VecArray):
        return [v.array]
    return [v]


def _leaves_of(v, what: str) -> list:
    return SV.leaf_values(v, what) if isinstance(v, StructValue) else [v]


def expand(anns: Sequence[Annotation], reverse: bool, where: str, name: str) -> Expanded:
    flat_anns, types, spans = [], [], []
    for k, a in enumerate(anns):
        what = f"{name}(): argument {k}"
        v = a.val
        if not isinstance(v, (StructValue, Vec)):
            spans.append((len(flat_anns), 1, None))
            types.append(len(flat_anns))     # (the type of derivative_call's value there)
            flat_anns.append(a)
            continue
        if isinstance(a, BatchDuplicated):
            raise UserError(f"{what} is a {S.describe(v)}: batched tangents take scalars and "
                            "arrays")
        items = _leaves_of(v, what)
        types.extend(V.operand_type(x) for x in items)
        tangents = None
        if isinstance(a, Duplicated):
            if reverse:
                raise UserError(f"{what} is {S.describe(v)} marked Duplicated: in reverse mode "
                                "inside compiled code its derivative is returned (grad, "
                                "vjp, or autodiff with Active)")
            d = a.dval
            if not (isinstance(d, type(v)) and d.type == v.type):
                raise UserError(f"{what}: the tangent of {S.describe(v)} must be of the same "
                                f"type, got {S.describe(d)}")
            tangents = [y for x in _leaves_of(d, f"{what}'s tangent") for y in _flat(x)]
        start = len(flat_anns)
        shadows = {}
        for j, x in enumerate(y for x in items for y in _flat(x)):
            dtype = x.type.dtype if isinstance(x, Array) else x.type
            if isinstance(a, Const) or not dtype.is_float:
                flat_anns.append(Const(x))
            elif tangents is not None:
                flat_anns.append(Duplicated(x, tangents[j]))
            elif isinstance(x, Array):
                if where != "jit":
                    raise UserError(f"{what}: the derivative of {S.describe(v)}, which holds "
                                    "an array, is a new array, which only @adjit.jit "
                                    "functions make")
                shadows[len(flat_anns)] = A.alloc(dtype, A.dims(x))
                A.fill(shadows[len(flat_anns)], Literal(0.0))
                flat_anns.append(Duplicated(x, shadows[len(flat_anns)]))
            else:
                flat_anns.append(Active(x))
        spans.append((start, len(flat_anns) - start, (a, shadows)))

    def gather(flat: list) -> list:
        out = []
        for start, n, structured_arg in spans:
            if structured_arg is None:
                out.append(flat[start])
                continue
            a, shadows = structured_arg
            if isinstance(a, Const) or isinstance(a, Duplicated):
                out.append(PyObj(None))
                continue
            grads = [shadows.get(start + j, flat[start + j]) for j in range(n)]
            out.append(_regrouped(a.val, grads, where))
        return out
    return Expanded(flat_anns, types, gather)


def _zero_like(x, where: str):
    """The derivative of an integer leaf (or of a float one the pass left out): zero."""
    if isinstance(x, Array):
        if where != "jit":
            raise UserError("the derivative of a struct holding an integer array is a new "
                            "(zero) array, which only @adjit.jit functions make")
        z = A.alloc(x.type.dtype, A.dims(x))
        A.fill(z, Literal(0))
        return z
    return S.as_scalar(Literal(0), x.type)


def _regrouped(v, grads: list, where: str):
    """The derivative of argument `v` (a struct or vector) from its flat leaves' ones."""
    flat_values = [y for x in (_leaves_of(v, "") if isinstance(v, StructValue) else [v])
                   for y in _flat(x)]
    filled = [g if isinstance(g, (Scalar, Array)) else _zero_like(x, where)
              for g, x in zip(grads, flat_values)]
    if isinstance(v, Vec):
        return V.of_type(v.type, filled)
    return SV.from_leaves(v.type, filled)[0]
