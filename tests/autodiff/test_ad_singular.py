"""Every op of the rule table (passes/autodiff/rules/scalar.py) at its singular points (0, -0.0, +-inf
and the op's own: asin at +-1, log1p at -1...), in forward and reverse mode, alone and inside
a select, a max, a min and an `scf.if`, taken and not taken, and fed its singular point
with a zero tangent (from the side of a select not taken).

Expected values: what JAX 0.10.2 returns (jax.grad and jax.jvp agree; read off once with
`jax[cpu]`, JAX is not needed here), which is the one-sided limit where there is one; the few
places where adjit differs say why. Where a value does not reach the result (the side of a
select, max, min or if not taken) its derivative is 0, even where its own partial is inf or NaN
(strong zero), except for a product with an infinite operand (rules.py: mulf is not guarded).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from ad_helpers import Compiled, request

import adjit
from adjit import Active, Const, Duplicated, Forward, Reverse, autodiff

INF, NAN = math.inf, math.nan
LN2, C = math.log(2.0), 2 / math.sqrt(math.pi)

# op -> [(point, d/dx at the point)]: the unary ops.
UNARY = {
    "arith.negf": [(0.0, -1.0), (-0.0, -1.0), (INF, -1.0), (-INF, -1.0)],
    "math.sin": [(0.0, 1.0), (-0.0, 1.0), (INF, NAN), (-INF, NAN)],
    "math.cos": [(0.0, -0.0), (-0.0, 0.0), (INF, NAN), (-INF, NAN)],
    "math.tan": [(0.0, 1.0), (-0.0, 1.0), (INF, NAN), (-INF, NAN)],
    "math.exp": [(0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, 0.0), (710.0, INF)],
    "math.exp2": [(0.0, LN2), (-0.0, LN2), (INF, INF), (-INF, 0.0)],
    "math.expm1": [(0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, 0.0)],
    "math.log": [(0.0, INF), (-0.0, -INF), (INF, 0.0), (-INF, -0.0)],
    "math.log2": [(0.0, INF), (-0.0, -INF), (INF, 0.0), (-INF, -0.0)],
    "math.log10": [(0.0, INF), (-0.0, -INF), (INF, 0.0), (-INF, -0.0)],
    "math.log1p": [(0.0, 1.0), (-0.0, 1.0), (INF, 0.0), (-INF, -0.0), (-1.0, INF)],
    "math.sqrt": [(0.0, INF), (-0.0, -INF), (INF, 0.0), (-INF, NAN)],
    "math.rsqrt": [(0.0, -INF), (-0.0, -INF), (INF, -0.0), (-INF, NAN)],
    "math.cbrt": [(0.0, INF), (-0.0, INF), (INF, 0.0), (-INF, 0.0)],
    "math.tanh": [(0.0, 1.0), (-0.0, 1.0), (INF, 0.0), (-INF, 0.0)],
    "math.sinh": [(0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, INF)],
    "math.cosh": [(0.0, 0.0), (-0.0, -0.0), (INF, INF), (-INF, -INF)],
    "math.asinh": [(0.0, 1.0), (-0.0, 1.0), (INF, 0.0), (-INF, 0.0)],
    "math.acosh": [(1.0, INF), (-1.0, INF), (INF, 0.0), (-INF, 0.0), (0.0, NAN)],
    "math.atanh": [(0.0, 1.0), (-0.0, 1.0), (1.0, INF), (-1.0, INF), (INF, -0.0)],
    "math.atan": [(0.0, 1.0), (-0.0, 1.0), (INF, 0.0), (-INF, 0.0)],
    "math.asin": [(0.0, 1.0), (-0.0, 1.0), (1.0, INF), (-1.0, INF), (INF, NAN)],
    "math.acos": [(0.0, -1.0), (-0.0, -1.0), (1.0, -INF), (-1.0, -INF), (INF, NAN)],
    # |x| at -0.0: 1, as JAX (x >= 0 picks the right-hand slope; -0.0 >= 0).
    "math.absf": [(0.0, 1.0), (-0.0, 1.0), (INF, 1.0), (-INF, -1.0)],
    "math.erf": [(0.0, C), (-0.0, C), (INF, 0.0), (-INF, 0.0)],
    "math.erfc": [(0.0, -C), (-0.0, -C), (INF, -0.0), (-INF, -0.0)],
}

# op -> [((x, y), (d/dx, d/dy))]; None: that operand is not differentiable.
BINARY = {
    "arith.addf": [((INF, 1.0), (1.0, 1.0)), ((INF, -INF), (1.0, 1.0))],
    "arith.subf": [((INF, 1.0), (1.0, -1.0)), ((INF, INF), (1.0, -1.0))],
    "arith.mulf": [((1.0, INF), (INF, 1.0)), ((0.0, INF), (INF, 0.0)), ((-0.0, 0.0), (0.0, -0.0))],
    "arith.divf": [((1.0, 0.0), (INF, -INF)), ((1.0, -0.0), (-INF, -INF)), ((0.0, 0.0), (INF, NAN)),
                   ((1.0, INF), (0.0, -0.0)), ((INF, 0.0), (INF, -INF)), ((INF, 2.0), (0.5, -INF))],
    "arith.remf": [((1.0, 0.0), (1.0, -INF)), ((1.0, -0.0), (1.0, INF)), ((0.0, 0.0), (1.0, NAN)),
                   ((1.0, INF), (1.0, -0.0)), ((INF, 2.0), (1.0, -INF))],
    "math.powf": [
        # d/dx x^0 at 0 and -0: 0 (x^0 = 1 is constant; JAX: nan, 0 * 0^-1).
        ((0.0, 0.0), (0.0, 0.0)), ((-0.0, 0.0), (0.0, 0.0)),
        ((0.0, 2.0), (0.0, 0.0)), ((0.0, 1.0), (1.0, 0.0)), ((0.0, 0.5), (INF, 0.0)),
        # d/dy at x = 0: 0 wherever 0^y is (Enzyme-MLIR's PowFOp; JAX: nan for y < 0).
        ((0.0, -1.0), (-INF, 0.0)), ((-0.0, -1.0), (-INF, 0.0)),
        ((-0.0, 0.5), (INF, 0.0)), ((-0.0, 2.0), (-0.0, 0.0)),
        ((INF, 2.0), (INF, INF)), ((INF, 1.0), (1.0, INF)), ((INF, 0.0), (0.0, INF)),
        ((1.0, INF), (INF, 0.0)), ((2.0, INF), (INF, INF)), ((0.0, INF), (NAN, 0.0)),
        ((1.0, 0.0), (0.0, 0.0)),
    ],
    "math.atan2": [((1.0, 0.0), (0.0, -1.0)), ((1.0, -0.0), (-0.0, -1.0)), ((0.0, 0.0), (NAN, NAN)),
                   ((1.0, INF), (NAN, -0.0)), ((INF, 2.0), (0.0, NAN)), ((0.0, 2.0), (0.5, -0.0))],
    # d/dx copysign(x, y) = |x|' sign(y); y only chooses a sign.
    "math.copysign": [((1.0, 0.0), (1.0, None)), ((1.0, -0.0), (-1.0, None)),
                      ((-0.0, 0.0), (1.0, None)), ((0.0, -1.0), (-1.0, None)),
                      ((INF, 1.0), (1.0, None))],
    # Ties are not singular points of these; 0 and inf are.
    "arith.maximumf": [((INF, 0.0), (1.0, 0.0)), ((0.0, INF), (0.0, 1.0)), ((-INF, 0.0), (0.0, 1.0))],
    "arith.maxnumf": [((INF, 0.0), (1.0, 0.0)), ((0.0, INF), (0.0, 1.0))],
    "arith.minimumf": [((INF, 0.0), (0.0, 1.0)), ((-INF, 0.0), (1.0, 0.0))],
    "arith.minnumf": [((INF, 0.0), (0.0, 1.0)), ((-INF, 0.0), (1.0, 0.0))],
}

# x^n, n an integer (math.fpowi): ((x, n), d/dx). JAX's integer_pow agrees at all of them.
FPOWI = [((0.0, 0), 0.0), ((-0.0, 0), 0.0), ((INF, 0), 0.0), ((0.0, 1), 1.0), ((0.0, 2), 0.0),
         ((-0.0, 2), -0.0), ((0.0, -1), -INF), ((-0.0, -1), -INF), ((INF, 2), INF),
         ((INF, -1), -0.0)]

# fma(x, y, z) = x * y + z: ((x, y, z), (d/dx, d/dy, d/dz)).
FMA = [((0.0, INF, 1.0), (INF, 0.0, 1.0)), ((INF, 0.0, -INF), (0.0, INF, 1.0))]

# (op, operand types, [(point, expected)]) for every op.
CASES = ([(op, ("f64",), [((p,), (e,)) for p, e in pts]) for op, pts in UNARY.items()]
         + [(op, ("f64", "f64"), pts) for op, pts in BINARY.items()]
         + [("math.fpowi", ("f64", "i32"), [(p, (e, None)) for p, e in FPOWI]),
            ("math.fma", ("f64", "f64", "f64"), FMA)])
NAMES = {op: op.replace(".", "_") for op, _, _ in CASES}
CONTEXTS = ("plain", "select", "max", "min", "if")


def _op_line(op: str, types: tuple) -> str:
    args = ", ".join(f"%a{k}" for k in range(len(types)))
    if op == "math.fpowi":
        return f"%r = math.fpowi {args} : f64, i32"
    return f"%r = {op} {args} : f64"


def _functions(op: str, types: tuple) -> str:
    """One function per context; %k (a Const f64) is what the context compares or chooses:
    select(k > 0, r, k), maximumf(r, k), minimumf(r, k), if k > 0 { r } else { k }; "fed"
    gives the op select(k > 0, a_i, b_i) for each float operand, b_i Const: with k < 0 the
    op sees b (the point) with a zero tangent."""
    name = NAMES[op]
    params = ", ".join(f"%a{k}: {t}" for k, t in enumerate(types)) + ", %k: f64"
    floats = [k for k, t in enumerate(types) if t == "f64"]
    line = _op_line(op, types)
    attrs = "attributes {adj.func}"
    cond = "%z = arith.constant 0.0 : f64\n  %c = arith.cmpf ogt, %k, %z : f64"
    fed = "\n  ".join(f"%m{k} = arith.select %c, %a{k}, %b{k} : f64" for k in floats)
    fed_line = line
    for k in floats:
        fed_line = fed_line.replace(f"%a{k}", f"%m{k}")
    bodies = {
        "plain": f"{line}\n  return %r : f64",
        "select": f"{line}\n  {cond}\n  %s = arith.select %c, %r, %k : f64\n  return %s : f64",
        "max": f"{line}\n  %s = arith.maximumf %r, %k : f64\n  return %s : f64",
        "min": f"{line}\n  %s = arith.minimumf %r, %k : f64\n  return %s : f64",
        "if": f"{cond}\n  %s = scf.if %c -> f64 {{\n    {line}\n    scf.yield %r : f64\n"
              f"  }} else {{\n    scf.yield %k : f64\n  }}\n  return %s : f64",
        "fed": f"{cond}\n  {fed}\n  {fed_line}\n  return %r : f64",
    }
    out = []
    for ctx, body in bodies.items():
        fn = f"{name}_{ctx}"
        extra = [f"%b{k}: f64" for k in floats] if ctx == "fed" else []
        out.append(f"func.func @{fn}({', '.join([params] + extra)}) -> f64 {attrs} {{\n"
                   f"  {body}\n}}\n")
        tail = ["const"] * (1 + len(extra))
        rev = ["active" if t == "f64" else "const" for t in types] + tail
        out.append(request(fn, f"{fn}_r", "reverse", rev, "active"))
        for k in floats:
            fwd = ["dup" if j == k else "const" for j in range(len(types))] + tail
            out.append(request(fn, f"{fn}_f{k}", "forward", fwd, "dup"))
    return "\n".join(out)


@pytest.fixture(scope="module")
def compiled() -> Compiled:
    # One module for all ops: one compilation (~the cost of a few small ones).
    return Compiled("\n".join(_functions(op, types) for op, types, _ in CASES))


def _primal(op: str, args: tuple) -> float:
    """The op's value at `args`, through NumPy (for choosing the max/min side not taken)."""
    with np.errstate(all="ignore"):
        x = np.float64(args[0])
        table = {"arith.negf": np.negative, "math.sin": np.sin, "math.cos": np.cos,
                 "math.tan": np.tan, "math.exp": np.exp, "math.exp2": np.exp2,
                 "math.expm1": np.expm1, "math.log": np.log, "math.log2": np.log2,
                 "math.log10": np.log10, "math.log1p": np.log1p, "math.sqrt": np.sqrt,
                 "math.rsqrt": lambda v: 1 / np.sqrt(v), "math.cbrt": np.cbrt,
                 "math.tanh": np.tanh, "math.sinh": np.sinh, "math.cosh": np.cosh,
                 "math.asinh": np.arcsinh, "math.acosh": np.arccosh, "math.atanh": np.arctanh,
                 "math.atan": np.arctan, "math.asin": np.arcsin, "math.acos": np.arccos,
                 "math.absf": np.abs, "math.erf": lambda v: np.float64(math.erf(v)),
                 "math.erfc": lambda v: np.float64(math.erfc(v))}
        if op in table:
            return float(table[op](x))
        y = np.float64(args[1])
        table2 = {"arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
                  "arith.divf": np.divide, "arith.remf": np.fmod, "math.powf": np.power,
                  "math.fpowi": lambda a, n: np.power(a, np.float64(n)),
                  "math.atan2": np.arctan2, "math.copysign": np.copysign,
                  "arith.maximumf": np.maximum, "arith.maxnumf": np.fmax,
                  "arith.minimumf": np.minimum, "arith.minnumf": np.fmin,
                  "math.fma": lambda a, b: a * b + np.float64(args[2])}
        return float(table2[op](x, y))


