"""Math ops as arith-only code, for targets without a math library (the GPU).

`convert-gpu-to-nvvm` turns every math op into a call of CUDA's libdevice (`__nv_sinf`...),
which PTX cannot resolve without linking libdevice.bc, and it marks the matching LLVM
intrinsics illegal too. So `expand_math` rewrites math ops before that pass: rounding, sqrt,
fabs, fma and copysign become `llvm.call_intrinsic` (NVPTX has an instruction for each, and
the conversion leaves that op alone); transcendentals become range reduction plus
polynomials in plain arith.

Algorithms and coefficients: exp/expm1 by Cody-Waite reduction and Taylor series; log from
fdlibm/musl (e_log.c, e_logf.c); sin/cos kernels from fdlibm (f64) and Cephes (f32).
Accuracy against NumPy (tests/gpu/test_math_approx.py): a few ulp, except pow in f64 (error
grows with |y*log(x)|, ~1e-13 relative near overflow), and sin/cos/tan, whose 3-part
reduction of x by pi/2 is accurate for |x| < 2**20*pi/2 and loses digits beyond (CUDA's
libdevice switches to Payne-Hanek there). f32 sin/cos/tan reduce in f64 and f32 pow
computes in f64, which Hopper runs at half the f32 rate.
"""
from __future__ import annotations

import math
from typing import Callable

from mlir import ir
from mlir.dialects import arith, llvm, scf

from ..dialects.adj import AdjError

_F, _I = arith.CmpFPredicate, arith.CmpIPredicate


class _Emit:
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


def _expm1_core(e: _Emit, x: ir.Value, base2: bool = False):
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


def _nan_passthrough(e: _Emit, x, result):
    return e.sel(e.cmp(_F.UNO, x, x), x, result)


def exp(e: _Emit, x):
    q, n = _expm1_core(e, x)
    return _nan_passthrough(e, x, e.ldexp(e.add(e.c(1.0), q), n))


def exp2(e: _Emit, x):
    q, n = _expm1_core(e, x, base2=True)
    return _nan_passthrough(e, x, e.ldexp(e.add(e.c(1.0), q), n))


def expm1(e: _Emit, x):
    q, n = _expm1_core(e, x)
    # 2**n*q + (2**n - 1) is exactly q when n == 0 (no cancellation); for large n, 2**n alone
    # would overflow before the result does, and the -1 hardly matters.
    near = e.add(e.ldexp(q, n), e.sub(e.ldexp(e.c(1.0), n), e.c(1.0)))
    far = e.sub(e.ldexp(e.add(e.c(1.0), q), n), e.c(1.0))
    return _nan_passthrough(e, x, e.sel(arith.cmpi(_I.sgt, n, e.ic(e.mant)), far, near))


# --- log family: x = 2**k * (1 + f), sqrt(2)/2 <= 1 + f < sqrt(2) ------------------------------

_LG = {True: [6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
              2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
              1.479819860511658591e-01],
       False: [0xaaaaaa * 2.0**-24, 0xccce13 * 2.0**-25, 0x91e9ee * 2.0**-25, 0xf89e26 * 2.0**-26]}
_LOG_LN2 = {True: (6.93147180369123816490e-01, 1.90821492927058770002e-10),
            False: (6.9313812256e-01, 9.0580006145e-06)}


def _log_core(e: _Emit, x):
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


def _log_special(e: _Emit, x, result):
    """log's values at +inf, 0 and below (NaN included); `result` holds for finite x > 0."""
    result = e.sel(e.cmp(_F.OEQ, x, e.c(math.inf)), x, result)
    result = e.sel(e.cmp(_F.OEQ, x, e.c(0.0)), e.c(-math.inf), result)
    return e.sel(e.cmp(_F.ULT, x, e.c(0.0)), e.c(math.nan), result)


def log(e: _Emit, x):
    k, l = _log_core(e, x)
    ln2_hi, ln2_lo = _LOG_LN2[e.f64]
    return _log_special(e, x, e.add(e.mul(k, e.c(ln2_hi)), e.add(l, e.mul(k, e.c(ln2_lo)))))


