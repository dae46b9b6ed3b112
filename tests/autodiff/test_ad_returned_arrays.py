"""A called function of scalars that makes and returns an array (`ones(n) * r`, or an array
a kernel launch fills from `r`): its caller's derivative reaches `r` through that array, in
forward mode as in reverse. The activity analysis had marked a call's inputs useful only
through float results and array arguments, so such a call's scalar argument was constant to
forward mode and every tangent through it was silently 0."""
import numpy as np
import pytest

import adjit


@adjit.jit
def scaled_ones(r: float, n: int):
    return adjit.ones(n, adjit.f64) * r


@adjit.jit
def sum_of_scaled_ones(r: float):
    return adjit.sum(scaled_ones(r, 4))


@adjit.jit
def scaled_ones_of(r: float):
    return scaled_ones(r * r, 3)


@adjit.kernel
def fill(out, r: float):
    i = adjit.index()
    out[i] = r * i


@adjit.jit
def filled(r: float, n: int):
    out = adjit.zeros(n, adjit.f64)
    fill(out, r, ndrange=n)
    return out


@adjit.jit
def filled_sin(r: float):
    return np.sin(filled(r, 5))


def central(f, r, h=1e-6):
    return (np.asarray(f(r + h)) - np.asarray(f(r - h))) / (2 * h)


def test_forward_mode_through_a_returned_array():
    value, tangent = adjit.jvp(sum_of_scaled_ones, (2.0,), (1.0,))
    assert (value, tangent) == (8.0, 4.0)
    assert adjit.autodiff(adjit.Forward, sum_of_scaled_ones, adjit.Duplicated(2.0, 1.0)) == 4.0


def test_an_array_result_s_tangent_through_the_call():
    value, tangent = adjit.jvp(scaled_ones_of, (1.5,), (1.0,))
    np.testing.assert_allclose(value, np.full(3, 2.25))
    np.testing.assert_allclose(tangent, np.full(3, 3.0))


@pytest.mark.parametrize("r", [0.3, -1.1])
def test_a_kernel_filled_array_returned_forward_and_reverse(r):
    value, tangent = adjit.jvp(filled_sin, (r,), (1.0,))
    i = np.arange(5.0)
    np.testing.assert_allclose(value, np.sin(r * i))
    np.testing.assert_allclose(tangent, np.cos(r * i) * i, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(tangent, central(filled_sin, r), rtol=1e-6, atol=1e-8)
    total = adjit.grad(lambda q: adjit.sum(filled_sin(q)))(r)
    assert total == pytest.approx(np.sum(tangent), rel=1e-12)