def _same(got: float, want: float) -> bool:
    """Equal, NaN matching NaN (the sign of a zero is not compared: forward and reverse mode
    may add a +0.0 to it)."""
    return (math.isnan(got) and math.isnan(want)) or got == want


def _derivatives(c: Compiled, fn: str, types: tuple, args: tuple, k: float,
                 extra: tuple = ()) -> dict:
    """{'reverse': [d/da_i...], 'forward': [...]}, None for the non-float operands; `extra`:
    Const arguments after k."""
    full = list(args) + [k] + list(extra)
    tape = c(f"{fn}_r_aug", *full)
    grads = iter(c(f"{fn}_r_rev", *full, 1.0, *tape))
    rev = [float(next(grads)) if t == "f64" else None for t in types]
    fwd = []
    for i, t in enumerate(types):
        if t != "f64":
            fwd.append(None)
            continue
        flat = []
        for j, a in enumerate(full):
            flat.append(a)
            if j == i:
                flat.append(1.0)
        fwd.append(float(c(f"{fn}_f{i}", *flat)[0]))
    return {"reverse": rev, "forward": fwd}


def _ids():
    return [f"{op}{p}" for op, _, pts in CASES for p, _ in pts]


POINTS = [(op, types, p, e) for op, types, pts in CASES for p, e in pts]