def log2(e: _Emit, x):
    k, l = _log_core(e, x)                                    # exact at powers of two
    return _log_special(e, x, e.add(k, e.mul(l, e.c(1 / math.log(2)))))


def log10(e: _Emit, x):
    return e.mul(log(e, x), e.c(1 / math.log(10)))


def log1p(e: _Emit, x):
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


def _sincos(e: _Emit, x):
    """(sin r, cos r, k mod 4 as i1 pair (odd, second half)) of x = k*pi/2 + r, in f64."""
    d = _Emit(ir.F64Type.get())
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


def _finite_only(e: _Emit, x, result):
    return e.sel(e.isfinite(x), result, e.c(math.nan))


def sin(e: _Emit, x):
    s, c, odd, upper = _sincos(e, x)
    v = e.sel(odd, c, s)
    return _finite_only(e, x, e.sel(upper, arith.negf(v), v))


def cos(e: _Emit, x):
    s, c, odd, upper = _sincos(e, x)
    v = e.sel(odd, arith.negf(s), c)
    return _finite_only(e, x, e.sel(upper, arith.negf(v), v))


def tan(e: _Emit, x):
    s, c, odd, _ = _sincos(e, x)
    return _finite_only(e, x, e.sel(odd, arith.negf(e.div(c, s)), e.div(s, c)))


# --- hyperbolic and pow ----------------------------------------------------------------------

def _with_sign_of(e: _Emit, magnitude, x):
    return e.intr("copysign", magnitude, x)


def tanh(e: _Emit, x):
    t = expm1(e, e.mul(e.c(-2.0), e.intr("fabs", x)))     # in (-1, 0]: no overflow, no cancellation
    return _with_sign_of(e, arith.negf(e.div(t, e.add(t, e.c(2.0)))), x)


_HYPERBOLIC_TAIL = {True: 22.0, False: 9.0}    # beyond: exp(-2|x|) is below epsilon


def _half_exp(e: _Emit, a):
    """exp(a)/2 as exp(a/2)/2*exp(a/2): no early overflow, and a/2 is exact (unlike a - ln2)."""
    h = exp(e, e.mul(e.c(0.5), a))
    return e.mul(e.mul(h, e.c(0.5)), h)


def sinh(e: _Emit, x):
    a = e.intr("fabs", x)
    t = expm1(e, a)
    near = e.mul(e.c(0.5), e.add(t, e.div(t, e.add(t, e.c(1.0)))))
    return _with_sign_of(e, e.sel(e.cmp(_F.OGT, a, e.c(_HYPERBOLIC_TAIL[e.f64])),
                                  _half_exp(e, a), near), x)


def cosh(e: _Emit, x):
    a = e.intr("fabs", x)
    t = exp(e, a)
    near = e.add(e.mul(e.c(0.5), t), e.div(e.c(0.5), t))
    return e.sel(e.cmp(_F.OGT, a, e.c(_HYPERBOLIC_TAIL[e.f64])), _half_exp(e, a), near)


def powf(e: _Emit, x, y):
    """C99 pow. f32 computes in f64, so exp(y*log|x|) keeps f32 precision for any y."""
    if not e.f64:
        d = _Emit(ir.F64Type.get())
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


def fpowi(e: _Emit, x, n):
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
    "math.powf": powf, "math.fpowi": fpowi,
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

    root.walk(collect)
    for op in found:
        with ir.InsertionPoint(op), op.location:
            if op.name == "math.ipowi":
                value = ipowi(op)
            elif op.name in _FLOAT_OPS and _is_f32_or_f64(op.results[0].type):
                value = _FLOAT_OPS[op.name](_Emit(op.results[0].type), *op.operands)
            else:
                raise AdjError(op, f"{op.name} on {op.results[0].type} has no GPU lowering "
                                   "without libdevice")
        op.results[0].replace_all_uses_with(value)
        op.erase()


def _is_f32_or_f64(t: ir.Type) -> bool:
    return isinstance(t, (ir.F32Type, ir.F64Type))
