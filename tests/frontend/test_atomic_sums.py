"""Kernels adding into one element every item shares (`atomic_add(out, 0, ...)`): on the CPU
each chunk of items sums its values in f64 and adds them with one atomic
(passes/chunked_launch.py), instead of one atomic per item on one address, which the cores
fought over (10M items: 224 ms) and which lost 1% of a float32 sum. Against float64 NumPy."""
import numpy as np
import pytest

import adjit


@adjit.kernel
def sum_sq(x, out):
    i = adjit.index()
    adjit.atomic_add(out, 0, x[i] * x[i])


@adjit.kernel
def moments(x, out, k: int):
    i = adjit.index()
    adjit.atomic_add(out, 0, x[i])
    adjit.atomic_add(out, k, x[i] * x[i])


@adjit.kernel
def count_items(x, n):
    i = adjit.index()
    adjit.atomic_add(n, 0, 1)


@adjit.kernel
def plane_sum(img, out):
    i, j = adjit.index_nd()
    adjit.atomic_add(out, (1, 0), img[i, j])


@adjit.kernel
def positives(x, n):
    i = adjit.index()
    if x[i] > 0.0:
        adjit.atomic_add(n, 0, 1)


@pytest.mark.parametrize("n", [1, 4095, 4097, 10_000_000])
def test_float32_sum_is_as_accurate_as_float64(n):
    x = np.random.default_rng(n).random(n, dtype=np.float32)
    out = np.zeros(1, np.float32)
    sum_sq(x, out, ndrange=n)
    want = np.sum(x.astype(np.float64) ** 2)
    assert abs(out[0] - want) <= 1e-6 * want


def test_adds_to_what_the_element_held():
    x = np.arange(10.0)
    out = np.array([100.0, -1.0, 7.0])
    moments(x, out, 2, ndrange=10)
    np.testing.assert_allclose(out, [100.0 + 45.0, -1.0, 7.0 + 285.0])


def test_integer_counter_is_exact():
    x = np.zeros(3 * 4096 + 5, np.float32)
    n = np.array([5], np.int64)
    count_items(x, n, ndrange=x.size)
    assert n[0] == 5 + x.size


def test_two_dimensional_index():
    img = np.random.default_rng(2).random((333, 77))
    out = np.zeros((2, 2))
    plane_sum(img, out, ndrange=img.shape)
    assert out[1, 0] == pytest.approx(img.sum(), rel=1e-13)
    assert out[0, 0] == out[0, 1] == out[1, 1] == 0.0


def test_conditional_atomic_keeps_its_meaning():
    x = np.random.default_rng(3).standard_normal(50_001)
    n = np.zeros(1, np.int64)
    positives(x, n, ndrange=x.size)
    assert n[0] == np.count_nonzero(x > 0.0)


def test_empty_ndrange_adds_nothing():
    out = np.array([3.0], np.float32)
    sum_sq(np.zeros(0, np.float32), out, ndrange=0)
    assert out[0] == 3.0


def test_ndrange_past_the_array_is_refused():
    with pytest.raises(IndexError):
        sum_sq(np.ones(4, np.float32), np.zeros(1, np.float32), ndrange=5)


def test_gradient_through_the_sum():
    # The reverse of an atomic add into a shared element: every item's x[i] gets 2 x[i] d.
    x = np.linspace(-1.0, 1.0, 9)
    dx, out = np.zeros_like(x), np.zeros(1)
    adjit.autodiff(adjit.Reverse, sum_sq, adjit.Duplicated(x, dx),
                   adjit.Duplicated(out, np.array([0.5])), ndrange=x.size)
    np.testing.assert_allclose(dx, x, rtol=1e-14)
