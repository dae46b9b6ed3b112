"""How calls compile when user code calls a builtin: adjit's own (builtins.py), the `math`
module's, and Python's `abs min max float int bool len range`. `lookup` maps each Python
object to the code that compiles a call of it; the code generator looks callees up there by
identity.
"""
from __future__ import annotations

import builtins as py
import math as pymath
from typing import Callable

from mlir import ir

from ..dialects import adj
from . import arrays as A
from . import scalar_ops as S
from .builtins import UNARY_MATH, namespace
from .errors import UserError
from .types import ScalarType, as_scalar_type, bool_, f64, i64
from .values import Array, ArrayExpr, Literal, PyObj, RangeValue, Scalar, Shape

Handler = Callable[..., object]   # (gen, args, kwargs) -> value
_HANDLERS: dict[int, tuple[object, Handler]] = {}


def _register(objs, handler: Handler) -> None:
    for o in objs:
        _HANDLERS[id(o)] = (o, handler)


def lookup(obj) -> Handler | None:
    entry = _HANDLERS.get(id(obj))
    return entry[1] if entry is not None and entry[0] is obj else None


def _expect(args, n: int, name: str, kwargs=None) -> None:
    if kwargs:
        raise UserError(f"{name}() takes no keyword arguments here")
    if len(args) != n:
        raise UserError(f"{name}() takes {n} argument{'s' if n != 1 else ''}, got {len(args)}")


def lift(fn: Callable, args: list):
    """Applies a scalar function element-wise when any argument is an array."""
    if any(isinstance(a, (Array, ArrayExpr)) for a in args):
        return A.elementwise(fn, args)
    return fn(*args)


# ---- math --------------------------------------------------------------------------
def _math(name: str, scalar_fn: Callable, arity: int, py_names=()) -> None:
    def handler(gen, args, kwargs):
        _expect(args, arity, name, kwargs)
        return lift(scalar_fn, list(args))

    _register([namespace[name], *[getattr(pymath, n) for n in py_names]], handler)


for _n in UNARY_MATH:
    _math(_n, (lambda n: lambda a: S.math_unary(n, a))(_n), 1,
          [_n] if hasattr(pymath, _n) else [])
_math("floor", lambda a: S.floor_ceil("floor", a), 1, ["floor"])
_math("ceil", lambda a: S.floor_ceil("ceil", a), 1, ["ceil"])
_math("abs", S.absolute, 1, ["fabs"])
_math("pow", lambda a, b: S.binary("**", a, b), 2, ["pow"])
_math("atan2", S.atan2, 2, ["atan2"])
_register([py.abs], lambda gen, args, kw: (_expect(args, 1, "abs", kw), lift(S.absolute, args))[1])


def _minmax(name: str):
    def handler(gen, args, kwargs):
        if kwargs:
            raise UserError(f"{name}() takes no keyword arguments here")
        if len(args) == 1:
            return reduce(name, args[0])
        if len(args) < 2:
            raise UserError(f"{name}() needs at least 1 argument")
        out = args[0]
        for a in args[1:]:
            out = lift(lambda x, y: S.minmax(name, x, y), [out, a])
        return out
    return handler


_register([py.min, namespace["min"]], _minmax("min"))
_register([py.max, namespace["max"]], _minmax("max"))


def _scalar_cast(to: ScalarType, name: str):
    def handler(gen, args, kwargs):
        _expect(args, 1, name, kwargs)
        a = args[0]
        if isinstance(a, Literal):
            return Literal({"f64": float, "i64": int, "bool": py.bool}[to.name](a.value))
        return lift(lambda x: S.cast(S.as_scalar(x), to), [a])
    return handler


_register([py.float], _scalar_cast(f64, "float"))
_register([py.int], _scalar_cast(i64, "int"))
_register([py.bool], _scalar_cast(bool_, "bool"))


def _range(gen, args, kwargs):
    if kwargs or not 1 <= len(args) <= 3:
        raise UserError("range() takes 1 to 3 positional arguments")
    for a in args:
        if isinstance(a, Literal) and not isinstance(a.value, int):
            raise UserError(f"range() bounds must be integers, got {a.value!r}")
        if isinstance(a, Scalar) and a.type.is_float:
            raise UserError(f"range() bounds must be integers, got a {a.type!r} value")
    start, stop, step = ((Literal(0), args[0], Literal(1)) if len(args) == 1 else
                         (args[0], args[1], Literal(1)) if len(args) == 2 else tuple(args))
    return RangeValue(start, stop, step)


_register([py.range], _range)


def _len(gen, args, kwargs):
    _expect(args, 1, "len", kwargs)
    a = args[0]
    if isinstance(a, (Array, ArrayExpr)):
        if a.type.ndim == 0:
            raise UserError("len() of a 0-d array")
        d = A.dims(a)[0] if isinstance(a, Array) else a.shape[0]
        return S.from_index(d)
    if isinstance(a, (tuple, Shape)):
        return Literal(len(a) if isinstance(a, tuple) else len(a.dims))
    raise UserError(f"len() of {S.describe(a)}")


_register([py.len], _len)


# ---- work-item indices, atomics, sync ---------------------------------------------------
def _index(gen, args, kwargs):
    _expect(args, 0, "adjit.index", kwargs)
    gen.require_kernel("adjit.index()")
    return S.from_index(adj.index())


