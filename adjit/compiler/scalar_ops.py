"""Scalar arithmetic with Python's meaning, emitted as arith/math ops.

Every function takes and returns frontend values (Scalar or Literal) and raises UserError
for what Python would reject or adjit does not take; the code generator adds the position.
"""
from __future__ import annotations

import math as pymath
import operator

import numpy as np
from mlir import ir
from mlir.dialects import arith, math, memref, scf

from ..dialects import adj
from ..dialects.mlir_types import mlir_type
from ..lang.builtins import UNARY_MATH
from ..core.errors import UserError
from ..core.types import ScalarType, bool_, f64, i64, index, promote, weak_f64, weak_i64
from .values import Array, ArrayExpr, Literal, Scalar


def literal_type(v: int | float | bool) -> ScalarType:
    """A Python constant's type: a Python int or float is weak (NEP 50)."""
    return bool_ if isinstance(v, bool) else weak_i64 if isinstance(v, int) else weak_f64


def constant(v: int | float | bool, t: ScalarType) -> Scalar:
    if t.is_float:
        attr = ir.FloatAttr.get(mlir_type(t), float(v))
    elif t.is_bool:
        attr = ir.IntegerAttr.get(mlir_type(t), int(bool(v)))
    else:
        if isinstance(v, float):
            raise UserError(f"cannot use the float {v!r} as an integer {t!r}")
        lo, hi = -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1
        if not lo <= v <= hi:   # NumPy refuses too (OverflowError), rather than wrapping
            raise UserError(f"the integer {v} does not fit in {t!r}")
        attr = ir.IntegerAttr.get(mlir_type(t), int(v))
    return Scalar(arith.ConstantOp(mlir_type(t), attr).result, t)


def as_scalar(v, t: ScalarType | None = None) -> Scalar:
    """Materialises a Literal (with type `t`, or its Python type); checks a Scalar."""
    if isinstance(v, Literal):
        return constant(v.value, t or literal_type(v.value))
    if isinstance(v, Scalar):
        return v
    raise UserError(f"expected a scalar here, got {describe(v)}")


def describe(v) -> str:
    from .values import Array, ArrayExpr, Shape
    if isinstance(v, (Array, ArrayExpr)):
        return f"an array {v.type!r}"
    if isinstance(v, Shape):
        return "a shape tuple"
    from .values import Vec, VecArray
    if isinstance(v, Vec):
        return f"a {v.type!r} value"
    if isinstance(v, VecArray):
        return f"an array of {v.vec!r} (an array {v.array.type!r})"
    if isinstance(v, tuple) and hasattr(type(v), "_fields"):
        return f"a {type(v).__name__} (a NamedTuple)"
    if isinstance(v, tuple):
        return f"a tuple of {len(v)}"
    if isinstance(v, dict):
        return f"a dict (keys {', '.join(map(repr, v))})"
    if isinstance(v, Scalar):
        return f"a {v.type!r} value"
    if isinstance(v, Literal):
        return f"the constant {v.value!r}"
    from .values import FString, PyObj, StructValue
    if isinstance(v, FString):
        return "an f-string (only print() takes one: compiled code has no strings)"
    if isinstance(v, StructValue):
        return f"a {v.type.name} struct"
    if isinstance(v, PyObj):
        if v.obj is None:
            return ("None (in a rule, a Const argument's .dval and the dret of a Const "
                    "result are None: test `x.dval is None`)")
        return f"the Python object {v.obj!r}"
    return f"{type(v).__name__}"


def cast(s: Scalar, to: ScalarType) -> Scalar:
    """Numeric conversion as NumPy's astype (floats to ints truncate toward zero)."""
    frm = s.type
    if frm == to:
        return s
    if frm.name == to.name:   # a weak scalar made typed, or the reverse: the same bits
        return Scalar(s.value, to)
    v, t = s.value, mlir_type(to)
    if to.is_bool:
        return truth(s)
    if frm.is_bool:
        v = arith.extui(mlir_type(i64) if to.is_float else t, v) if to.bits > 1 else v
        return Scalar(arith.uitofp(t, v) if to.is_float else v, to)
    if frm.is_float and to.is_float:
        return Scalar(arith.extf(t, v) if to.bits > frm.bits else arith.truncf(t, v), to)
    if frm.is_float:
        if to == index:
            return Scalar(arith.index_cast(t, arith.fptosi(mlir_type(i64), v)), to)
        return Scalar(arith.fptosi(t, v), to)
    if to.is_float:
        if frm == index:
            v = arith.index_cast(mlir_type(i64), v)
        return Scalar(arith.sitofp(t, v), to)
    if frm == index or to == index:
        return Scalar(arith.index_cast(t, v), to)
    return Scalar(arith.extsi(t, v) if to.bits > frm.bits else arith.trunci(t, v), to)


