"""Every rule of the table (passes/autodiff/rules/scalar.py): forward and reverse mode against the
analytic derivative and central differences, one op per function."""
import math

import numpy as np
import pytest
from ad_helpers import ENTRY, GradCheck


def erf_prime(x: float) -> float:
    return 2 / math.sqrt(math.pi) * math.exp(-x * x)


# op -> (analytic (d/dx, d/dy), point (x, y)); unary: (d/dx, x)
BINARY = {
    "arith.addf": (lambda x, y: (1.0, 1.0), (0.3, -1.2)),
    "arith.subf": (lambda x, y: (1.0, -1.0), (0.3, -1.2)),
    "arith.mulf": (lambda x, y: (y, x), (0.3, -1.2)),
    "arith.divf": (lambda x, y: (1 / y, -x / y**2), (0.3, -1.2)),
    "arith.remf": (lambda x, y: (1.0, -math.trunc(x / y)), (5.3, 1.2)),
    "arith.maximumf": (lambda x, y: (1.0, 0.0), (0.3, -1.2)),
    "arith.maxnumf": (lambda x, y: (0.0, 1.0), (-0.3, 1.2)),
    "arith.minimumf": (lambda x, y: (0.0, 1.0), (0.3, -1.2)),
    "arith.minnumf": (lambda x, y: (1.0, 0.0), (-0.3, 1.2)),
    "math.atan2": (lambda x, y: (y / (x * x + y * y), -x / (x * x + y * y)), (0.3, -1.2)),
    "math.powf": (lambda x, y: (y * x ** (y - 1), x**y * math.log(x)), (1.3, 2.7)),
    "math.copysign": (lambda x, y: (-1.0, 0.0), (0.3, -1.2)),
}

UNARY = {
    "arith.negf": (lambda x: -1.0, 0.4),
    "math.sin": (math.cos, 0.4),
    "math.cos": (lambda x: -math.sin(x), 0.4),
    "math.tan": (lambda x: 1 / math.cos(x) ** 2, 0.4),
    "math.exp": (math.exp, 0.4),
    "math.exp2": (lambda x: 2**x * math.log(2), 0.4),
    "math.expm1": (math.exp, 0.4),
    "math.log": (lambda x: 1 / x, 0.4),
    "math.log2": (lambda x: 1 / (x * math.log(2)), 0.4),
    "math.log10": (lambda x: 1 / (x * math.log(10)), 0.4),
    "math.log1p": (lambda x: 1 / (1 + x), 0.4),
    "math.sqrt": (lambda x: 0.5 / math.sqrt(x), 0.4),
    "math.rsqrt": (lambda x: -0.5 * x**-1.5, 0.4),
    "math.cbrt": (lambda x: x ** (-2 / 3) / 3, 0.4),
    "math.tanh": (lambda x: 1 - math.tanh(x) ** 2, 0.4),
    "math.sinh": (math.cosh, 0.4),
    "math.cosh": (math.sinh, 0.4),
    "math.asinh": (lambda x: 1 / math.sqrt(x * x + 1), 0.4),
    "math.acosh": (lambda x: 1 / math.sqrt(x * x - 1), 1.4),
    "math.atanh": (lambda x: 1 / (1 - x * x), 0.4),
    "math.atan": (lambda x: 1 / (1 + x * x), 0.4),
    "math.asin": (lambda x: 1 / math.sqrt(1 - x * x), 0.4),
    "math.acos": (lambda x: -1 / math.sqrt(1 - x * x), 0.4),
    "math.absf": (lambda x: -1.0, -0.4),
    "math.erf": (erf_prime, 0.4),
    "math.erfc": (lambda x: -erf_prime(x), 0.4),
}

ZERO = ["math.floor", "math.ceil", "math.round", "math.roundeven", "math.trunc"]


def unary_module(op: str, t: str = "f64") -> str:
    return f"""
func.func @f(%x: {t}) -> {t} attributes {{{ENTRY}}} {{
  %r = {op} %x : {t}
  return %r : {t}
}}
"""


