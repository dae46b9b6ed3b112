"""The derivative of every arith and math op, each written once.

An entry gives, for each operand, the op's derivative with respect to that operand applied to a
seed: `rule(x, y, d)` returns d * dy/dx_i, where `x[i]` is the i-th primal operand, `y()` the
primal result and `d` the seed. Every rule is linear in `d`, so one table serves both modes:

    forward:  tangent(y)  = sum_i rule_i(x, y, tangent(x_i))
    reverse:  adjoint(x_i) += rule_i(x, y, adjoint(y))

`x` and `y` are read lazily: the reverse pass recomputes or loads from the tape only the primal
values a rule actually reads. `None` in place of a rule: that operand is not differentiable
(a condition, an integer exponent). Ops listed in ZERO_DERIVATIVE have a float result whose
derivative is zero everywhere it exists (floor, ceil...): their results are never active.
Casts between float widths are linear maps with a type change, handled by CASTS.
"""
from __future__ import annotations

import math as pymath
from typing import Callable, Protocol

from mlir import ir
from mlir.dialects import arith, math


class Primals(Protocol):
    def __getitem__(self, i: int) -> ir.Value: ...


Rule = Callable[[Primals, Callable[[], ir.Value], ir.Value], ir.Value]


# Builders at the current insertion point; each takes and returns ir.Values of one float type.
def _c(like: ir.Value, v: float) -> ir.Value:
    return arith.constant(like.type, v)


