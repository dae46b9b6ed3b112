"""Variables bound on one branch of an `if` whose other branch leaves by continue, break or
return (issue 8, item 11): Python defines them on every path that can use them, so adjit
compiles them, in @jit functions, device functions and kernels. Each compiled function is
compared with the plain Python function (`f.__wrapped__`)."""
from __future__ import annotations

import numpy as np
import pytest

import adjit
from fe_helpers import assert_same


@adjit.jit
def continue_then_bind(x):
    """The issue's shape: `if c: continue` then `t4 = ...` on one branch, `t4 = ...` on
    the other."""
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] > 0.0:
            if x[i] > 2.0:
                continue
            t4 = x[i] * x[i]
        else:
            t4 = 3.0 * x[i]
        s += t4
    return s


@adjit.jit
def continue_or_bind(x):
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] > 2.0:
            continue
        else:
            t = x[i] * x[i]
        s += t
    return s


@adjit.jit
def break_or_bind(x):
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] < -1.5:
            break
        else:
            t = x[i] + 1.0
        s += t * t
    return s


@adjit.func
def return_or_bind(a: float):
    if a < 0.0:
        return -1.0
    else:
        y = a * 2.0
    return y + 1.0


@adjit.jit
def nested_jumps(n: int):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            if i % 2 == 0:
                continue
            elif i > 7:
                break
            k = i * 10
        elif i % 3 == 1:
            k = -i
        else:
            continue
        total += k
    return total


X = np.array([1.0, -2.0, 3.0, 0.5, 2.5, -0.25, 1.75, -3.0, 0.125])


@pytest.mark.parametrize("f", [continue_then_bind, continue_or_bind, break_or_bind])
def test_bound_where_the_other_branch_jumps(f):
    for x in (X, X[::-1].copy(), np.array([5.0]), np.zeros(0)):
        assert_same(f(x), np.float64(f.__wrapped__(x)))


def test_issue_example_value():
    # 1 - 6 (x=-2) + 0.25 (x=0.5): x = 3 continues
    assert continue_then_bind(np.array([1.0, -2.0, 3.0, 0.5])) == -4.75


def test_return_on_the_other_branch():
    for a in (-2.0, 0.0, 1.5):
        assert_same(return_or_bind(a), np.float64(return_or_bind.__wrapped__(a)))


def test_nested_continue_break():
    for n in (0, 1, 4, 9, 20):
        assert_same(nested_jumps(n), np.int64(nested_jumps.__wrapped__(n)))


@adjit.jit
def array_bound_after_continue(x, y):
    s = 0.0
    for i in range(4):
        if i == 1:
            continue
        else:
            a = y                                    # an argument: defined before the if
            b = x * 2.0                              # made in the branch
        s += adjit.sum(a) + adjit.sum(b)
    return s


def test_arrays_bound_after_a_jump():
    x, y = np.array([1.0, 2.0]), np.array([10.0, 20.0])
    assert array_bound_after_continue(x, y) == 3 * (30.0 + 6.0)


@adjit.kernel
def kernel_continue_then_bind(x, out):
    i = adjit.index()
    s = 0.0
    for j in range(x.shape[0]):
        if x[j] > 0.0:
            if x[j] > 2.0:
                continue
            t4 = x[j] * x[j] * x[i]
        else:
            t4 = 3.0 * x[j]
        s += t4
    out[i] = s


def kernel_reference(x):
    keep = (x > 0) & (x <= 2)
    return np.sum(np.where(keep, x * x, 0.0)) * x + np.sum(np.where(x <= 0, 3 * x, 0.0))


def test_in_a_kernel():
    out = np.zeros_like(X)
    kernel_continue_then_bind(X, out, ndrange=len(X))
    np.testing.assert_allclose(out, kernel_reference(X), rtol=1e-14)


@adjit.jit
def _bound_only_on_the_jumping_branch(x):
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] > 0.0:
            r = 1.0
            continue
        s += r   # r is unbound here whenever this runs
    return s


def test_bound_only_on_the_jumping_branch_is_still_refused():
    with pytest.raises(adjit.CompilationError, match="'r' is assigned on only one branch"):
        _bound_only_on_the_jumping_branch(X)


@adjit.jit
def float32_stays_float32(x):
    s = x[0] * 0.0
    for i in range(x.shape[0]):
        if x[i] < 0.0:
            continue
        else:
            w = 0.5               # a constant: weakly typed, as anywhere else
            v = x[i] * 2.0
        s += w * v
    return s


def test_constant_bound_after_a_jump_stays_weakly_typed():
    x = np.array([1.5, -1.0, 2.0], dtype=np.float32)
    assert_same(float32_stays_float32(x), np.float32(3.5))


@adjit.jit
def while_break_continue_bind(n: int):
    s = 0
    k = 0
    while k < n:
        k += 1
        if k % 5 == 4:
            break
        elif k % 2 == 0:
            continue
        else:
            t = k * 3
        s += t
    return s


@adjit.func
def return_in_loop_bind(n: int):
    s = 0
    for i in range(n):
        if i == 7:
            return -s
        else:
            t = i * i
        s += t
    return s


@adjit.jit
def nested_loops_bind(x):
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(x.shape[0]):
            if j > i:
                break
            if x[j] < 0:
                continue
            else:
                u = x[j] * x[i]
            s += u
        if x[i] > 1.0:
            continue
        v = x[i]
        s -= v
    return s


def test_while_return_and_nested_loops():
    for n in range(12):
        want = while_break_continue_bind.__wrapped__(n)
        assert_same(while_break_continue_bind(n), np.int64(want))
        assert_same(return_in_loop_bind(n), np.int64(return_in_loop_bind.__wrapped__(n)))
    for x in (X, -X, X[:3].copy()):
        assert_same(nested_loops_bind(x), np.float64(nested_loops_bind.__wrapped__(x)))
