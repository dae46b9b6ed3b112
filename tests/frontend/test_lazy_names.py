"""Names bound to element-wise expressions stay lazy (compiler/lazy.py): `r = a*x + b - y;
sum(r*r)` is one fused loop, as the one-expression form. Every hazard of not computing `r`
when it is bound (a later write to an array it reads, through a store, an in-place op, a
kernel launch, a call, a loop or an if; aliases; writes into `r` itself) is checked here
against NumPy, and the fusion itself in the IR."""
from __future__ import annotations

import re

import numpy as np
import pytest

import adjit
from fe_helpers import assert_same


def _x(n=8, dtype=np.float64):
    return np.linspace(-2.0, 3.0, n).astype(dtype)


# ---- writes after the binding: r keeps the values it had when bound ---------------------

@adjit.jit
def store_after(x):
    r = x * 2
    x[0] = 100.0
    return r


def test_store_into_an_array_the_name_reads():
    x = _x()
    want_x = x.copy()
    want = want_x * 2
    want_x[0] = 100.0
    got = store_after(x)
    assert_same(got, want)
    assert_same(x, want_x)


@adjit.jit
def inplace_after(x):
    r = x * 2 + 1
    x += 5.0
    return r, x[0]


def test_in_place_update_of_an_array_the_name_reads():
    x = _x()
    want = x * 2 + 1
    r, x0 = inplace_after(x.copy())
    assert_same(r, want)
    assert_same(x0, np.float64(_x()[0] + 5.0))


@adjit.kernel
def zero_out(x):
    i = adjit.index()
    x[i] = 0.0


@adjit.jit
def launch_after(x):
    r = x * 3
    zero_out(x, ndrange=x.shape[0])
    return r + x


def test_kernel_launch_that_writes_an_array_the_name_reads():
    x = _x()
    assert_same(launch_after(x.copy()), _x() * 3)


@adjit.jit
def scale_in_place(x, k):
    for i in range(x.shape[0]):
        x[i] = x[i] * k
    return 0.0


@adjit.jit
def call_after(x):
    r = x - 1
    scale_in_place(x, 10.0)
    return r


@adjit.jit
def call_inside_expression(x):
    r = x - 1
    v = scale_in_place(x, 10.0) + adjit.sum(r)   # the call runs first, then sum(r)
    return v


def test_call_that_writes_an_array_the_name_reads():
    assert_same(call_after(_x()), _x() - 1)
    assert_same(call_inside_expression(_x()), np.float64(np.sum(_x() - 1)))


@adjit.func
def poke(x, i, v):
    x[i] = v
    return 0.0


@adjit.jit
def device_call_after(x):
    r = x * x
    t = poke(x, 1, 42.0)
    return r + t


def test_device_function_call_that_writes_an_array_the_name_reads():
    assert_same(device_call_after(_x()), _x() * _x())


@adjit.jit
def loop_after(x, n):
    r = x + 1
    for i in range(n):
        x[i] = -1.0
    return r


@adjit.jit
def while_after(x):
    r = x + 1
    i = 0
    while i < 3:
        x[i] = -1.0
        i += 1
    return r


@adjit.jit
def if_after(x, c):
    r = x + 1
    if c > 0:
        x[0] = -1.0
    return r


def test_loops_and_ifs_that_write_an_array_the_name_reads():
    assert_same(loop_after(_x(), 8), _x() + 1)
    assert_same(while_after(_x()), _x() + 1)
    assert_same(if_after(_x(), 1), _x() + 1)
    assert_same(if_after(_x(), 0), _x() + 1)


@adjit.jit
def used_in_loop_body(x, n):
    r = x * 2
    total = 0.0
    for k in range(n):
        total += adjit.sum(r)
        x[k] = 0.0      # the second pass of the body must still see the old x in r
    return total


def test_name_read_by_a_loop_that_writes_what_it_reads():
    assert_same(used_in_loop_body(_x(), 3), np.float64(3 * np.sum(_x() * 2)))


# ---- aliases and writes into the name itself ---------------------------------------------

@adjit.jit
def alias_write(x):
    r = x * 2
    s = r
    s[0] = 7.0
    return r