def convert(v, to: ScalarType) -> Scalar:
    """`v` as a `to` value, as NumPy's astype: a float constant into an integer truncates
    (where as_scalar refuses it, since `x[i] // 2.5` must not silently become `// 2`)."""
    if isinstance(v, Literal) and isinstance(v.value, float) and not to.is_float:
        v = as_scalar(v)
    return cast(as_scalar(v, to), to)


def unify(a, b) -> tuple[Scalar, Scalar]:
    """Two operands at their common type, NumPy 2's (NEP 50, `core.types.promote`): a
    Python scalar (a Literal, or a weak Scalar: a Python float or int argument, an int from
    range or len...) takes the other side's type where it is of its kind or above, so
    `0.5 * x[i]` and `lr * x[i]` stay f32 for f32 `x`; a float one meeting an integer
    makes both f64, as in NumPy."""
    if isinstance(a, Literal) and isinstance(b, Literal):
        raise AssertionError("constant operands are folded before this")
    ta = literal_type(a.value) if isinstance(a, Literal) else as_scalar(a).type
    tb = literal_type(b.value) if isinstance(b, Literal) else as_scalar(b).type
    t = promote(ta, tb)
    return at_type(a, t), at_type(b, t)


def at_type(v, t: ScalarType) -> Scalar:
    """Operand `v` of `unify` at its common type `t`. A Python int becoming a narrower
    integer must fit, as NumPy 2 requires (`np.int32(1) + 2**40` raises OverflowError): a
    constant is checked now, a run-time one (a Python int argument, `len(x)`) where it
    runs (arrays.elementwise converts one once, before its loop)."""
    if isinstance(v, Literal):
        return as_scalar(v, t)
    v = as_scalar(v)
    if v.type.weak and t.is_int and t.bits < v.type.bits:
        lo, hi = (constant(c, v.type).value for c in (-(1 << (t.bits - 1)),
                                                       (1 << (t.bits - 1)) - 1))
        I = arith.CmpIPredicate
        fits = arith.andi(arith.cmpi(I.sge, v.value, lo), arith.cmpi(I.sle, v.value, hi))
        adj.check(fits, "OverflowError", f"a Python int does not fit in {t!r} (NumPy 2 "
                                         "raises too): convert it, or the array, first")
    return cast(v, t)


_PY_BINOPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
              "//": operator.floordiv, "%": operator.mod, "**": operator.pow,
              "&": operator.and_, "|": operator.or_, "^": operator.xor,
              "<<": operator.lshift, ">>": operator.rshift}


def binary(op: str, a, b):
    if isinstance(a, Literal) and isinstance(b, Literal):
        try:
            return Literal(_PY_BINOPS[op](a.value, b.value))
        except ZeroDivisionError:
            raise UserError("division by zero in constant expression") from None
        except (ValueError, TypeError) as e:   # a negative shift count, a float shifted
            raise UserError(f"{e} (in a constant expression)") from None
    if op == "**":
        return power(a, b)
    x, y = unify(a, b)
    t = x.type
    if op == "/":
        if not t.is_float:   # (two Python ints: a Python float, weak)
            x, y = (cast(v, weak_f64 if t.weak else f64) for v in (x, y))
        return Scalar(arith.divf(x.value, y.value), x.type)
    if t.is_bool and op in ("+", "-", "*", "//", "%", "<<", ">>"):
        x, y = cast(x, i64), cast(y, i64)
        t = i64
    xv, yv = x.value, y.value
    if op in ("<<", ">>"):
        if t.is_float:
            raise UserError(f"operator {op} needs integers or bools, got {t!r}")
        return Scalar(_shift(op, xv, yv, t), t)
    if op in ("&", "|", "^"):
        if t.is_float:
            raise UserError(f"operator {op} needs integers or bools, got {t!r}")
        fn = {"&": arith.andi, "|": arith.ori, "^": arith.xori}[op]
        return Scalar(fn(xv, yv), t)
    if t.is_float:
        if op in ("//", "%"):
            div, mod = _float_divmod(xv, yv, t)
            return Scalar(div if op == "//" else mod, t)
        fn = {"+": arith.addf, "-": arith.subf, "*": arith.mulf}[op]
        return Scalar(fn(xv, yv), t)
    if op in ("//", "%"):
        return Scalar(_int_divmod(op, xv, yv, t), t)
    fn = {"+": arith.addi, "-": arith.subi, "*": arith.muli}[op]
    return Scalar(fn(xv, yv), t)


