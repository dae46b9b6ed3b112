"""NaN in max/min and shift counts past the width (issue 19, item 9): compiled code gives
NumPy's results (Python's for the builtins max/min of scalars) in scalar code, element-wise
array expressions, reductions and kernels, whatever the argument order and wherever an
element falls: in a vector lane or in the scalar tail of a loop, in any reduction chunk."""
from __future__ import annotations

import math

import numpy as np
import pytest

import adjit
from fe_helpers import assert_same

NAN = float("nan")
# Long enough for vector lanes and a tail (LLVM's vector width, the reductions' 8 lanes),
# and for several reduction chunks (arrays.CHUNK = 4096).
LENGTHS = [1, 7, 8, 9, 37, 4096 + 37]


def same_bits(got, want):
    """Equal dtype, shape and bits, except that any NaN matches any NaN (NumPy does not
    promise a payload); -0.0 and 0.0 differ."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        keep = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[keep]), np.signbit(want[keep]))
    np.testing.assert_array_equal(got, want)


def with_nans(n, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-4, 4, n).astype(dtype)
    x[rng.random(n) < 0.2] = NAN
    x[rng.random(n) < 0.1] = 0.0
    x[rng.random(n) < 0.1] = -0.0
    return x


# ---- scalars --------------------------------------------------------------------------

@adjit.jit
def scalar_extrema(a, b):
    return (adjit.max(a, b), adjit.min(a, b), adjit.maximum(a, b), adjit.minimum(a, b),
            max(a, b), min(a, b))


SCALAR_PAIRS = [(NAN, 1.0), (1.0, NAN), (NAN, NAN), (0.0, -0.0), (-0.0, 0.0), (2.0, -3.0),
                (-math.inf, NAN), (math.inf, 1.0)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("a, b", SCALAR_PAIRS)
def test_scalar_max_min(a, b, dtype):
    a, b = dtype(a), dtype(b)
    got = scalar_extrema(a, b)
    # adjit's names are NumPy's functions; Python's builtins are Python's, as interpreted
    want = (np.maximum(a, b), np.minimum(a, b), np.maximum(a, b), np.minimum(a, b),
            max(a, b), min(a, b))
    for g, w in zip(got, want):
        same_bits(g, w)
    # and adjit.max called outside compiled code agrees with the compiled call
    same_bits(adjit.max(a, b), got[0])
    same_bits(adjit.min(a, b), got[1])


@adjit.func
def three_way(a: float, b: float, c: float):
    return adjit.max(a, b, c), adjit.min(a, b, c), max(a, b, c), min(a, b, c)


def test_several_arguments_left_to_right():
    for args in ((1.0, NAN, 3.0), (NAN, 1.0, 3.0), (1.0, 3.0, NAN), (2.0, 1.0, 3.0)):
        got = three_way(*args)
        want = (np.maximum(np.maximum(*args[:2]), args[2]),
                np.minimum(np.minimum(*args[:2]), args[2]), max(*args), min(*args))
        for g, w in zip(got, want):
            same_bits(g, np.float64(w))


# ---- element-wise, reductions ---------------------------------------------------------

@adjit.jit
def elementwise_extrema(x, y, s):
    return (adjit.max(x, y), adjit.min(y, x), adjit.maximum(x, s), adjit.minimum(s, x),
            max(x, y), min(s, y))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", LENGTHS)
def test_elementwise_follows_numpy(n, dtype):
    x, y = with_nans(n, dtype, 1), with_nans(n, dtype, 2)
    for s in (dtype(NAN), dtype(0.5), dtype(-0.0)):
        got = elementwise_extrema(x, y, s)
        want = (np.maximum(x, y), np.minimum(y, x), np.maximum(x, s), np.minimum(s, x),
                np.maximum(x, y), np.minimum(s, y))
        for g, w in zip(got, want):
            same_bits(g, w)


@adjit.jit
def reductions(x):
    return adjit.max(x), adjit.min(x), max(x), min(x)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", LENGTHS)
def test_reductions_propagate_nan_from_any_position(n, dtype):
    rng = np.random.default_rng(n)
    base = rng.uniform(-4, 4, n).astype(dtype)
    same_bits(reductions(base), tuple(np.asarray(w) for w in
                                      (np.max(base), np.min(base)) * 2))
    # a single NaN: first, last, in the lanes, in the tail, in a later chunk
    for pos in sorted({0, n - 1, n // 2, max(n - 3, 0), min(4100, n - 1)}):
        x = base.copy()
        x[pos] = NAN
        for g in reductions(x):
            assert np.isnan(g) and g.dtype == dtype, (pos, g)


def test_reductions_of_ints_and_bools_unchanged():
    x = np.array([3, -7, 12, 5, 0, 9, -2, 4, 11], dtype=np.int32)
    assert reductions(x) == (12, -7, 12, -7)
    b = np.array([False] * 9 + [True])
    assert tuple(bool(v) for v in reductions(b)) == (True, False, True, False)


# ---- kernels --------------------------------------------------------------------------

@adjit.kernel
def kernel_extrema(x, y, out):
    i = adjit.index()
    out[0, i] = adjit.max(x[i], y[i])
    out[1, i] = adjit.min(y[i], x[i])
    out[2, i] = max(x[i], y[i])
    out[3, i] = min(x[i], y[i])


@pytest.mark.parametrize("n", [9, 37])
def test_kernel_max_min(n):
    x, y = with_nans(n, np.float64, 3), with_nans(n, np.float64, 4)
    out = np.zeros((4, n))
    kernel_extrema(x, y, out, ndrange=n)
    same_bits(out[0], np.maximum(x, y))
    same_bits(out[1], np.minimum(y, x))
    same_bits(out[2], np.array([max(a, b) for a, b in zip(x, y)]))
    same_bits(out[3], np.array([min(a, b) for a, b in zip(x, y)]))


# ---- shifts ---------------------------------------------------------------------------

# Counts across the width and past it, negative ones included (NumPy compares them
# unsigned: everything is shifted out).
COUNTS = [-65, -1, 0, 1, 5, 31, 32, 33, 62, 63, 64, 65, 100, 2**40]


@adjit.jit
def shifts(x, s):
    return x << s, x >> s


@adjit.jit
def shifts_by_array(x, s):
    return x << s, x >> s


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
@pytest.mark.parametrize("n", [9, 41])
def test_shift_past_the_width_like_numpy(dtype, n):
    x = np.arange(-(n // 2), n - n // 2, dtype=dtype) * dtype(3)
    info = np.iinfo(dtype)
    for c in COUNTS:
        if not info.min <= c <= info.max:
            continue
        c = dtype(c)
        lo, hi = shifts(x, c)
        same_bits(lo, np.left_shift(x, c))
        same_bits(hi, np.right_shift(x, c))
    # a count per element: each lane and the tail get a different one
    counts = np.array([COUNTS[k % len(COUNTS)] for k in range(n)]).clip(info.min, info.max)
    counts = counts.astype(dtype)
    lo, hi = shifts_by_array(x, counts)
    same_bits(lo, np.left_shift(x, counts))
    same_bits(hi, np.right_shift(x, counts))


@adjit.func
def scalar_shifts(a, s):
    return a << s, a >> s, a << 3, a >> 70


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_scalar_shifts(dtype):
    for a in (dtype(-5), dtype(7), dtype(0), dtype(np.iinfo(dtype).min)):
        for c in (0, 1, 31, 32, 63, 64, 65, -1):
            c = dtype(c)
            got = scalar_shifts(a, c)
            with np.errstate(over="ignore"):
                want = (np.left_shift(a, c), np.right_shift(a, c), np.left_shift(a, dtype(3)),
                        np.right_shift(a, dtype(70)))
            for g, w in zip(got, want):
                same_bits(g, w)


@adjit.kernel
def kernel_shifts(x, s, out):
    i = adjit.index()
    out[0, i] = x[i] << s[i]
    out[1, i] = x[i] >> s[i]


def test_kernel_shifts():
    n = 14
    x = np.arange(-7, 7, dtype=np.int64) * 11
    s = np.array(COUNTS, dtype=np.int64)
    out = np.zeros((2, n), dtype=np.int64)
    kernel_shifts(x, s, out, ndrange=n)
    same_bits(out[0], np.left_shift(x, s))
    same_bits(out[1], np.right_shift(x, s))


@adjit.func
def bool_shifts(p, q):
    return p << q, p >> q


def test_bool_shifts_are_ints_as_in_python():
    for p in (True, False):
        for q in (True, False):
            lo, hi = bool_shifts(p, q)
            assert_same(lo, np.int64(p << q))
            assert_same(hi, np.int64(p >> q))


@adjit.func
def negative_constant_shift():
    return 1 << -1  # negative-shift


def test_negative_constant_shift_is_a_compile_error():
    with pytest.raises(adjit.CompilationError, match="negative shift count") as e:
        negative_constant_shift()
    assert "negative-shift" in str(e.value)
