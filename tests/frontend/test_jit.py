"""@adjit.jit functions: kernel launches (also inside loops, with arrays swapped), array
creation, element-wise arithmetic and math with scalar broadcasting, reductions, results
of every kind, arrays passed by reference, and calls between compiled functions."""
from __future__ import annotations

import math

import numpy as np
import pytest

import adjit
from fe_helpers import DTYPES, FLOATS, NUMERIC, assert_same, sample


# ---- the SPEC example: launches in a loop, swapping arrays --------------------------------

@adjit.kernel
def heat_step(u, v, dt: float):
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    if 0 < i < n - 1 and 0 < j < m - 1:
        lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        v[i, j] = u[i, j] + dt * lap
    else:
        v[i, j] = u[i, j]


@adjit.jit
def simulate(u0, steps: int, dt: float):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(steps):
        heat_step(u, v, dt, ndrange=u.shape)   # kernel launch inside a compiled function
        u, v = v, u
    return adjit.sum(u * u)


def simulate_numpy(u0, steps, dt):
    u = u0.copy()
    for _ in range(steps):
        v = u.copy()
        v[1:-1, 1:-1] = u[1:-1, 1:-1] + dt * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2]
                                               + u[1:-1, 2:] - 4 * u[1:-1, 1:-1])
        u = v
    return (u * u).sum()


@pytest.mark.parametrize("steps", [0, 1, 2, 7])
def test_spec_simulate_example(steps):
    u0 = sample((16, 12), np.float64)
    before = u0.copy()
    assert_same(simulate(u0, steps, 0.1), simulate_numpy(u0, steps, 0.1), rtol=1e-12)
    np.testing.assert_array_equal(u0, before)   # u0.copy() left the argument alone


@adjit.jit
def simulate_returning_field(u0, steps: int, dt: float):
    u = u0.copy()
    v = adjit.zeros_like(u)
    for _ in range(steps):
        heat_step(u, v, dt, ndrange=(u.shape[0], u.shape[1]))
        u, v = v, u
    return u


def test_swapped_arrays_returned():
    u0 = sample((9, 10), np.float32)
    for steps in (3, 4):
        got = simulate_returning_field(u0, steps, 0.2)
        u = u0.copy()
        for _ in range(steps):
            v = u.copy()
            v[1:-1, 1:-1] = u[1:-1, 1:-1] + np.float64(0.2).astype(np.float32) * (
                u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1])
            u = v
        assert_same(got, u, rtol=1e-5)


@adjit.kernel
def add_scalar(x, c):
    i = adjit.index()
    x[i] += c


@adjit.jit
def launch_in_while(x, target):
    n = 0
    while x[0] < target:
        add_scalar(x, 1.5, ndrange=len(x))
        n += 1
    return n


def test_launch_inside_a_while_loop_writes_the_callers_array():
    x = np.zeros(5)
    assert launch_in_while(x, 10.0) == 7
    np.testing.assert_array_equal(x, 10.5)


@adjit.jit
def launch_sequence(x):
    y = adjit.zeros(x.shape[0], dtype=adjit.f64)
    add_scalar(y, 2.0, ndrange=y.shape)
    axpy(3.0, x, y, ndrange=len(x))
    return y