def _index_nd(gen, args, kwargs):
    _expect(args, 0, "adjit.index_nd", kwargs)
    ndim = gen.require_kernel("adjit.index_nd()")
    return tuple(S.from_index(adj.global_id(d)) for d in range(ndim))


def _ndrange(gen, args, kwargs):
    _expect(args, 0, "adjit.ndrange", kwargs)
    ndim = gen.require_kernel("adjit.ndrange()")
    return tuple(S.from_index(adj.global_size(d)) for d in range(ndim))


def _atomic_add(gen, args, kwargs):
    _expect(args, 3, "adjit.atomic_add", kwargs)
    arr, sub, v = args
    if not isinstance(arr, Array):
        raise UserError("adjit.atomic_add(arr, idx, v): arr must be an array")
    return A.atomic_add(arr, gen.subscripts(arr, sub), v, gen.debug)


def _sync(gen, args, kwargs):
    _expect(args, 0, "adjit.synchronize", kwargs)
    adj.sync()
    return None


# ---- arrays (compiled functions only) --------------------------------------------------
def reduce(op: str, a):
    if isinstance(a, (Array, ArrayExpr)):
        return A.reduce(op, a)
    if isinstance(a, (Scalar, Literal)):
        return a
    raise UserError(f"{op}() of {S.describe(a)}")


def _reduction(op: str):
    def handler(gen, args, kwargs):
        _expect(args, 1, f"adjit.{op}", kwargs)
        return reduce(op, args[0])
    return handler


def _dot(gen, args, kwargs):
    _expect(args, 2, "adjit.dot", kwargs)
    a, b = args
    if not all(isinstance(x, (Array, ArrayExpr)) and x.type.ndim == 1 for x in (a, b)):
        raise UserError("adjit.dot takes two 1-D arrays")
    return A.reduce("sum", A.elementwise(lambda x, y: S.binary("*", x, y), [a, b]))


def _shape_arg(gen, shape) -> list[ir.Value]:
    if isinstance(shape, Shape):
        return list(shape.dims)
    if isinstance(shape, tuple):
        return [S.to_index(s) for s in shape]
    return [S.to_index(shape)]


def _dtype_arg(gen, kwargs, default: ScalarType) -> ScalarType:
    d = kwargs.pop("dtype", None)
    if d is None:
        return default
    try:
        return as_scalar_type(d.obj if isinstance(d, PyObj) else None)
    except TypeError as e:
        raise UserError(f"dtype=: {e}") from None


def _dtype_positional(name: str, args: list, kwargs: dict) -> tuple[list, dict]:
    """NumPy's signatures take the dtype second, by position or by keyword."""
    kwargs = dict(kwargs)
    if len(args) == 2:
        if "dtype" in kwargs:
            raise UserError(f"adjit.{name}() got dtype both by position and by keyword")
        kwargs["dtype"] = args[1]
        args = args[:1]
    return list(args), kwargs


def _creator(name: str, fill_value):
    def handler(gen, args, kwargs):
        gen.require_host(f"adjit.{name}()")
        args, kwargs = _dtype_positional(name, args, kwargs)
        if len(args) != 1:
            raise UserError(f"adjit.{name}(shape, dtype=...) takes a shape and a dtype")
        dtype = _dtype_arg(gen, kwargs, f64)
        if kwargs:
            raise UserError(f"adjit.{name}() got unexpected keyword(s) {sorted(kwargs)}")
        out = A.alloc(dtype, _shape_arg(gen, args[0]))
        if fill_value is not None:
            A.fill(out, Literal(fill_value))
        return out
    return handler


def _like(name: str, fill_value):
    def handler(gen, args, kwargs):
        gen.require_host(f"adjit.{name}()")
        args, kwargs = _dtype_positional(name, args, kwargs)
        if len(args) != 1 or not isinstance(args[0], (Array, ArrayExpr)):
            raise UserError(f"adjit.{name}(a, dtype=None) takes one array")
        a = args[0]
        dtype = _dtype_arg(gen, kwargs, a.type.dtype)
        if kwargs:
            raise UserError(f"adjit.{name}() got unexpected keyword(s) {sorted(kwargs)}")
        shape = A.dims(a) if isinstance(a, Array) else a.shape
        out = A.alloc(dtype, shape)
        if fill_value is not None:
            A.fill(out, Literal(fill_value))
        return out
    return handler


def _copy(gen, args, kwargs):
    gen.require_host("adjit.copy()")
    _expect(args, 1, "adjit.copy", kwargs)
    if not isinstance(args[0], (Array, ArrayExpr)):
        raise UserError("adjit.copy() takes an array")
    return A.copy(args[0])


_NAMED_HANDLERS = {
    "index": _index, "index_nd": _index_nd, "ndrange": _ndrange, "atomic_add": _atomic_add,
    "synchronize": _sync, "sum": _reduction("sum"), "dot": _dot,
    "zeros": _creator("zeros", 0), "ones": _creator("ones", 1), "empty": _creator("empty", None),
    "zeros_like": _like("zeros_like", 0), "ones_like": _like("ones_like", 1),
    "empty_like": _like("empty_like", None), "copy": _copy}
for _name, _h in _NAMED_HANDLERS.items():
    _register([namespace[_name]], _h)
