"""np.array(obj, dtype=None) and np.asarray(obj, dtype=None) in compiled code, of what a
function computes: a (nested) list or tuple of scalars (`np.array([a, b, c])`,
`np.array([[a, b], [c, d]])`), of arrays of one shape (a stack of them), or an array (a
copy; np.asarray's is the array itself); and x.astype(dtype), a copy in dtype. Its dtype is NumPy's: the promotion of the items'
types, where a Python number counts as NumPy's default type (np.array([x_f32, 1.0]) is
float64, as NumPy's: no weak scalars in a list), or dtype=. A new array, whose items are
stored into it; the derivative flows through those stores."""
from __future__ import annotations

from mlir.dialects import arith, memref

import numpy as np

from ..core.errors import UserError
from ..core.types import ScalarType, f64, promote
from ..dialects import adj
from . import arrays as A
from . import scalar_ops as S
from .builtin_calls import creation_args, register_builtin
from .lazy import consumed
from .numpy_calls import copy_into
from .values import Array, ArrayExpr, Literal, PyObj, Scalar, SliceValue


def _leaves(obj, depth: int, at: tuple, out: list, sizes: list) -> None:
    """The items of a nested list at their positions, and the list's sizes per level;
    NumPy's 'inhomogeneous shape' error where a level's lengths or depths differ."""
    if isinstance(obj, tuple):
        if len(sizes) == depth:
            sizes.append(len(obj))
        elif sizes[depth] != len(obj) or sizes[depth] is None:
            raise UserError("np.array(): the nested lists have an inhomogeneous shape "
                            f"(lengths {sizes[depth]} and {len(obj)} at depth {depth})")
        for k, item in enumerate(obj):
            _leaves(item, depth + 1, at + (k,), out, sizes)
        return
    if len(sizes) > depth and sizes[depth] is not None:
        raise UserError("np.array(): the nested lists have an inhomogeneous shape (a list "
                        "beside a non-list at one depth)")
    if not isinstance(obj, (Scalar, Literal, Array, ArrayExpr)) or (
            isinstance(obj, Literal) and not isinstance(obj.value, (bool, int, float))):
        raise UserError(f"np.array() of {S.describe(obj)} is not supported in adjit (it "
                        "takes numbers, arrays and nested lists or tuples of them)")
    if len(sizes) == depth:
        sizes.append(None)
    out.append((at, obj))


def _type_of(v) -> ScalarType:
    if isinstance(v, Literal):
        return S.literal_type(v.value).strong
    if isinstance(v, Scalar):
        return v.type.strong
    return v.type.dtype


def build(gen, obj, dtype: ScalarType | None, copy: bool):
    if isinstance(obj, (Array, ArrayExpr)):
        if not copy and (dtype is None or dtype == obj.type.dtype):
            return obj
        gen.require_host("np.array() (a new array)")
        if dtype is not None and dtype != obj.type.dtype:
            return A.materialize(A.elementwise(lambda v: S.cast(v, dtype), [obj]))
        return A.copy(obj)
    leaves, sizes = [], []
    _leaves(obj, 0, (), leaves, sizes)
    outer = [s for s in sizes if s is not None]
    gen.require_host("np.array() (a new array)")
    if not leaves:        # np.array([]), np.array([[], []]): float64, as NumPy's
        return A.alloc(dtype or f64, [A.idx(s) for s in outer])
    kinds = {isinstance(v, (Array, ArrayExpr)) for _, v in leaves}
    if len(kinds) > 1:
        raise UserError("np.array(): the nested lists have an inhomogeneous shape (arrays "
                        "beside numbers)")
    if dtype is None:
        dtype = _type_of(leaves[0][1])
        for _, v in leaves[1:]:
            dtype = promote(dtype, _type_of(v))
    if kinds == {False}:
        out = A.alloc(dtype, [A.idx(s) for s in outer])
        for at, v in leaves:
            value = S.cast(S.as_scalar(v, dtype if isinstance(v, Literal) else None), dtype)
            memref.store(value.value, out.value, [A.idx(k) for k in at])
        return out
    # arrays of one shape: stacked along the list's levels
    items = [v for _, v in leaves]
    consumed(*items)
    rank = items[0].type.ndim
    if any(v.type.ndim != rank for v in items):
        raise UserError("np.array(): the arrays in the list must have one shape (their "
                        f"dimensions: {sorted({v.type.ndim for v in items})})")
    shapes = [A.dims(v) if isinstance(v, Array) else list(v.shape) for v in items]
    for s in shapes[1:]:
        for k in range(rank):
            adj.check(arith.cmpi(arith.CmpIPredicate.eq, s[k], shapes[0][k]), "ValueError",
                      "np.array(): the arrays in the list must have one shape")
    out = A.alloc(dtype, [A.idx(s) for s in outer] + list(shapes[0]))
    whole = [SliceValue(None, None, None)] * rank
    for at, v in leaves:
        copy_into(A.view(out, [Literal(k) for k in at] + whole, False), v)
    return out


def _handler(name: str, copy: bool):
    def handler(gen, args, kwargs):
        kwargs = dict(kwargs)
        for k in ("order", "like", "ndmin", "subok", "copy"):
            if k in kwargs:
                raise UserError(f"{name}(): {k}= is not supported in adjit")
        if not args:
            raise UserError(f"{name}(object, dtype=None) takes an object")
        (obj,), dtype = creation_args(f"{name[3:]}(object, dtype=None)", list(args), kwargs, 1)
        if isinstance(obj, PyObj):
            raise UserError(f"{name}() of {S.describe(obj)} is not supported in adjit")
        return build(gen, obj, dtype, copy)
    return handler


def _astype(gen, args, kwargs):
    """x.astype(dtype): a new array of x's values in dtype (NumPy's casts: a float to an
    int truncates toward zero)."""
    kwargs = dict(kwargs)
    for k in ("order", "casting", "subok", "copy"):
        if k in kwargs:
            raise UserError(f"x.astype(): {k}= is not supported in adjit")
    x, rest = args[0], list(args[1:])
    if len(rest) != 1 and "dtype" not in kwargs:
        raise UserError("x.astype(dtype) takes a dtype")
    _, dtype = creation_args("astype(dtype)", rest[:0], {"dtype": rest[0] if rest else
                                                          kwargs.pop("dtype")}, 0)
    if kwargs:
        raise UserError(f"x.astype() has no argument {sorted(kwargs)[0]!r} in adjit")
    if dtype is None:
        raise UserError("x.astype(dtype): dtype must be a type such as np.float32")
    return build(gen, x, dtype, True)


register_builtin([np.array], _handler("np.array", True))
register_builtin([np.asarray], _handler("np.asarray", False))
METHODS = {"astype": _astype}
