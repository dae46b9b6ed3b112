"""Control flow in compiled code: if/elif/else, for over range, while, break, continue,
return from inside loops and ifs, local variables and tuple unpacking. Each function is
compared with the same Python function run by the interpreter (`f.__wrapped__`)."""
from __future__ import annotations

import numpy as np
import pytest

import adjit
from fe_helpers import assert_same


def check(fn, *args):
    """fn (compiled) gives what the plain Python function gives, in the NumPy type of its
    result (Python int is i64, float f64, bool bool)."""
    got = fn(*args)
    want = fn.__wrapped__(*args)
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            assert_same(g, np.asarray(w)[()])
    else:
        assert_same(got, np.asarray(want)[()])


# ---- if / elif / else ---------------------------------------------------------------------

@adjit.func
def sign(x):
    if x > 0:
        s = 1
    elif x < 0:
        s = -1
    else:
        s = 0
    return s


@adjit.func
def classify(x):
    r = 0.0
    if x < -10.0:
        r = -2.0
    elif x < 0.0:
        r = -1.0
    elif x == 0.0:
        pass
    elif x < 10.0:
        r = 1.0
    else:
        r = 2.0
    return r


def test_if_elif_else():
    for x in (-5, 0, 7):
        check(sign, x)
    for x in (-20.0, -3.0, 0.0, 3.0, 30.0):
        check(classify, x)


@adjit.func
def if_without_else(x):
    y = x
    if x < 0:
        y = -x
    return y


@adjit.func
def nested_ifs(a, b):
    r = 0
    if a > 0:
        if b > 0:
            r = 1
        else:
            r = 2
    else:
        if b > 0:
            r = 3
    return r


def test_if_without_else_and_nested_ifs():
    for x in (-4.5, 4.5):
        check(if_without_else, x)
    for a in (-1, 1):
        for b in (-1, 1):
            check(nested_ifs, a, b)


@adjit.func
def branch_local(x):
    # `t` only exists inside the branch; `y` gets a float on one side and an int literal
    # on the other, so it is a float afterwards.
    y = 0
    if x > 0:
        t = x * 2.0
        y = t + 1.0
    return y


def test_variable_typed_by_both_branches():
    assert_same(branch_local(3.0), np.float64(7.0))
    assert_same(branch_local(-3.0), np.float64(0.0))


@adjit.func
def truthiness(x):
    if x:
        return 1
    return 0


@pytest.mark.parametrize("value", [0, 5, 0.0, -0.5, True, False])
def test_if_on_a_number_uses_its_truth(value):
    check(truthiness, value)


# ---- for over range ---------------------------------------------------------------------

@adjit.func
def range_sums(n, a, b, s):
    t1 = 0
    for i in range(n):
        t1 += i
    t2 = 0
    for i in range(a, b):
        t2 += i * i
    t3 = 0
    for i in range(a, b, s):
        t3 = t3 * 3 + i
    t4 = 0
    for i in range(b, a, -2):
        t4 = t4 * 3 + i
    return t1, t2, t3, t4


@pytest.mark.parametrize("n, a, b, s", [(10, 2, 9, 3), (0, 5, 5, 1), (3, -4, 6, 2),
                                        (5, 9, -3, -2), (4, 9, 2, -1), (1, 0, 7, -1),
                                        (2, 7, 0, 4)])
def test_for_over_range_with_start_stop_step(n, a, b, s):
    check(range_sums, n, a, b, s)


@adjit.func
def loop_var_after_loop(n):
    i = -1
    for i in range(n):
        pass
    return i


def test_loop_variable_keeps_its_last_value():
    check(loop_var_after_loop, 5)
    check(loop_var_after_loop, 0)


@adjit.func
def nested_loops(n, m):
    total = 0
    for i in range(n):
        for j in range(i, m):
            total += i * 10 + j
    return total


def test_nested_loops():
    check(nested_loops, 4, 6)


@adjit.func
def accumulate_float(n):
    s = 0            # an int that becomes a float inside the loop
    for i in range(n):
        s += 0.5 * i
    return s


def test_loop_carried_variable_promoted_by_the_body():
    check(accumulate_float, 6)


@adjit.func
def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def test_tuple_swap_in_a_loop():
    for n in (0, 1, 2, 10, 50):
        check(fib, n)


# ---- while, break, continue --------------------------------------------------------------