@adjit.jit
def augmented_lazy(x):
    r = x * 2
    s = r
    r += 1.0
    return s


@adjit.jit
def write_into_name(x):
    r = x * 2
    r[1] = -3.0
    return r


def _numpy_alias(x):
    r = x * 2
    r[0] = 7.0
    return r


def test_aliases_share_one_array():
    assert_same(alias_write(_x()), _numpy_alias(_x()))
    assert_same(augmented_lazy(_x()), _x() * 2 + 1)
    want = _x() * 2
    want[1] = -3.0
    assert_same(write_into_name(_x()), want)


@adjit.jit
def callee_writes_it(r):
    r[0] = 99.0
    return 0.0


@adjit.jit
def pass_lazy_name(x):
    r = x + 0.5
    callee_writes_it(r)
    return r


def test_passing_a_name_passes_its_array():
    want = _x() + 0.5
    want[0] = 99.0
    assert_same(pass_lazy_name(_x()), want)


@adjit.jit
def tuple_of_lazy(x, y):
    t = (x * 2, y)
    x[0] = 5.0
    return t[0]


def test_tuple_holding_an_expression():
    assert_same(tuple_of_lazy(_x(), _x()), _x() * 2)


@adjit.jit
def return_twice(x):
    r = x * 2
    return r, r


def test_returning_a_name_twice():
    a, b = return_twice(_x())
    assert_same(a, _x() * 2)
    assert_same(b, _x() * 2)


# ---- control flow carries lazy names -------------------------------------------------------

@adjit.jit
def bound_in_branches(x, c):
    if c > 0:
        r = x * 2
    else:
        r = x - 1
    x[0] = 0.0
    return r


@adjit.jit
def carried_through_loop(x, n):
    r = x * 2
    for k in range(n):
        r = r + x
    return r


@adjit.jit
def bound_in_loop_body(x, n):
    total = 0.0
    for k in range(n):
        r = x * k
        x[0] = x[0] + 1.0
        total += adjit.sum(r)
    return total


def _numpy_bound_in_loop_body(x, n):
    total = 0.0
    for k in range(n):
        r = x * k
        x[0] += 1.0
        total += np.sum(r)
    return np.float64(total)


def test_lazy_names_through_ifs_and_loops():
    assert_same(bound_in_branches(_x(), 1), _x() * 2)
    assert_same(bound_in_branches(_x(), -1), _x() - 1)
    assert_same(carried_through_loop(_x(), 3), _x() * 5)
    assert_same(bound_in_loop_body(_x(), 4), _numpy_bound_in_loop_body(_x(), 4))


@adjit.jit
def index_twice(x):
    r = x * 2 + 1
    return r[0] + r[-1]


@adjit.jit
def chain(a, b, x, y):
    u = a * x
    v = u + b
    r = v - y
    return adjit.sum(r * r), adjit.max(r)


def test_indexing_and_chains_against_numpy():
    assert_same(index_twice(_x()), np.float64((_x() * 2 + 1)[0] + (_x() * 2 + 1)[-1]))
    x, y = _x(1000, np.float32), _x(1000, np.float32)[::-1].copy()
    a, b = np.float32(1.5), np.float32(-0.25)
    r = a * x + b - y
    s, m = chain(a, b, x, y)
    assert_same(s, np.float32(np.sum(r.astype(np.float64) ** 2)), rtol=1e-6)
    assert_same(m, np.max(r))


# ---- the IR: one fused loop, no array for r --------------------------------------------------

@adjit.jit
def named_loss(a, b, x, y):
    r = a * x + b - y
    return adjit.sum(r * r)


@adjit.jit
def one_expression_loss(a, b, x, y):
    return adjit.sum((a * x + b - y) ** 2)


def _args(n=64):
    return np.float32(1.5), np.float32(-0.5), _x(n, np.float32), _x(n, np.float32)[::-1].copy()


def _count(text, pattern):
    return len(re.findall(pattern, text))


