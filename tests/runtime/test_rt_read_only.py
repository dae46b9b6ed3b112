"""A read-only NumPy array is refused for an argument the compiled code may write (through
calls, launches and loop-carried swaps too), as NumPy refuses a read-only `out=`, and taken
for one it only reads."""
from __future__ import annotations

import numpy as np
import pytest

import adjit


def read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@adjit.kernel
def axpy(a, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


@adjit.func
def bump(z, i):
    z[i] = z[i] + 1.0
    return z[i]


@adjit.jit
def bump_first(x, y):
    return bump(y, 0) + adjit.sum(x)


@adjit.jit
def ping_pong(u, v, steps: int):
    for _ in range(steps):
        axpy(0.5, u, v, ndrange=u.shape[0])
        u, v = v, u
    return adjit.sum(u)


def test_a_kernel_may_read_a_read_only_array_and_not_write_one():
    x, y = read_only(np.arange(4.0)), np.ones(4)
    axpy(2.0, x, y, ndrange=4)
    np.testing.assert_array_equal(y, 2 * np.arange(4.0) + 1)
    with pytest.raises(ValueError, match="axpy\\(\\): argument 'y' is written .* read-only"):
        axpy(2.0, y, x, ndrange=4)
    np.testing.assert_array_equal(x, np.arange(4.0))


def test_writes_through_a_called_function_count():
    x, y = read_only(np.ones(3)), np.zeros(3)
    assert bump_first(x, y) == 4.0 and y[0] == 1.0
    with pytest.raises(ValueError, match="bump_first\\(\\): argument 'y' is written"):
        bump_first(y, read_only(np.zeros(3)))


def test_arrays_swapped_in_a_loop_may_both_be_written():
    u, v = np.ones(5), np.zeros(5)
    assert ping_pong(u, v, 3) == pytest.approx(ping_pong_reference())
    for args in [(read_only(np.ones(5)), np.zeros(5)), (np.ones(5), read_only(np.zeros(5)))]:
        with pytest.raises(ValueError, match="is written by the compiled code"):
            ping_pong(*args, 3)


def ping_pong_reference() -> float:
    u, v = np.ones(5), np.zeros(5)
    for _ in range(3):
        v += 0.5 * u
        u, v = v, u
    return float(np.sum(u))
