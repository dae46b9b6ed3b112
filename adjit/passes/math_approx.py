"""Math ops as arith-only code, for targets without a math library (the GPU).

`convert-gpu-to-nvvm` turns every math op into a call of CUDA's libdevice (`__nv_sinf`...),
which PTX cannot resolve without linking libdevice.bc, and it marks the matching LLVM
intrinsics illegal too. So `expand_math` rewrites math ops before that pass: rounding, sqrt,
fabs, fma and copysign become `llvm.call_intrinsic` (NVPTX has an instruction for each, and
the conversion leaves that op alone); transcendentals become range reduction plus
polynomials in plain arith.

Algorithms and coefficients: exp/expm1 by Cody-Waite reduction and Taylor series; log and
atan from fdlibm/musl (e_log.c, e_logf.c, s_atan.c, s_atanf.c); sin/cos kernels from fdlibm
(f64) and Cephes (f32); erf by series and continued fraction (Abramowitz & Stegun).
Accuracy against NumPy and libm (tests/gpu/test_math_approx.py): within 3 ulp (4 for f32
tan), except f64 erf (6 ulp), f64 pow (error grows with |y*log(x)|: ~1e-13 relative near
overflow), and sin/cos/tan, whose 3-part reduction by pi/2 is accurate for |x| < 2**20*pi/2
and loses digits beyond (libdevice switches to Payne-Hanek there). f32 sin/cos/tan reduce in
f64, and f32 pow, cbrt and erf compute in f64, which Hopper runs at half the f32 rate.
asinh, acosh and atanh from log/log1p as fdlibm does. Not expanded (an error names them):
erfc and the other math ops without a case here.
The CPU pipeline uses log1p and expm1 from here too (cpu_math.py): upstream's lowering
computes them as log(1 + x) and exp(x) - 1.
"""
from __future__ import annotations

import math
from typing import Callable

from mlir import ir
from mlir.dialects import arith, scf

from ..dialects.adj import AdjError
from .registry import AdjPass
from .walk import walk

_F, _I = arith.CmpFPredicate, arith.CmpIPredicate


class Emit:
    """Arithmetic of one float type at the current insertion point, kept short."""

    def __init__(self, t: ir.Type):
        self.t = t
        self.f64 = isinstance(t, ir.F64Type)
        self.bits, self.mant, self.bias = (64, 52, 1023) if self.f64 else (32, 23, 127)
        self.i = ir.IntegerType.get_signless(self.bits)

    def c(self, v: float) -> ir.Value:
        return arith.constant(self.t, v)

    def ic(self, v: int) -> ir.Value:
        return arith.constant(self.i, v)

    def add(self, a, b): return arith.addf(a, b)
    def sub(self, a, b): return arith.subf(a, b)
    def mul(self, a, b): return arith.mulf(a, b)
    def div(self, a, b): return arith.divf(a, b)
    def cmp(self, p, a, b): return arith.cmpf(p, a, b)
    def sel(self, c, a, b): return arith.select(c, a, b)

    def intr(self, name: str, *args: ir.Value) -> ir.Value:
        # (imported here: mlir.dialects.llvm costs 12-25 ms, and the CPU pipeline imports
        # this module without expanding math)
        from mlir.dialects import llvm
        return llvm.call_intrinsic(self.t, f"llvm.{name}.f{self.bits}", list(args), [], [])

    def poly(self, x: ir.Value, coeffs: list[float]) -> ir.Value:
        """coeffs[0] + x*coeffs[1] + ... by Horner's rule."""
        acc = self.c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            acc = self.add(self.mul(acc, x), self.c(k))
        return acc

    def bits_of(self, x): return arith.bitcast(self.i, x)
    def from_bits(self, n): return arith.bitcast(self.t, n)
    def to_int(self, x): return arith.fptosi(self.i, x)
    def to_float(self, n): return arith.sitofp(self.t, n)

    def isfinite(self, x):
        return self.cmp(_F.OLT, self.intr("fabs", x), self.c(math.inf))

    def ldexp(self, x: ir.Value, n: ir.Value) -> ir.Value:
        """x * 2**n for n in [-2*bias, 2*bias], in two steps so that each power is normal."""
        h = arith.shrsi(n, self.ic(1))
        return self.mul(self.mul(x, self._pow2(h)), self._pow2(arith.subi(n, h)))

    def _pow2(self, n):
        return self.from_bits(arith.shli(arith.addi(n, self.ic(self.bias)), self.ic(self.mant)))