def _expect(compiled, op, types, point, values, ctx, k, reverse_values=None, extra=()):
    got = _derivatives(compiled, f"{NAMES[op]}_{ctx}", types, point, k, extra)
    want = {"forward": values, "reverse": reverse_values or values}
    for mode, ds in got.items():
        for i, (g, w) in enumerate(zip(ds, want[mode])):
            if w is None:
                continue
            assert _same(g, w), (f"{op} at {point}, {ctx} (k={k}), {mode} mode: d/da{i} = {g}, "
                                 f"expected {w}")


@pytest.mark.parametrize("op, types, point, expected", POINTS, ids=_ids())
def test_alone_and_taken(compiled, op, types, point, expected):
    """The JAX value (one-sided limit) alone, and where a select, max, min or if takes it."""
    _expect(compiled, op, types, point, expected, "plain", 0.0)
    _expect(compiled, op, types, point, expected, "select", 1.0)
    _expect(compiled, op, types, point, expected, "if", 1.0)
    r = _primal(op, point)
    if not math.isnan(r):   # a max or min with NaN is NaN: neither side is taken
        _expect(compiled, op, types, point, expected, "max", -INF)
        _expect(compiled, op, types, point, expected, "min", INF)


# mulf and fma are not guarded (rules.py): in reverse mode, the zero adjoint of a product not
# taken times an infinite operand stays NaN there, as in JAX. (Forward mode is 0: the select,
# max, min or if drops the tangent of the side it does not take.)
UNGUARDED = {"arith.mulf", "math.fma"}


