"""Kernels launched on views of unknown innermost stride run a twin compiled for unit stride
when every such stride is 1 at run time, the kernel as written otherwise
(passes/unit_stride.py; tests/ir/lower_cpu_unit_stride.mlir shows the IR). Both paths must
give NumPy's numbers: views of unit and of other innermost strides, from Python and made in
@jit code, rows of a stacked array, an empty view, and the derivatives of such launches."""
from __future__ import annotations

import numpy as np
import pytest

import adjit
from adjit import Const, Duplicated, ReverseWithPrimal


@adjit.kernel
def smooth(u, v):
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    if 0 < j < m - 1:
        v[i, j] = 0.25 * u[i, j - 1] + 0.5 * u[i, j] + 0.25 * u[i, j + 1]
    else:
        v[i, j] = u[i, j] * u[i, j]


def smooth_np(u):
    v = u * u
    v[:, 1:-1] = 0.25 * u[:, :-2] + 0.5 * u[:, 1:-1] + 0.25 * u[:, 2:]
    return v


@adjit.jit
def rows(u_all, steps: int):
    for t in range(steps):
        smooth(u_all[t], u_all[t + 1], ndrange=(u_all.shape[1], u_all.shape[2]))
    return adjit.sum(u_all[steps] * u_all[steps])


@adjit.jit
def every_other_column(u, v):
    smooth(u[:, ::2], v[:, ::2], ndrange=(u.shape[0], (u.shape[1] + 1) // 2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unit_stride_views_from_python(dtype):
    base = np.random.default_rng(0).random((9, 14)).astype(dtype)
    u = base[1:-1, 2:]              # innermost stride 1, rows apart: the twin
    out = np.zeros((9, 14), dtype=dtype)
    v = out[1:-1, :-2]
    smooth(u, v, ndrange=u.shape)
    np.testing.assert_array_equal(v, smooth_np(u).astype(dtype))
    assert v.dtype == dtype


@pytest.mark.parametrize("step", [2, 3, -1])
def test_other_strides_from_python(step):
    base = np.random.default_rng(1).random((6, 21))
    u = base[:, ::step]
    out = np.zeros_like(base)
    v = out[:, ::step]
    smooth(u, v, ndrange=u.shape)
    np.testing.assert_array_equal(v, smooth_np(u))


def test_views_made_in_jit_code():
    u = np.random.default_rng(2).random((5, 11))
    v = np.zeros_like(u)
    every_other_column(u, v)
    expect = np.zeros_like(u)
    expect[:, ::2] = smooth_np(u[:, ::2])
    np.testing.assert_array_equal(v, expect)


@pytest.mark.parametrize("steps", [0, 1, 4])
def test_rows_of_a_stacked_array_and_their_gradient(steps):
    u0 = np.random.default_rng(3).random((7, 9))
    u_all = np.zeros((steps + 1, 7, 9))
    u_all[0] = u0
    value = rows(u_all.copy(), steps)
    ref = [u0]
    for _ in range(steps):
        ref.append(smooth_np(ref[-1]))
    assert value == pytest.approx(float(np.sum(ref[-1] ** 2)), rel=1e-13)
    du_all = np.zeros_like(u_all)
    adjit.autodiff(ReverseWithPrimal, rows, Duplicated(u_all, du_all), Const(steps))
    np.testing.assert_allclose(u_all[steps], ref[-1], rtol=1e-14)

    def loss(x):
        for _ in range(steps):
            x = smooth_np(x)
        return float(np.sum(x * x))
    h = 1e-6
    for p in [(0, 0), (3, 4), (6, 8), (2, 1)]:
        up, um = u0.copy(), u0.copy()
        up[p] += h
        um[p] -= h
        assert du_all[0][p] == pytest.approx((loss(up) - loss(um)) / (2 * h), rel=1e-6, abs=1e-8)


def test_empty_view():
    u = np.zeros((0, 5))
    v = np.zeros((0, 5))
    smooth(u[:, 1:], v[:, 1:], ndrange=(0, 4))
    assert v.shape == (0, 5)
