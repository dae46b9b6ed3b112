"""Kernels adding atomically into a small array at indices that vary (histograms, the adjoint
of a table lookup): on the CPU each part of the items adds into a private float64 copy of the
array with plain adds, and the copies are added once (passes/chunked_launch.py
lower_privatised_launch), where the copies are small beside the work; else the atomics run
as written. Both paths against float64 NumPy, the gradient also against finite differences."""
import numpy as np
import pytest

import adjit
from adjit import Const, Duplicated, Reverse


@adjit.kernel
def histogram(bins, w, h):
    i = adjit.index()
    adjit.atomic_add(h, bins[i], w[i])


@adjit.kernel
def counts(bins, h):
    i = adjit.index()
    adjit.atomic_add(h, bins[i], 1)


@adjit.kernel
def histogram_2d(bx, by, w, h):
    i = adjit.index()
    adjit.atomic_add(h, (bx[i], by[i]), w[i])


@adjit.kernel
def even_items(bins, w, h):
    i = adjit.index()
    if i % 2 == 0:
        adjit.atomic_add(h, bins[i], w[i])


@adjit.kernel
def claim_slots(bins, count, slot):
    # The old value is used: each item gets its own slot, so the adds stay atomic.
    i = adjit.index()
    slot[i] = adjit.atomic_add(count, bins[i], 1)


@adjit.kernel
def lookup(idx, w, x, out):
    i = adjit.index()
    out[i] = w[idx[i]] * x[i]


def bincount(bins, weights, m):
    return np.bincount(bins, weights=None if weights is None else weights.astype(np.float64),
                       minlength=m)


# n items into m bins: privatised where 4 copies per thread fit in n / 4 (m small), atomics
# otherwise (m large beside n); odd n so that the parts are uneven.
CASES = [(200_001, 97), (1_001, 50_000), (3, 2)]


@pytest.mark.parametrize("n, m", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_weighted_histogram_matches_numpy(n, m, dtype):
    rng = np.random.default_rng(n)
    bins = rng.integers(0, m, n)
    w = rng.standard_normal(n).astype(dtype)
    h = np.full(m, 0.5, dtype)                   # added into, not overwritten
    histogram(bins, w, h, ndrange=n)
    want = 0.5 + bincount(bins, w, m)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(h, want, rtol=tol, atol=tol * np.sqrt(n / m))


@pytest.mark.parametrize("n, m", CASES)
def test_integer_counts_are_exact(n, m):
    bins = np.random.default_rng(1).integers(0, m, n)
    h = np.zeros(m, np.int64)
    counts(bins, h, ndrange=n)
    counts(bins, h, ndrange=n)
    np.testing.assert_array_equal(h, 2 * bincount(bins, None, m))


def test_float32_histogram_of_many_items_is_as_accurate_as_float64():
    # 4M weights into 16 bins: 250,000 adds per bin. The private copies are float64, so each
    # bin is rounded once (a float32 running sum drifts by ~1e-4 relative here).
    n, m = 1 << 22, 16
    rng = np.random.default_rng(3)
    bins = rng.integers(0, m, n)
    w = rng.random(n, dtype=np.float32)
    h = np.zeros(m, np.float32)
    histogram(bins, w, h, ndrange=n)
    want = bincount(bins, w, m)
    assert np.max(np.abs(h - want) / want) < 1e-7


def test_two_dimensional_target():
    n, shape = 50_001, (7, 5)
    rng = np.random.default_rng(4)
    bx, by = rng.integers(0, shape[0], n), rng.integers(0, shape[1], n)
    w = rng.random(n)
    h = np.zeros(shape)
    histogram_2d(bx, by, w, h, ndrange=n)
    want = np.zeros(shape)
    np.add.at(want, (bx, by), w)
    np.testing.assert_allclose(h, want, rtol=1e-12)


def test_atomic_under_a_condition():
    n, m = 100_001, 13
    rng = np.random.default_rng(5)
    bins, w = rng.integers(0, m, n), rng.random(n)
    h = np.zeros(m)
    even_items(bins, w, h, ndrange=n)
    np.testing.assert_allclose(h, bincount(bins[::2], w[::2], m), rtol=1e-12)


def test_old_value_used_keeps_atomics():
    n, m = 100_000, 4
    bins = np.random.default_rng(6).integers(0, m, n)
    count, slot = np.zeros(m, np.int64), np.full(n, -1, np.int64)
    claim_slots(bins, count, slot, ndrange=n)
    np.testing.assert_array_equal(count, bincount(bins, None, m))
    for b in range(m):   # each bin handed out 0..count-1, each once
        np.testing.assert_array_equal(np.sort(slot[bins == b]), np.arange(count[b]))


@pytest.mark.parametrize("n, m", [(400_003, 256), (999, 300)])
def test_lookup_gradient_matches_bincount_and_finite_differences(n, m):
    rng = np.random.default_rng(7)
    idx = rng.integers(0, m, n)
    w, x = rng.random(m), rng.random(n)
    seed = rng.standard_normal(n)
    dw, out, dout = np.zeros(m), np.zeros(n), seed.copy()
    adjit.autodiff(Reverse, lookup, Const(idx), Duplicated(w, dw), Const(x),
                   Duplicated(out, dout), ndrange=n)
    want = np.bincount(idx, weights=x * seed, minlength=m)
    np.testing.assert_allclose(dw, want, rtol=1e-11, atol=1e-12)

    def loss(w_):
        return float(np.sum(w_[idx] * x * seed))
    d = rng.standard_normal(m)
    h = 1e-6
    fd = (loss(w + h * d) - loss(w - h * d)) / (2 * h)
    assert float(np.dot(dw, d)) == pytest.approx(fd, rel=1e-7)


def test_float32_lookup_gradient_at_large_size():
    n, m = 1 << 22, 256
    rng = np.random.default_rng(8)
    idx = rng.integers(0, m, n)
    w, x = rng.random(m, dtype=np.float32), rng.random(n, dtype=np.float32)
    dw, out, dout = np.zeros(m, np.float32), np.zeros(n, np.float32), np.ones(n, np.float32)
    adjit.autodiff(Reverse, lookup, Const(idx), Duplicated(w, dw), Const(x),
                   Duplicated(out, dout), ndrange=n)
    want = np.bincount(idx, weights=x.astype(np.float64), minlength=m)
    assert np.max(np.abs(dw - want) / want) < 1e-6