@adjit.kernel
def axpy(a, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


def test_kernels_launched_in_sequence_on_a_new_array():
    x = np.arange(6.0)
    assert_same(launch_sequence(x), 3 * x + 2)


# ---- array creation -------------------------------------------------------------------

@adjit.jit
def creators(n, m):
    a = adjit.zeros((n, m))
    b = adjit.ones(n, dtype=adjit.i32)
    c = adjit.zeros((n, m, 2), dtype=np.float32)
    d = adjit.ones((m, n), dtype=adjit.bool_)
    e = adjit.empty((n,), dtype=adjit.i64)
    for i in range(n):
        e[i] = i * i
    return a, b, c, d, e


def test_zeros_ones_empty_with_shape_and_dtype():
    a, b, c, d, e = creators(3, 4)
    assert_same(a, np.zeros((3, 4)))
    assert_same(b, np.ones(3, dtype=np.int32))
    assert_same(c, np.zeros((3, 4, 2), dtype=np.float32))
    assert_same(d, np.ones((4, 3), dtype=np.bool_))
    assert_same(e, np.arange(3, dtype=np.int64) ** 2)


@adjit.jit
def like_creators(x):
    a = adjit.zeros_like(x)
    b = adjit.ones_like(x, dtype=adjit.f32)
    c = adjit.empty_like(x)
    c[0, 0] = 5
    d = adjit.copy(x)
    e = x.copy()
    x[0, 0] = 0      # copies are independent of x
    return a, b, c[0, 0], d, e, adjit.zeros(x.shape, dtype=x.dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_like_creators_and_copies(dtype):
    x = sample((3, 5), dtype, seed=11)
    orig = x.copy()
    a, b, c00, d, e, z = like_creators(x)
    assert_same(a, np.zeros_like(orig))
    assert_same(b, np.ones(orig.shape, dtype=np.float32))
    assert_same(c00, dtype(5))
    assert_same(d, orig)
    assert_same(e, orig)
    assert_same(z, np.zeros_like(orig))
    assert x[0, 0] == 0


# ---- element-wise arithmetic ----------------------------------------------------------------

@adjit.jit
def elementwise(x, y, s):
    return x + y, x - y, x * y, x * s, s - x, x * 2 + 1, -x, abs(x)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("shape", [(17,), (3, 5), (2, 3, 4)])
def test_elementwise_arithmetic_with_scalar_broadcasting(dtype, shape):
    x, y = sample(shape, dtype, seed=12), sample(shape, dtype, seed=13)
    s = dtype(3)
    got = elementwise(x, y, s)
    want = (x + y, x - y, x * y, x * s, s - x, x * 2 + 1, -x, np.abs(x))
    for g, w in zip(got, want):
        assert_same(g, w)


@adjit.jit
def division_ops(x, y):
    return x / y, x // y, x % y, x ** 2, 1.0 / x


@pytest.mark.parametrize("dtype", NUMERIC)
def test_elementwise_division_and_power(dtype):
    x, y = sample((4, 6), dtype, seed=14), sample((4, 6), dtype, seed=15)
    got = division_ops(x, y)
    want = (x / y, x // y, x % y, x ** 2, 1.0 / x)
    for g, w in zip(got, want):
        assert_same(g, w)


@adjit.jit
def bool_elementwise(x, y):
    return x & y, x | y, x ^ y, ~x, x == y


def test_elementwise_on_bool_arrays():
    x, y = sample(20, np.bool_, seed=16), sample(20, np.bool_, seed=17)
    for g, w in zip(bool_elementwise(x, y), (x & y, x | y, x ^ y, ~x, x == y)):
        assert_same(g, w)


@adjit.jit
def comparisons(x, y):
    return x < y, x >= 0.5, x == y


def test_elementwise_comparisons_give_bool_arrays():
    x, y = sample(30, np.float64, seed=18), sample(30, np.float64, seed=19)
    y[::3] = x[::3]
    for g, w in zip(comparisons(x, y), (x < y, x >= 0.5, x == y)):
        assert_same(g, w)


@adjit.jit
def mixed_dtypes(x, y):
    return x + y, x * 0.5, x + 1


@pytest.mark.parametrize("tx, ty", [(np.float32, np.float64), (np.int32, np.float32),
                                    (np.int32, np.int64), (np.bool_, np.int32)])
def test_elementwise_promotion_as_numpy(tx, ty):
    x, y = sample(8, tx, seed=20), sample(8, ty, seed=21)
    for g, w in zip(mixed_dtypes(x, y), (x + y, x * 0.5, x + 1)):
        assert_same(g, w)


@adjit.jit
def fused_math(x, z):
    return adjit.sin(adjit.exp(x)) * z + 0.5 * x * x, math.sqrt(x * x + 1.0), adjit.max(x, z)


@pytest.mark.parametrize("dtype", FLOATS)
def test_elementwise_math_stays_in_dtype(dtype):
    x, z = sample((5, 7), dtype, seed=22, lo=-1, hi=1), sample((5, 7), dtype, seed=23)
    got = fused_math(x, z)
    t = dtype
    want = (np.sin(np.exp(x)) * z + t(0.5) * x * x, np.sqrt(x * x + t(1)), np.maximum(x, z))
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-5 if dtype == np.float32 else 1e-12)


@adjit.jit
def casts(x):
    return adjit.f32(x), adjit.i64(x), float(x[0]) + 0.0


def test_array_casts():
    x = np.array([1.7, -2.2, 3.0])
    a, b, c = casts(x)
    assert_same(a, x.astype(np.float32))
    assert_same(b, x.astype(np.int64))
    assert_same(c, np.float64(1.7))


@adjit.jit
def shape_mismatch(x, y):
    return x + y


def test_elementwise_on_different_shapes_raises_value_error():
    with pytest.raises(ValueError, match="different shapes"):
        shape_mismatch(np.ones(3), np.ones(4))
    assert_same(shape_mismatch(np.ones(3), np.ones(3)), np.full(3, 2.0))


@adjit.jit
def assign_elements(x):
    y = x * 2
    y[0] = -1
    x[1] += y[2]
    return y


def test_element_writes_into_created_and_argument_arrays():
    x = np.arange(4.0)
    y = assign_elements(x)
    assert_same(y, np.array([-1, 2, 4, 6.0]))
    assert_same(x, np.array([0, 5, 2, 3.0]))


# ---- reductions ----------------------------------------------------------------------------

@adjit.jit
def reductions(x):
    return adjit.sum(x), adjit.max(x), adjit.min(x)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("shape", [(1,), (9000,), (9, 13), (4, 5, 6)])
def test_sum_max_min(dtype, shape):
    x = sample(shape, dtype, seed=24)
    s, mx, mn = reductions(x)
    want_sum = np.sum(x) if dtype in (np.float32, np.float64) else np.sum(x, dtype=np.int64)
    assert_same(s, want_sum, rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert_same(mx, np.max(x))
    assert_same(mn, np.min(x))


@adjit.jit
def reduction_methods(x):
    return x.sum(), x.max(), x.min(), max(x), min(x)


def test_reduction_methods_and_builtins():
    x = sample((5, 6), np.float64, seed=29)
    for g, w in zip(reduction_methods(x), (x.sum(), x.max(), x.min(), x.max(), x.min())):
        assert_same(g, w)


@adjit.jit
def sum_of_squares(x):
    return adjit.sum(x * x)


@adjit.jit
def plain_sum(x):
    return adjit.sum(x)


def test_sum_of_bools_counts():
    x = sample(101, np.bool_, seed=25)
    assert_same(plain_sum(x), np.sum(x))


@pytest.mark.parametrize("dtype", FLOATS)
def test_sum_is_at_least_as_accurate_as_numpy(dtype):
    rng = np.random.default_rng(26)
    # Values of mixed magnitude and sign: naive accumulation loses digits here.
    x = (rng.standard_normal(1_000_003) * 10.0 ** rng.integers(-3, 4, 1_000_003)).astype(dtype)
    exact = math.fsum(x.astype(np.float64))
    ours = float(plain_sum(x))
    theirs = float(np.sum(x))
    assert abs(ours - exact) <= abs(theirs - exact) + 1e-12 * abs(exact), (ours, theirs, exact)
    sq = float(sum_of_squares(x))
    exact_sq = math.fsum((x.astype(np.float64) * x.astype(np.float64)).astype(dtype)
                         .astype(np.float64))
    np_sq = float(np.sum(x * x))
    assert abs(sq - exact_sq) <= abs(np_sq - exact_sq) + 1e-12 * exact_sq


@pytest.mark.parametrize("kind", ["uniform", "normal", "harmonic", "mixed"])
def test_float64_sums_are_as_accurate_as_numpys_pairwise_sum(kind):
    """Many partial sums (more than NumPy's 128-element blocks could leave) combined
    pairwise: the error stays within NumPy's, with no slack beyond a few ulp."""
    rng = np.random.default_rng(27)
    n = 3_000_017
    x = {"uniform": rng.random(n), "normal": rng.standard_normal(n),
         "harmonic": 1.0 / np.arange(1, n + 1),
         "mixed": rng.random(n) * np.where(np.arange(n) % 2 == 0, 1e8, 1e-3)}[kind]
    exact = math.fsum(x)
    ulp = np.spacing(abs(exact))
    assert abs(float(plain_sum(x)) - exact) <= abs(float(np.sum(x)) - exact) + 4 * ulp


@adjit.jit
def extremes(x):
    return adjit.max(x), adjit.min(x)


@pytest.mark.parametrize("x", [[True, False, True], [False, False], [True, True], [True]])
def test_max_and_min_of_bools(x):
    a = np.array(x * 3000)
    assert extremes(a) == (np.max(a), np.min(a))


def test_sum_of_many_equal_float32_values_does_not_drift():
    x = np.full(3_000_001, 0.1, dtype=np.float32)
    assert abs(float(plain_sum(x)) - math.fsum(x.astype(np.float64))) <= \
        abs(float(np.sum(x)) - math.fsum(x.astype(np.float64)))


@adjit.jit
def dots(x, y):
    return adjit.dot(x, y), adjit.dot(x, x + 1.0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_dot(dtype):
    x, y = sample(5000, dtype, seed=27), sample(5000, dtype, seed=28)
    d1, d2 = dots(x, y)
    assert_same(d1, np.dot(x, y), rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert_same(d2, np.dot(x, x + dtype(1)), rtol=1e-5 if dtype == np.float32 else 1e-12)


@adjit.jit
def empty_reductions(x):
    return adjit.sum(x)


@adjit.jit
def empty_max(x):
    return adjit.max(x)


def test_reductions_of_empty_arrays():
    assert_same(empty_reductions(np.zeros(0)), np.float64(0))
    with pytest.raises(ValueError):
        empty_max(np.zeros(0))


@adjit.jit
def nan_max(x):
    return adjit.max(x), adjit.min(x)


def test_max_min_propagate_nan_as_numpy():
    x = np.array([1.0, np.nan, 3.0])
    mx, mn = nan_max(x)
    assert np.isnan(mx) and np.isnan(mn)


# ---- results, references, calls --------------------------------------------------------

@adjit.jit
def results_of_every_kind(x, s):
    y = x + s
    return y, adjit.sum(y), s, x.shape[0], 2.5


@adjit.jit
def return_shape(x):
    return x.shape


@adjit.jit
def return_one_array(x):
    return x + 1


@adjit.jit
def return_one_scalar(x):
    return x[1]


def test_returning_scalars_arrays_and_tuples():
    x = np.arange(4.0)
    y, total, s, n, c = results_of_every_kind(x, 1.5)
    assert_same(y, x + 1.5)
    assert_same(total, np.float64(12.0))
    assert_same(s, np.float64(1.5))
    assert_same(n, np.int64(4))
    assert_same(c, np.float64(2.5))
    assert tuple(int(d) for d in return_shape(np.zeros((2, 3, 4)))) == (2, 3, 4)
    assert isinstance(return_one_array(x), np.ndarray)
    assert_same(return_one_array(x), x + 1)
    assert_same(return_one_scalar(x), np.float64(1.0))


@adjit.jit
def return_argument(x):
    return x


@adjit.jit
def return_same_array_twice(x):
    y = x * 2
    return y, y


def test_returning_arrays_that_alias():
    x = np.arange(3.0)
    r = return_argument(x)
    np.testing.assert_array_equal(r, x)
    a, b = return_same_array_twice(x)
    np.testing.assert_array_equal(a, 2 * x)
    np.testing.assert_array_equal(b, 2 * x)


@adjit.jit
def fill_in_place(x, value):
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            x[i, j] = value * (i + j)


def test_arrays_are_passed_by_reference():
    x = np.zeros((3, 4), dtype=np.float32)
    assert fill_in_place(x, 2.0) is None
    i, j = np.indices((3, 4))
    assert_same(x, (2.0 * (i + j)).astype(np.float32))


@adjit.jit
def inner(x, k):
    return x * k, adjit.sum(x)


@adjit.jit
def outer(x):
    y, s = inner(x, 2.0)
    z, _ = inner(y, s)
    return z


def test_jit_calling_jit():
    x = np.arange(1.0, 4.0)
    assert_same(outer(x), x * 2.0 * x.sum())


@adjit.func
def cube(v):
    return v * v * v


@adjit.jit
def jit_calls_device_function(x, n):
    total = 0.0
    for i in range(n):
        total += cube(x[i])
    return total, cube(2)


def test_jit_calling_a_device_function():
    x = np.arange(5.0)
    total, eight = jit_calls_device_function(x, 5)
    assert_same(total, np.float64((x ** 3).sum()))
    assert_same(eight, np.int64(8))


# ---- specialisation ---------------------------------------------------------------------

@adjit.jit
def twice(x):
    return x * 2


def test_specialised_per_dtype_and_rank():
    for dtype in DTYPES[:4]:
        for shape in ((3,), (2, 3)):
            x = sample(shape, dtype)
            assert_same(twice(x), x * 2)
    assert len(twice._cache) == 8
    twice(np.ones(5, dtype=np.float32))        # a new shape reuses the specialisation
    assert len(twice._cache) == 8


def test_same_function_with_f32_then_f64():
    @adjit.jit
    def scale(x):
        return adjit.sum(x * 0.1)

    a = scale(np.ones(10, dtype=np.float32))
    b = scale(np.ones(10, dtype=np.float64))
    assert a.dtype == np.float32 and b.dtype == np.float64
    assert_same(a, np.float32(np.sum(np.ones(10, np.float32) * np.float32(0.1))))
    assert_same(b, np.sum(np.ones(10) * 0.1))
    assert len(scale._cache) == 2


def test_kernel_specialised_per_dtype():
    @adjit.kernel
    def double(x):
        i = adjit.index()
        x[i] = x[i] * 2

    for dtype in (np.float32, np.float64, np.int32):
        x = np.arange(4, dtype=dtype)
        double(x, ndrange=4)
        assert_same(x, np.arange(4, dtype=dtype) * 2)
    assert len(double._cache) == 3


def test_docstring_of_a_jit_function():
    @adjit.jit
    def documented(x):
        """Returns x."""
        return x

    assert documented.__doc__ == "Returns x."
    assert documented(1.5) == 1.5


# ---- arrays through control flow ---------------------------------------------------------

@adjit.jit
def array_per_branch(x, c):
    if c > 0:
        y = x * 2
    else:
        y = x + 1
    return y


@adjit.jit
def array_through_loops(x, n):
    u = x.copy()
    for _ in range(n):
        u = u * 0.5 + 1.0
    while u[0] < 100.0:
        u = u * 3.0
    u += 1.0
    u *= 2
    return u


def test_arrays_assigned_in_branches_and_loops():
    x = np.arange(3.0)
    assert_same(array_per_branch(x, 1), x * 2)
    assert_same(array_per_branch(x, -1), x + 1)
    u = x.copy()
    for _ in range(4):
        u = u * 0.5 + 1.0
    while u[0] < 100.0:
        u = u * 3.0
    assert_same(array_through_loops(x, 4), (u + 1.0) * 2)


def test_temporary_arrays_are_freed():
    x = np.arange(10_000.0)
    array_through_loops(x, 5)
    before = adjit.memory_stats()["bytes_in_use"]
    for _ in range(3):
        r = array_through_loops(x, 5)
    del r
    assert adjit.memory_stats()["bytes_in_use"] == before


@adjit.jit
def _one_tuple(x: float):
    return (x * 2.0,)


def test_one_tuple_result_stays_a_tuple():
    assert _one_tuple(1.5) == (3.0,)


@adjit.jit
def _positional_dtypes(n: int):
    a = adjit.zeros((n, 2), adjit.i32)
    return a, adjit.ones_like(a, adjit.f32)


def test_array_creation_takes_numpy_positional_dtype():
    a, b = _positional_dtypes(3)
    assert a.dtype == np.int32 and a.shape == (3, 2) and not a.any()
    assert b.dtype == np.float32 and (b == 1).all()