# --- exp family: x = n*ln2 + r, |r| <= ln2/2, exp(x) = 2**n * (1 + q(r)) ---------------------

_LN2 = {True: (6.93147180369123816490e-01, 1.90821492927058770002e-10),   # fdlibm hi/lo
        False: (0.693145751953125, 1.428606765330187045e-06)}           # musl expf
_EXP_RANGE = {True: (-745.2, 709.8), False: (-104.0, 88.8)}   # beyond: 0 or inf
_TAYLOR_TERMS = {True: 13, False: 7}   # remainder r**(N+1)/(N+1)! below the type's epsilon


def _expm1_core(e: Emit, x: ir.Value, base2: bool = False):
    """(q, n) with exp(x) - 1 = 2**n * (1 + q) - 1 (2**x when base2); NaN becomes 0."""
    lo, hi = _EXP_RANGE[e.f64]
    if base2:
        lo, hi = lo / math.log(2), hi / math.log(2)
    x = e.sel(e.cmp(_F.UNO, x, x), e.c(0.0), x)
    x = arith.minimumf(arith.maximumf(x, e.c(lo)), e.c(hi))
    if base2:
        k = e.intr("floor", e.add(x, e.c(0.5)))
        r = e.mul(e.sub(x, k), e.c(math.log(2)))       # x - k is exact
    else:
        ln2_hi, ln2_lo = _LN2[e.f64]
        k = e.intr("floor", e.add(e.mul(x, e.c(1 / math.log(2))), e.c(0.5)))
        r = e.sub(e.sub(x, e.mul(k, e.c(ln2_hi))), e.mul(k, e.c(ln2_lo)))
    coeffs = [1 / math.factorial(j) for j in range(1, _TAYLOR_TERMS[e.f64] + 1)]
    return e.mul(r, e.poly(r, coeffs)), e.to_int(k)


def _nan_passthrough(e: Emit, x, result):
    return e.sel(e.cmp(_F.UNO, x, x), x, result)


def exp(e: Emit, x):
    q, n = _expm1_core(e, x)
    return _nan_passthrough(e, x, e.ldexp(e.add(e.c(1.0), q), n))


def exp2(e: Emit, x):
    q, n = _expm1_core(e, x, base2=True)
    return _nan_passthrough(e, x, e.ldexp(e.add(e.c(1.0), q), n))


def expm1(e: Emit, x):
    q, n = _expm1_core(e, x)
    # 2**n*q + (2**n - 1) is exactly q when n == 0 (no cancellation); for large n, 2**n alone
    # would overflow before the result does, and the -1 hardly matters.
    near = e.add(e.ldexp(q, n), e.sub(e.ldexp(e.c(1.0), n), e.c(1.0)))
    far = e.sub(e.ldexp(e.add(e.c(1.0), q), n), e.c(1.0))
    # n == 0: q itself (q + (1 - 1) made expm1(-0) +0; NumPy and libm give -0)
    near = e.sel(arith.cmpi(_I.eq, n, e.ic(0)), q, near)
    return _nan_passthrough(e, x, e.sel(arith.cmpi(_I.sgt, n, e.ic(e.mant)), far, near))


# --- log family: x = 2**k * (1 + f), sqrt(2)/2 <= 1 + f < sqrt(2) ------------------------------

_LG = {True: [6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
              2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
              1.479819860511658591e-01],
       False: [0xaaaaaa * 2.0**-24, 0xccce13 * 2.0**-25, 0x91e9ee * 2.0**-25, 0xf89e26 * 2.0**-26]}
_LOG_LN2 = {True: (6.93147180369123816490e-01, 1.90821492927058770002e-10),
            False: (6.9313812256e-01, 9.0580006145e-06)}