def _shift(op: str, x: ir.Value, n: ir.Value, t: ScalarType) -> ir.Value:
    """NumPy's shifts of fixed-width integers, for every count: a count at least the
    width, or negative (compared unsigned, as NumPy does), shifts everything out: `<<`
    gives 0 and `>>` (arithmetic) 0 or -1 by the sign. LLVM's shl/ashr make such counts
    poison: x86's vector shifts then give NumPy's 0 but its scalar ones shift by the
    count modulo the width, so lanes and the loop tail disagreed. (Python's unbounded
    ints never overflow and refuse a negative count; the compiled ints have the dtype's
    width, as NumPy's.)"""
    I = arith.CmpIPredicate
    in_range = arith.cmpi(I.ult, n, constant(t.bits, t).value)
    if op == "<<":
        safe = arith.select(in_range, n, constant(0, t).value)
        return arith.select(in_range, arith.shli(x, safe), constant(0, t).value)
    return arith.shrsi(x, arith.select(in_range, n, constant(t.bits - 1, t).value))


def _int_divmod(op: str, x: ir.Value, y: ir.Value, t: ScalarType) -> ir.Value:
    """Python's integer `//` or `%` (floored). The CPU traps, killing the process, on a
    zero divisor and on MIN // -1: a zero divisor raises ZeroDivisionError instead, and
    -1 is handled without dividing (x // -1 is -x, wrapping as NumPy does; x % -1 is 0)."""
    I = arith.CmpIPredicate
    zero, one, minus_one = (constant(c, t).value for c in (0, 1, -1))
    adj.check(arith.cmpi(I.ne, y, zero), "ZeroDivisionError", "integer division or modulo "
                                                              "by zero")
    by_minus_one = arith.cmpi(I.eq, y, minus_one)
    safe = arith.select(arith.ori(by_minus_one, arith.cmpi(I.eq, y, zero)), one, y)
    if op == "//":
        return arith.select(by_minus_one, arith.subi(zero, x), arith.floordivsi(x, safe))
    r = arith.remsi(x, safe)
    fix = arith.andi(arith.cmpi(I.ne, r, zero),
                     arith.xori(arith.cmpi(I.slt, r, zero), arith.cmpi(I.slt, safe, zero)))
    return arith.select(fix, arith.addi(r, safe), r)


def _float_divmod(x: ir.Value, y: ir.Value, t: ScalarType) -> tuple[ir.Value, ir.Value]:
    """Python's float `//` and `%` (CPython's float_divmod, as NumPy's): floor(x / y) is
    wrong when x / y rounds up to an integer (`1.0 // 0.1` is 9.0, not 10.0), so the
    quotient is derived from the remainder; the remainder has the divisor's sign, and a
    zero remainder is a zero of that sign."""
    F = arith.CmpFPredicate
    zero, one, half = (constant(c, t).value for c in (0.0, 1.0, 0.5))
    mod = arith.remf(x, y)
    div = arith.divf(arith.subf(x, mod), y)
    nonzero = arith.cmpf(F.UNE, mod, zero)
    fix = arith.andi(nonzero, arith.xori(arith.cmpf(F.OLT, y, zero),
                                         arith.cmpf(F.OLT, mod, zero)))
    mod = arith.select(nonzero, arith.select(fix, arith.addf(mod, y), mod),
                       math.copysign(zero, y))
    div = arith.select(fix, arith.subf(div, one), div)
    floor = math.floor(div)
    floor = arith.select(arith.cmpf(F.OGT, arith.subf(div, floor), half),
                         arith.addf(floor, one), floor)
    div = arith.select(arith.cmpf(F.UNE, div, zero), floor,
                       math.copysign(zero, arith.divf(x, y)))
    return div, mod


