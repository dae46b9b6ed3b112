"""Kernels: work-item indices over 1-D to 3-D ndranges, N-D element access for every dtype,
x.shape, atomic_add, and calls to @adjit.func device functions."""
from __future__ import annotations

import numpy as np
import pytest

import adjit
from fe_helpers import DTYPES, assert_same, sample


# ---- axpy over every dtype and rank --------------------------------------------------------

@adjit.kernel
def axpy1(a, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


@adjit.kernel
def axpy2(a, x, y):
    i, j = adjit.index_nd()
    y[i, j] = a * x[i, j] + y[i, j]


@adjit.kernel
def axpy3(a, x, y):
    i, j, k = adjit.index_nd()
    y[i, j, k] = a * x[i, j, k] + y[i, j, k]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, kernel", [((37,), axpy1), ((5, 7), axpy2), ((3, 4, 5), axpy3)])
def test_axpy_every_dtype_and_rank(dtype, shape, kernel):
    x, y = sample(shape, dtype, seed=1), sample(shape, dtype, seed=2)
    a = dtype(3) if dtype is not np.bool_ else np.bool_(True)
    want = a * x + y if dtype is not np.bool_ else (a & x) | y
    kernel(a, x, y, ndrange=shape)
    assert_same(y, want.astype(dtype))


def test_int_ndrange_and_one_tuple_are_the_same():
    x, y = np.arange(5.0), np.zeros(5)
    axpy1(2.0, x, y, ndrange=5)
    axpy1(2.0, x, y, ndrange=(5,))
    axpy1(2.0, x, y, ndrange=[5])
    np.testing.assert_array_equal(y, 6 * x)


def test_empty_ndrange_runs_nothing():
    x, y = np.arange(4.0), np.zeros(4)
    axpy1(1.0, x, y, ndrange=0)
    axpy2(1.0, x.reshape(2, 2), y.reshape(2, 2), ndrange=(0, 2))
    np.testing.assert_array_equal(y, 0)


def test_annotated_scalar_parameter_of_a_kernel():
    @adjit.kernel
    def saxpy(a: adjit.f32, x, y):
        i = adjit.index()
        y[i] = a * x[i] + y[i]

    x = np.linspace(0, 1, 1000, dtype=np.float32)
    y = np.ones(1000, dtype=np.float32)
    saxpy(2.5, x, y, ndrange=len(x))   # a Python float becomes f32
    assert_same(y, np.float32(2.5) * x + np.float32(1))


# ---- indices ------------------------------------------------------------------------------

@adjit.kernel
def linear_and_nd_2(lin, ids, sizes):
    i, j = adjit.index_nd()
    n0, n1 = adjit.ndrange()
    lin[i, j] = adjit.index()
    ids[i, j, 0] = i
    ids[i, j, 1] = j
    sizes[i, j] = n0 * 1000 + n1


@adjit.kernel
def linear_and_nd_3(lin, ids):
    i, j, k = adjit.index_nd()
    lin[i, j, k] = adjit.index()
    ids[i, j, k] = i * 100 + j * 10 + k


def test_index_is_row_major_linear_and_index_nd_the_coordinates():
    lin = np.zeros((3, 4), dtype=np.int64)
    ids = np.zeros((3, 4, 2), dtype=np.int32)
    sizes = np.zeros((3, 4), dtype=np.int64)
    linear_and_nd_2(lin, ids, sizes, ndrange=(3, 4))
    np.testing.assert_array_equal(lin, np.arange(12).reshape(3, 4))
    np.testing.assert_array_equal(ids[..., 0], np.arange(3)[:, None] + 0 * ids[..., 0])
    np.testing.assert_array_equal(ids[..., 1], np.arange(4)[None, :] + 0 * ids[..., 1])
    np.testing.assert_array_equal(sizes, 3004)

    lin3 = np.zeros((2, 3, 4), dtype=np.int64)
    ids3 = np.zeros((2, 3, 4), dtype=np.int64)
    linear_and_nd_3(lin3, ids3, ndrange=(2, 3, 4))
    np.testing.assert_array_equal(lin3, np.arange(24).reshape(2, 3, 4))
    i, j, k = np.indices((2, 3, 4))
    np.testing.assert_array_equal(ids3, i * 100 + j * 10 + k)


@adjit.kernel
def one_d_index_nd(out):
    (i,) = adjit.index_nd()
    out[i] = i * 2


def test_index_nd_of_a_1d_ndrange_is_a_1_tuple():
    out = np.zeros(6, dtype=np.int64)
    one_d_index_nd(out, ndrange=6)
    np.testing.assert_array_equal(out, 2 * np.arange(6))


@adjit.kernel
def shape_info(x, out):
    i = adjit.index()
    out[i, 0] = x.shape[0]
    out[i, 1] = x.shape[1]
    out[i, 2] = x.shape[-1]
    out[i, 3] = len(x)
    out[i, 4] = x.ndim
    out[i, 5] = x.size


def test_shape_len_ndim_size():
    x = np.zeros((3, 7), dtype=np.float32)
    out = np.zeros((2, 6), dtype=np.int64)
    shape_info(x, out, ndrange=2)
    np.testing.assert_array_equal(out, [[3, 7, 7, 3, 2, 21]] * 2)


@adjit.kernel
def row_sums(x, out):
    i = adjit.index()
    s = 0.0
    for j in range(x.shape[1]):
        s += x[i, j]
    out[i] = s


@adjit.kernel
def transpose3(x, y):
    i, j, k = adjit.index_nd()
    y[k, j, i] = x[i, j, k]


def test_nd_indexing_reads_and_writes():
    x = sample((6, 9), np.float64)
    out = np.zeros(6)
    row_sums(x, out, ndrange=6)
    assert_same(out, x.sum(axis=1))
    a = sample((2, 3, 4), np.int32)
    b = np.zeros((4, 3, 2), dtype=np.int32)
    transpose3(a, b, ndrange=a.shape)
    assert_same(b, a.transpose(2, 1, 0).copy())


@adjit.kernel
def last_elements(x, m, out):
    out[0] = x[-1]
    out[1] = m[-1, 0]
    out[2] = m[0, -2]


def test_constant_negative_index_counts_from_the_end():
    x = np.arange(5.0)
    m = np.arange(12.0).reshape(3, 4)
    out = np.zeros(3)
    last_elements(x, m, out, ndrange=1)
    np.testing.assert_array_equal(out, [x[-1], m[-1, 0], m[0, -2]])


@adjit.kernel
def stencil(u, v):
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    if 0 < i < n - 1 and 0 < j < m - 1:
        v[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1])
    else:
        v[i, j] = u[i, j]