def _log_core(e: Emit, x):
    """(k, l) with log(x) = k*ln2 + l for finite x > 0; l = log(1 + f) to a fraction of an ulp."""
    tiny = e.cmp(_F.OLT, x, e.c(2.0 ** (1 - e.bias)))           # subnormal: scale into range
    shift = e.mant + 2
    x = e.sel(tiny, e.mul(x, e.c(2.0 ** shift)), x)
    bits = e.bits_of(x)
    k = arith.subi(arith.shrui(bits, e.ic(e.mant)), e.ic(e.bias))
    k = arith.subi(k, arith.select(tiny, e.ic(shift), e.ic(0)))
    m = e.from_bits(arith.ori(arith.andi(bits, e.ic((1 << e.mant) - 1)),
                              e.ic(e.bias << e.mant)))               # in [1, 2)
    big = e.cmp(_F.OGT, m, e.c(math.sqrt(2.0)))
    m = e.sel(big, e.mul(m, e.c(0.5)), m)
    k = arith.addi(k, arith.select(big, e.ic(1), e.ic(0)))
    f = e.sub(m, e.c(1.0))
    s = e.div(f, e.add(e.c(2.0), f))
    z = e.mul(s, s)
    w = e.mul(z, z)
    lg = _LG[e.f64]
    r = e.add(e.mul(z, e.poly(w, lg[0::2])), e.mul(w, e.poly(w, lg[1::2])))
    hfsq = e.mul(e.c(0.5), e.mul(f, f))
    return e.to_float(k), e.sub(f, e.sub(hfsq, e.mul(s, e.add(hfsq, r))))


def _log_special(e: Emit, x, result):
    """log's values at +inf, 0 and below (NaN included); `result` holds for finite x > 0."""
    result = e.sel(e.cmp(_F.OEQ, x, e.c(math.inf)), x, result)
    result = e.sel(e.cmp(_F.OEQ, x, e.c(0.0)), e.c(-math.inf), result)
    return e.sel(e.cmp(_F.ULT, x, e.c(0.0)), e.c(math.nan), result)


def log(e: Emit, x):
    k, l = _log_core(e, x)
    ln2_hi, ln2_lo = _LOG_LN2[e.f64]
    return _log_special(e, x, e.add(e.mul(k, e.c(ln2_hi)), e.add(l, e.mul(k, e.c(ln2_lo)))))


def log2(e: Emit, x):
    k, l = _log_core(e, x)                                    # exact at powers of two
    return _log_special(e, x, e.add(k, e.mul(l, e.c(1 / math.log(2)))))


def log10(e: Emit, x):
    return e.mul(log(e, x), e.c(1 / math.log(10)))


def log1p(e: Emit, x):
    u = e.add(e.c(1.0), x)                       # log(u) * x/(u-1) cancels u's rounding error
    fixed = e.mul(log(e, u), e.div(x, e.sub(u, e.c(1.0))))
    fixed = e.sel(e.cmp(_F.OEQ, u, e.c(math.inf)), u, fixed)
    return e.sel(e.cmp(_F.OEQ, u, e.c(1.0)), x, fixed)


# --- trigonometry: x = k*pi/2 + r, |r| <= pi/4 -------------------------------------------------

_PIO2 = (1.57079632673412561417e+00, 6.07710050630396597660e-11, 2.02226624879595063154e-21)
_SIN = {True: [1.0, -1.66666666666666324348e-01, 8.33333333332248946124e-03,
               -1.98412698298579493134e-04, 2.75573137070700676789e-06,
               -2.50507602534068634195e-08, 1.58969099521155010221e-10],
        False: [1.0, -1.6666654611e-1, 8.3321608736e-3, -1.9515295891e-4]}
_COS = {True: [1.0, -0.5, 4.16666666666666019037e-02, -1.38888888888741095749e-03,
               2.48015872894767294178e-05, -2.75573143513906633035e-07,
               2.08757232129817482790e-09, -1.13596475577881948265e-11],
        False: [1.0, -0.5, 4.166664568298827e-2, -1.388731625493765e-3, 2.443315711809948e-5]}


