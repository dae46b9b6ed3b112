"""NumPy's arithmetic ufuncs by name: np.add, np.subtract, np.multiply, np.divide /
np.true_divide, np.floor_divide, np.remainder / np.mod, np.negative, np.positive,
np.square, np.sign and np.reciprocal, element-wise (scalars, arrays, kernels) with NumPy's
values and dtypes: those of the operators on arrays, on scalars too (np.add of two bools is
`or`, np.multiply `and`, where Python's operators count; np.subtract,
np.negative and np.positive refuse them, as NumPy raises TypeError, and np.square, whose
NumPy result is an int8). Their derivatives are the operators'."""
from __future__ import annotations

import numpy as np

from ..core.errors import UserError
from ..core.types import bool_
from . import scalar_ops as S
from .builtin_calls import lift, numpy_typed, register_builtin
from .values import Literal


def _is_bool(v) -> bool:
    if isinstance(v, Literal):
        return isinstance(v.value, bool)
    return S.as_scalar(v).type == bool_


def _binary(name: str, op: str, on_bools: str | None):
    def fn(a, b):
        if _is_bool(a) and _is_bool(b):
            if on_bools is None:
                raise UserError(f"np.{name}() of two booleans is not supported (NumPy raises "
                                "TypeError: use np.logical_xor or `!=`)")
            return S.binary(on_bools, a, b)
        return S.binary(op, a, b)
    return fn


def _negative(a):
    if _is_bool(a):
        raise UserError("np.negative() of a boolean is not supported (NumPy raises "
                        "TypeError: use np.logical_not or `~`)")
    return S.negate(a)


def _sign(a):
    """-1, 0 or 1 in the type of `a` (NaN for NaN); its derivative is 0."""
    if isinstance(a, Literal):
        return Literal(type(a.value)(np.sign(a.value)))
    x = S.as_scalar(a)
    if x.type == bool_:
        return x
    one, zero, minus = (S.as_scalar(Literal(v), x.type) for v in (1, 0, -1))
    out = S.select(S.compare(">", x, zero), one, S.select(S.compare("<", x, zero), minus, zero))
    if x.type.is_float:    # (NaN compares false both ways: keep it)
        out = S.select(S.classify("isnan", x), x, out)
    return out


def _no_int8(name: str):
    raise UserError(f"np.{name}() of a boolean is not supported in adjit (NumPy's result is "
                    "an int8, a type adjit does not have)")


def _positive(a):
    if _is_bool(a):
        raise UserError("np.positive() of a boolean is not supported (NumPy raises TypeError)")
    return a


def _reciprocal(a):
    x = S.as_scalar(a) if not isinstance(a, Literal) else a
    if not (isinstance(x, Literal) and isinstance(x.value, float) or
            not isinstance(x, Literal) and x.type.is_float):
        raise UserError("np.reciprocal() of an integer is not supported in adjit (NumPy's "
                        "truncates: 1/x rounds to 0); use 1.0 / x")
    return S.binary("/", Literal(1.0), x)


_BINARY = {"add": ("+", "|"), "subtract": ("-", None), "multiply": ("*", "&"),
           "divide": ("/", "/"), "true_divide": ("/", "/"), "floor_divide": ("//", "//"),
           "remainder": ("%", "%"), "mod": ("%", "%")}
_UNARY = {"negative": _negative, "positive": _positive,
          "square": lambda a: S.binary("*", a, a) if not _is_bool(a) else _no_int8("square"),
          "sign": _sign,
          "reciprocal": _reciprocal}


def _handler(name: str, fn, arity: int):
    def handler(gen, args, kwargs):
        if kwargs or len(args) != arity:
            raise UserError(f"np.{name}() takes {arity} argument{'s' if arity > 1 else ''} "
                            "(no where=, dtype=, casting= in adjit)")
        return lift(fn, list(args))
    return handler


for _name, (_op, _bools) in _BINARY.items():
    register_builtin([getattr(np, _name)],
                     numpy_typed(_handler(_name, _binary(_name, _op, _bools), 2)))
for _name, _fn in _UNARY.items():
    register_builtin([getattr(np, _name)], numpy_typed(_handler(_name, _fn, 1)))