@pytest.mark.parametrize("op, types, point, expected", POINTS, ids=_ids())
def test_not_taken_is_zero(compiled, op, types, point, expected):
    """A value a select, max, min or if does not take contributes exactly 0, even where its
    partial is infinite or NaN (strong zero): forward and reverse mode."""
    r = _primal(op, point)
    # The side not taken: max(r, +inf) takes +inf unless r is +inf; min(r, -inf) likewise.
    extremum = ("min", -INF) if r == INF else ("max", INF)
    zeros = tuple(None if e is None else 0.0 for e in expected)
    rev = zeros
    if op in UNGUARDED:
        # d/da_i of a product is the other operands' product: inf where one of them is.
        rev = tuple(NAN if math.isinf(e) else z for e, z in zip(expected, zeros))
    for ctx, k in (("select", -1.0), ("if", -1.0), extremum):
        _expect(compiled, op, types, point, zeros, ctx, k, rev if ctx != "if" else zeros)


# ---- the cases, from Python (issue 8, item 2) -------------------------------------
@adjit.jit
def _power_n(x: float, n: int):
    return x ** n


@adjit.jit
def _power_zero(x: float):
    return x ** 0.0


@adjit.jit
def _power_xy(x: float, y: float):
    return x ** y


@adjit.jit
def _max_sqrt(x: float):
    return max(adjit.sqrt(x), 1.0)