def binary_module(op: str, t: str = "f64") -> str:
    return f"""
func.func @f(%x: {t}, %y: {t}) -> {t} attributes {{{ENTRY}}} {{
  %r = {op} %x, %y : {t}
  return %r : {t}
}}
"""


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(op):
    derivative, x = UNARY[op]
    g = GradCheck(unary_module(op), "f", ["active"])
    (dx,), _, _ = g.reverse([x], [None])
    assert dx == pytest.approx(derivative(x), rel=1e-12, abs=1e-15)
    assert g.forward([x], [None], [1.0]) == pytest.approx(derivative(x), rel=1e-12)
    g.check([x], rtol=1e-6)


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary(op):
    derivative, (x, y) = BINARY[op]
    g = GradCheck(binary_module(op), "f", ["active", "active"])
    grads, _, _ = g.reverse([x, y], [None, None])
    assert grads == pytest.approx(derivative(x, y), rel=1e-12, abs=1e-15)
    g.check([x, y], rtol=1e-6)


@pytest.mark.parametrize("op", ZERO)
def test_piecewise_constant_ops_have_zero_derivative(op):
    g = GradCheck(unary_module(op), "f", ["active"])
    (dx,), _, _ = g.reverse([1.3], [None])
    assert dx == 0.0
    assert g.forward([1.3], [None], [1.0]) == 0.0


def test_select_routes_the_adjoint_to_the_chosen_operand():
    text = f"""
func.func @f(%x: f64, %y: f64) -> f64 attributes {{{ENTRY}}} {{
  %c = arith.cmpf olt, %x, %y : f64
  %xx = arith.mulf %x, %x : f64
  %r = arith.select %c, %xx, %y : f64
  return %r : f64
}}
"""
    g = GradCheck(text, "f", ["active", "active"])
    assert g.reverse([0.5, 2.0], [None, None])[0] == [1.0, 0.0]
    assert g.reverse([3.0, 2.0], [None, None])[0] == [0.0, 1.0]
    g.check([0.5, 2.0])
    g.check([3.0, 2.0])


def test_fma_and_fpowi():
    text = f"""
func.func @f(%x: f64, %y: f64, %z: f64) -> f64 attributes {{{ENTRY}}} {{
  %a = math.fma %x, %y, %z : f64
  %n = arith.constant 3 : i32
  %p = math.fpowi %a, %n : f64, i32
  return %p : f64
}}
"""
    g = GradCheck(text, "f", ["active", "active", "active"])
    x, y, z = 0.5, 1.5, -0.2
    a = x * y + z
    grads, _, _ = g.reverse([x, y, z], [None] * 3)
    assert grads == pytest.approx([3 * a**2 * y, 3 * a**2 * x, 3 * a**2], rel=1e-12)
    g.check([x, y, z])


def test_casts_between_float_widths():
    text = f"""
func.func @f(%x: f32, %y: f64) -> f64 attributes {{{ENTRY}}} {{
  %e = arith.extf %x : f32 to f64
  %m = arith.mulf %e, %y : f64
  %t = arith.truncf %m : f64 to f32
  %s = math.sin %t : f32
  %r = arith.extf %s : f32 to f64
  return %r : f64
}}
"""
    g = GradCheck(text, "f", ["active", "active"])
    x, y = np.float32(0.5), 1.5
    (dx, dy), _, _ = g.reverse([x, y], [None, None])
    assert type(dx) is np.float32
    assert dx == pytest.approx(math.cos(x * y) * y, rel=1e-6)
    assert dy == pytest.approx(math.cos(x * y) * x, rel=1e-6)


def test_integer_casts_carry_no_derivative():
    text = f"""
func.func @f(%x: f64) -> f64 attributes {{{ENTRY}}} {{
  %i = arith.fptosi %x : f64 to i64
  %b = arith.sitofp %i : i64 to f64
  %r = arith.mulf %b, %x : f64
  return %r : f64
}}
"""
    g = GradCheck(text, "f", ["active"])
    (dx,), _, _ = g.reverse([2.5], [None])
    assert dx == 2.0


@pytest.mark.parametrize("op", ["math.sin", "math.exp", "math.sqrt", "math.tanh"])
def test_f32(op):
    g = GradCheck(unary_module(op, "f32"), "f", ["active"])
    derivative, x = UNARY[op]
    (dx,), _, _ = g.reverse([np.float32(x)], [None])
    assert dx == pytest.approx(derivative(x), rel=1e-6)
    g.check([np.float32(x)], h=1e-3, rtol=1e-3, atol=1e-4)