def power(a, b):
    # Small integer exponents become multiplications: exact, fast, and simple to differentiate.
    if (isinstance(b, Literal) and not isinstance(b.value, bool) and b.value in (0, 1, 2, 3, 4)
            and isinstance(b.value, int)):
        base = as_scalar(a)
        if b.value == 0:
            return as_scalar(Literal(1), base.type)
        out = base
        for _ in range(b.value - 1):
            out = binary("*", out, base)
        return out
    x, y = unify(a, b)
    if x.type.is_float:
        return Scalar(math.powf(x.value, y.value), x.type)
    if x.type.is_bool:
        x, y = cast(x, i64), cast(y, i64)
    return Scalar(_ipow(x.value, y.value, x.type), x.type)


def _ipow(x: ir.Value, y: ir.Value, t: ScalarType) -> ir.Value:
    """Integer power by repeated squaring. A negative exponent raises ValueError, as NumPy
    does for integer arrays (rather than math.ipowi, whose lowering computes 0 ** -1 as 1 / 0,
    which traps and kills the process)."""
    I = arith.CmpIPredicate
    zero, one = constant(0, t).value, constant(1, t).value
    adj.check(arith.cmpi(I.sge, y, zero), "ValueError",
              "integers to negative integer powers are not allowed")
    ty = mlir_type(t)
    loop = scf.WhileOp([ty] * 3, [one, x, y])
    before = loop.regions[0].blocks.append(ty, ty, ty)
    after = loop.regions[1].blocks.append(ty, ty, ty)
    with ir.InsertionPoint(before):
        scf.ConditionOp(arith.cmpi(I.sgt, before.arguments[2], zero), list(before.arguments))
    with ir.InsertionPoint(after):
        acc, base, e = after.arguments
        odd = arith.cmpi(I.ne, arith.andi(e, one), zero)
        acc = arith.select(odd, arith.muli(acc, base), acc)
        scf.YieldOp([acc, arith.muli(base, base), arith.shrui(e, one)])
    return loop.results[0]


_FPRED = {"<": "OLT", "<=": "OLE", ">": "OGT", ">=": "OGE", "==": "OEQ", "!=": "UNE"}
_IPRED = {"<": "slt", "<=": "sle", ">": "sgt", ">=": "sge", "==": "eq", "!=": "ne"}
_PY_CMP = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
           "==": operator.eq, "!=": operator.ne}


def compare(op: str, a, b):
    if isinstance(a, Literal) and isinstance(b, Literal):
        return Literal(_PY_CMP[op](a.value, b.value))
    ta = literal_type(a.value) if isinstance(a, Literal) else as_scalar(a).type
    tb = literal_type(b.value) if isinstance(b, Literal) else as_scalar(b).type
    if ta.is_int and tb.is_int and (ta.weak or tb.weak) and index not in (ta, tb):
        # A Python int compared with a narrower int: at i64, where both are exact (NumPy 2
        # compares `np.int32(1) < 2**40` correctly rather than refusing the int).
        x, y = at_type(a, i64), at_type(b, i64)
    else:
        x, y = unify(a, b)
    if x.type.is_float:
        pred = getattr(arith.CmpFPredicate, _FPRED[op])
        return Scalar(arith.cmpf(pred, x.value, y.value), bool_)
    pred = getattr(arith.CmpIPredicate, _IPRED[op] if not x.type.is_bool or op in ("==", "!=")
                   else _IPRED[op].replace("s", "u", 1))
    return Scalar(arith.cmpi(pred, x.value, y.value), bool_)


def truth(a) -> Scalar:
    """Python truthiness of a number (x != 0) as i1."""
    if isinstance(a, Literal):
        return constant(bool(a.value), bool_)
    if isinstance(a, Array) and a.type.ndim == 0:   # NumPy's too: its one element
        a = Scalar(memref.load(a.value, []), a.type.dtype)
    if isinstance(a, (tuple, Array, ArrayExpr)):
        raise UserError(f"the truth value of {describe(a)} is ambiguous (as in NumPy): "
                        "compare scalars, or reduce the array first")
    a = as_scalar(a)
    if a.type.is_bool:
        return a
    return compare("!=", a, Literal(0))


def logical_not(a):
    if isinstance(a, Literal):
        return Literal(not a.value)
    return Scalar(arith.xori(truth(a).value, constant(True, bool_).value), bool_)