def _sincos(e: Emit, x):
    """(sin r, cos r, k mod 4 as i1 pair (odd, second half)) of x = k*pi/2 + r, in f64."""
    d = Emit(ir.F64Type.get())
    xd = x if e.f64 else arith.extf(d.t, x)
    xd = d.sel(d.isfinite(xd), xd, d.c(0.0))       # keep fptosi below away from inf and NaN
    k = d.intr("floor", d.add(d.mul(xd, d.c(2 / math.pi)), d.c(0.5)))
    r = xd
    for part in _PIO2:
        r = d.sub(r, d.mul(k, d.c(part)))
    quadrant = d.to_int(d.sub(k, d.mul(d.c(4.0), d.intr("floor", d.mul(k, d.c(0.25))))))
    if not e.f64:
        r = arith.truncf(e.t, r)
    z = e.mul(r, r)
    s = e.mul(r, e.poly(z, _SIN[e.f64]))
    c = e.poly(z, _COS[e.f64])
    odd = arith.trunci(ir.IntegerType.get_signless(1), quadrant)
    upper = arith.cmpi(_I.uge, quadrant, arith.constant(d.i, 2))
    return s, c, odd, upper


def _finite_only(e: Emit, x, result):
    return e.sel(e.isfinite(x), result, e.c(math.nan))


def sin(e: Emit, x):
    s, c, odd, upper = _sincos(e, x)
    v = e.sel(odd, c, s)
    return _finite_only(e, x, e.sel(upper, arith.negf(v), v))


def cos(e: Emit, x):
    s, c, odd, upper = _sincos(e, x)
    v = e.sel(odd, arith.negf(s), c)
    return _finite_only(e, x, e.sel(upper, arith.negf(v), v))


def tan(e: Emit, x):
    s, c, odd, _ = _sincos(e, x)
    return _finite_only(e, x, e.sel(odd, arith.negf(e.div(c, s)), e.div(s, c)))


# --- hyperbolic and pow ----------------------------------------------------------------------

def _with_sign_of(e: Emit, magnitude, x):
    return e.intr("copysign", magnitude, x)


def tanh(e: Emit, x):
    t = expm1(e, e.mul(e.c(-2.0), e.intr("fabs", x)))     # in (-1, 0]: no overflow, no cancellation
    return _with_sign_of(e, arith.negf(e.div(t, e.add(t, e.c(2.0)))), x)


_HYPERBOLIC_TAIL = {True: 22.0, False: 9.0}    # beyond: exp(-2|x|) is below epsilon


def _half_exp(e: Emit, a):
    """exp(a)/2 as exp(a/2)/2*exp(a/2): no early overflow, and a/2 is exact (unlike a - ln2)."""
    h = exp(e, e.mul(e.c(0.5), a))
    return e.mul(e.mul(h, e.c(0.5)), h)


def sinh(e: Emit, x):
    a = e.intr("fabs", x)
    t = expm1(e, a)
    near = e.mul(e.c(0.5), e.add(t, e.div(t, e.add(t, e.c(1.0)))))
    return _with_sign_of(e, e.sel(e.cmp(_F.OGT, a, e.c(_HYPERBOLIC_TAIL[e.f64])),
                                  _half_exp(e, a), near), x)


def cosh(e: Emit, x):
    a = e.intr("fabs", x)
    t = exp(e, a)
    near = e.add(e.mul(e.c(0.5), t), e.div(e.c(0.5), t))
    return e.sel(e.cmp(_F.OGT, a, e.c(_HYPERBOLIC_TAIL[e.f64])), _half_exp(e, a), near)