@adjit.jit
def _if_sqrt(x: float):
    s = adjit.sqrt(x)
    if s > 1.0:
        return s
    else:
        return 1.0


def _one_sided(f, *args, k=0, h=1e-6):
    """(f(args with args[k] + h) - f(args)) / h: these functions are not defined left of 0."""
    up = list(args)
    up[k] += h
    return (f(*up) - f(*args)) / h


def test_power_with_a_zero_exponent_at_zero():
    # d/dx x**n at x = 0, n = 0 (x ** 0 = 1): 0, not NaN (0 * 0^-1).
    assert autodiff(Reverse, _power_n, Active(0.0), Const(0))[0] == 0.0
    assert autodiff(Forward, _power_n, Duplicated(0.0, 1.0), Const(0)) == 0.0
    assert autodiff(Reverse, _power_zero, Active(0.0))[0] == 0.0
    assert autodiff(Forward, _power_zero, Duplicated(0.0, 1.0)) == 0.0
    assert _one_sided(_power_zero, 0.0) == 0.0
    # Away from the singular point the rule is unchanged: n x^(n-1).
    assert autodiff(Reverse, _power_n, Active(0.5), Const(3))[0] == pytest.approx(0.75)


def test_power_exponent_derivative_at_a_zero_base():
    # d/dy x**y at (0, 2.0): 0 (0^y = 0 for y > 0; JAX gives 0), not 0 * log(0) = NaN.
    assert autodiff(Reverse, _power_xy, Const(0.0), Active(2.0))[1] == 0.0
    assert autodiff(Forward, _power_xy, Const(0.0), Duplicated(2.0, 1.0)) == 0.0
    assert _one_sided(_power_xy, 0.0, 2.0, k=1) == 0.0
    # Elsewhere x^y ln x (float64 reference).
    assert autodiff(Reverse, _power_xy, Const(1.5), Active(2.0))[1] == pytest.approx(
        1.5 ** 2 * math.log(1.5), rel=1e-14)