def negate(a):
    if isinstance(a, Literal):
        return Literal(-a.value)
    a = as_scalar(a)
    if a.type.is_float:
        return Scalar(arith.negf(a.value), a.type)
    if a.type.is_bool:
        a = cast(a, i64)
    return Scalar(arith.subi(constant(0, a.type).value, a.value), a.type)


def invert(a):
    if isinstance(a, Literal):
        return Literal(~a.value)
    a = as_scalar(a)
    if a.type.is_float:
        raise UserError("operator ~ needs an integer or bool")
    if a.type.is_bool:
        return logical_not(a)
    return Scalar(arith.xori(a.value, constant(-1, a.type).value), a.type)


def to_index(a) -> ir.Value:
    """An array subscript or range bound as an `index` value."""
    if isinstance(a, Literal):
        if not isinstance(a.value, int) or isinstance(a.value, bool):
            raise UserError(f"an index must be an integer, got {a.value!r}")
        return constant(a.value, index).value
    a = as_scalar(a)
    if not a.type.is_int:
        raise UserError(f"an index must be an integer, got a {a.type!r} value")
    return cast(a, index).value


def from_index(v: ir.Value) -> Scalar:
    """An index value as the Python int user code sees (a loop variable, len(x),
    x.shape[d]): weak, as a Python int is in NumPy 2 (`x_f32 * i` stays f32)."""
    return cast(Scalar(v, index), weak_i64)


def to_float(a) -> Scalar:
    """A number as a float: a Python int becomes a Python float (weak), a typed int f64."""
    if isinstance(a, Literal):
        return as_scalar(Literal(float(a.value)))
    a = as_scalar(a)
    return a if a.type.is_float else cast(a, weak_f64 if a.type.weak else f64)


# Unary math functions: name -> math dialect builder (the math dialect's names are adjit's).
_UNARY_MATH = {name: getattr(math, name) for name in UNARY_MATH}
_PY_UNARY = {"rsqrt": lambda x: 1 / pymath.sqrt(x), "exp2": lambda x: 2.0 ** x,
             "cbrt": lambda x: pymath.copysign(abs(x) ** (1 / 3), x)}


def math_unary(name: str, a):
    if isinstance(a, Literal):
        fn = _PY_UNARY.get(name) or getattr(pymath, name)
        return Literal(fn(a.value))
    x = to_float(a)
    return Scalar(_UNARY_MATH[name](x.value), x.type)


def floor_ceil(name: str, a):
    if isinstance(a, Literal):
        return Literal(getattr(pymath, name)(a.value))
    x = as_scalar(a)
    if not x.type.is_float:
        return x
    return Scalar((math.floor if name == "floor" else math.ceil)(x.value), x.type)


def absolute(a):
    if isinstance(a, Literal):
        return Literal(abs(a.value))
    x = as_scalar(a)
    if x.type.is_float:
        return Scalar(math.absf(x.value), x.type)
    if x.type.is_bool:
        return cast(x, i64)
    return Scalar(math.absi(x.value), x.type)


def minmax(name: str, a, b):
    """Python's builtin min/max of two scalars: min(a, b) is b if b < a else a, so a NaN
    is kept or dropped by its position, exactly as Python does (adjit.min/adjit.max and
    any array operand follow NumPy instead: `extremum`)."""
    if isinstance(a, Literal) and isinstance(b, Literal):
        return Literal(min(a.value, b.value) if name == "min" else max(a.value, b.value))
    x, y = unify(a, b)
    better = compare("<" if name == "min" else ">", y, x)
    return Scalar(arith.select(better.value, y.value, x.value), x.type)


def extremum(name: str, a, b):
    """NumPy's maximum/minimum (also adjit.max/min and reductions): NaN propagates, in
    either argument order, unlike Python's max/min; bools give bools.

    For floats it is NumPy's own definition, `a if (a > b or isnan(a)) else b` (`<` for
    minimum), as selects: the same result as NumPy bit for bit (on a tie, -0.0 against
    0.0 included, b), and a derivative that goes to the operand returned (the NaN one at a
    NaN, b on a tie) through the autodiff pass's select rule. arith.maximumf would order
    -0.0 below 0.0 (not NumPy's result) and its derivative rule, a comparison, cannot see
    which operand a NaN result came from."""
    if isinstance(a, Literal) and isinstance(b, Literal):
        return Literal(getattr(np, name)(a.value, b.value).item())
    x, y = unify(a, b)
    t = x.type
    if t.is_float:
        F = arith.CmpFPredicate
        beats = arith.cmpf(F.OGT if name == "maximum" else F.OLT, x.value, y.value)
        first = arith.ori(beats, arith.cmpf(F.UNO, x.value, x.value))
        return Scalar(arith.select(first, x.value, y.value), t)
    ops = (arith.ori, arith.andi) if t.is_bool else (arith.maxsi, arith.minsi)
    return Scalar(ops[name == "minimum"](x.value, y.value), t)