def test_stencil_with_guarded_neighbours():
    u = sample((8, 11), np.float32)
    v = np.empty_like(u)
    stencil(u, v, ndrange=u.shape)
    want = u.copy()
    want[1:-1, 1:-1] = np.float32(0.25) * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    assert_same(v, want)


@adjit.kernel
def bool_ops(x, y, out):
    i = adjit.index()
    out[i, 0] = x[i] and not y[i]
    out[i, 1] = x[i] or y[i]
    out[i, 2] = x[i] != y[i]


def test_bool_arrays():
    x, y = sample(50, np.bool_, seed=3), sample(50, np.bool_, seed=4)
    out = np.zeros((50, 3), dtype=np.bool_)
    bool_ops(x, y, out, ndrange=50)
    np.testing.assert_array_equal(out, np.stack([x & ~y, x | y, x ^ y], axis=1))


# ---- atomic_add -------------------------------------------------------------------------

@adjit.kernel
def histogram(values, hist):
    i = adjit.index()
    adjit.atomic_add(hist, values[i] % hist.shape[0], 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_atomic_add_histogram(dtype):
    values = np.random.default_rng(5).integers(0, 1000, 20000)
    hist = np.zeros(7, dtype=dtype)
    histogram(values, hist, ndrange=len(values))
    assert_same(hist, np.bincount(values % 7, minlength=7).astype(dtype))


@adjit.kernel
def scatter_2d(x, acc):
    i, j = adjit.index_nd()
    adjit.atomic_add(acc, (i % 2, j), x[i, j])


def test_atomic_add_with_an_nd_index():
    x = sample((40, 3), np.float64)
    acc = np.zeros((2, 3))
    scatter_2d(x, acc, ndrange=x.shape)
    want = np.stack([x[0::2].sum(axis=0), x[1::2].sum(axis=0)])
    assert_same(acc, want)


@adjit.kernel
def atomic_returns_old(counter, out):
    i = adjit.index()
    out[i] = adjit.atomic_add(counter, 0, 1)


def test_atomic_add_returns_the_previous_value():
    counter = np.zeros(1, dtype=np.int64)
    out = np.zeros(1000, dtype=np.int64)
    atomic_returns_old(counter, out, ndrange=1000)
    assert counter[0] == 1000
    np.testing.assert_array_equal(np.sort(out), np.arange(1000))


# ---- device functions -----------------------------------------------------------------

@adjit.func
def clamp(v, lo, hi):
    return min(max(v, lo), hi)


@adjit.func
def polar(x, y):
    """Radius and angle."""
    return adjit.sqrt(x * x + y * y), adjit.atan2(y, x)


@adjit.func
def norm_and_clamp(x, y):
    r, t = polar(x, y)       # a device function calling another
    return clamp(r, 0.0, 2.0), t


@adjit.kernel
def use_device_functions(x, y, r, t, c):
    i = adjit.index()
    r[i], t[i] = norm_and_clamp(x[i], y[i])
    c[i] = clamp(i, 2, 5)    # the same function specialised for integers


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_device_functions_returning_scalars_and_tuples(dtype):
    x, y = sample(20, dtype, seed=6, lo=-2, hi=2), sample(20, dtype, seed=7, lo=-2, hi=2)
    r, t = np.zeros(20, dtype), np.zeros(20, dtype)
    c = np.zeros(20, dtype=np.int64)
    use_device_functions(x, y, r, t, c, ndrange=20)
    assert_same(r, np.minimum(np.hypot(x, y), 2).astype(dtype))
    assert_same(t, np.arctan2(y, x))
    np.testing.assert_array_equal(c, np.clip(np.arange(20), 2, 5))


@adjit.func
def scale_to_f32(v: adjit.f32):
    return v * 0.1


@adjit.kernel
def call_annotated(x, out):
    i = adjit.index()
    out[i] = scale_to_f32(x[i])


def test_device_function_annotation_converts_its_argument():
    x = np.arange(5.0)
    out = np.zeros(5)
    call_annotated(x, out, ndrange=5)
    assert_same(out, (x.astype(np.float32) * np.float32(0.1)).astype(np.float64))


@adjit.func
def add_in_place(a, i, v):
    a[i] += v


@adjit.kernel
def device_function_writes_array(a):
    i = adjit.index()
    add_in_place(a, i, i)


def test_device_function_writes_an_array_it_is_given():
    a = np.ones(6, dtype=np.int64)
    device_function_writes_array(a, ndrange=6)
    np.testing.assert_array_equal(a, 1 + np.arange(6))


def test_device_function_called_from_python():
    assert_same(clamp(7.5, 0.0, 2.0), np.float64(2.0))
    r, t = polar(np.float32(3), np.float32(4))
    assert_same(r, np.float32(5))
    assert polar.__doc__ == "Radius and angle."


@adjit.kernel
def with_docstring(x):
    """Doubles x in place.

    Bare expressions are allowed too."""
    "another bare string"
    42
    i = adjit.index()
    x[i] *= 2


def test_docstrings_and_bare_expressions():
    x = np.arange(4.0)
    with_docstring(x, ndrange=4)
    np.testing.assert_array_equal(x, 2 * np.arange(4.0))
    assert with_docstring.__doc__.startswith("Doubles x in place.")


def test_arrays_are_passed_by_reference_to_kernels():
    x = np.zeros((4, 4))
    view = x.reshape(16)        # a contiguous view of the same memory
    one_d_index_nd(np.zeros(16, dtype=np.int64), ndrange=16)
    axpy1(1.0, np.ones(16), view, ndrange=16)
    np.testing.assert_array_equal(x, 1.0)


SCALE = 3


def test_globals_and_closure_constants_are_compiled_in():
    offset = 0.5

    @adjit.kernel
    def k(x):
        i = adjit.index()
        x[i] = x[i] * SCALE + offset

    x = np.arange(4.0)
    k(x, ndrange=4)
    np.testing.assert_array_equal(x, np.arange(4.0) * 3 + 0.5)


@adjit.jit
def launch_with_workgroupsize(a, x, y):
    axpy1(a, x, y, ndrange=len(x), workgroupsize=64)
    return y


def test_workgroupsize_is_accepted_on_the_cpu():
    x, y = np.arange(300.0), np.ones(300)
    axpy1(2.0, x, y, ndrange=len(x), workgroupsize=256)
    assert_same(y, 2 * x + 1)
    assert_same(launch_with_workgroupsize(1.0, x, y), 3 * x + 1)
    m, n = np.arange(12.0).reshape(3, 4), np.zeros((3, 4))
    axpy2(1.0, m, n, ndrange=m.shape, workgroupsize=(2, 2))
    assert_same(n, m)
