"""0-d NumPy arrays in compiled code (issue 19, item 16; SPEC: arrays of any ndim): as
arguments and results of @jit functions and kernels, read with `x[()]`, written with
`x[()] = v`, in element-wise expressions (where they broadcast like scalars, and where, as in
NumPy, an expression of 0-d arrays alone is a scalar), reduced, and passed to kernels. Every
result is compared with NumPy's, dtype included."""
from __future__ import annotations

import numpy as np
import pytest

import adjit
from fe_helpers import NUMERIC, assert_same


def zero_d(v, dtype=np.float64):
    return np.array(v, dtype=dtype)


@adjit.jit
def read_write(x0, out0, v: float):
    out0[()] = x0[()] * 2.0 + v
    return x0[()]


def test_read_and_write_an_element():
    x0, out0 = zero_d(1.25), zero_d(0.0)
    assert_same(read_write(x0, out0, 0.5), np.float64(1.25))
    assert_same(out0, zero_d(3.0))


@adjit.jit
def expressions(x0, y0, s):
    return x0 * y0 + s, -x0, x0 > y0, adjit.sin(x0), float(x0), x0 // y0


@pytest.mark.parametrize("dtype", NUMERIC)
def test_expressions_of_0d_arrays_are_numpy_scalars(dtype):
    x0, y0 = zero_d(7, dtype), zero_d(2, dtype)
    s = dtype(3)
    got = expressions(x0, y0, s)
    want = (x0 * y0 + s, -x0, x0 > y0, np.sin(x0), np.float64(float(x0)), x0 // y0)
    for g, w in zip(got, want):
        assert not isinstance(g, np.ndarray), g      # NumPy's ufuncs give scalars here
        assert_same(g, w)


@adjit.jit
def broadcast(x0, y):
    return x0 * y + 1.0, y - x0, adjit.maximum(y, x0), x0 < y


def test_0d_arrays_broadcast_like_scalars():
    x0 = zero_d(2.5)
    for y in (np.arange(37.0) - 3.0, np.arange(12.0).reshape(3, 4)):
        got = broadcast(x0, y)
        want = (x0 * y + 1.0, y - x0, np.maximum(y, x0), x0 < y)
        for g, w in zip(got, want):
            assert_same(g, w)


@adjit.jit
def reductions(x0):
    return adjit.sum(x0), adjit.max(x0), adjit.min(x0), x0.sum(), adjit.sum(x0 * 2)


@pytest.mark.parametrize("dtype", [*NUMERIC, np.bool_])
def test_reductions_of_a_0d_array(dtype):
    x0 = zero_d(3 if dtype != np.bool_ else True, dtype)
    got = reductions(x0)
    want = (np.sum(x0), np.max(x0), np.min(x0), x0.sum(), np.sum(x0 * 2))
    for g, w in zip(got, want):
        assert_same(g, w)


@adjit.jit
def make(x0):
    y0 = adjit.zeros_like(x0)
    y0[()] = x0[()] + 1.0
    return x0.copy(), adjit.zeros(()), adjit.full((), 2.5, adjit.f32), y0, adjit.ones(())


def test_0d_results_are_0d_arrays():
    got = make(zero_d(4.0))
    want = (zero_d(4.0), zero_d(0.0), zero_d(2.5, np.float32), zero_d(5.0), zero_d(1.0))
    for g, w in zip(got, want):
        assert isinstance(g, np.ndarray) and g.ndim == 0
        assert_same(g, w)


@adjit.jit
def in_place(x0, y0, y):
    x0 += 1.0
    x0 *= y0
    y *= x0


def test_augmented_assignment_in_place():
    x0, y0, y = zero_d(2.0), zero_d(3.0), np.arange(5.0)
    in_place(x0, y0, y)
    assert_same(x0, zero_d(9.0))
    assert_same(y, np.arange(5.0) * 9.0)


@adjit.jit
def shape_queries(x0):
    return x0.ndim, x0.size, len(x0.shape)


def test_shape_queries():
    assert shape_queries(zero_d(1.0)) == (0, 1, 0)


@adjit.jit
def branch_on(x0):
    if x0 > 1.0:
        return 1
    return 0


def test_comparison_of_a_0d_array_is_a_scalar_condition():
    assert branch_on(zero_d(2.0)) == 1 and branch_on(zero_d(0.5)) == 0


# ---- kernels ----------------------------------------------------------------------------

@adjit.kernel
def scale_by(x0, y, out, total0):
    i = adjit.index()
    out[i] = y[i] * x0[()] + x0 * 0.5      # x0 * 0.5: a scalar, no array arithmetic
    adjit.atomic_add(total0, (), y[i])


@adjit.jit
def launch_from_jit(x0, y):
    out = adjit.empty_like(y)
    total0 = adjit.zeros(())
    scale_by(x0, y, out, total0, ndrange=y.shape[0])
    return out, total0


def test_kernels_take_0d_arrays():
    x0, y = zero_d(3.0), np.arange(9.0)
    out, total0 = np.zeros(9), zero_d(0.0)
    scale_by(x0, y, out, total0, ndrange=9)
    np.testing.assert_array_equal(out, y * 3.0 + 1.5)
    assert_same(total0, zero_d(36.0))
    out, total0 = launch_from_jit(x0, y)
    np.testing.assert_array_equal(out, y * 3.0 + 1.5)
    assert_same(total0, zero_d(36.0))


# ---- errors -------------------------------------------------------------------------------

@adjit.jit
def grow(x0, y):
    x0 += y  # grow-0d


@adjit.jit
def length(x0):
    return len(x0)  # len-0d


@adjit.jit
def one_index(x0):
    return x0[0]  # index-0d


@adjit.jit
def write_it(x0):
    x0[()] = 1.0


@pytest.mark.parametrize("fn, marker, words", [
    (grow, "grow-0d", ["1-D result", "0-D array"]),
    (length, "len-0d", ["len() of a 0-d array"]),
    (one_index, "index-0d", ["0-D array", "1 indices"]),
])
def test_errors_name_the_line(fn, marker, words):
    with pytest.raises(adjit.CompilationError) as e:
        fn(zero_d(1.0), np.ones(3)) if fn is grow else fn(zero_d(1.0))
    text = str(e.value)
    assert marker in text
    for w in words:
        assert w in text


def test_read_only_0d_array_written_is_refused():
    x0 = zero_d(1.0)
    x0.flags.writeable = False
    with pytest.raises(ValueError, match="'x0'.*read-only"):
        write_it(x0)


@adjit.jit
def debug_read_write(x0, y0, y):
    adjit.atomic_add(y0, (), x0[()])
    y0[()] = y0[()] * 2.0
    out = adjit.empty_like(y)
    scale_by(x0, y, out, y0, ndrange=y.shape[0])
    return x0[()], out


def test_debug_mode_checks_nothing_for_the_one_element(debug_mode):
    # ADJIT_DEBUG=1 bounds-checks every access; a 0-d array's element has no index to check
    x0, y0, y = zero_d(2.0), zero_d(1.0), np.ones(4)
    got, out = debug_read_write(x0, y0, y)
    assert_same(got, np.float64(2.0))
    assert_same(y0, zero_d((1.0 + 2.0) * 2.0 + 4.0))
    np.testing.assert_array_equal(out, np.full(4, 1.0 * 2.0 + 1.0))


@adjit.jit
def truthiness(x0, n0):
    if x0:
        return 1 if n0 else 2
    return 3 if not n0 else 4


def test_truth_of_a_0d_array_is_its_element_as_in_numpy():
    for x, n in ((1.5, 0), (0.0, 2), (0.0, 0), (-1.0, 5)):
        want = truthiness.__wrapped__(zero_d(x), zero_d(n, np.int32))
        assert truthiness(zero_d(x), zero_d(n, np.int32)) == want
