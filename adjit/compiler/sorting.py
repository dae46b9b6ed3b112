"""np.sort and np.argsort in @adjit.jit code (and the methods x.argsort(), x.sort()).

argsort is a stable bottom-up merge sort of each line along the axis (NumPy's
kind='stable' order: equal keys keep their order, NaNs go last as NumPy puts them), written
as an @adjit.func (`_argsort_rows`) that this module calls with the keys viewed as (lines,
n): its result is int64 indices, which have no derivative. np.sort(x) is then
take_along_axis(x, argsort(x)), a gather, so its derivatives are the gather's: the tangent
permuted as the values are (forward), the cotangent scattered back (reverse), ties resolved
by the stable order as JAX's sort does. Why merge sort: it is stable, O(n log n) in every
case, and needs no recursion (which compiled code does not have).

NumPy's default sort (quicksort, kind=None) is not stable: np.sort's values are the same in
any order of equal keys (except that -0.0 and 0.0 compare equal, so their signs may come out
in another order than NumPy's), but np.argsort's indices of equal keys may differ from
NumPy's default; they are those of np.argsort(x, kind='stable').
"""
from __future__ import annotations

import functools

import numpy as np

from ..core.errors import UserError
from ..core.types import i32, i64
from ..lang.functions import device_function
from . import arrays as A
from . import callables
from . import fancy_indexing as F
from . import scalar_ops as S
from .builtin_calls import namespace, register_builtin
from .values import Array, ArrayExpr, Literal, PyObj


@functools.cache
def _function():
    """The merge sort, made on first use (parsing its source at import would cost every
    unit that never sorts)."""

    def argsort_rows(keys, order, scratch):
        # order[r] := the stable argsort of keys[r], for each line r; scratch: the merge's
        # buffer. A key is less than another if smaller, or if the other is NaN and it
        # is not (NaNs last, as NumPy sorts them).
        rows = keys.shape[0]
        n = keys.shape[1]
        for r in range(rows):
            for k in range(n):
                order[r, k] = k
            width = 1
            while width < n:
                lo = 0
                while lo < n:
                    mid = min(lo + width, n)
                    hi = min(lo + 2 * width, n)
                    i = lo
                    j = mid
                    for k in range(lo, hi):
                        right = i >= mid
                        if i < mid and j < hi:
                            a = keys[r, order[r, j]]
                            b = keys[r, order[r, i]]
                            right = a < b or (b != b and a == a)
                        if right:
                            scratch[r, k] = order[r, j]
                            j += 1
                        else:
                            scratch[r, k] = order[r, i]
                            i += 1
                    lo += 2 * width
                for k in range(n):
                    order[r, k] = scratch[r, k]
                width *= 2

    return device_function(argsort_rows)


def _axis(args: list, kwargs: dict, name: str, ndim: int) -> int | None:
    """The axis of sort/argsort (default -1; None: the flattened array)."""
    kwargs = dict(kwargs)
    axis = args[1] if len(args) > 1 else kwargs.pop("axis", Literal(-1))
    kind = args[2] if len(args) > 2 else kwargs.pop("kind", None)
    order = kwargs.pop("order", None)
    if order is not None and not (isinstance(order, PyObj) and order.obj is None):
        raise UserError(f"{name}(): order= (of structured arrays) is not supported in adjit")
    if kind is not None and not (isinstance(kind, PyObj) and kind.obj is None):
        k = kind.obj if isinstance(kind, PyObj) else getattr(kind, "value", None)
        if k not in ("quicksort", "mergesort", "heapsort", "stable"):
            raise UserError(f"{name}(): kind must be 'quicksort', 'mergesort', 'heapsort' or "
                            "'stable'")
    if kwargs or len(args) > 3:
        raise UserError(f"{name}(a, axis=-1, kind=None) takes no other argument in adjit")
    return F._axis_of(axis, ndim, name)


def _keys(x, name: str) -> Array:
    if isinstance(x, ArrayExpr):
        x = A.materialize(x)
    if not isinstance(x, Array):
        raise UserError(f"{name}() takes an array, got {S.describe(x)}")
    if x.type.ndim == 0:
        raise UserError(f"{name}() of a 0-d array: NumPy raises too (axis -1 is out of bounds)")
    return x


def argsort(gen, x: Array, axis: int) -> Array:
    """The stable argsort of x along `axis` (int64, x's shape)."""
    gen.require_host("argsort (a new array)")
    from .numpy_calls import reshape     # (numpy_calls imports builtin_calls, as this does)
    nd = x.type.ndim
    last = axis == nd - 1
    e = A.as_expr(x)
    if x.type.dtype.is_bool:     # (False < True, as integers)
        e = A.elementwise(lambda v: S.cast(v, i32), [e])
    if last:
        keys = A.contiguous(e)
    else:      # the axis moved last, in a copy
        keys = A.materialize(_moved(e, axis, nd))
    shape = A.dims(keys)
    n = shape[-1]
    lines = A.numel(shape[:-1])
    rows = [S.from_index(lines), S.from_index(n)]
    order = A.alloc(i64, shape)
    scratch = A.alloc(i64, shape)
    callables.call(gen, _function(), [A.materialize(reshape(v, rows))
                                      for v in (keys, order, scratch)], {})
    if last:
        return order
    return A.materialize(_moved_back(A.as_expr(order), axis, nd))


def _moved(e: ArrayExpr, axis: int, nd: int) -> ArrayExpr:
    perm = [d for d in range(nd) if d != axis] + [axis]
    return A.nd_expr(e.dtype, [e.shape[d] for d in perm],
                     lambda ids: A.element_at(e, [ids[perm.index(d)] for d in range(nd)]), None)


def _moved_back(e: ArrayExpr, axis: int, nd: int) -> ArrayExpr:
    perm = [d for d in range(nd) if d != axis] + [axis]
    shape = [None] * nd
    for k, d in enumerate(perm):
        shape[d] = e.shape[k]
    return A.nd_expr(e.dtype, shape, lambda ids: A.element_at(e, [ids[d] for d in perm]), None)


def _keys_and_axis(args, kwargs, name: str):
    """`name(a, axis=-1, kind=None)`'s keys and axis (axis=None: the flattened keys)."""
    if not args:
        raise UserError(f"{name}(a, axis=-1, kind=None)")
    x = _keys(args[0], name)
    axis = _axis(list(args), kwargs, name, x.type.ndim)
    return (F.flat_view(x), 0) if axis is None else (x, axis)


def _argsort(gen, args, kwargs):
    x, axis = _keys_and_axis(args, kwargs, "argsort")
    return argsort(gen, x, axis)


def _sort(gen, args, kwargs):
    x, axis = _keys_and_axis(args, kwargs, "sort")
    return A.materialize(F.along_axis(gen, x, argsort(gen, x, axis), axis))


def _sort_method(gen, args, kwargs):
    """x.sort(axis=-1): x sorted in place, as NumPy's method."""
    x = args[0]
    if not isinstance(x, Array):
        raise UserError(f"x.sort() sorts an array in place, got {S.describe(x)}")
    if x.type.ndim == 0:
        raise UserError("x.sort() of a 0-d array: NumPy raises too")
    gen.force_lazy()     # (lazy names that read x keep its old values)
    A.store_into(x, A.as_expr(_sort(gen, args, kwargs)))
    return None


register_builtin([namespace["sort"], np.sort], _sort)
register_builtin([namespace["argsort"], np.argsort], _argsort)
METHODS = {"argsort": _argsort, "sort": _sort_method}
