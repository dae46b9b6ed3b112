"""hypot, copysign, isnan/isinf/isfinite, maximum/minimum (adjit's and the math module's
names) in kernels, device functions and @jit code, and array creation with full, full_like
and arange: every result against NumPy (or Python's math module), errors at their line."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

import adjit
from fe_helpers import FLOATS, NUMERIC, assert_same, marker_line, sample

SPECIALS = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e-30, 3e30]


def _pairs(dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of special values, then random values of both signs."""
    s = np.array(SPECIALS, dtype=dtype)
    x, y = np.meshgrid(s, s)
    rx, ry = sample(50, dtype, seed=1), sample(50, dtype, seed=2)
    return np.concatenate([x.ravel(), rx]), np.concatenate([y.ravel(), ry])


# ---- scalar functions in kernels ------------------------------------------------------------

@adjit.kernel
def extra_math(x, y, out, flags):
    i = adjit.index()
    a, b = x[i], y[i]
    out[0, i] = adjit.hypot(a, b)
    out[1, i] = adjit.copysign(a, b)
    out[2, i] = adjit.maximum(a, b)
    out[3, i] = adjit.minimum(a, b)
    out[4, i] = math.hypot(a, b)
    out[5, i] = math.copysign(a, b)
    flags[0, i] = adjit.isnan(a)
    flags[1, i] = adjit.isinf(a)
    flags[2, i] = adjit.isfinite(a)
    flags[3, i] = math.isnan(b)
    flags[4, i] = math.isinf(b)
    flags[5, i] = math.isfinite(b)


@pytest.mark.parametrize("dtype", FLOATS)
def test_scalar_functions_in_a_kernel_match_numpy(dtype):
    x, y = _pairs(dtype)
    out, flags = np.zeros((6, len(x)), dtype), np.zeros((6, len(x)), np.bool_)
    with np.errstate(all="ignore"):
        extra_math(x, y, out, flags, ndrange=len(x))
        want = [np.hypot(x, y), np.copysign(x, y), np.maximum(x, y), np.minimum(x, y),
                np.hypot(x, y), np.copysign(x, y)]
    for k, w in enumerate(want):
        if k in (2, 3):      # only the sign of a zero that ties another zero may differ
            ties = (x == 0) & (y == 0)
            assert_same(out[k][~ties], w[~ties])
            assert (out[k][ties] == 0).all()
        else:
            assert_same(out[k], w, rtol=2 * np.finfo(dtype).eps)
    want_flags = [np.isnan(x), np.isinf(x), np.isfinite(x), np.isnan(y), np.isinf(y),
                  np.isfinite(y)]
    assert_same(flags, np.stack(want_flags))


@pytest.mark.parametrize("dtype", FLOATS)
def test_hypot_neither_overflows_nor_underflows(dtype):
    tiny, huge = np.finfo(dtype).tiny, np.finfo(dtype).max
    x = np.array([huge / 2, huge, tiny, tiny * 3, 3e-30, huge / 3], dtype)
    y = np.array([huge / 2, 1, tiny, tiny * 4, 4e-30, huge / 4], dtype)
    out, flags = np.zeros((6, len(x)), dtype), np.zeros((6, len(x)), np.bool_)
    extra_math(x, y, out, flags, ndrange=len(x))
    assert np.isfinite(out[0]).all()
    assert_same(out[0], np.hypot(x, y), rtol=2 * np.finfo(dtype).eps)


@adjit.func
def scalar_results(a, b):
    return (adjit.hypot(a, b), adjit.copysign(a, b), adjit.maximum(a, b), adjit.minimum(a, b),
            adjit.isnan(a), adjit.isinf(b), adjit.isfinite(a))


@pytest.mark.parametrize("a, b", [(np.float32(3), np.float32(-4)), (3.0, -4.0), (3, -4),
                                  (np.int32(-7), np.int32(2)), (np.float32(1.5), -2),
                                  (np.float32(2), 0.5)])
def test_scalar_result_types_follow_numpy(a, b):
    got = scalar_results(a, b)
    # (Python scalars as they are: weak, NEP 50, in NumPy 2 as in adjit)
    want = (np.hypot(a, b), np.copysign(a, b), np.maximum(a, b), np.minimum(a, b),
            np.isnan(a), np.isinf(b), np.isfinite(a))
    for g, w in zip(got, want):
        assert_same(g, w)


@adjit.func
def nan_extrema(a, b):
    return adjit.maximum(a, b), adjit.minimum(a, b), max(a, b), min(a, b)


