"""`view[...] = expression` in @jit (issue 30): the expression is computed straight into the
view, with no temporary, where nothing runs between the two and it does not read the
view's memory other than element by element; otherwise NumPy's order holds (the value
first, then the stores)."""
import numpy as np

import adjit


def heat(u0, steps: int):
    u = u0.copy()
    un = u0.copy()
    for _ in range(steps):
        un[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:]
                                                + u[1:-1, :-2] - 4.0 * u[1:-1, 1:-1])
        u[...] = un
    return u


def shift_in_place(a):
    a[1:] = a[:-1] * 2.0 + 1.0


def two_targets(a, b):
    a[1:] = b[:-1] = a[:-1] + 1.0


def test_the_stencil_step_needs_no_temporary():
    """Its two states, nothing per step (was: the interior computed into a temporary each
    step, then copied into `un`)."""
    jitted = adjit.jit(heat)
    u0 = np.random.default_rng(0).standard_normal((64, 48))
    jitted(u0, 3)
    adjit.reset_peak_memory()
    before = adjit.memory_stats()["bytes_in_use"]
    got = jitted(u0, 3)
    assert adjit.memory_stats()["peak_bytes"] - before == 2 * u0.nbytes
    np.testing.assert_array_equal(got, heat(u0, 3))


def test_a_value_reading_the_target_is_computed_first():
    a = np.arange(7.0)
    want = a.copy()
    shift_in_place(want)
    adjit.jit(shift_in_place)(a)
    np.testing.assert_array_equal(a, want)


def test_two_targets_store_one_value():
    for n in (1, 2, 6):
        a, b = np.arange(float(n)), -np.arange(float(n))
        wa, wb = a.copy(), b.copy()
        two_targets(wa, wb)
        adjit.jit(two_targets)(a, b)
        np.testing.assert_array_equal(a, wa)
        np.testing.assert_array_equal(b, wb)


def test_a_target_whose_index_calls_a_function():
    @adjit.jit
    def f(a, k: int):
        a[abs(k):] = a[:-abs(k)] + 1.0
        return a

    a = np.arange(6.0)
    want = a.copy()
    want[2:] = want[:-2] + 1.0
    np.testing.assert_array_equal(f(a.copy(), -2), want)
