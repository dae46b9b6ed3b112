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

Singular points and strong zero. A rule gives `d * partial`; where the partial is infinite or
NaN (sqrt, log, 1/x at 0; asin at 1; exp past overflow; sin at inf) and the seed is zero, IEEE
arithmetic gives NaN, and a seed is zero exactly where a value does not reach the result: the
side of a select, min or max not taken (`max(sqrt(x), 1.0)` at x = 0). Rules wrapped in
`_strong` give an exact zero for a zero seed (Enzyme's strong-zero mode), so a derivative is
not NaN because of a value that does not matter. (Enzyme-MLIR's SqrtOp instead selects 0 at
x == 0 whatever the seed: d sqrt(x) at 0 would be 0 where the one-sided limit and JAX say inf.)
Wrapped: every rule whose partial can be non-finite at a non-NaN operand, but the product's
(mulf, fma): its partial is the other operand, non-finite only where that operand already is,
and guarding the most frequent rule cost 25% (reverse) to 55% (forward) on
benchmarks/bench_grad.py, so there `0 * inf` stays NaN, as in JAX. The unwrapped rest have
constant or bounded partials (add, neg, select, min/max, abs, tanh, atan, asinh, erf), where a
zero seed gives zero anyway. With a nonzero seed a rule gives the one-sided value JAX returns
(d sqrt(x) = +inf at 0 and -inf at -0.0, d log(x) = +inf at 0); pow, whose partials have
finite limits where the formula has none, is guarded at those points: d/da a^b = 0 where
b == 0 (b a^(b-1) would be 0 * inf at a = 0; a^0 is constant), d/db a^b = 0 where a == 0
(Enzyme-MLIR's PowFOp; JAX too, for b >= 0). A guard replaces the product by 0 only where it
is not finite (`_zero_if_nan`), so that where the partial is finite the rule stays the
product, whose own derivative a higher-order mode takes (a guard `seed == 0 ? 0 : product`
made the Hessian of x sin x at 0 come out 1 instead of 2). It costs a subtraction, two
compares, an and and a select.
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
    """+1 or -1 with the sign bit of `a` (copysign's factor from its second operand)."""
    return math.copysign(_c(a, 1.0), a)


def _gauss(a: ir.Value) -> ir.Value:
    """exp(-a^2), with a^2 split exactly into hi + lo (fma): exp(-hi) alone is off by up to
    2 a^2 ulps (a^2's rounding error, scaled by the exponent: 15 ulp for erf' in f32 at 5),
    and |lo| is below hi's half ulp, so exp(-lo) = 1 - lo to the type's precision."""
    hi = _sq(a)
    # lo is -inf (then NaN) where a^2 overflows, and exp(-hi) is 0 there anyway
    lo = _where(arith.cmpf(arith.CmpFPredicate.OLT, hi, _c(a, pymath.inf)),
                math.fma(a, a, _neg(hi)), _c(a, 0.0))
    return _mul(math.exp(_neg(hi)), _sub(_c(a, 1.0), lo))


def _one_minus_sq(a: ir.Value) -> ir.Value:
    return _mul(_sub(_c(a, 1.0), a), _add(_c(a, 1.0), a))


def _acosh_partial(a, d):
    m = math.absf(a)
    return _div(d, _mul(math.sqrt(_sub(m, _c(d, 1.0))), math.sqrt(_add(m, _c(d, 1.0)))))


def _cbrt_partial(x: ir.Value, y: ir.Value, d: ir.Value) -> ir.Value:
    """d / (3 y^2) for y = cbrt(x), as d (y / x) / 3: y's error once, where squaring y doubled
    it (libmvec's float32 cbrt, 2 ulp, gave 8 ulp); 1 / (3 y^2) at x = 0 or +-inf (y / x is
    NaN there, and NaN only there and at x = NaN)."""
    q = _div(_div(y, x), _c(x, 3.0))
    exact = _div(d, _mul(_c(d, 3.0), _sq(y)))
    return _where(arith.cmpf(arith.CmpFPredicate.UNO, q, q), exact, _mul(d, q))


def _hypot_one(a: ir.Value) -> ir.Value:
    """sqrt(a^2 + 1), as |a| sqrt(1 + (1/a)^2) past |a| = 1 (no overflow)."""
    m = math.absf(a)
    big = arith.cmpf(arith.CmpFPredicate.OGT, m, _c(a, 1.0))
    t = _where(big, _div(_c(a, 1.0), m), m)
    r = math.sqrt(_add(_sq(t), _c(a, 1.0)))
    return _where(big, _mul(m, r), r)


def _sech2(a: ir.Value) -> ir.Value:
    """1 / cosh(a)^2 as 4t / (1 + t)^2, t = exp(-2|a|) in (0, 1]: 1 - tanh(a)^2 cancels
    once tanh rounds to 1 (0 for |a| > 9 in f32, where sech^2 is 6e-8), cosh^2 overflows."""
    t = math.exp(_mul(_c(a, -2.0), math.absf(a)))
    u = _add(_c(a, 1.0), t)
    return _div(_mul(_c(a, 4.0), t), _sq(u))


def _atan2_partial(a: ir.Value, b: ir.Value, top: ir.Value, d: ir.Value) -> ir.Value:
    """d * top / (a^2 + b^2), with a and b scaled by max(|a|, |b|) first: the squares
    underflow for tiny operands (1e-20 in f32: inf instead of 1e20) and overflow for huge
    ones (1e20: 0 instead of 1e-20). An infinite operand keeps the unscaled formula's values
    (JAX's: NaN or 0)."""
    s = arith.maximumf(math.absf(a), math.absf(b))
    s = _where(arith.cmpf(arith.CmpFPredicate.OEQ, s, _c(s, pymath.inf)), _c(s, 1.0), s)
    an, bn = _div(a, s), _div(b, s)
    return _div(_div(_mul(d, _div(top, s)), _add(_sq(an), _sq(bn))), s)


def _keep_if(cond: ir.Value, d: ir.Value) -> ir.Value:
    return _where(cond, d, _c(d, 0.0))


def _drop_if(cond: ir.Value, d: ir.Value) -> ir.Value:
    return _where(cond, _c(d, 0.0), d)


def _is_zero(a: ir.Value) -> ir.Value:
    """a == 0 (true for -0.0 too)."""
    return arith.cmpf(arith.CmpFPredicate.OEQ, a, _c(a, 0.0))


def _abs_slope(a: ir.Value) -> ir.Value:
    """The derivative of |a|: 1 where a >= 0 (-0.0 included, as JAX), else -1."""
    return _where(_ge(a, _c(a, 0.0)), _c(a, 1.0), _c(a, -1.0))


def _non_finite(a: ir.Value) -> ir.Value:
    """a is inf or NaN (a - a is NaN exactly then)."""
    return arith.cmpf(arith.CmpFPredicate.UNE, _sub(a, a), _c(a, 0.0))


def _zero_if_nan(cond: ir.Value, term: ir.Value) -> ir.Value:
    """`term`, but 0 where `cond` holds and `term` is not finite: the guard of a rule whose
    `term` is 0 * inf exactly where `cond` holds and a partial is infinite. Where `cond`
    holds and the partial is finite, `term` itself is kept (0, or -0.0), so that a
    derivative of the rule (forward over reverse, a Hessian) still sees `term`'s own
    derivative there: a guard `cond ? 0 : term` would give those points a zero second
    derivative (x sin x at 0: 1 for 2)."""
    return _drop_if(arith.andi(cond, _non_finite(term)), term)


def _strong(rule: Rule) -> Rule:
    """`rule`, giving an exact zero for a zero seed (strong zero: module docstring)."""
    def guarded(x: Primals, y: Callable[[], ir.Value], d: ir.Value) -> ir.Value:
        return _zero_if_nan(_is_zero(d), rule(x, y, d))
    return guarded


def _pow_base(x: Primals, y: Callable[[], ir.Value], d: ir.Value) -> ir.Value:
    # d/da a^b = b a^(b-1); 0 when b == 0, where 0^(b-1) is inf at a = 0. a^(b-1) is taken
    # as a^b / a wherever a^b is a normal number: b - 1 rounds, and ln(a) scales that
    # error (366 ulp in f64 at a = 1e-308, b = -0.001), or b - 1 == b with the wrong
    # parity (+1e30 instead of -1e30 at a = -1, b = 1e30). Elsewhere (a^b 0, subnormal or
    # inf: a^b / a would lose digits or overflow first) pow(a, b - 1).
    b = x[1]
    F = arith.CmpFPredicate
    tiny = _c(d, 1.1754943508222875e-38 if isinstance(d.type, ir.F32Type)
              else 2.2250738585072014e-308)
    magnitude = math.absf(y())
    normal = arith.andi(arith.andi(arith.cmpf(F.OGE, magnitude, tiny),
                                   arith.cmpf(F.OLT, magnitude, _c(d, pymath.inf))),
                        arith.cmpf(F.ONE, x[0], _c(d, 0.0)))
    slope = _where(normal, _div(y(), x[0]), math.powf(x[0], _sub(b, _c(d, 1.0))))
    return _zero_if_nan(_is_zero(b), _mul(d, _mul(b, slope)))


def _pow_exponent(x: Primals, y: Callable[[], ir.Value], d: ir.Value) -> ir.Value:
    # d/db a^b = a^b ln a; 0 when a == 0 (0^b is constant in b > 0; log 0 = -inf).
    return _zero_if_nan(_is_zero(x[0]), _mul(d, _mul(y(), math.log(x[0]))))


def _fpowi_base(x: Primals, y: Callable[[], ir.Value], d: ir.Value) -> ir.Value:
    # d/da a^n = n a^(n-1); 0 when n == 0, as for powf.
    n = x[1]
    one = arith.constant(n.type, 1)
    slope = _mul(arith.sitofp(d.type, n), math.fpowi(x[0], arith.subi(n, one)))
    zero_n = arith.cmpi(arith.CmpIPredicate.eq, n, arith.constant(n.type, 0))
    return _zero_if_nan(zero_n, _mul(d, slope))


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
    "arith.divf": (_strong(lambda x, y, d: _div(d, x[1])),
                   _strong(lambda x, y, d: _neg(_div(_mul(d, y()), x[1])))),
    "arith.negf": (lambda x, y, d: _neg(d),),
    # a - b * trunc(a / b)
    "arith.remf": (lambda x, y, d: d,
                   _strong(lambda x, y, d: _neg(_mul(d, math.trunc(_div(x[0], x[1])))))),
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
    "math.sin": (_strong(lambda x, y, d: _mul(d, math.cos(x[0]))),),
    "math.cos": (_strong(lambda x, y, d: _neg(_mul(d, math.sin(x[0])))),),
    "math.tan": (_strong(lambda x, y, d: _mul(d, _add(_c(d, 1.0), _sq(y())))),),
    "math.exp": (_strong(lambda x, y, d: _mul(d, y())),),
    "math.exp2": (_strong(lambda x, y, d: _mul(d, _mul(y(), _c(d, LN2)))),),
    # exp(x), not y + 1: that cancels for x < 0 (0 instead of exp(-30) in f32)
    "math.expm1": (_strong(lambda x, y, d: _mul(d, math.exp(x[0]))),),
    "math.log": (_strong(lambda x, y, d: _div(d, x[0])),),
    # (d / ln b) / x: x * ln b would overflow for x near the largest finite value
    "math.log2": (_strong(lambda x, y, d: _div(_mul(d, _c(d, 1.0 / LN2)), x[0])),),
    "math.log10": (_strong(lambda x, y, d: _div(_mul(d, _c(d, 1.0 / LN10)), x[0])),),
    "math.log1p": (_strong(lambda x, y, d: _div(d, _add(x[0], _c(d, 1.0)))),),
    "math.sqrt": (_strong(lambda x, y, d: _div(d, _mul(y(), _c(d, 2.0)))),),
    # y = x^(-1/2): dy/dx = -y / (2x) (-inf at -0.0, where y = -inf, as JAX; -y^3/2 is +inf)
    "math.rsqrt": (_strong(lambda x, y, d: _mul(d, _mul(_c(d, -0.5), _div(y(), x[0])))),),
    "math.cbrt": (_strong(lambda x, y, d: _cbrt_partial(x[0], y(), d)),),
    "math.tanh": (lambda x, y, d: _mul(d, _sech2(x[0])),),
    "math.sinh": (_strong(lambda x, y, d: _mul(d, math.cosh(x[0]))),),
    "math.cosh": (_strong(lambda x, y, d: _mul(d, math.sinh(x[0]))),),
    # 1/sqrt(x^2 + 1) without x^2 (it overflows past 1e19 in f32, and the derivative was 0)
    "math.asinh": (lambda x, y, d: _div(d, _hypot_one(x[0])),),
    # sqrt(x^2 - 1) as sqrt(|x| - 1) sqrt(|x| + 1): exact differences near 1, no overflow; |x|
    # so that the formula's value off the domain (x <= -1) is JAX's: inf at -1, 0 at -inf
    "math.acosh": (_strong(lambda x, y, d: _acosh_partial(x[0], d)),),
    "math.atanh": (_strong(lambda x, y, d: _div(d, _one_minus_sq(x[0]))),),
    "math.atan": (lambda x, y, d: _div(d, _add(_c(d, 1.0), _sq(x[0]))),),
    # 1 - x^2 as (1 - x)(1 + x): 1 - x is exact near 1, 1 - x*x cancels (6 ulp in f32)
    "math.asin": (_strong(lambda x, y, d: _div(d, math.sqrt(_one_minus_sq(x[0])))),),
    "math.acos": (_strong(lambda x, y, d: _neg(_div(d, math.sqrt(_one_minus_sq(x[0]))))),),
    # atan2(a, b) = angle of (b, a): da = b / (a^2 + b^2), db = -a / (a^2 + b^2)
    "math.atan2": (_strong(lambda x, y, d: _atan2_partial(x[0], x[1], x[1], d)),
                   _strong(lambda x, y, d: _neg(_atan2_partial(x[0], x[1], x[0], d)))),
    "math.absf": (lambda x, y, d: _mul(d, _abs_slope(x[0])),),
    "math.powf": (_strong(_pow_base), _strong(_pow_exponent)),
    "math.fpowi": (_strong(_fpowi_base), None),
    # copysign(a, b) = |a| sign(b)
    "math.copysign": (lambda x, y, d: _mul(d, _mul(_abs_slope(x[0]), _sign(x[1]))),
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
