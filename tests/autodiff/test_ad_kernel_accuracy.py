"""Reverse mode of kernels: the sums over work items of per-item adjoints (Active scalar
arguments, array elements that every item reads) are as accurate as adjit.sum's (issue 8.1):
passes/summation.py and uniform_loads.py."""
import numpy as np
import pytest

import adjit
from adjit import Active, Const, Duplicated, Reverse

RTOL = 1e-6   # what issue 8 asks of a float32 reduction, against float64


@adjit.kernel
def scale2d(a: adjit.f32, img, out):
    i, j = adjit.index_nd()
    out[i, j] = a * img[i, j]


@adjit.kernel
def scale(a: adjit.f32, x, out):
    i = adjit.index()
    out[i] = a * x[i]


@adjit.kernel
def param(p, x, out):
    i = adjit.index()
    out[i] = p[0] * x[i]


def test_active_scalar_over_a_4096_by_8192_image_of_ones():
    # d/da sum(a * img) = sum(img) = 2^25: a float32 running sum stops at 2^24.
    img = np.ones((4096, 8192), np.float32)
    out, dout = np.zeros_like(img), np.ones_like(img)
    da, _, _ = adjit.autodiff(Reverse, scale2d, Active(np.float32(2.0)), Const(img),
                              Duplicated(out, dout), ndrange=img.shape)
    assert da == 33554432.0
    np.testing.assert_array_equal(out[:2, :3], 2.0)


def test_active_scalar_over_2_20_random_items():
    x = np.random.default_rng(0).random(1 << 20, dtype=np.float32)
    seed = np.random.default_rng(1).random(1 << 20, dtype=np.float32)
    out = np.zeros_like(x)
    da, _, _ = adjit.autodiff(Reverse, scale, Active(np.float32(0.5)), Const(x),
                              Duplicated(out, seed.copy()), ndrange=x.size)
    want = np.dot(x.astype(np.float64), seed.astype(np.float64))
    assert abs(da - want) / want < RTOL
    np.testing.assert_allclose(out, 0.5 * x)


def test_parameter_element_read_by_2_25_items():
    # Every item reads p[0]: its 2^25 partials (1.0 each) sum exactly, not to 2^24.
    x = np.ones(1 << 25, np.float32)
    out, dout = np.zeros_like(x), np.ones_like(x)
    p, dp = np.array([2.0, 5.0], np.float32), np.zeros(2, np.float32)
    adjit.autodiff(Reverse, param, Duplicated(p, dp), Const(x), Duplicated(out, dout),
                   ndrange=x.size)
    assert dp[0] == 33554432.0 and dp[1] == 0.0


def test_parameter_element_read_by_2_20_random_items():
    rng = np.random.default_rng(2)
    x, seed = rng.random(1 << 20, dtype=np.float32), rng.random(1 << 20, dtype=np.float32)
    out = np.zeros_like(x)
    p, dp = np.array([0.5], np.float32), np.zeros(1, np.float32)
    adjit.autodiff(Reverse, param, Duplicated(p, dp), Const(x), Duplicated(out, seed.copy()),
                   ndrange=x.size)
    want = np.dot(x.astype(np.float64), seed.astype(np.float64))
    assert abs(dp[0] - want) / want < RTOL


@adjit.kernel
def weighted(w, x, out, k: int, steps: int):
    # w[k] and w[k + 1] are read by every item, in a loop and behind a guard; x[i] per item.
    i = adjit.index()
    acc = 0.0
    for _ in range(steps):
        acc = acc + w[k] * x[i]
    if k + 1 < w.shape[0]:
        acc = acc * w[k + 1]
    out[i] = adjit.sin(acc)


def _weighted_np(w, x, k, steps):
    acc = steps * w[k] * x
    if k + 1 < len(w):
        acc = acc * w[k + 1]
    return np.sin(acc)