def powf(e: Emit, x, y):
    """C99 pow. f32 computes in f64, so exp(y*log|x|) keeps f32 precision for any y."""
    if not e.f64:
        d = Emit(ir.F64Type.get())
        return arith.truncf(e.t, powf(d, arith.extf(d.t, x), arith.extf(d.t, y)))
    a = e.intr("fabs", x)
    r = exp(e, e.mul(y, log(e, a)))
    r = e.sel(e.cmp(_F.OEQ, a, e.c(1.0)), e.c(1.0), r)      # (-1)**inf, 1**nan
    y_int = e.cmp(_F.OEQ, e.intr("floor", y), y)
    y_odd = arith.andi(y_int, e.cmp(_F.ONE, e.mul(e.c(2.0), e.intr("floor", e.mul(y, e.c(0.5)))), y))
    negative = arith.cmpi(_I.slt, e.bits_of(x), e.ic(0))          # -0.0 included
    r = e.sel(arith.andi(negative, y_odd), arith.negf(r), r)
    finite_negative = arith.andi(e.cmp(_F.OLT, x, e.c(0.0)), e.isfinite(x))
    r = e.sel(arith.andi(finite_negative, arith.xori(y_int, _true())), e.c(math.nan), r)
    return e.sel(arith.ori(e.cmp(_F.OEQ, y, e.c(0.0)), e.cmp(_F.OEQ, x, e.c(1.0))), e.c(1.0), r)


def cbrt(e: Emit, x):
    """exp(log|x|/3), then one Newton step (which squares its relative error), in f64."""
    if not e.f64:
        d = Emit(ir.F64Type.get())
        return arith.truncf(e.t, cbrt(d, arith.extf(d.t, x)))
    a = e.intr("fabs", x)
    r = exp(e, e.mul(log(e, a), e.c(1 / 3)))
    r2 = e.mul(r, r)
    r = e.sub(r, e.div(e.sub(e.mul(r2, r), a), e.mul(e.c(3.0), r2)))
    r = e.sel(arith.ori(e.cmp(_F.OEQ, a, e.c(0.0)), e.cmp(_F.OEQ, a, e.c(math.inf))), a, r)
    return _with_sign_of(e, r, x)


# --- inverse trigonometry (fdlibm s_atan.c / s_atanf.c) -----------------------------------------

_ATAN_HI = {True: [4.63647609000806093515e-01, 7.85398163397448278999e-01,
                   9.82793723247329054082e-01, 1.57079632679489655800e+00],
            False: [4.6364760399e-01, 7.8539812565e-01, 9.8279368877e-01, 1.5707962513e+00]}
_ATAN_LO = {True: [2.26987774529616870924e-17, 3.06161699786838301793e-17,
                   1.39033110312309984516e-17, 6.12323399573676603587e-17],
            False: [5.0121582440e-09, 3.7748947079e-08, 3.4473217170e-08, 7.5497894159e-08]}
_ATAN_T = {True: [3.33333333333329318027e-01, -1.99999999998764832476e-01,
                  1.42857142725034663711e-01, -1.11111104054623557880e-01,
                  9.09088713343650656196e-02, -7.69187620504482999495e-02,
                  6.66107313738753120669e-02, -5.83357013379057348645e-02,
                  4.97687799461593236017e-02, -3.65315727442169155270e-02,
                  1.62858201153657823623e-02],
           False: [3.3333328366e-01, -1.9999158382e-01, 1.4253635705e-01, -1.0648017377e-01,
                   6.1687607318e-02]}
# |x| at or above each bound moves to the next interval; in each, t = (p*|x| + q)/(r*|x| + s)
_ATAN_BOUNDS = [7 / 16, 11 / 16, 19 / 16, 39 / 16]
_ATAN_PQRS = [(2.0, -1.0, 1.0, 2.0), (1.0, -1.0, 1.0, 1.0), (1.0, -1.5, 1.5, 1.0),
              (0.0, -1.0, 1.0, 0.0)]


