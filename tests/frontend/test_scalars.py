"""Scalar code: literal typing, promotion, arithmetic with Python's meaning, comparisons,
and/or/not, conditional expressions and casts. Scalars go in and out of @adjit.func
functions called from Python; NumPy scalars (NEP 50 promotion) are the reference."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import adjit
from fe_helpers import NUMERIC, assert_same


# ---- argument and literal typing ---------------------------------------------------------

@adjit.func
def identity(a):
    return a


@pytest.mark.parametrize("value, dtype", [
    (1.5, np.float64), (3, np.int64), (True, np.bool_),
    (np.float32(1.5), np.float32), (np.int32(-7), np.int32), (np.float64(2.25), np.float64),
    (np.int64(-3), np.int64), (np.bool_(False), np.bool_)])
def test_python_scalars_and_numpy_scalars_keep_their_type(value, dtype):
    assert_same(identity(value), dtype(value))


@adjit.func
def annotated(a: adjit.f32, n: adjit.i32, b: float):
    return a, n, b


def test_annotated_parameters_convert_their_argument():
    a, n, b = annotated(1.1, 7, 2)
    assert_same(a, np.float32(1.1))
    assert_same(n, np.int32(7))
    assert_same(b, np.float64(2.0))


@adjit.func
def with_literals(x):
    return 0.5 * x, x + 1, x * 2.0, 3 - x, x / 2


@pytest.mark.parametrize("dtype", NUMERIC + [np.bool_])
def test_literal_takes_the_type_of_the_value_it_meets(dtype):
    x = dtype(3)
    got = with_literals(x)
    want = (0.5 * x, x + 1, x * 2.0, 3 - x if dtype is not np.bool_ else 3 - np.int64(x), x / 2)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_same(g, w)


def test_float32_code_stays_float32():
    out = with_literals(np.float32(0.1))
    assert all(np.asarray(v).dtype == np.float32 for v in out)


@adjit.func
def mixed(a, b):
    return a + b, a * b, a - b


@pytest.mark.parametrize("ta, tb", [
    (np.float32, np.float64), (np.float32, np.int32), (np.float32, np.int64),
    (np.int32, np.int64), (np.bool_, np.int32), (np.bool_, np.float32), (np.int64, np.float64),
    (np.int32, np.float64)])
def test_mixed_precision_promotes_as_numpy(ta, tb):
    a, b = ta(3), tb(2)
    got = mixed(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = (a + b, a * b, (a - b) if ta is not np.bool_ else np.int64(a) - b)
    if ta is np.bool_:   # NumPy refuses bool - x; adjit computes it in the promoted type
        want = (want[0], want[1], (np.asarray(a).astype(np.result_type(a, b)) - b))
    for g, w in zip(got, want):
        assert_same(g, w)


# ---- arithmetic --------------------------------------------------------------------------

@adjit.func
def arith_ops(a, b):
    return a + b, a - b, a * b, a / b, a // b, a % b


PAIRS = [(7, 2), (-7, 2), (7, -2), (-7, -2), (6, 3), (-6, 3), (0, 5), (1, 7), (-1, 7), (5, 1)]


@pytest.mark.parametrize("dtype", NUMERIC)
def test_arithmetic_matches_numpy_with_negative_operands(dtype):
    for a, b in PAIRS:
        x, y = dtype(a), dtype(b)
        got = arith_ops(x, y)
        with np.errstate(all="ignore"):
            want = (x + y, x - y, x * y, x / y, x // y, x % y)
        for g, w in zip(got, want):
            assert_same(g, w)


def test_int_floor_division_and_modulo_follow_python():
    for a, b in PAIRS + [(2**40 + 3, -5), (-(2**40), 3)]:
        got = arith_ops(a, b)
        assert int(got[4]) == a // b, (a, b)
        assert int(got[5]) == a % b, (a, b)


def test_float_floor_division_and_modulo_follow_python():
    for a, b in [(7.5, 2.0), (-7.5, 2.0), (7.5, -2.0), (-7.5, -2.0), (1.0, 0.1), (-1.0, 0.1),
                 (0.3, 0.1), (5.0, 2.5), (-0.0, 3.0), (1e-300, 1e300), (-4.25, 0.5)]:
        got = arith_ops(a, b)
        assert float(got[4]) == a // b, (a, b, float(got[4]), a // b)
        assert float(got[5]) == a % b, (a, b, float(got[5]), a % b)
        assert math.copysign(1, float(got[5])) == math.copysign(1, a % b), (a, b)


@adjit.func
def int_div(a, b):
    return a // b


@adjit.func
def int_mod(a, b):
    return a % b


@pytest.mark.parametrize("fn", [int_div, int_mod])
def test_integer_division_by_zero_raises_instead_of_crashing(fn):
    with pytest.raises(ZeroDivisionError):
        fn(7, 0)
    assert fn(7, 2) == (3 if fn is int_div else 1)   # the function still works afterwards


def test_integer_division_of_the_most_negative_value_by_minus_one_wraps():
    lo = np.iinfo(np.int64).min
    assert int(int_div(lo, -1)) == lo     # NumPy's result (wraps), not a crash
    assert int(int_mod(lo, -1)) == 0


@adjit.func
def powers(a, b):
    return a ** 2, a ** 3, a ** b, a ** 0, 2 ** b


@pytest.mark.parametrize("dtype", NUMERIC)
def test_power(dtype):
    for a, b in [(3, 2), (-2, 3), (2, 0), (-3, 1), (5, 4)]:
        x, y = dtype(a), dtype(b)
        got = powers(x, y)
        want = (x ** 2, x ** 3, x ** y, x ** 0, 2 ** y)
        for g, w in zip(got, want):
            assert_same(g, w)


@adjit.func
def float_powers(a):
    return a ** 0.5, a ** -1, a ** 2.5, a ** -2


def test_fractional_and_negative_exponents():
    for dtype in (np.float32, np.float64):
        x = dtype(2.0)
        for g, w in zip(float_powers(x), (x ** 0.5, x ** -1, x ** 2.5, x ** -2)):
            assert_same(g, w)


@adjit.func
def augmented(a, b):
    s = a
    s += b
    s -= 1
    s *= b
    t = s
    t //= 2
    u = s
    u %= 5
    v = s
    v **= 2
    w = s
    w /= 4
    return s, t, u, v, w


@pytest.mark.parametrize("dtype", NUMERIC)
def test_augmented_assignment(dtype):
    a, b = dtype(-5), dtype(3)
    with np.errstate(all="ignore"):
        s = (a + b - dtype(1)) * b
        want = (s, s // dtype(2), s % dtype(5), s ** 2, s / dtype(4))
    for g, w in zip(augmented(a, b), want):
        assert_same(g, w)


@adjit.func
def unary(a):
    return -a, +a, abs(a)


@pytest.mark.parametrize("dtype", NUMERIC)
def test_unary_minus_plus_abs(dtype):
    x = dtype(-4)
    for g, w in zip(unary(x), (-x, +x, abs(x))):
        assert_same(g, w)


@adjit.func
def bit_ops(a, b):
    return a & b, a | b, a ^ b, a << 2, a >> 1, ~a


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_bitwise_operators(dtype):
    for a, b in [(12, 10), (-12, 5), (7, -1)]:
        x, y = dtype(a), dtype(b)
        want = (x & y, x | y, x ^ y, x << dtype(2), x >> dtype(1), ~x)
        for g, w in zip(bit_ops(x, y), want):
            assert_same(g, w)


# ---- comparisons, and/or/not ------------------------------------------------------------

@adjit.func
def comparisons(a, b):
    return a < b, a <= b, a > b, a >= b, a == b, a != b


@pytest.mark.parametrize("dtype", NUMERIC + [np.bool_])
def test_comparisons(dtype):
    for a, b in [(1, 2), (2, 1), (2, 2), (-3, 1), (0, 0)]:
        x, y = dtype(a), dtype(b)
        want = (x < y, x <= y, x > y, x >= y, x == y, x != y)
        for g, w in zip(comparisons(x, y), want):
            assert_same(g, w)


def test_comparison_of_mixed_types():
    got = comparisons(np.float32(0.5), 1)
    assert [bool(g) for g in got] == [True, True, False, False, False, True]
    got = comparisons(np.int32(3), np.float64(3.0))
    assert [bool(g) for g in got] == [False, True, False, True, True, False]


def test_nan_compares_as_python():
    nan = float("nan")
    assert [bool(g) for g in comparisons(nan, 1.0)] == [nan < 1, nan <= 1, nan > 1, nan >= 1,
                                                       nan == 1, nan != 1]


@adjit.func
def chained(a, b, c):
    return a < b < c, a < b > c, a == b == c


def test_chained_comparisons():
    for a, b, c in [(1, 2, 3), (1, 3, 2), (3, 2, 1), (2, 2, 2), (1, 1, 2)]:
        got = [bool(g) for g in chained(a, b, c)]
        assert got == [a < b < c, a < b > c, a == b == c], (a, b, c)


@adjit.func
def logic(a, b):
    return (a > 0) and (b > 0), (a > 0) or (b > 0), not (a > 0), not a


def test_and_or_not_on_booleans():
    for a in (-1, 0, 2):
        for b in (-1, 0, 2):
            got = [bool(g) for g in logic(a, b)]
            assert got == [(a > 0) and (b > 0), (a > 0) or (b > 0), not (a > 0), not a]


@adjit.func
def logic_values(a, b):
    return a and b, a or b


@pytest.mark.parametrize("a, b", [(0, 5), (3, 5), (3, 0), (0, 0), (-2, 7)])
def test_and_or_give_an_operand_as_python_does(a, b):
    got = logic_values(a, b)
    assert_same(got[0], np.int64(a and b))
    assert_same(got[1], np.int64(a or b))


def test_and_or_of_floats_give_floats():
    got = logic_values(0.0, 2.5)
    assert_same(got[0], np.float64(0.0))
    assert_same(got[1], np.float64(2.5))


@adjit.func
def short_circuit_guard(n, d):
    # `n // d` would raise ZeroDivisionError if evaluated with d == 0
    ok = d != 0 and n // d > 1
    alt = d == 0 or n // d > 1
    return ok, alt


def test_and_or_short_circuit():
    assert [bool(v) for v in short_circuit_guard(7, 0)] == [False, True]
    assert [bool(v) for v in short_circuit_guard(7, 2)] == [True, True]
    assert [bool(v) for v in short_circuit_guard(1, 2)] == [False, False]


@adjit.func
def three_way(a, b, c):
    return a > 0 and b > 0 and c > 0, a > 0 or b > 0 or c > 0


def test_and_or_of_more_than_two_operands():
    for a in (-1, 1):
        for b in (-1, 1):
            for c in (-1, 1):
                got = [bool(v) for v in three_way(a, b, c)]
                assert got == [a > 0 and b > 0 and c > 0, a > 0 or b > 0 or c > 0]


# ---- conditional expressions -------------------------------------------------------------

@adjit.func
def choose(c, a, b):
    return a if c > 0 else b


@pytest.mark.parametrize("dtype", NUMERIC)
def test_conditional_expression(dtype):
    assert_same(choose(1, dtype(4), dtype(9)), dtype(4))
    assert_same(choose(-1, dtype(4), dtype(9)), dtype(9))


@adjit.func
def choose_literal(x):
    return x if x > 0 else 0.0


def test_conditional_expression_with_a_literal_keeps_the_value_type():
    assert_same(choose_literal(np.float32(-2)), np.float32(0))
    assert_same(choose_literal(np.float32(2)), np.float32(2))


@adjit.func
def choose_guarded(n, d):
    return n // d if d != 0 else -1


def test_conditional_expression_evaluates_only_the_chosen_side():
    assert choose_guarded(7, 0) == -1
    assert choose_guarded(7, 2) == 3


@adjit.func
def nested_choice(x):
    return -1 if x < 0 else (0 if x == 0 else 1)


def test_nested_conditional_expressions():
    assert [int(nested_choice(v)) for v in (-3, 0, 8)] == [-1, 0, 1]


# ---- casts ----------------------------------------------------------------------------------

@adjit.func
def casts(x):
    return float(x), int(x), bool(x), adjit.f32(x), adjit.i32(x)


@pytest.mark.parametrize("value", [2.7, -2.7, 0.0, 3, -3, True, np.float32(-1.5), np.int32(9)])
def test_float_int_bool_casts(value):
    f, i, b, f32, i32 = casts(value)
    assert_same(f, np.float64(float(value)))
    assert_same(i, np.int64(int(value)))        # truncates toward zero, as Python
    assert_same(b, np.bool_(bool(value)))
    assert_same(f32, np.float32(value))
    assert_same(i32, np.int32(int(value)))


@adjit.func
def constant_folding():
    a = 7 // -2
    b = -7 % 3
    c = 2 ** 10
    d = 1.0 / 4
    return a, b, c, d


def test_constant_expressions_follow_python():
    a, b, c, d = constant_folding()
    assert (int(a), int(b), int(c), float(d)) == (7 // -2, -7 % 3, 2 ** 10, 0.25)
