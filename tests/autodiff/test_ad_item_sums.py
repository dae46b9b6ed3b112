"""Reverse mode of kernels with Active scalar arguments on the CPU (issue 9.2): the launch's
sums of per-item adjoints are computed per chunk of items as the reverse kernel runs
(passes/chunked_launch.lower_summing_launch), with no per-item buffer, and Const arrays that a
kernel only reads get no shadow (passes/autodiff/analysis/activity_analysis.py). Checked against float64
references, finite differences, and the memory the gradient allocates; that the chunk loop
vectorises: tests/autodiff/test_ad_gather.py (test_derivative_kernels_vectorise)."""
import numpy as np
import pytest

import adjit
from adjit import Active, Const, Duplicated, Reverse, ReverseWithPrimal


@adjit.kernel
def residual_sq(a: adjit.f32, b: adjit.f32, x, y, out):
    i = adjit.index()
    out[i] = (a * x[i] + b - y[i]) ** 2


@adjit.kernel
def affine2d(a: adjit.f32, c: adjit.f64, img, out):
    i, j = adjit.index_nd()
    out[i, j] = a * img[i, j] * img[i, j] + c * (i - j)


@adjit.kernel
def clipped(a: adjit.f64, x, out):
    i = adjit.index()
    if x[i] > 0.5:
        out[i] = a * x[i]
    else:
        out[i] = a * a


def _residual_grad(a, b, x, y):
    r = a * x.astype(np.float64) + b - y.astype(np.float64)
    return np.sum(2 * r * x), np.sum(2 * r)


@pytest.mark.parametrize("n", [1, 4095, 4097, 3 * 4096 + 17, 1 << 20])
def test_active_scalars_match_float64(n):
    rng = np.random.default_rng(n)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    out, dout = np.zeros_like(x), np.ones_like(x)
    da, db, *_ = adjit.autodiff(Reverse, residual_sq, Active(np.float32(2.0)),
                                Active(np.float32(1.0)), Const(x), Const(y),
                                Duplicated(out, dout), ndrange=n)
    want_a, want_b = _residual_grad(2.0, 1.0, x, y)
    assert abs(da - want_a) <= 1e-6 * abs(want_a)
    assert abs(db - want_b) <= 1e-6 * abs(want_b)
    np.testing.assert_allclose(out, (2 * x + 1 - y) ** 2, rtol=1e-6)
    assert not dout.any()         # the reverse zeroes the seed of what it overwrote


def test_gradient_allocates_no_per_item_buffer_nor_const_shadow():
    # Before: a zero-filled shadow for each Const array (x, y) and a per-item buffer for each
    # Active scalar: 4 float32 states. Now the chunk partials only (n / 4096 doubles each).
    n = 1 << 20
    rng = np.random.default_rng(0)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    out, dout = np.zeros_like(x), np.ones_like(x)
    args = (Active(np.float32(2.0)), Active(np.float32(1.0)), Const(x), Const(y),
            Duplicated(out, dout))
    adjit.autodiff(ReverseWithPrimal, residual_sq, *args, ndrange=n)   # compiled
    dout[:] = 1.0
    before = adjit.memory_stats()["bytes_in_use"]
    adjit.reset_peak_memory()
    adjit.autodiff(ReverseWithPrimal, residual_sq, *args, ndrange=n)
    extra = adjit.memory_stats()["peak_bytes"] - before
    assert extra < x.nbytes // 16, extra


def test_two_dimensional_mixed_precision_odd_extents():
    img = np.random.default_rng(3).random((333, 77), dtype=np.float32)
    out = np.zeros_like(img)
    seed = np.random.default_rng(4).random(img.shape, dtype=np.float32)
    da, dc, *_ = adjit.autodiff(Reverse, affine2d, Active(np.float32(0.5)), Active(1.5),
                                Const(img), Duplicated(out, seed.copy()), ndrange=img.shape)
    i, j = np.indices(img.shape)
    s64, im64 = seed.astype(np.float64), img.astype(np.float64)
    assert isinstance(dc, float) and abs(dc - np.sum(s64 * (i - j))) <= 1e-9 * np.sum(
        np.abs(s64 * (i - j)))
    want = np.sum(s64 * im64 * im64)
    assert abs(da - want) <= 1e-6 * want


def test_branches_against_finite_differences():
    x = np.random.default_rng(5).random(10001)
    out = np.zeros_like(x)

    def loss(a):
        return float(np.sum(np.where(x > 0.5, a * x, a * a)))
    a = 0.7
    da, *_ = adjit.autodiff(Reverse, clipped, Active(a), Const(x),
                            Duplicated(out, np.ones_like(x)), ndrange=x.size)
    h = 1e-6
    fd = (loss(a + h) - loss(a - h)) / (2 * h)
    assert abs(da - fd) <= 1e-6 * abs(fd)
    assert abs(da - (np.sum(x[x > 0.5]) + 2 * a * np.sum(x <= 0.5))) <= 1e-9 * abs(da)


def test_empty_ndrange_gives_zero():
    x = np.zeros(0, np.float32)
    da, db, *_ = adjit.autodiff(Reverse, residual_sq, Active(np.float32(2.0)),
                                Active(np.float32(1.0)), Const(x), Const(x.copy()),
                                Duplicated(np.zeros(0, np.float32), np.zeros(0, np.float32)),
                                ndrange=0)
    assert da == 0.0 and db == 0.0


def test_ndrange_larger_than_the_arrays_is_refused():
    x = np.ones(8, np.float32)
    with pytest.raises(IndexError):
        adjit.autodiff(Reverse, residual_sq, Active(np.float32(2.0)), Active(np.float32(1.0)),
                       Const(x), Const(x.copy()), Duplicated(np.zeros(8, np.float32),
                                                             np.ones(8, np.float32)),
                       ndrange=9)


@adjit.jit
def copied_scale(a: adjit.f32, x):
    y = (a * x).copy()            # an element-wise loop that stores: reversed in parallel
    return adjit.sum(y) + adjit.sum(y * y)


def test_active_scalar_of_a_parallel_element_wise_loop_is_summed_in_f64_pairwise():
    # Each iteration's adjoint of `a` goes to a slot; the slots are added pairwise in f64
    # (reverse.py _reverse_parallel). A serial float32 sum of the 4M slots was 1.7e-3 off.
    x = np.random.default_rng(0).random(1 << 22, dtype=np.float32)
    da, _ = adjit.autodiff(Reverse, copied_scale, Active(np.float32(1.0)),
                           Duplicated(x, np.zeros_like(x)))
    x64 = x.astype(np.float64)
    want = np.sum(x64) + 2 * np.sum(x64 * x64)
    assert abs(float(da) - want) / want < 1e-6