def atan(e: Emit, x):
    a = arith.minimumf(e.intr("fabs", x), e.c(1e300 if e.f64 else 1e30))   # keeps 0*a finite
    p, q, r, s, hi, lo = (e.c(v) for v in (1.0, 0.0, 0.0, 1.0, 0.0, 0.0))
    for bound, pqrs, h, l in zip(_ATAN_BOUNDS, _ATAN_PQRS, _ATAN_HI[e.f64], _ATAN_LO[e.f64]):
        above = e.cmp(_F.OGE, a, e.c(bound))
        p, q, r, s, hi, lo = (e.sel(above, e.c(new), old)
                              for new, old in zip((*pqrs, h, l), (p, q, r, s, hi, lo)))
    t = e.div(e.add(e.mul(p, a), q), e.add(e.mul(r, a), s))
    z = e.mul(t, t)
    w = e.mul(z, z)
    at = _ATAN_T[e.f64]
    s12 = e.add(e.mul(z, e.poly(w, at[0::2])), e.mul(w, e.poly(w, at[1::2])))
    result = e.sub(hi, e.sub(e.sub(e.mul(t, s12), lo), t))
    return _with_sign_of(e, result, x)


_PIO2_HI_LO = {True: (1.57079632679489655800e+00, 6.12323399573676603587e-17),
               False: (1.5707963705e+00, -4.3711388287e-08)}
_PI_HI_LO = {True: (3.14159265358979311600e+00, 1.22464679914735317720e-16),
             False: (3.1415927410e+00, -8.7422776573e-08)}


def atan2(e: Emit, y, x):
    """z = atan(min/max of |x|, |y|) placed in its octant as hi - (+-z - lo): z, pi/2 - z,
    pi - z or pi/2 + z, with pi and pi/2 split in two for an ulp's accuracy."""
    ax, ay = e.intr("fabs", x), e.intr("fabs", y)
    steep = e.cmp(_F.OGT, ay, ax)
    ratio = e.sel(steep, e.div(ax, ay), e.div(ay, ax))
    ratio = e.sel(e.cmp(_F.OEQ, ax, ay), e.c(1.0), ratio)          # inf/inf
    z = e.sel(e.cmp(_F.OEQ, ay, e.c(0.0)), e.c(0.0), atan(e, ratio))
    x_negative = arith.cmpi(_I.slt, e.bits_of(x), e.ic(0))           # -0.0 included
    pio2, pi = _PIO2_HI_LO[e.f64], _PI_HI_LO[e.f64]
    hi = e.sel(steep, e.c(pio2[0]), e.sel(x_negative, e.c(pi[0]), e.c(0.0)))
    lo = e.sel(steep, e.c(pio2[1]), e.sel(x_negative, e.c(pi[1]), e.c(0.0)))
    z = e.sel(arith.xori(steep, x_negative), z, arith.negf(z))
    result = _with_sign_of(e, e.sub(hi, e.sub(z, lo)), y)
    return e.sel(e.cmp(_F.UNO, x, y), e.add(x, y), result)


def asin(e: Emit, x):
    return atan2(e, x, e.intr("sqrt", e.mul(e.sub(e.c(1.0), x), e.add(e.c(1.0), x))))


def acos(e: Emit, x):
    return atan2(e, e.intr("sqrt", e.mul(e.sub(e.c(1.0), x), e.add(e.c(1.0), x))), x)


# --- inverse hyperbolic (fdlibm s_asinh.c, e_acosh.c, e_atanh.c) ----------------------------

_HYPERBOLIC_BIG = {True: 2.0 ** 28, False: 2.0 ** 12}   # beyond: sqrt(x*x + 1) is x


def _log_twice(e: Emit, a):
    """log(2a), for a past _HYPERBOLIC_BIG (2a may overflow: log(a) + ln 2)."""
    return e.add(log(e, a), e.c(math.log(2)))


def asinh(e: Emit, x):
    a = e.intr("fabs", x)
    a2 = e.mul(a, a)
    root = e.intr("sqrt", e.add(a2, e.c(1.0)))
    small = log1p(e, e.add(a, e.div(a2, e.add(e.c(1.0), root))))      # no cancellation
    mid = log(e, e.add(e.mul(e.c(2.0), a), e.div(e.c(1.0), e.add(root, a))))
    r = e.sel(e.cmp(_F.OGT, a, e.c(2.0)), mid, small)
    r = e.sel(e.cmp(_F.OGT, a, e.c(_HYPERBOLIC_BIG[e.f64])), _log_twice(e, a), r)
    return _nan_passthrough(e, x, _with_sign_of(e, r, x))