@adjit.func
def collatz_steps(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def test_while():
    for n in (1, 6, 27):
        check(collatz_steps, n)


@adjit.func
def first_multiple(n, k):
    found = -1
    for i in range(1, n):
        if i % k == 0:
            found = i
            break
    return found


@adjit.func
def skip_multiples(n, k):
    total = 0
    for i in range(n):
        if i % k == 0:
            continue
        total += i
    return total


@adjit.func
def while_break_continue(n):
    i = 0
    total = 0
    while True:
        i += 1
        if i > n:
            break
        if i % 3 == 0:
            continue
        total += i
    return total, i


def test_break_and_continue():
    for n, k in ((10, 4), (3, 5), (20, 7)):
        check(first_multiple, n, k)
        check(skip_multiples, n, k)
    for n in (0, 1, 10):
        check(while_break_continue, n)


@adjit.func
def break_inner_only(n):
    count = 0
    for i in range(n):
        for j in range(n):
            if j > i:
                break
            count += 1
    return count


@adjit.func
def continue_with_negative_step(n):
    total = 0
    for i in range(n, 0, -1):
        if i % 2:
            continue
        total = total * 10 + i
    return total


@adjit.func
def break_with_runtime_step(a, b, s):
    last = 0
    for i in range(a, b, s):
        last = i
        if i * i > 50:
            break
    return last


def test_break_leaves_the_innermost_loop_only():
    check(break_inner_only, 5)
    check(continue_with_negative_step, 9)
    for s in (3, -3):
        check(break_with_runtime_step, 0 if s > 0 else 20, 20 if s > 0 else -20, s)


# ---- return inside loops and ifs -----------------------------------------------------------

@adjit.func
def find(n, target):
    for i in range(n):
        if i * i == target:
            return i
    return -1


@adjit.func
def early_return(x):
    if x < 0:
        return -1.0
    y = x * 2.0
    if y > 10.0:
        return 10.0
    return y


@adjit.func
def return_from_while(x):
    k = 0
    while True:
        k += 1
        if k * x > 20:
            return k
        if k > 100:
            break
    return -k


@adjit.func
def return_from_nested(n):
    for i in range(n):
        for j in range(n):
            if i * j == 6:
                return i, j
    return -1, -1


@adjit.func
def return_tuple_of_mixed(x):
    if x > 0:
        return x, 1
    return 0.5 * x, -1


def test_return_inside_loops_and_ifs():
    for t in (16, 17):
        check(find, 10, t)
    for x in (-2.0, 3.0, 7.0):
        check(early_return, x)
    for x in (1, 7, 0):
        check(return_from_while, x)
    for n in (3, 5):
        check(return_from_nested, n)
    for x in (2.0, -2.0):
        check(return_tuple_of_mixed, x)


@adjit.func
def no_return_value(x):
    y = x + 1
    return


def test_function_without_a_value_returns_none():
    assert no_return_value(3) is None


# ---- tuple unpacking and locals ----------------------------------------------------------

@adjit.func
def unpack(a, b):
    x, y = a + b, a - b
    (p, q), r = (x, y), x * y
    x, y = y, x
    [m, n] = [p, q]
    return x, y, p, q, r, m, n


def test_tuple_unpacking():
    check(unpack, 7, 3)
    check(unpack, 1.5, -2.0)


@adjit.func
def chained_assignment(a):
    x = y = a * 2
    x += 1
    return x, y


def test_chained_assignment():
    check(chained_assignment, 4)


@adjit.func
def annotated_local(a):
    x: adjit.f32 = a
    y: float = 1
    return x * 2, y


def test_annotated_local_converts():
    x, y = annotated_local(1.5)
    assert_same(x, np.float32(3.0))
    assert_same(y, np.float64(1.0))


# ---- the same in a kernel ---------------------------------------------------------------

@adjit.kernel
def per_item_control_flow(x, out):
    i = adjit.index()
    v = x[i]
    acc = 0
    k = 0
    while k < 100:
        if v <= 1:
            break
        if v % 2 == 0:
            v = v // 2
        else:
            v = 3 * v + 1
        k += 1
    for j in range(x.shape[0] - 1, -1, -1):
        if j == i:
            continue
        acc += x[j] if x[j] > x[i] else 0
    out[i, 0] = k
    out[i, 1] = acc


def test_control_flow_in_a_kernel():
    x = np.array([1, 6, 27, 8, 3, 12], dtype=np.int64)
    out = np.zeros((6, 2), dtype=np.int64)
    per_item_control_flow(x, out, ndrange=len(x))
    want = np.zeros_like(out)
    for i, v0 in enumerate(x):
        v, k = int(v0), 0
        while k < 100 and v > 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            k += 1
        want[i] = k, sum(int(xj) for j, xj in enumerate(x) if j != i and xj > x[i])
    np.testing.assert_array_equal(out, want)


@adjit.jit
def _one_branch(a: float):
    if a > 0:
        r = 1.0
    return r


@adjit.jit
def _range_step(n: int, st: int):
    s = 0
    for i in range(0, n, st):
        s += 1
    return s


def test_variable_bound_on_one_branch_is_refused():
    with pytest.raises(adjit.CompilationError, match="'r' is assigned on only one branch"):
        _one_branch(1.0)


def test_runtime_zero_range_step_raises():
    with pytest.raises(ValueError, match="must not be zero"):
        _range_step(5, 0)
    assert _range_step(5, 2) == 3


@adjit.jit
def _scale_in_place(x, y):
    x += y
    x *= 2.0


def test_augmented_assignment_updates_the_callers_array():
    x, y = np.ones(4), np.arange(4.0)
    _scale_in_place(x, y)
    np.testing.assert_array_equal(x, 2 * (1 + np.arange(4.0)))