@pytest.mark.parametrize("k", [1, 3])
def test_elements_at_a_scalar_argument_in_loops_and_ifs(k):
    rng = np.random.default_rng(3)
    n, steps = 1000, 3
    w, x, seed = rng.uniform(-1, 1, 4), rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    dw, dx = np.zeros(4), np.zeros(n)
    adjit.autodiff(Reverse, weighted, Duplicated(w, dw), Duplicated(x, dx),
                   Duplicated(np.zeros(n), seed.copy()), k, steps, ndrange=n)
    # analytic
    inner = steps * w[k] * x
    scale_ = w[k + 1] if k + 1 < 4 else 1.0
    cos = np.cos(inner * scale_)
    want = np.zeros(4)
    want[k] = np.sum(seed * cos * scale_ * steps * x)
    if k + 1 < 4:
        want[k + 1] = np.sum(seed * cos * inner)
    np.testing.assert_allclose(dw, want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dx, seed * cos * scale_ * steps * w[k], rtol=1e-12)
    # finite differences on w
    for j in range(4):
        e = np.zeros(4)
        e[j] = 1e-6
        fd = (np.dot(seed, _weighted_np(w + e, x, k, steps)) -
              np.dot(seed, _weighted_np(w - e, x, k, steps))) / 2e-6
        assert abs(dw[j] - fd) < 1e-6 * max(1.0, abs(fd))


@adjit.kernel
def read_and_written(p, x, out):
    # p is also written (by item 0): its element's adjoint cannot wait for the kernel's end,
    # so it stays an atomic add, and must still be right.
    i = adjit.index()
    out[i] = p[0] * x[i]
    if i == 0:
        p[1] = 2.0 * p[1]


def test_element_of_an_array_the_kernel_writes_falls_back_to_atomics():
    rng = np.random.default_rng(4)
    n = 5000
    x, seed = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    p, dp = np.array([0.7, 1.5]), np.array([0.0, 1.0])
    adjit.autodiff(Reverse, read_and_written, Duplicated(p, dp), Const(x),
                   Duplicated(np.zeros(n), seed.copy()), ndrange=n)
    np.testing.assert_allclose(dp, [np.dot(seed, x), 2.0], rtol=1e-12)


def test_an_element_outside_the_array_read_by_no_item_adds_nothing():
    # k = 3 = len(w) - 1: the guarded w[k + 1] is never read; its index is outside w.
    n = 10
    w, x = np.array([0.1, 0.2, 0.3, 0.4]), np.linspace(0, 1, n)
    dw = np.zeros(4)
    adjit.autodiff(Reverse, weighted, Duplicated(w, dw), Const(x),
                   Duplicated(np.zeros(n), np.ones(n)), 3, 1, ndrange=n)
    np.testing.assert_allclose(dw, [0, 0, 0, np.sum(np.cos(0.4 * x) * x)], rtol=1e-12)


@adjit.kernel
def table2d(w, x, out, k: int):
    # w[1, k] and w[0, w.shape[1] - 1]: 2-D elements at indices from arguments and sizes.
    i, j = adjit.index_nd()
    out[i, j] = w[1, k] * x[i, j] + w[0, w.shape[1] - 1] * x[i, j] * x[i, j]


def test_elements_of_a_2d_array_at_argument_and_size_indices():
    rng = np.random.default_rng(6)
    x, seed = rng.uniform(-1, 1, (64, 48)), rng.uniform(-1, 1, (64, 48))
    w, dw = rng.uniform(-1, 1, (2, 5)), np.zeros((2, 5))
    adjit.autodiff(Reverse, table2d, Duplicated(w, dw), Const(x),
                   Duplicated(np.zeros_like(x), seed.copy()), 2, ndrange=x.shape)
    want = np.zeros((2, 5))
    want[1, 2] = np.sum(seed * x)
    want[0, 4] = np.sum(seed * x * x)
    np.testing.assert_allclose(dw, want, rtol=1e-12)


def test_no_items_sum_to_zero():
    x = np.zeros(0, np.float32)
    p, dp = np.array([2.0], np.float32), np.array([0.25], np.float32)
    da, _, _ = adjit.autodiff(Reverse, scale, Active(np.float32(1.0)), Const(x),
                              Duplicated(x.copy(), x.copy()), ndrange=0)
    adjit.autodiff(Reverse, param, Duplicated(p, dp), Const(x), Duplicated(x.copy(), x.copy()),
                   ndrange=0)
    assert da == 0.0 and dp[0] == 0.25