def acosh(e: Emit, x):
    t = e.sub(x, e.c(1.0))
    small = log1p(e, e.add(t, e.intr("sqrt", e.add(e.mul(e.c(2.0), t), e.mul(t, t)))))
    mid = log(e, e.sub(e.mul(e.c(2.0), x),
                       e.div(e.c(1.0), e.add(x, e.intr("sqrt", e.sub(e.mul(x, x), e.c(1.0)))))))
    r = e.sel(e.cmp(_F.OGT, x, e.c(2.0)), mid, small)
    r = e.sel(e.cmp(_F.OGT, x, e.c(_HYPERBOLIC_BIG[e.f64])), _log_twice(e, x), r)
    r = e.sel(e.cmp(_F.OLT, x, e.c(1.0)), e.c(math.nan), r)
    return _nan_passthrough(e, x, r)


def atanh(e: Emit, x):
    a = e.intr("fabs", x)
    two_a = e.add(a, a)
    small = e.mul(e.c(0.5), log1p(e, e.add(two_a, e.div(e.mul(two_a, a), e.sub(e.c(1.0), a)))))
    big = e.mul(e.c(0.5), log1p(e, e.div(two_a, e.sub(e.c(1.0), a))))
    r = e.sel(e.cmp(_F.OLT, a, e.c(0.5)), small, big)
    r = e.sel(e.cmp(_F.OGT, a, e.c(1.0)), e.c(math.nan), r)
    return _nan_passthrough(e, x, _with_sign_of(e, r, x))


# --- erf: below 2, x*exp(-x*x) times a series of positive terms (A&S 7.1.6, no cancellation);
# above, 1 - erfc with erfc's continued fraction (A&S 7.1.14); in f64 --------------------------

_ERF_SPLIT = 2.0
_ERF_TERMS = 36          # 2**n / (2n+1)!! times 4**n, the last term at x = 2, is below 1e-19
_ERFC_CF_TERMS = 60      # converged to an ulp from x = 2 on


def _exp_neg_square(e: Emit, a):
    """exp(-a*a), with the rounding error of a*a (from fma) folded back in."""
    sq = e.mul(a, a)
    sq_err = e.intr("fma", a, a, arith.negf(sq))
    return e.mul(exp(e, arith.negf(sq)), e.sub(e.c(1.0), sq_err))


def erf(e: Emit, x):
    if not e.f64:
        d = Emit(ir.F64Type.get())
        return arith.truncf(e.t, erf(d, arith.extf(d.t, x)))
    a = arith.minimumf(e.intr("fabs", x), e.c(7.0))        # erf(7) is 1 to f64's precision
    small = arith.minimumf(a, e.c(_ERF_SPLIT))
    coeffs, double_factorial = [], 1
    for n in range(_ERF_TERMS):
        double_factorial *= 2 * n + 1
        coeffs.append(2 / math.sqrt(math.pi) * 2 ** n / double_factorial)
    series = e.mul(e.mul(small, _exp_neg_square(e, small)), e.poly(e.mul(small, small), coeffs))
    big = arith.maximumf(a, e.c(_ERF_SPLIT))
    f = big
    for k in range(_ERFC_CF_TERMS, 0, -1):
        f = e.add(big, e.div(e.c(k / 2), f))
    erfc = e.div(_exp_neg_square(e, big), e.mul(e.c(math.sqrt(math.pi)), f))
    result = e.sel(e.cmp(_F.OLT, a, e.c(_ERF_SPLIT)), series, e.sub(e.c(1.0), erfc))
    return _nan_passthrough(e, x, _with_sign_of(e, result, x))


def fpowi(e: Emit, x, n):
    return powf(e, x, arith.sitofp(e.t, n))


def _true():
    return arith.constant(ir.IntegerType.get_signless(1), 1)


