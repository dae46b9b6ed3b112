"""An array a call returns is an alias only of the arguments the callee may return
(passes/written.py, CallAliasClasses): a freshly allocated result does not make every
argument of the call written, so read-only arrays the code only reads are accepted, by plain
calls and by every derivative entry point; an array result that is an argument, or a view of
one, still counts, and writing it refuses a read-only argument. (Views and results that
are an argument on one branch come from IR only: tests/ir/written.mlir.)"""
from __future__ import annotations

import numpy as np
import pytest

import adjit
from adjit import (Const, Duplicated, Forward, Reverse, ReverseSplitWithPrimal, autodiff,
                   autodiff_thunk)


def read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@adjit.jit
def f(x, y):
    """The issue's function: writes y, returns a fresh array."""
    y[0] = 1.0
    return x * 2


@adjit.jit
def mark_and_square(x, y):
    y[0] = 1.0
    return x * x


@adjit.jit
def loss(x, y):
    """Writes y through a call whose (fresh) result it reads: sum(x^2)."""
    return adjit.sum(mark_and_square(x, y))


@adjit.jit
def mark_and_pass(x, y):
    y[0] = 1.0
    return x


@adjit.jit
def write_returned_argument(x, y):
    z = mark_and_pass(x, y)      # z is x
    z[1] = 5.0
    return adjit.sum(z)


@adjit.jit
def doubled(x):
    return x * 2.0


@adjit.jit
def write_fresh_result(x):
    t = doubled(x)               # freshly allocated
    t[0] = 7.0
    return adjit.sum(t)


def test_the_issue_a_fresh_result_does_not_make_a_read_only_argument_written():
    x, y = read_only(np.arange(4.0)), np.zeros(4)
    np.testing.assert_array_equal(f(x, y), np.arange(4.0) * 2)
    np.testing.assert_array_equal(y, [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(x, np.arange(4.0))
    with pytest.raises(ValueError, match="f\\(\\): argument 'y' is written"):
        f(np.arange(4.0), read_only(np.zeros(4)))


def test_through_a_called_function():
    x, y = read_only(np.arange(1.0, 5.0)), np.zeros(4)
    assert loss(x, y) == np.sum(np.arange(1.0, 5.0) ** 2) and y[0] == 1.0
    with pytest.raises(ValueError, match="loss\\(\\): argument 'y' is written"):
        loss(np.ones(4), read_only(np.zeros(4)))


def test_a_returned_argument_still_counts_as_written():
    x, y = np.ones(3), np.zeros(3)
    assert write_returned_argument(x, y) == 7.0
    np.testing.assert_array_equal(x, [1.0, 5.0, 1.0])
    for args in [(read_only(np.ones(3)), np.zeros(3)), (np.ones(3), read_only(np.zeros(3)))]:
        with pytest.raises(ValueError, match="is written by the compiled code"):
            write_returned_argument(*args)


def test_writing_a_fresh_result_writes_no_argument():
    x = read_only(np.arange(3.0))
    assert write_fresh_result(x) == 7.0 + 2.0 + 4.0
    np.testing.assert_array_equal(x, np.arange(3.0))


def _fd_grad(fn, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    g = np.empty_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e[k] = h
        g[k] = (fn(x + e) - fn(x - e)) / (2 * h)
    return g


def test_derivatives_accept_a_read_only_primal_the_function_only_reads():
    """Reverse, forward, split mode, vjp and the entries called directly (each entry's own
    written arguments, derivative.py _written): x is read-only, y is written."""
    x0 = np.array([0.5, -1.0, 2.0, 3.0])
    analytic = 2 * x0
    fd = _fd_grad(lambda v: np.sum(v * v), x0)
    np.testing.assert_allclose(analytic, fd, rtol=1e-7)

    x, y, dx = read_only(x0.copy()), np.zeros(4), np.zeros(4)
    autodiff(Reverse, loss, Duplicated(x, dx), Const(y))
    np.testing.assert_allclose(dx, analytic, rtol=1e-14)
    assert y[0] == 1.0

    t = autodiff(Forward, loss, Duplicated(x, read_only(np.ones(4))), Const(np.zeros(4)))
    assert t == pytest.approx(np.sum(analytic), rel=1e-14)

    fwd, rev = autodiff_thunk(ReverseSplitWithPrimal, loss, Duplicated, Const)
    dx = np.zeros(4)
    tape, primal, _ = fwd(Duplicated(x, dx), Const(np.zeros(4)))
    assert primal == pytest.approx(np.sum(x0 * x0))
    rev(Duplicated(x, dx), Const(np.zeros(4)), 1.0, tape)
    np.testing.assert_allclose(dx, analytic, rtol=1e-14)

    value, pullback = adjit.vjp(f, x, np.zeros(4))
    np.testing.assert_array_equal(value, 2 * x0)
    ct_x, _ = pullback(read_only(np.full(4, 0.5)))
    np.testing.assert_allclose(ct_x, np.ones(4), rtol=0)   # d(2x)/dx . 0.5

    (d,) = [d for key, d in loss._derivatives.items()
            if key[0] is Reverse and key[1] == ("dup", "const")]
    for entry in ("rev_all", "aug", "rev"):
        assert 0 not in d.written[entry], entry     # the primal x: read only
    assert 2 in d.written["aug"] and 2 in d.written["rev_all"]   # y
    dx = np.zeros(4)
    d.calls["rev_all"](x, dx, np.zeros(4), 1.0)
    np.testing.assert_allclose(dx, analytic, rtol=1e-14)
    np.testing.assert_array_equal(x, x0)


def test_derivatives_still_refuse_a_read_only_array_the_function_writes():
    x = np.array([0.5, -1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="argument 'y' is written by loss"):
        autodiff(Reverse, loss, Duplicated(x, np.zeros(4)), Const(read_only(np.zeros(4))))
    with pytest.raises(ValueError, match="argument 'y' is written by loss"):
        autodiff(Forward, loss, Duplicated(x, np.ones(4)), Const(read_only(np.zeros(4))))
    with pytest.raises(ValueError, match="argument 'x' is written by write_returned_argument"):
        autodiff(Reverse, write_returned_argument, Duplicated(read_only(x[:3].copy()),
                                                              np.zeros(3)), Const(np.zeros(3)))