def test_maximum_minimum_propagate_nan_unlike_max_min():
    nan = float("nan")
    for a, b in ((nan, 1.0), (1.0, nan)):
        hi, lo, py_hi, py_lo = nan_extrema(a, b)
        assert np.isnan(hi) and np.isnan(lo)
        assert np.isnan(py_hi) == math.isnan(max(a, b))
        assert np.isnan(py_lo) == math.isnan(min(a, b))


@adjit.func
def constant_folded():
    return (adjit.hypot(3, 4), math.copysign(2, -0.0), adjit.maximum(1, 2.5), adjit.minimum(3, 7),
            adjit.isnan(1.5), math.isinf(-math.inf), adjit.isfinite(7), adjit.maximum(True, False))


def test_constants_fold_as_numpy_and_python():
    got = constant_folded()
    want = (5.0, -2.0, 2.5, 3, False, True, True, True)
    assert [type(np.asarray(g)[()].item()) for g in got] == [type(w) for w in want]
    assert [np.asarray(g)[()].item() for g in got] == list(want)


@adjit.func
def math_hypot_arity(a, b, c):
    return math.hypot(), math.hypot(a), math.hypot(a, b), math.hypot(a, b, c), math.hypot(3, 4, 12)


@pytest.mark.parametrize("a, b, c", [(3.0, -4.0, 12.0), (-2, 5, 1), (1e300, 1e300, 1e300)])
def test_math_hypot_takes_any_number_of_coordinates(a, b, c):
    got = math_hypot_arity(a, b, c)
    want = (math.hypot(), math.hypot(a), math.hypot(a, b), math.hypot(a, b, c), 13.0)
    for g, w in zip(got, want):
        assert_same(g, np.float64(w), rtol=4e-16)


@adjit.func
def integer_predicates(n):
    return adjit.isnan(n), adjit.isinf(n), adjit.isfinite(n), math.isnan(n)


def test_integers_are_finite():
    assert integer_predicates(5) == (False, False, True, False)


@adjit.func
def f32_stays_f32(v):
    return adjit.hypot(v, 1.0), adjit.copysign(2.0, v), adjit.maximum(v, 0.5)


def test_f32_stays_f32_with_literals():
    for g, w in zip(f32_stays_f32(np.float32(-3)),
                    (np.hypot(np.float32(-3), np.float32(1)), np.float32(-2), np.float32(0.5))):
        assert_same(g, w)


# ---- element-wise on arrays in @jit ---------------------------------------------------------

@adjit.jit
def elementwise_extra(x, y, s):
    return (adjit.hypot(x, y), adjit.hypot(x, s), adjit.copysign(s, x), adjit.maximum(x, y),
            adjit.minimum(s, x), adjit.isnan(x), adjit.isinf(y), adjit.isfinite(x * y),
            math.hypot(x, 2), adjit.sum(adjit.maximum(x, 0) * y))


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("shape", [(23,), (3, 4)])
def test_elementwise_on_arrays_with_scalar_broadcasting(dtype, shape):
    x, y = sample(shape, dtype, seed=3), sample(shape, dtype, seed=4)
    s = dtype(2)
    got = elementwise_extra(x, y, s)
    want = (np.hypot(x, y), np.hypot(x, s), np.copysign(s, x), np.maximum(x, y),
            np.minimum(s, x), np.isnan(x), np.isinf(y), np.isfinite(x * y),
            np.hypot(x, np.asarray(2, dtype) if np.issubdtype(dtype, np.floating) else 2.0),
            np.sum(np.maximum(x, 0) * y))
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-5 if dtype == np.float32 else None)


@pytest.mark.parametrize("dtype", FLOATS)
def test_elementwise_specials(dtype):
    x, y = _pairs(dtype)
    got = elementwise_extra(x, y, dtype(-1.5))
    with np.errstate(all="ignore"):
        assert_same(got[0], np.hypot(x, y), rtol=2 * np.finfo(dtype).eps)
        assert_same(got[5], np.isnan(x))
        assert_same(got[6], np.isinf(y))
        assert_same(got[7], np.isfinite(x * y))


def test_elementwise_shapes_must_match():
    with pytest.raises(ValueError, match="different shapes"):
        elementwise_extra(np.ones(3), np.ones(4), 1.0)


# ---- array creation -------------------------------------------------------------------------