@pytest.mark.parametrize("f", [_max_sqrt, _if_sqrt], ids=["max", "if"])
def test_sqrt_on_the_side_not_taken(f):
    # max(sqrt(x), 1.0) at x = 0 is 1.0 near 0: derivative 0. The zero adjoint max gives
    # sqrt times sqrt's infinite partial at 0 was NaN (JAX too); strong zero makes it 0.
    assert autodiff(Reverse, f, Active(0.0))[0] == 0.0
    assert autodiff(Forward, f, Duplicated(0.0, 1.0)) == 0.0
    assert _one_sided(f, 0.0) == 0.0
    # Where sqrt is taken: 1 / (2 sqrt(x)).
    assert autodiff(Reverse, f, Active(4.0))[0] == pytest.approx(0.25, rel=1e-14)
    assert autodiff(Forward, f, Duplicated(4.0, 1.0)) == pytest.approx(0.25, rel=1e-14)


@pytest.mark.parametrize("op, types, point, expected", POINTS, ids=_ids())
def test_zero_tangent_in_is_zero(compiled, op, types, point, expected):
    """An op that gets its singular point with a zero tangent (the side of a select not
    taken, before it: `sqrt(max(x, 0.0))` at x = -1) gives a zero tangent: forward mode's
    strong zero. (Reverse mode: the select gives the op's operands' adjoints to b.)"""
    floats = tuple(v for v, t in zip(point, types) if t == "f64")
    zeros = tuple(None if e is None else 0.0 for e in expected)
    fwd = zeros
    if op in UNGUARDED:
        # d/da_i of a product is the other operands' product: inf where one of them is.
        fwd = tuple(NAN if math.isinf(e) else z for e, z in zip(expected, zeros))
    # The a_i (what the select does not take) are 0.5, a regular point of every op.
    regular = tuple(0.5 if t == "f64" else v for v, t in zip(point, types))
    got = _derivatives(compiled, f"{NAMES[op]}_fed", types, regular, -1.0, floats)
    for mode, want in (("forward", fwd), ("reverse", zeros)):
        for i, (g, w) in enumerate(zip(got[mode], want)):
            if w is not None:
                assert _same(g, w), f"{op} fed {point}, {mode} mode: d/da{i} = {g}, expected {w}"


def test_every_op_of_the_table_is_covered():
    from adjit.passes.autodiff.rules.scalar import RULES
    # arith.select is the context itself (its condition has no derivative).
    assert set(RULES) - {"arith.select"} == set(NAMES)


@adjit.jit
def _sqrt_of_relu(x: float):
    return adjit.sqrt(max(x, 0.0))


def test_sqrt_after_the_side_not_taken():
    # At x = -1 sqrt gets 0 with a zero tangent: forward mode gave 0 / (2 sqrt(0)) = NaN.
    assert autodiff(Forward, _sqrt_of_relu, Duplicated(-1.0, 1.0)) == 0.0
    assert autodiff(Reverse, _sqrt_of_relu, Active(-1.0))[0] == 0.0
    h = 1e-6
    assert (_sqrt_of_relu(-1.0 + h) - _sqrt_of_relu(-1.0 - h)) / (2 * h) == 0.0
    assert autodiff(Forward, _sqrt_of_relu, Duplicated(4.0, 1.0)) == pytest.approx(0.25)