def ipowi(op: ir.Operation) -> ir.Value:
    """Integer power by squaring; a negative exponent gives 0 unless the base is 1 or -1."""
    base, n = op.operands
    t = base.type
    one, zero = arith.constant(t, 1), arith.constant(t, 0)
    loop = scf.WhileOp([t, t, t], [one, base, n])
    before = loop.before.blocks.append(t, t, t)
    with ir.InsertionPoint(before):
        scf.ConditionOp(arith.cmpi(_I.sgt, before.arguments[2], zero), list(before.arguments))
    after = loop.after.blocks.append(t, t, t)
    with ir.InsertionPoint(after):
        acc, b, m = after.arguments
        odd = arith.cmpi(_I.ne, arith.andi(m, one), zero)
        scf.YieldOp([arith.select(odd, arith.muli(acc, b), acc), arith.muli(b, b),
                     arith.shrsi(m, one)])
    minus_one = arith.constant(t, -1)
    odd_n = arith.cmpi(_I.ne, arith.andi(n, one), zero)
    negative = arith.select(arith.cmpi(_I.eq, base, one), one,
                            arith.select(arith.cmpi(_I.eq, base, minus_one),
                                         arith.select(odd_n, minus_one, one), zero))
    return arith.select(arith.cmpi(_I.slt, n, zero), negative, loop.results[0])


def _intrinsic(name: str) -> Callable:
    return lambda e, *args: e.intr(name, *args)


_FLOAT_OPS: dict[str, Callable] = {
    "math.sqrt": _intrinsic("sqrt"), "math.absf": _intrinsic("fabs"),
    "math.floor": _intrinsic("floor"), "math.ceil": _intrinsic("ceil"),
    "math.trunc": _intrinsic("trunc"), "math.round": _intrinsic("round"),
    "math.roundeven": _intrinsic("roundeven"), "math.fma": _intrinsic("fma"),
    "math.copysign": _intrinsic("copysign"),
    "math.rsqrt": lambda e, x: e.div(e.c(1.0), e.intr("sqrt", x)),
    "math.exp": exp, "math.exp2": exp2, "math.expm1": expm1,
    "math.log": log, "math.log2": log2, "math.log10": log10, "math.log1p": log1p,
    "math.sin": sin, "math.cos": cos, "math.tan": tan,
    "math.tanh": tanh, "math.sinh": sinh, "math.cosh": cosh,
    "math.powf": powf, "math.fpowi": fpowi, "math.cbrt": cbrt,
    "math.atan": atan, "math.atan2": atan2, "math.asin": asin, "math.acos": acos,
    "math.erf": erf, "math.asinh": asinh, "math.acosh": acosh, "math.atanh": atanh,
}
# Lowered by convert-math-to-llvm to intrinsics that NVPTX selects.
_LEFT_TO_LLVM = {"math.absi", "math.ctlz", "math.cttz", "math.ctpop"}


def expand_math(root: ir.Operation) -> None:
    """Rewrites every math op under `root` into arith, scf and llvm.call_intrinsic ops.

    Raises AdjError naming the op for a math op with no expansion (it would need libdevice).
    """
    found: list[ir.Operation] = []

    def collect(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("math.") and op.name not in _LEFT_TO_LLVM:
            found.append(op)
        return ir.WalkResult.ADVANCE

    walk(root, collect)
    for op in found:
        with ir.InsertionPoint(op), op.location:
            if op.name == "math.ipowi":
                value = ipowi(op)
            elif op.name in _FLOAT_OPS and _is_f32_or_f64(op.results[0].type):
                value = _FLOAT_OPS[op.name](Emit(op.results[0].type), *op.operands)
            else:
                raise AdjError(op, f"{op.name} on {op.results[0].type} has no GPU lowering "
                                   "without libdevice")
        op.results[0].replace_all_uses_with(value)
        op.erase()


def _is_f32_or_f64(t: ir.Type) -> bool:
    return isinstance(t, (ir.F32Type, ir.F64Type))


class ExpandMath(AdjPass):
    """--adj-expand-math: math ops into arith-only code (for the GPU: the module docstring)."""
    name = "adj-expand-math"

    def apply(self, module: ir.Operation) -> None:
        expand_math(module)