def _float_pair(a, b) -> tuple[Scalar, Scalar]:
    """Two operands at their common type, made float as the math module's functions do."""
    x, y = unify(a, b)
    return to_float(x), to_float(y)


def atan2(a, b):
    if isinstance(a, Literal) and isinstance(b, Literal):
        return Literal(pymath.atan2(a.value, b.value))
    x, y = _float_pair(a, b)
    return Scalar(math.atan2(x.value, y.value), x.type)


def copysign(a, b):
    if isinstance(a, Literal) and isinstance(b, Literal):
        return Literal(pymath.copysign(a.value, b.value))
    x, y = _float_pair(a, b)
    return Scalar(math.copysign(x.value, y.value), x.type)


def hypot(a, b):
    """sqrt(a*a + b*b) as big + small*r/(1 + sqrt(1 + r*r)), r = small/big, big and small
    the larger and smaller of |a| and |b| (that is big*sqrt(1 + r*r), so the squares cannot
    overflow or underflow; the math dialect has no hypot, and a libm call would not lower to
    the GPU). The autodiff pass differentiates these ops into a/h and b/h. Written as a sum
    rather than big*sqrt(1 + r*r) for forward mode: there the tangent of r*r, 2r/big, underflows
    when the operands differ by more than the type's range allows (f32 hypot(100, 1e30):
    0 instead of 1e-28), while small*r's is 2r. At the origin the quotient divides by 1, not
    0, so the value (0) and the derivative stay finite; an infinite operand gives inf even
    beside a NaN, as C's."""
    if isinstance(a, Literal) and isinstance(b, Literal):
        return Literal(pymath.hypot(a.value, b.value))
    x, y = _float_pair(a, b)
    F = arith.CmpFPredicate
    zero, one, inf = (constant(c, x.type).value for c in (0.0, 1.0, pymath.inf))
    ax, ay = math.absf(x.value), math.absf(y.value)
    # selects, not maximumf/minimumf: on a tie those both pick |a|, and the derivative
    # with respect to b would be lost. (A NaN operand makes big or small NaN either way.)
    a_bigger = arith.cmpf(F.OGE, ax, ay)
    big, small = arith.select(a_bigger, ax, ay), arith.select(a_bigger, ay, ax)
    ratio = arith.divf(small, arith.select(arith.cmpf(F.OEQ, big, zero), one, big))
    root = math.sqrt(arith.addf(one, arith.mulf(ratio, ratio)))
    h = arith.addf(big, arith.divf(arith.mulf(small, ratio), arith.addf(one, root)))
    either_inf = arith.ori(arith.cmpf(F.OEQ, ax, inf), arith.cmpf(F.OEQ, ay, inf))
    return Scalar(arith.select(either_inf, inf, h), x.type)


def classify(name: str, a):
    """isnan / isinf / isfinite as bools; integers are always finite."""
    if isinstance(a, Literal):
        return Literal(getattr(pymath, name)(a.value))
    x = as_scalar(a)
    if not x.type.is_float:
        return Literal(name == "isfinite")
    F = arith.CmpFPredicate
    if name == "isnan":
        return Scalar(arith.cmpf(F.UNO, x.value, x.value), bool_)
    # |x| < inf is false for NaN, as isfinite must be
    pred = F.OEQ if name == "isinf" else F.OLT
    inf = constant(pymath.inf, x.type).value
    return Scalar(arith.cmpf(pred, math.absf(x.value), inf), bool_)


def select(cond, a, b) -> Scalar:
    x, y = unify(a, b) if not (isinstance(a, Scalar) and isinstance(b, Scalar)
                                and a.type == b.type) else (a, b)
    return Scalar(arith.select(truth(cond).value, x.value, y.value), x.type)
