"""NumPy's variance and standard deviation, np.var / np.std (and x.var(), x.std()): of all
elements or along one axis, with ddof= and keepdims=, in NumPy's dtype (integers and bools
as float64, float32 as float32, or dtype=). Two passes, as NumPy's: the mean, then the
mean squared deviation from it over max(N - ddof, 0) (so N <= ddof gives inf or nan, as
NumPy's). Built from the reductions of arrays.py and element-wise arithmetic, whose rules
give the derivatives; std's at zero variance is NaN (the derivative of sqrt at 0 times a
zero), as JAX's."""
from __future__ import annotations

import numpy as np

from ..core.errors import UserError
from ..core.types import ScalarType, f64
from ..lang.builtins import namespace
from . import arrays as A
from . import scalar_ops as S
from .builtin_calls import bind, creation_args, numpy_typed, register_builtin
from .values import Array, ArrayExpr, Literal, PyObj, Scalar


def variance(gen, x, axis: int | None, ddof, keepdims: bool, dtype: ScalarType):
    """np.var of `x` in `dtype` (a float type)."""
    if not isinstance(x, (Array, ArrayExpr)):
        x = S.cast(S.as_scalar(x), dtype)     # (one element: its deviation is 0)
        return _over(_square(S.binary("-", x, x)), Literal(1), ddof, dtype)
    rank = x.type.ndim
    shape = A.dims(x) if isinstance(x, Array) else list(x.shape)
    xf = A.elementwise(lambda v: S.cast(v, dtype), [x])
    if axis is None:
        count = A.numel(shape)
        mean = S.binary("/", _sum(xf, dtype), _as(count, dtype))
    else:
        if not -rank <= axis < rank:
            raise UserError(f"var(): axis {axis} is out of bounds for an array of {rank} "
                            "dimensions")
        axis %= rank
        count = shape[axis]
        gen.require_host("var(..., axis=...) (a new array)")
        total = A.reduce_axis("sum", xf, axis, True)
        mean = A.elementwise(lambda t: S.binary("/", S.cast(t, dtype), _as(count, dtype)),
                             [total])
    squares = A.elementwise(lambda v, m: _square(S.binary("-", v, m)), [xf, mean])
    if axis is None and not keepdims:
        return _over(_sum(squares, dtype), count, ddof, dtype)
    gen.require_host("var(..., keepdims=True) (a new array)")
    sums = A.reduce_axis("sum", squares, axis, keepdims)
    return A.elementwise(lambda s: _over(S.cast(s, dtype), count, ddof, dtype), [sums])


def _square(v: Scalar) -> Scalar:
    return S.binary("*", v, v)


def _sum(e, dtype: ScalarType) -> Scalar:
    return S.cast(A.reduce("sum", e), dtype)


def _as(count, dtype: ScalarType) -> Scalar:
    if isinstance(count, Literal):
        return S.as_scalar(Literal(float(count.value)), dtype)
    return S.cast(S.from_index(count), dtype)


def _over(total: Scalar, count, ddof, dtype: ScalarType) -> Scalar:
    """total / max(count - ddof, 0)."""
    dof = S.binary("-", _as(count, dtype), S.cast(S.as_scalar(ddof, dtype)
                                                  if isinstance(ddof, Literal)
                                                  else ddof, dtype))
    dof = S.extremum("maximum", dof, S.as_scalar(Literal(0.0), dtype))
    return S.binary("/", total, dof)


def _handler(name: str):
    def handler(gen, args, kwargs):
        kwargs = dict(kwargs)
        for k in ("out", "where", "mean", "correction"):
            if k in kwargs:
                raise UserError(f"{name}(): {k}= is not supported in adjit")
        got = bind(name, ("a", "axis", "dtype", "out", "ddof", "keepdims"), args, kwargs)
        if "a" not in got:
            raise UserError(f"{name}(a, axis=None, dtype=None, ddof=0, keepdims=False) "
                            "takes an array")
        if not _none(got.get("out")):
            raise UserError(f"{name}(): out= is not supported in adjit")
        x = got["a"]
        axis = got.get("axis")
        if _none(axis):
            axis = None
        elif isinstance(axis, Literal) and type(axis.value) is int:
            axis = axis.value
        else:
            raise UserError(f"{name}(): axis must be a constant integer (or None)")
        keepdims = got.get("keepdims", Literal(False))
        if not (isinstance(keepdims, Literal) and isinstance(keepdims.value, bool)):
            raise UserError(f"{name}(): keepdims must be True or False")
        ddof = got.get("ddof", Literal(0))
        if not (isinstance(ddof, Literal) and not isinstance(ddof.value, bool)
                or isinstance(ddof, Scalar) and not ddof.type.is_bool):
            raise UserError(f"{name}(): ddof must be a number, got {S.describe(ddof)}")
        dtype = None
        if not _none(got.get("dtype")):
            _, dtype = creation_args(f"{name}(a, axis=None, dtype=None)", [],
                                     {"dtype": got["dtype"]}, 0)
            if not dtype.is_float:
                raise UserError(f"{name}(): dtype must be a float type in adjit")
        if not isinstance(x, (Array, ArrayExpr, Scalar, Literal)):
            raise UserError(f"{name}() takes an array, got {S.describe(x)}")
        t = (x.type.dtype if isinstance(x, (Array, ArrayExpr)) else
             S.as_scalar(x).type.strong if not isinstance(x, Literal) else f64)
        dtype = dtype or (t if t.is_float else f64)
        v = variance(gen, x, axis, ddof, keepdims.value, dtype)
        if name == "var":
            return v
        return A.elementwise(lambda s: S.math_unary("sqrt", s), [v]) if isinstance(
            v, (Array, ArrayExpr)) else S.math_unary("sqrt", v)
    return handler


def _none(v) -> bool:
    return v is None or isinstance(v, PyObj) and v.obj is None


HANDLERS = {"var": _handler("var"), "std": _handler("std")}
for _name, _h in HANDLERS.items():
    register_builtin([namespace[_name]], _h)
    register_builtin([getattr(np, _name)], numpy_typed(_h))
METHODS = dict(HANDLERS)   # x.var(...), x.std(...)