@adjit.jit
def fulls(n: int, v, x):
    return (adjit.full(n, v), adjit.full((n, 2), 7), adjit.full(x.shape, 2.5, dtype=adjit.f32),
            adjit.full(n, 2.9, adjit.i32), adjit.full((2, n), True), adjit.full(n, v, dtype=None),
            adjit.full_like(x, v), adjit.full_like(x, 2.7), adjit.full_like(x, 1, adjit.bool_),
            adjit.full_like(x * 2, -1.5, dtype=np.float64))


@pytest.mark.parametrize("dtype", NUMERIC)
def test_full_and_full_like_match_numpy(dtype):
    x = sample((3, 4), dtype, seed=5)
    v = dtype(3)
    got = fulls(4, v, x)
    want = (np.full(4, v), np.full((4, 2), 7), np.full(x.shape, 2.5, dtype=np.float32),
            np.full(4, 2.9, np.int32), np.full((2, 4), True), np.full(4, v, dtype=None),
            np.full_like(x, v), np.full_like(x, 2.7), np.full_like(x, 1, np.bool_),
            np.full_like(x * 2, -1.5, dtype=np.float64))
    for g, w in zip(got, want):
        assert_same(g, w)


@adjit.jit
def aranges(n: int, a: float, b: float, step: float, k: int):
    return (adjit.arange(n), adjit.arange(2, n), adjit.arange(n, -3, -2), adjit.arange(a, b, step),
            adjit.arange(k), adjit.arange(a, b, step, dtype=adjit.f32), adjit.arange(0.5, n, 1.5,
                                                                                     dtype=int),
            adjit.arange(1, n, 2, adjit.f64), adjit.arange(n, dtype=adjit.i32), adjit.arange(a))


@pytest.mark.parametrize("n, a, b, step, k", [(7, 0.0, 1.0, 0.1, 0), (1, -2.0, 3.5, 0.25, 5),
                                              (0, 10.0, 0.0, -0.3, -4), (12, 0.3, 1e3, 0.7, 1),
                                              (-3, 1.0, 1.0, 1.0, 3)])
def test_arange_matches_numpy(n, a, b, step, k):
    got = aranges(n, a, b, step, k)
    want = (np.arange(n), np.arange(2, n), np.arange(n, -3, -2), np.arange(a, b, step),
            np.arange(k), np.arange(a, b, step, dtype=np.float32),
            np.arange(0.5, n, 1.5, dtype=int), np.arange(1, n, 2, np.float64),
            np.arange(n, dtype=np.int32), np.arange(a))
    for g, w in zip(got, want):
        assert_same(g, w, rtol=0)       # the same formula as NumPy's: bit for bit


@adjit.jit
def arange_fused(x):
    return adjit.sum(adjit.arange(x.shape[0]) * x), adjit.arange(x.shape[0]) * 2 + x


def test_arange_fuses_into_expressions():
    x = sample(10, np.float64, seed=6)
    total, y = arange_fused(x)
    assert_same(total, np.sum(np.arange(10) * x))
    assert_same(y, np.arange(10) * 2 + x)


@adjit.jit
def arange_written(n: int):
    a = adjit.arange(n)
    a[0] = 100
    return a, adjit.arange(3.0)


def test_arange_bound_to_a_name_is_an_array():
    a, b = arange_written(4)
    assert_same(a, np.array([100, 1, 2, 3]))
    assert_same(b, np.arange(3.0))


@adjit.jit
def arange_step(a, b, step):
    return adjit.arange(a, b, step)


def test_arange_bad_steps_raise_as_numpy():
    with pytest.raises(ZeroDivisionError, match="step is zero"):
        arange_step(0, 5, 0)
    with pytest.raises(ZeroDivisionError, match="step is zero"):
        arange_step(0.0, 5.0, 0.0)
    with pytest.raises(ValueError, match="cannot compute the length"):
        arange_step(0.0, math.nan, 1.0)
    with pytest.raises(ValueError, match="cannot compute the length"):
        arange_step(0.0, math.inf, 1.0)
    assert_same(arange_step(0, 5, 2), np.arange(0, 5, 2))


@adjit.jit
def arange_zero_step():
    return adjit.arange(0, 5, 0)  # arange-zero


def test_a_constant_zero_step_raises_when_run_naming_the_line():
    with pytest.raises(ZeroDivisionError, match=f"{re.escape(__file__)}:{_line_of('arange-zero')}"):
        arange_zero_step()


@adjit.jit
def bool_extrema(p, q):
    return adjit.maximum(p, q), adjit.minimum(p, True), adjit.maximum(p, 2)


