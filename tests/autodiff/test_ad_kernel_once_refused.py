"""Kernels that reverse mode once refused (issue 8.9, 8.10): an integer atomic counter, which
is inactive and runs once per item; a triangular loop `for k2 in range(k, n)` inside
`for k in range(...)`, whose per-item tape size is a sum over the outer loop."""
import numpy as np
import pytest

import adjit
from adjit import Const, Duplicated, Forward, Reverse, ReverseSplitWithPrimal
from adjit.core.types import ArrayType

F64_1D = ArrayType(adjit.f64, 1)


# ---- 8.9: an integer atomic_add in a differentiated kernel --------------------------------

@adjit.kernel
def counted(x, y, count):
    i = adjit.index()
    y[i] = adjit.sin(x[i]) * x[i]
    adjit.atomic_add(count, 0, 1)


def test_an_integer_counter_runs_once_per_item_in_reverse():
    n = 37
    x = np.linspace(-1, 1, n)
    dx, seed = np.zeros(n), np.linspace(0.5, 1.5, n)
    count = np.zeros(1, np.int32)
    adjit.autodiff(Reverse, counted, Duplicated(x, dx), Duplicated(np.zeros(n), seed.copy()),
                   Const(count), ndrange=n)
    assert count[0] == n          # the augmented kernel counts; the reverse kernel does not
    np.testing.assert_allclose(dx, seed * (np.cos(x) * x + np.sin(x)), rtol=1e-12)
    h = 1e-6
    fd = (np.sin(x + h) * (x + h) - np.sin(x - h) * (x - h)) / (2 * h) * seed
    np.testing.assert_allclose(dx, fd, rtol=1e-7)


def test_an_integer_counter_runs_once_per_item_in_forward_and_with_the_primal():
    n = 20
    x, count = np.linspace(0, 2, n), np.zeros(1, np.int32)
    y, ty = np.zeros(n), np.zeros(n)
    adjit.autodiff(Forward, counted, Duplicated(x, np.ones(n)), Duplicated(y, ty),
                   Const(count), ndrange=n)
    assert count[0] == n
    np.testing.assert_allclose(y, np.sin(x) * x, rtol=1e-12)
    np.testing.assert_allclose(ty, np.cos(x) * x + np.sin(x), rtol=1e-12)
    adjit.autodiff(adjit.ReverseWithPrimal, counted, Duplicated(x, np.zeros(n)),
                   Duplicated(y, np.ones(n)), Const(count), ndrange=n)
    assert count[0] == 2 * n


# ---- 8.10: triangular loops ---------------------------------------------------------------

@adjit.kernel
def triangular(a, x, out, n: int):
    # Each step feeds the last: the reverse pass needs every acc from the tape.
    i = adjit.index()
    acc = 0.0
    for k in range(4):
        for k2 in range(k, n):
            acc = adjit.sin(acc + a[i * n + k2] * x[k])
    out[i] = acc


def triangular_np(a, x, n, m):
    out = np.zeros(m)
    for i in range(m):
        for k in range(4):
            for k2 in range(k, n):
                out[i] = np.sin(out[i] + a[i * n + k2] * x[k])
    return out


def _fd(f, v, h=1e-6):
    return np.array([(f(v + e) - f(v - e)) / (2 * h) for e in np.eye(v.size) * h])