def test_named_form_is_one_loop_without_an_array_for_r():
    named = named_loss.lower(*_args()).adj()
    one = one_expression_loss.lower(*_args()).adj()
    assert _count(named, r"scf\.parallel") == 1 == _count(one, r"scf\.parallel")
    assert _count(named, r"memref\.alloc") == _count(one, r"memref\.alloc") == 1
    assert not re.search(r"memref\.alloc\(.*memref<\?xf32>", named)   # (the one is f64 partials)
    # r*r computes r once per element: two loads (x, y) per element, as the one-expression form
    assert _count(named, r"memref\.load %arg[23]") == _count(one, r"memref\.load %arg[23]")
    a, b, x, y = _args(1000)
    assert_same(named_loss(a, b, x, y), one_expression_loss(a, b, x, y))


@adjit.jit
def dead_after_write(x):
    r = x * 2
    s = adjit.sum(r)
    x[0] = 1.0      # r is not read again: it is never stored
    return s


def test_a_dead_name_is_not_stored_at_a_write():
    x = _x(dtype=np.float32)    # (f32 data: its sum's partials are f64, an array for r f32)
    text = dead_after_write.lower(x).adj()
    assert not re.search(r"memref\.alloc\(.*memref<\?xf32>", text)
    assert_same(dead_after_write(x.copy()), np.float32(np.sum(x * 2)))


@adjit.jit
def cheap_read_twice(x):
    r = x * 2 + 1
    return adjit.sum(r) + adjit.sum(r * r)


@adjit.jit
def costly_read_twice(x):
    r = adjit.exp(x) * 2
    return adjit.sum(r) + adjit.sum(r * r)


@adjit.jit
def costly_read_once(x):
    r = adjit.exp(x) * 2
    return adjit.sum(r * r)


def test_recompute_or_store_rule():
    x = _x(100, np.float32)   # (sums' partials are f64, an array for r f32)
    # cheap arithmetic read by two loops: recomputed in each, no array
    text = cheap_read_twice.lower(x).adj()
    assert not re.search(r"memref\.alloc\(.*memref<\?xf32>", text)
    assert_same(cheap_read_twice(x), np.float32(np.sum(x * 2 + 1) + np.sum((x * 2 + 1) ** 2)),
                rtol=1e-6)
    # a transcendental read by two loops: stored once when bound, exp computed once per element
    text = costly_read_twice.lower(x).adj()
    assert _count(text, r"memref\.alloc\(.*memref<\?xf32>") == 1
    assert _count(text, r"math\.exp") == 1
    assert_same(costly_read_twice(x), np.float32(np.sum(np.exp(x) * 2) + np.sum((np.exp(x) * 2) ** 2)),
                rtol=1e-6)
    # read by one loop (twice in it): fused, and exp once per element of the 4 lanes + tail
    text = costly_read_once.lower(x).adj()
    assert not re.search(r"memref\.alloc\(.*memref<\?xf32>", text)
    assert _count(text, r"math\.exp") == 5
    assert_same(costly_read_once(x), np.float32(np.sum((np.exp(x) * 2) ** 2)), rtol=1e-6)


@adjit.jit
def shape_mismatch(x, y):
    r = x + y
    return 0.0


def test_a_dead_name_still_checks_shapes():
    with pytest.raises(ValueError, match="different shapes"):
        shape_mismatch(_x(4), _x(5))


@adjit.jit
def launch_on_name(x):
    r = x * 3
    zero_out(r, ndrange=r.shape[0])
    return r


@adjit.jit
def atomic_on_name(x):
    r = x * 3
    adjit.atomic_add(r, 0, 1.0)
    return r


def test_kernels_and_atomics_write_the_names_array():
    assert_same(launch_on_name(_x()), np.zeros(8))
    want = _x() * 3
    want[0] += 1.0
    assert_same(atomic_on_name(_x()), want)


# ---- unnamed expressions made before a call in the same statement ---------------------------

@adjit.jit
def expression_then_call(x):
    y = x * 2 + scale_in_place(x, 10.0)      # x * 2 is computed before the call writes x
    return y


@adjit.jit
def arange_then_call(x):
    return adjit.sum(x * 1 + scale_in_place(x, 3.0))


def test_an_unnamed_expression_is_computed_before_a_later_call():
    assert_same(expression_then_call(_x()), _x() * 2)
    assert_same(arange_then_call(_x()), np.float64(np.sum(_x())))
