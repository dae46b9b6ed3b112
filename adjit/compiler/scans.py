"""NumPy's cumulative sum and product, np.cumsum / np.cumprod (and x.cumsum(), x.cumprod()):
of the flattened array (axis=None) or along one axis, in NumPy's dtype (bools and integers
as int64, floats as themselves, or dtype=), accumulated in order as NumPy does. One serial
loop per line along the axis, carrying the running value, in parallel over the other
axes (as arrays.reduce_axis). The derivative is the autodiff pass's of that loop, which
tapes the running value: the product's needs no division, so it is right where inputs are
zero."""
from __future__ import annotations

from mlir import ir
from mlir.dialects import memref, scf

import numpy as np

from ..core.errors import UserError
from ..core.types import ScalarType
from ..lang.builtins import namespace
from . import arrays as A
from . import scalar_ops as S
from .builtin_calls import bind, creation_args, numpy_typed, register_builtin
from .lazy import consumed
from .values import Array, ArrayExpr, Literal, PyObj, Scalar


def scan(op: str, v: Array | ArrayExpr, axis: int | None, dtype: ScalarType) -> Array:
    """The running sum or product ("sum", "prod") of `v` in `dtype`: over its C-order
    flattening (a 1-D result), or along `axis` (v's shape)."""
    consumed(v)
    e = A.as_expr(v)
    shape = list(e.shape)
    if axis is None or len(shape) <= 1:
        n = A.numel(shape)
        out = A.alloc(dtype, [n])
        _run(op, lambda i: e.element(i), n, lambda i, s: memref.store(s, out.value, [i]),
             dtype)
        return out
    out = A.alloc(dtype, shape)
    others = [s for k, s in enumerate(shape) if k != axis]
    loop = scf.ParallelOp([], [A.idx(0)], [A.numel(others)], [A.idx(1)], [])
    body = loop.regions[0].blocks.append(ir.IndexType.get())
    with ir.InsertionPoint(body):
        at = A._unravel(body.arguments[0], others)

        def where(i):
            return at[:axis] + [i] + at[axis:]
        _run(op, lambda i: A.element_at(e, where(i)), shape[axis],
             lambda i, s: memref.store(s, out.value, where(i)), dtype)
        scf.ReduceOp([], 0)
    return out


def _run(op: str, element, n: ir.Value, put, dtype: ScalarType) -> None:
    """for i in range(n): acc = acc (+ or *) element(i); put(i, acc)."""
    start = S.as_scalar(Literal(0 if op == "sum" else 1), dtype)
    loop = scf.ForOp(A.idx(0), n, A.idx(1), [start.value])
    with ir.InsertionPoint(loop.body):
        i = loop.induction_variable
        x = S.cast(element(i), dtype)
        acc = S.binary("+" if op == "sum" else "*", Scalar(loop.inner_iter_args[0], dtype), x)
        put(i, acc.value)
        scf.YieldOp([acc.value])


def _result_type(t: ScalarType) -> ScalarType:
    """NumPy's: bools and integers accumulate as the default int (int64), floats as they
    are."""
    return A._accumulator_type(t, "sum") if not t.is_float else t


def _scan_handler(op: str):
    name = "cumsum" if op == "sum" else "cumprod"

    def handler(gen, args, kwargs):
        kwargs = dict(kwargs)
        if "out" in kwargs:
            raise UserError(f"{name}(): out= is not supported in adjit (use the result)")
        got = bind(name, ("a", "axis", "dtype"), args, kwargs)
        if "a" not in got:
            raise UserError(f"{name}(a, axis=None, dtype=None) takes an array")
        gen.require_host(f"{name}() (a new array)")
        x = got["a"]
        if isinstance(x, (Scalar, Literal)):       # (NumPy: a 1-element array)
            x = A.as_expr(_one_element(x))
        if not isinstance(x, (Array, ArrayExpr)):
            raise UserError(f"{name}() takes an array, got {S.describe(x)}")
        axis = got.get("axis")
        if axis is None or isinstance(axis, PyObj) and axis.obj is None:
            axis = None
        else:
            if not (isinstance(axis, Literal) and isinstance(axis.value, int)
                    and not isinstance(axis.value, bool)):
                raise UserError(f"{name}(): axis must be a constant integer (or None)")
            rank = x.type.ndim
            if not -rank <= axis.value < rank:
                raise UserError(f"{name}(): axis {axis.value} is out of bounds for an array "
                                f"of {rank} dimensions")
            axis = axis.value % rank
        dtype = None
        if got.get("dtype") is not None:
            _, dtype = creation_args(f"{name}(a, axis=None, dtype=None)", [],
                                     {"dtype": got["dtype"]}, 0)
        return scan(op, x, axis, dtype or _result_type(x.type.dtype))
    return handler


def _one_element(v) -> Array:
    s = S.as_scalar(v, S.literal_type(v.value).strong if isinstance(v, Literal) else None)
    if s.type.weak:
        s = S.cast(s, s.type.strong)
    out = A.alloc(s.type, [A.idx(1)])
    memref.store(s.value, out.value, [A.idx(0)])
    return out


HANDLERS = {"cumsum": _scan_handler("sum"), "cumprod": _scan_handler("prod")}
for _name, _h in HANDLERS.items():
    register_builtin([namespace[_name]], _h)
    register_builtin([getattr(np, _name)], numpy_typed(_h))
METHODS = dict(HANDLERS)   # x.cumsum(axis=None, dtype=None), x.cumprod(...)
