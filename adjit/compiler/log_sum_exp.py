"""np.logaddexp(x, y) = log(exp(x) + exp(y)) and np.logaddexp2(x, y) = log2(2**x + 2**y),
element-wise (scalars, arrays, kernels), with NumPy's values where the plain formula
overflows or loses everything: big + log1p(exp(small - big)), big and small the larger and
smaller argument, chosen by a select so that the derivative goes to the side chosen (on a
tie each side gets 1/2, as the exact derivative exp(x - r) says: the select sends the
tie's 1 to one side and the log1p term's -1/2 back from it). Two equal infinities give
that infinity (their difference would be NaN), a NaN gives NaN, as NumPy's. Integers
become float64, float32 stays float32."""
from __future__ import annotations

import math as pymath

import numpy as np

from mlir.dialects import arith

from ..core.errors import UserError
from ..core.types import bool_
from ..lang.builtins import namespace
from . import scalar_ops as S
from .builtin_calls import lift, numpy_typed, register_builtin
from .values import Literal, Scalar


def logaddexp(a, b, base2: bool = False):
    if isinstance(a, Literal) and isinstance(b, Literal):
        return Literal(float((np.logaddexp2 if base2 else np.logaddexp)(a.value, b.value)))
    x, y = S.unify(a, b)
    x, y = S.to_float(x), S.to_float(y)
    first = S.compare(">=", x, y)
    big, small = S.select(first, x, y), S.select(first, y, x)
    # (only a tie of infinities: a finite tie keeps small - big = 0, and its derivative)
    infinite_tie = Scalar(arith.andi(S.compare("==", x, y).value,
                                     S.classify("isinf", x).value), bool_)
    gap = S.select(infinite_tie, Literal(0.0), S.binary("-", small, big))
    if base2:
        ln2 = Literal(pymath.log(2.0))
        tail = S.binary("/", S.math_unary("log1p", S.math_unary("exp2", gap)), ln2)
    else:
        tail = S.math_unary("log1p", S.math_unary("exp", gap))
    return S.binary("+", big, tail)


def _handler(name: str, base2: bool):
    def handler(gen, args, kwargs):
        if kwargs or len(args) != 2:
            raise UserError(f"{name}(x1, x2) takes two arguments (no out=, where=, dtype= "
                            "in adjit)")
        return lift(lambda a, b: logaddexp(a, b, base2), list(args))
    return handler


for _name, _base2 in (("logaddexp", False), ("logaddexp2", True)):
    _h = _handler(_name, _base2)
    register_builtin([namespace[_name]], _h)
    register_builtin([getattr(np, _name)], numpy_typed(_h))
