"""Guarded kernels after passes/interior.py splits their innermost loops into border, interior
and border: every item computes what NumPy does, for sizes whose interior is empty, one item
or large; for guards that hold only near a border; for bounds at the ends of int64 (clamped
before the split point is computed); and for offsets in both directions. The stencil's
gradient through the gather form (its five guarded neighbours) is checked against finite
differences in tests/bench/test_grad_workloads.py and tests/autodiff."""
import numpy as np
import pytest

import adjit
from adjit import Duplicated, Reverse


@adjit.kernel
def smooth(x, out):
    i = adjit.index()
    n = x.shape[0]
    if 0 < i < n - 1:
        out[i] = 0.25 * x[i - 1] + 0.5 * x[i] + 0.25 * x[i + 1]
    else:
        out[i] = x[i]


def smooth_np(x):
    out = x.copy()
    out[1:-1] = 0.25 * x[:-2] + 0.5 * x[1:-1] + 0.25 * x[2:]
    return out


@adjit.kernel
def shifted(x, out):
    # Offsets of both signs and guards in both directions: i + 2 < n, i - 3 >= 0, i + 1 <= n-2.
    i = adjit.index()
    n = x.shape[0]
    v = 0.0
    if i + 2 < n:
        v += x[i + 2]
    if i - 3 >= 0:
        v += 10.0 * x[i - 3]
    if i + 1 <= n - 2:
        v += 100.0 * x[i + 1]
    if i < 1:             # holds only at the first border
        v += 1000.0
    if n - 2 < i:         # the counter on the right, holds only at the last border
        v += 10000.0
    out[i] = v


def shifted_np(x):
    n = x.shape[0]
    out = np.zeros_like(x)
    for i in range(n):
        v = 0.0
        if i + 2 < n:
            v += x[i + 2]
        if i - 3 >= 0:
            v += 10.0 * x[i - 3]
        if i + 1 <= n - 2:
            v += 100.0 * x[i + 1]
        if i < 1:
            v += 1000.0
        if n - 2 < i:
            v += 10000.0
        out[i] = v
    return out


@adjit.kernel
def below(x, out, k: int):
    i = adjit.index()
    if i < k:
        out[i] = x[i]
    else:
        out[i] = -x[i]


@adjit.kernel
def heat(u, v):
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    if 0 < i < n - 1 and 0 < j < m - 1:
        v[i, j] = u[i, j] + 0.1 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                                   - 4.0 * u[i, j])
    else:
        v[i, j] = u[i, j]


def heat_np(u):
    v = u.copy()
    v[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2]
                                           + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1])
    return v


SIZES = [1, 2, 3, 4, 5, 17, 1000, 1 << 18]


@pytest.mark.parametrize("n", SIZES)
def test_smooth_matches_numpy(n):
    x = np.random.default_rng(n).random(n, dtype=np.float32)
    out = np.full_like(x, np.nan)
    smooth(x, out, ndrange=n)
    np.testing.assert_allclose(out, smooth_np(x), rtol=1e-6)


@pytest.mark.parametrize("n", SIZES)
def test_offsets_and_border_guards_match_numpy(n):
    x = np.random.default_rng(n).random(n)
    out = np.full_like(x, np.nan)
    shifted(x, out, ndrange=n)
    np.testing.assert_allclose(out, shifted_np(x), rtol=1e-12)


@pytest.mark.parametrize("k", [-(1 << 63), -5, 0, 7, 999, 1000, (1 << 62) + 5, (1 << 63) - 1])
def test_bounds_at_the_ends_of_int64(k):
    x = np.arange(1.0, 1001.0)
    out = np.zeros_like(x)
    below(x, out, k, ndrange=x.shape[0])
    np.testing.assert_array_equal(out, np.where(np.arange(1000) < k, x, -x))


@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (3, 3), (9, 130), (256, 256)])
def test_stencil_matches_numpy_and_gradient_matches_transpose(shape):
    rng = np.random.default_rng(shape[1])
    u = rng.random(shape)
    v = np.full_like(u, np.nan)
    heat(u, v, ndrange=shape)
    np.testing.assert_allclose(v, heat_np(u), rtol=1e-12)
    # Reverse (gather form, five guarded neighbours): <dv, J du> == <J^T dv, du>.
    dv = rng.random(shape)
    du = np.zeros_like(u)
    adjit.autodiff(Reverse, heat, Duplicated(u, du), Duplicated(v, dv.copy()), ndrange=shape)
    w = rng.random(shape)
    assert np.vdot(du, w) == pytest.approx(np.vdot(dv, heat_np(w)), rel=1e-12)