@pytest.mark.parametrize("n", [6, 3, 2])
def test_a_triangular_loop_differentiates(n):
    m = 5
    rng = np.random.default_rng(n)
    a, x, seed = rng.uniform(-1, 1, m * n), rng.uniform(-1, 1, 4), rng.uniform(-1, 1, m)
    da, dx, out = np.zeros_like(a), np.zeros_like(x), np.zeros(m)
    adjit.autodiff(Reverse, triangular, Duplicated(a, da), Duplicated(x, dx),
                   Duplicated(out, seed.copy()), n, ndrange=m)
    np.testing.assert_allclose(out, triangular_np(a, x, n, m), rtol=1e-12)
    np.testing.assert_allclose(da, _fd(lambda v: seed @ triangular_np(v, x, n, m), a),
                               rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(dx, _fd(lambda v: seed @ triangular_np(a, v, n, m), x),
                               rtol=1e-6, atol=1e-9)


def launch_tape(kernel, *args, m: int) -> list:
    """The tape that the augmented half of `kernel`'s launch derivative over `m` items
    records for `args` (arrays Duplicated, scalars Const): its launch rule allocates each
    per-item tape from the launch's arguments."""
    kinds = [Duplicated if isinstance(a, np.ndarray) else Const for a in args]
    forward, _ = adjit.autodiff_thunk(ReverseSplitWithPrimal, kernel, *kinds, ndrange=m)
    anns = [k(a, np.zeros_like(a)) if k is Duplicated else k(a) for k, a in zip(kinds, args)]
    return forward(*anns)[0].values


def test_the_tape_of_a_triangular_loop_is_a_sum_over_the_outer_loop():
    # sum over k < 4 of (n - k) slots an item, none where the inner range is empty: so many
    # values a slot, as for n = 2 (3 slots), for every n
    m = 5
    sizes = {n: [t.size for t in launch_tape(triangular, np.ones(m * n), np.ones(4),
                                             np.zeros(m), n, m=m)]
             for n in (0, 2, 3, 6, 100)}
    (per_slot,) = sizes[2]
    per_slot //= m * 3
    for n, size in sizes.items():
        assert size == [per_slot * m * sum(max(0, n - k) for k in range(4))], n


@adjit.kernel
def pyramid(a, out, m: int, n: int):
    # Three levels, each reading the enclosing one's variable; steps of 2 in the middle.
    i = adjit.index()
    acc = 0.5
    for k in range(m):
        for k2 in range(k, n, 2):
            for k3 in range(k2 - k):
                acc = acc * adjit.cos(a[i] + 0.1 * (k + k2 + k3))
    out[i] = acc


def pyramid_np(a, m, n):
    acc = np.full_like(a, 0.5)
    for k in range(m):
        for k2 in range(k, n, 2):
            for k3 in range(k2 - k):
                acc = acc * np.cos(a + 0.1 * (k + k2 + k3))
    return acc


def test_nested_triangular_loops_with_a_step():
    rng = np.random.default_rng(7)
    items, m, n = 9, 3, 8
    a, seed = rng.uniform(-1, 1, items), rng.uniform(-1, 1, items)
    da, out = np.zeros(items), np.zeros(items)
    adjit.autodiff(Reverse, pyramid, Duplicated(a, da), Duplicated(out, seed.copy()), m, n,
                   ndrange=items)
    np.testing.assert_allclose(out, pyramid_np(a, m, n), rtol=1e-12)
    h = 1e-6
    fd = (pyramid_np(a + h, m, n) - pyramid_np(a - h, m, n)) / (2 * h) * seed
    np.testing.assert_allclose(da, fd, rtol=1e-6, atol=1e-10)


@adjit.kernel
def item_bound(a, out):
    i = adjit.index()
    acc = 0.0
    for k in range(4):
        for k2 in range(k, i):       # depends on the item: a packed per-item tape
            acc = adjit.sin(acc + a[k2])
    out[i] = acc


def item_bound_np(a):
    out = np.zeros(len(a))
    for i in range(len(a)):
        acc = 0.0
        for k in range(4):
            for k2 in range(k, i):
                acc = np.sin(acc + a[k2])
        out[i] = acc
    return out


def test_a_loop_bound_from_the_item_index():
    rng = np.random.default_rng(9)
    a, seed = rng.uniform(-1, 1, 8), rng.uniform(-1, 1, 8)
    da, out = np.zeros(8), np.zeros(8)
    adjit.autodiff(Reverse, item_bound, Duplicated(a, da), Duplicated(out, seed.copy()),
                   ndrange=8)
    np.testing.assert_allclose(out, item_bound_np(a), rtol=1e-13, atol=1e-15)
    h = 1e-6
    fd = np.array([(np.dot(item_bound_np(a + h * e), seed) - np.dot(item_bound_np(a - h * e),
                                                                     seed)) / (2 * h)
                   for e in np.eye(8)])
    np.testing.assert_allclose(da, fd, rtol=1e-6, atol=1e-9)


@adjit.kernel
def triangular_const(a, out):
    i = adjit.index()
    acc = 0.0
    for k in range(4):
        for k2 in range(k, 6):
            acc = adjit.sin(acc + a[i * 6 + k2])
    out[i] = acc


def test_a_triangular_loop_with_constant_bounds_has_a_constant_tape():
    from adjit.compiler.derivative import Derivative
    z = np.zeros(1)
    d = Derivative(triangular_const, Reverse, [Duplicated(z, z), Duplicated(z, z)],
                   [F64_1D] * 2, (1,), None)
    assert "per_item = 18 : i64" in d.adj_text        # 6 + 5 + 4 + 3
    m = 3
    a, seed = np.random.default_rng(9).uniform(-1, 1, m * 6), np.ones(m)
    da = np.zeros_like(a)
    adjit.autodiff(Reverse, triangular_const, Duplicated(a, da), Duplicated(np.zeros(m), seed),
                   ndrange=m)
    want = _fd(lambda v: triangular_np(v, np.ones(4), 6, m).sum(), a)
    np.testing.assert_allclose(da, want, rtol=1e-6, atol=1e-9)