def test_maximum_minimum_of_bools():
    p, q = np.array([True, False, True, False]), np.array([True, True, False, False])
    for g, w in zip(bool_extrema(p, q), (np.maximum(p, q), np.minimum(p, True),
                                         np.maximum(p, np.int64(2)))):
        assert_same(g, w)


# ---- errors ---------------------------------------------------------------------------------

def _line_of(marker: str) -> int:
    return marker_line(__file__, marker)


@adjit.jit
def bad_hypot(x):
    return adjit.hypot(x)  # hypot-1


@adjit.jit
def bad_copysign(x):
    return math.copysign(x, x, x)  # copysign-3


@adjit.jit
def bad_isnan(x):
    return adjit.isnan(x, x)  # isnan-2


@adjit.jit
def bad_maximum(x):
    return adjit.maximum(x)  # maximum-1


@adjit.jit
def bad_keyword(x):
    return adjit.minimum(x, x, out=x)  # minimum-kw


@adjit.jit
def bad_full_fill(x):
    return adjit.full(3, x)  # full-array


@adjit.jit
def bad_full_count(x):
    return adjit.full(3)  # full-1


@adjit.jit
def bad_full_like(x):
    return adjit.full_like(3, 1.0)  # full-like-scalar


@adjit.jit
def bad_full_dtype(x):
    return adjit.full(3, 1.0, dtype=3)  # full-dtype


@adjit.jit
def bad_full_both_dtypes(x):
    return adjit.full(3, 1.0, adjit.f32, dtype=adjit.f64)  # full-2-dtypes


@adjit.jit
def bad_arange_count(x):
    return adjit.arange()  # arange-0


@adjit.jit
def bad_arange_array(x):
    return adjit.arange(x)  # arange-array


@adjit.jit
def bad_arange_bool(x):
    return adjit.arange(2, dtype=adjit.bool_)  # arange-bool


@adjit.jit
def bad_arange_keyword(x):
    return adjit.arange(2, like=x)  # arange-kw


@adjit.kernel
def bad_full_in_kernel(x):
    x[0] = adjit.sum(adjit.full(3, 1.0))  # full-kernel


@pytest.mark.parametrize("fn, marker, words", [
    (bad_hypot, "hypot-1", ["hypot", "2 arguments", "got 1"]),
    (bad_copysign, "copysign-3", ["copysign", "2 arguments", "got 3"]),
    (bad_isnan, "isnan-2", ["isnan", "1 argument", "got 2"]),
    (bad_maximum, "maximum-1", ["maximum", "2 arguments"]),
    (bad_keyword, "minimum-kw", ["minimum", "keyword"]),
    (bad_full_fill, "full-array", ["full", "fill_value must be a scalar", "array"]),
    (bad_full_count, "full-1", ["full(shape, fill_value", "2 arguments", "got 1"]),
    (bad_full_like, "full-like-scalar", ["full_like", "expected an array"]),
    (bad_full_dtype, "full-dtype", ["dtype", "the constant 3"]),
    (bad_full_both_dtypes, "full-2-dtypes", ["dtype both"]),
    (bad_arange_count, "arange-0", ["arange", "1 to 3", "got 0"]),
    (bad_arange_array, "arange-array", ["arange", "scalars", "array"]),
    (bad_arange_bool, "arange-bool", ["arange", "bool"]),
    (bad_arange_keyword, "arange-kw", ["arange", "unexpected keyword", "like"]),
    (bad_full_in_kernel, "full-kernel", ["full", "@adjit.jit"]),
])
def test_bad_calls_name_the_line(fn, marker, words):
    args = (np.ones(3),)
    with pytest.raises(adjit.CompilationError) as info:
        fn(*args, ndrange=1) if isinstance(fn, adjit.Kernel) else fn(*args)
    e, line = info.value, _line_of(marker)
    assert e.filename == __file__ and e.lineno == line, (e.lineno, line, str(e))
    assert f"{__file__}:{line}:" in str(e)
    for w in words:
        assert w.lower() in str(e).lower(), (w, str(e))


def test_outside_compiled_code_they_run_numpy():
    x = np.array([3.0, np.nan, -np.inf])
    assert_same(adjit.hypot(x, 4.0), np.hypot(x, 4.0))
    assert_same(adjit.isfinite(x), np.isfinite(x))
    assert_same(adjit.maximum(x, 0.0), np.maximum(x, 0.0))
    assert_same(adjit.arange(1, 7, 2), np.arange(1, 7, 2))
    assert_same(adjit.full_like(x, 2), np.full_like(x, 2))
