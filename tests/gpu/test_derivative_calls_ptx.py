"""Derivatives called inside kernels (adjit.grad, adjit.autodiff, adjit.hvp of @adjit.func
functions) lower to PTX that ptxas accepts, as the CPU build of the same kernel runs them
(issue 13, GPU)."""
from __future__ import annotations

import numpy as np
import pytest

import adjit

pytest.importorskip("mlir")
from test_ptx import assemble                                      # noqa: E402


@adjit.func
def potential(x, k):
    return k * x * x * x * x + adjit.sin(x)


@adjit.kernel
def forces_and_curvatures(x, k, force, curvature):
    i = adjit.index()
    force[i] = -adjit.grad(potential)(x[i], k)
    dx, dk = adjit.autodiff(adjit.Reverse, potential, adjit.Active(x[i]), adjit.Const(k))
    curvature[i] = adjit.hvp(potential, (x[i], k), (1.0, 0.0))[0] + 0.0 * dx


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_a_kernel_calling_derivatives_assembles(dtype, tmp_path):
    x = np.linspace(-1, 1, 9).astype(dtype)
    lowered = forces_and_curvatures.lower(x, dtype(0.5), x, x, ndrange=9, device="cuda")
    assert "adj.autodiff" not in lowered.adj() or "__adj_call_" in lowered.adj()
    ptx = lowered.ptx()
    assert ".entry" in ptx and ".extern" not in ptx
    assemble(ptx, tmp_path)


def test_the_same_kernel_on_the_cpu():
    x = np.linspace(-1, 1, 9)
    force, curvature = np.zeros(9), np.zeros(9)
    forces_and_curvatures(x, 0.5, force, curvature, ndrange=9)
    np.testing.assert_allclose(force, -(2.0 * x ** 3 + np.cos(x)), rtol=1e-14)
    np.testing.assert_allclose(curvature, 6.0 * x ** 2 - np.sin(x), rtol=1e-13, atol=1e-15)
