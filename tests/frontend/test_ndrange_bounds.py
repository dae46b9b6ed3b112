"""A launch whose ndrange is larger than an array that every work item indexes with its own
id is refused before any item runs (IndexError naming the kernel, the argument and the line),
without ADJIT_DEBUG: such a launch would write out of bounds. Indices under an `if` are left
to the kernel, which may guard them."""
from __future__ import annotations

import numpy as np
import pytest

import adjit


@adjit.kernel
def axpy(a, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


@adjit.kernel
def guarded_copy(x, y):
    i = adjit.index()
    if i < x.shape[0]:
        y[i] = x[i]


@adjit.kernel
def copy2d(u, v):
    i, j = adjit.index_nd()
    v[i, j] = u[i, j]


@adjit.jit
def axpy_n(x, y, n: int):
    axpy(1.0, x, y, ndrange=n)


LINE = axpy.__wrapped__.__code__.co_firstlineno + 3     # y[i] = ...


def test_a_launch_larger_than_an_array_is_refused_before_it_runs():
    x, y = np.ones(10), np.ones(10)
    with pytest.raises(IndexError, match=rf"kernel axpy: ndrange\[0\] is larger than "
                                         rf"dimension 0 of argument '[xy]'.*\(line {LINE}\)"):
        axpy(2.0, x, y, ndrange=11)
    np.testing.assert_array_equal(y, np.ones(10))     # nothing ran
    axpy(2.0, x, y, ndrange=10)
    axpy(2.0, x, y, ndrange=3)                         # smaller is fine
    np.testing.assert_array_equal(y, [5.0] * 3 + [3.0] * 7)


def test_guarded_indices_are_left_to_the_kernel():
    y = np.zeros(12)
    guarded_copy(np.ones(10), y, ndrange=12)
    np.testing.assert_array_equal(y, [1.0] * 10 + [0.0] * 2)


def test_each_dimension_is_checked():
    u = np.ones((4, 5))
    with pytest.raises(IndexError, match=r"ndrange\[1\] is larger than dimension 1 of "
                                         r"argument 'v'"):
        copy2d(u, np.zeros((4, 4)), ndrange=u.shape)
    with pytest.raises(IndexError, match=r"ndrange\[0\]"):
        copy2d(u, np.zeros((3, 5)), ndrange=u.shape)


def test_a_launch_in_compiled_code_names_its_line_too():
    x, y = np.ones(4), np.ones(4)
    with pytest.raises(IndexError, match=r"argument '[xy]'.*test_ndrange_bounds.py:\d+\)"):
        axpy_n(x, y, 5)
    np.testing.assert_array_equal(y, np.ones(4))
    axpy_n(x, y, 4)
    np.testing.assert_array_equal(y, np.full(4, 2.0))


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_derivatives_of_such_a_launch_are_refused_too(device):
    """The augmented kernel runs over the same items (on the GPU, the check comes before
    any launch, so no GPU is needed to see it)."""
    if device == "cuda":
        pytest.importorskip("mlir", reason="compiling GPU kernels needs MLIR")
    x, dx, y, dy = np.ones(10), np.zeros(10), np.ones(10), np.ones(10)
    with pytest.raises(IndexError, match=r"kernel axpy: ndrange\[0\] is larger"):
        adjit.autodiff(adjit.Reverse, axpy, adjit.Active(2.0), adjit.Duplicated(x, dx),
                       adjit.Duplicated(y, dy), ndrange=11, device=device)
    np.testing.assert_array_equal(dx, np.zeros(10))
    fwd, _ = adjit.autodiff_thunk(adjit.ReverseSplitWithPrimal, axpy, adjit.Active,
                                  adjit.Duplicated, adjit.Duplicated, ndrange=11)
    with pytest.raises(IndexError, match=r"ndrange\[0\] is larger"):
        fwd(adjit.Active(2.0), adjit.Duplicated(x, dx), adjit.Duplicated(y, dy))


@adjit.jit
def axpy_loss(a, x, y, n: int):
    axpy(a, x, y, ndrange=n)
    return adjit.sum(y * y)


def test_derivatives_of_a_compiled_function_check_their_launches_too():
    """The autodiff pass carries a kernel's facts onto its derivative kernels (positions moved
    past the shadows), so the launches inside a differentiated @jit function are checked: a
    too-large ndrange raises instead of writing past the arrays."""
    x, y = np.ones(10), np.ones(10)
    dx, dy = np.zeros(10), np.zeros(10)
    with pytest.raises(IndexError, match=r"kernel axpy: ndrange\[0\] is larger than "
                                         r"dimension 0 of argument '[xy]'"):
        adjit.autodiff(adjit.Reverse, axpy_loss, adjit.Active(2.0), adjit.Duplicated(x, dx),
                       adjit.Duplicated(y, dy), 11)
    np.testing.assert_array_equal(dx, np.zeros(10))
    # the same call in bounds: d/dx sum((a x + y)^2) = 2 a (a x + y)
    y, dy = np.ones(10), np.zeros(10)
    da = adjit.autodiff(adjit.Reverse, axpy_loss, adjit.Active(2.0),
                        adjit.Duplicated(x, dx), adjit.Duplicated(y, dy), 10)[0]
    np.testing.assert_allclose(dx, 2 * 2.0 * (2.0 * 1 + 1) * np.ones(10))
    np.testing.assert_allclose(da, np.sum(2 * (2.0 * 1 + 1) * np.ones(10)))
