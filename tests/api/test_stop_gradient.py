"""adjit.stop_gradient (issue 15, item 5): the value, with no derivative through it, in
kernels, device functions and @jit code, forward and reverse, batched, of arrays
element-wise; math.degrees / math.radians (and adjit's) against NumPy with their
derivatives."""
from __future__ import annotations

import math

import numpy as np
import pytest

import adjit


@adjit.jit
def damped(x: float):
    # x * stop_gradient(x): the value x^2, the derivative x (x held constant on one side)
    return x * adjit.stop_gradient(x) + adjit.sin(adjit.stop_gradient(x))


@adjit.kernel
def scaled(x, y):
    i = adjit.index()
    y[i] = x[i] * adjit.stop_gradient(x[i] * x[i])


@adjit.jit
def normalised(x):
    """A loss whose normaliser is held constant (a common use: a target or a scale)."""
    scale = adjit.stop_gradient(x * 2.0)
    return adjit.sum(scale * x)


def test_scalar_value_and_both_modes():
    assert damped(0.5) == pytest.approx(0.25 + math.sin(0.5), rel=1e-15)
    assert adjit.grad(damped)(0.5) == pytest.approx(0.5, rel=1e-15)
    value, tangent = adjit.jvp(damped, (0.5,), (2.0,))
    assert tangent == pytest.approx(1.0, rel=1e-15)
    # batched tangents: every lane zero through it
    ts = adjit.autodiff(adjit.Forward, damped, adjit.BatchDuplicated(0.5, (1.0, 3.0)))
    assert ts == pytest.approx((0.5, 1.5), rel=1e-15)
    # second order: the first derivative is stop_gradient(x), whose derivative is 0 (as JAX)
    assert adjit.grad(adjit.grad(damped))(0.5) == 0.0


def test_in_a_kernel_and_of_arrays_element_wise():
    x = np.linspace(-1.0, 1.0, 9)
    dx = np.zeros_like(x)
    adjit.autodiff(adjit.Reverse, scaled, adjit.Duplicated(x, dx),
                   adjit.Duplicated(np.zeros_like(x), np.ones_like(x)), ndrange=9)
    np.testing.assert_allclose(dx, x * x, rtol=1e-15)
    assert normalised(x) == pytest.approx(float(np.sum(2 * x * x)), rel=1e-14)
    np.testing.assert_allclose(adjit.grad(normalised)(x), 2 * x, rtol=1e-15)
    assert adjit.stop_gradient(x) is x        # from Python: the value itself


@adjit.jit
def angles(x: float, y):
    s = math.degrees(x) + adjit.radians(x * 90.0)
    for i in range(len(y)):
        y[i] = adjit.degrees(y[i]) + math.radians(2.0 * y[i])
    return s


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_degrees_and_radians_against_numpy(dtype):
    y = np.linspace(-3.0, 3.0, 7).astype(dtype)
    expected = np.degrees(y) + np.radians(2 * y)
    s = angles(0.25, y)
    assert s == pytest.approx(math.degrees(0.25) + math.radians(22.5), rel=1e-15)
    np.testing.assert_allclose(y, expected, rtol=1e-6 if dtype == np.float32 else 1e-15)
    assert y.dtype == dtype
    g = adjit.grad(lambda_free_angles)(0.25)
    assert g == pytest.approx(180 / math.pi + 90 * math.pi / 180, rel=1e-15)


@adjit.jit
def lambda_free_angles(x: float):
    return math.degrees(x) + adjit.radians(x * 90.0)