def _mul(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.mulf(a, b)


def _div(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.divf(a, b)


def _add(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.addf(a, b)


def _sub(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.subf(a, b)


def _neg(a: ir.Value) -> ir.Value:
    return arith.negf(a)


def _sq(a: ir.Value) -> ir.Value:
    return arith.mulf(a, a)


def _where(cond: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.select(cond, a, b)


def _ge(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.cmpf(arith.CmpFPredicate.OGE, a, b)


def _le(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.cmpf(arith.CmpFPredicate.OLE, a, b)


def _sign(a: ir.Value) -> ir.Value:
    """+1 or -1 with the sign bit of `a` (the derivative of |a| and of copysign)."""
    return math.copysign(_c(a, 1.0), a)


def _gauss(a: ir.Value) -> ir.Value:
    return math.exp(_neg(_sq(a)))


def _keep_if(cond: ir.Value, d: ir.Value) -> ir.Value:
    return _where(cond, d, _c(d, 0.0))


def _drop_if(cond: ir.Value, d: ir.Value) -> ir.Value:
    return _where(cond, _c(d, 0.0), d)


LN2 = pymath.log(2.0)
LN10 = pymath.log(10.0)
TWO_OVER_SQRT_PI = 2.0 / pymath.sqrt(pymath.pi)

RULES: dict[str, tuple[Rule | None, ...]] = {
    # arith
    "arith.addf": (lambda x, y, d: d,
                   lambda x, y, d: d),
    "arith.subf": (lambda x, y, d: d,
                   lambda x, y, d: _neg(d)),
    "arith.mulf": (lambda x, y, d: _mul(d, x[1]),
                   lambda x, y, d: _mul(d, x[0])),
    "arith.divf": (lambda x, y, d: _div(d, x[1]),
                   lambda x, y, d: _neg(_div(_mul(d, y()), x[1]))),
    "arith.negf": (lambda x, y, d: _neg(d),),
    # a - b * trunc(a / b)
    "arith.remf": (lambda x, y, d: d,
                   lambda x, y, d: _neg(_mul(d, math.trunc(_div(x[0], x[1]))))),
    "arith.maximumf": (lambda x, y, d: _keep_if(_ge(x[0], x[1]), d),
                       lambda x, y, d: _drop_if(_ge(x[0], x[1]), d)),
    "arith.maxnumf": (lambda x, y, d: _keep_if(_ge(x[0], x[1]), d),
                      lambda x, y, d: _drop_if(_ge(x[0], x[1]), d)),
    "arith.minimumf": (lambda x, y, d: _keep_if(_le(x[0], x[1]), d),
                       lambda x, y, d: _drop_if(_le(x[0], x[1]), d)),
    "arith.minnumf": (lambda x, y, d: _keep_if(_le(x[0], x[1]), d),
                      lambda x, y, d: _drop_if(_le(x[0], x[1]), d)),
    "arith.select": (None,
                     lambda x, y, d: _keep_if(x[0], d),
                     lambda x, y, d: _drop_if(x[0], d)),
    # math
    "math.sin": (lambda x, y, d: _mul(d, math.cos(x[0])),),
    "math.cos": (lambda x, y, d: _neg(_mul(d, math.sin(x[0]))),),
    "math.tan": (lambda x, y, d: _mul(d, _add(_c(d, 1.0), _sq(y()))),),
    "math.exp": (lambda x, y, d: _mul(d, y()),),
    "math.exp2": (lambda x, y, d: _mul(d, _mul(y(), _c(d, LN2))),),
    "math.expm1": (lambda x, y, d: _mul(d, _add(y(), _c(d, 1.0))),),
    "math.log": (lambda x, y, d: _div(d, x[0]),),
    "math.log2": (lambda x, y, d: _div(d, _mul(x[0], _c(d, LN2))),),
    "math.log10": (lambda x, y, d: _div(d, _mul(x[0], _c(d, LN10))),),
    "math.log1p": (lambda x, y, d: _div(d, _add(x[0], _c(d, 1.0))),),
    "math.sqrt": (lambda x, y, d: _div(d, _mul(y(), _c(d, 2.0))),),
    # y = x^(-1/2): dy/dx = -y^3 / 2
    "math.rsqrt": (lambda x, y, d: _mul(d, _mul(_c(d, -0.5), _mul(y(), _sq(y())))),),
    "math.cbrt": (lambda x, y, d: _div(d, _mul(_c(d, 3.0), _sq(y()))),),
    "math.tanh": (lambda x, y, d: _mul(d, _sub(_c(d, 1.0), _sq(y()))),),
    "math.sinh": (lambda x, y, d: _mul(d, math.cosh(x[0])),),
    "math.cosh": (lambda x, y, d: _mul(d, math.sinh(x[0])),),
    "math.asinh": (lambda x, y, d: _div(d, math.sqrt(_add(_sq(x[0]), _c(d, 1.0)))),),
    "math.acosh": (lambda x, y, d: _div(d, math.sqrt(_sub(_sq(x[0]), _c(d, 1.0)))),),
    "math.atanh": (lambda x, y, d: _div(d, _sub(_c(d, 1.0), _sq(x[0]))),),
    "math.atan": (lambda x, y, d: _div(d, _add(_c(d, 1.0), _sq(x[0]))),),
    "math.asin": (lambda x, y, d: _div(d, math.sqrt(_sub(_c(d, 1.0), _sq(x[0])))),),
    "math.acos": (lambda x, y, d: _neg(_div(d, math.sqrt(_sub(_c(d, 1.0), _sq(x[0]))))),),
    # atan2(a, b) = angle of (b, a): da = b / (a^2 + b^2), db = -a / (a^2 + b^2)
    "math.atan2": (lambda x, y, d: _div(_mul(d, x[1]), _add(_sq(x[0]), _sq(x[1]))),
                   lambda x, y, d: _neg(_div(_mul(d, x[0]), _add(_sq(x[0]), _sq(x[1]))))),
    "math.absf": (lambda x, y, d: _mul(d, _sign(x[0])),),
    # a^b: da = b a^(b-1), db = a^b ln a
    "math.powf": (lambda x, y, d: _mul(d, _mul(x[1], math.powf(x[0], _sub(x[1], _c(d, 1.0))))),
                  lambda x, y, d: _mul(d, _mul(y(), math.log(x[0])))),
    # a^n, n an integer: da = n a^(n-1)
    "math.fpowi": (lambda x, y, d: _mul(d, _mul(arith.sitofp(d.type, x[1]), math.fpowi(
                       x[0], arith.subi(x[1], arith.constant(x[1].type, 1))))),
                   None),
    "math.copysign": (lambda x, y, d: _mul(d, _mul(_sign(x[0]), _sign(x[1]))),
                      None),
    "math.erf": (lambda x, y, d: _mul(d, _mul(_c(d, TWO_OVER_SQRT_PI), _gauss(x[0]))),),
    "math.erfc": (lambda x, y, d: _mul(d, _mul(_c(d, -TWO_OVER_SQRT_PI), _gauss(x[0]))),),
    "math.fma": (lambda x, y, d: _mul(d, x[1]),
                 lambda x, y, d: _mul(d, x[0]),
                 lambda x, y, d: d),
}

# Float results whose derivative is zero wherever it is defined.
ZERO_DERIVATIVE = frozenset({
    "math.floor", "math.ceil", "math.round", "math.roundeven", "math.trunc",
    "arith.sitofp", "arith.uitofp", "arith.constant",
})


def _extend(seed: ir.Value, to: ir.Type) -> ir.Value:
    return arith.extf(to, seed)


def _truncate(seed: ir.Value, to: ir.Type) -> ir.Value:
    return arith.truncf(to, seed)


Cast = Callable[[ir.Value, ir.Type], ir.Value]
# Float-to-float casts: (map a tangent to the result type, map an adjoint to the operand type).
CASTS: dict[str, tuple[Cast, Cast]] = {
    "arith.extf": (_extend, _truncate),
    "arith.truncf": (_truncate, _extend),
}
