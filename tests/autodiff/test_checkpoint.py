"""Checkpointed loops (issue 14): `adjit.checkpointed(range(n), snapshots=k | every=m |
max_bytes=b)` in @jit code. The gradient equals the store-all gradient to rounding for every
schedule (G2b: reaction-diffusion, 256^2, 50 steps, snapshots 1, 2, 5, 50), the steps run
again are Revolve's optimum (a dynamic program over the same recursion, written here), the
memory kept is at most k + a few states, central differences agree, the state is found by
the pass (carried scalars, swapped arrays, free parameters), and bad loops are refused."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

import adjit


@adjit.kernel
def reaction_diffusion_step(u, v):
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    if 0 < i < n - 1 and 0 < j < m - 1:
        c = u[i, j]
        lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * c
        v[i, j] = c + 0.1 * lap + 0.05 * c * (1.0 - c)
    else:
        v[i, j] = u[i, j]


@adjit.jit
def store_all(u0, steps: int):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(steps):
        reaction_diffusion_step(u, v, ndrange=u.shape)
        u, v = v, u
    return adjit.sum(u * u)


def with_schedule(snapshots=None, every=None, max_bytes=None, spill=False):
    """The G2b loss with its loop checkpointed so (compiled for each: a schedule is a
    constant of the code, here a closure's; None is a schedule not given). The GPU tests
    (tests/gpu/test_checkpoint_gpu.py) use these too."""
    @adjit.jit
    def loss(u0, steps: int):
        u = u0.copy()
        v = adjit.empty_like(u)
        for _ in adjit.checkpointed(range(steps), snapshots=snapshots, every=every,
                                    max_bytes=max_bytes, spill=spill):
            reaction_diffusion_step(u, v, ndrange=u.shape)
            u, v = v, u
        return adjit.sum(u * u)
    return loss


revolve_2 = with_schedule(snapshots=2)
revolve_5 = with_schedule(snapshots=5)
periodic_7 = with_schedule(every=7)
# 256^2 float32 x 2 arrays = 512 KiB a state: 3 states fit in 1.6 MB
in_a_budget = with_schedule(max_bytes=1_600_000)
REVOLVE = {1: with_schedule(snapshots=1), 2: revolve_2, 5: revolve_5,
           50: with_schedule(snapshots=50)}


def rerun(n: int, k: int) -> int:
    """The steps a reverse pass with k snapshots runs again: Revolve's optimum, less the
    forward sweep's n - 1 steps, which the augmented pass runs as the loop itself, and the
    last step once more, which puts the final state back (a split-mode tape may be reversed
    again, and the caller may hold a state array)."""
    return optimum(n, k - 1) - max(n - 1, 0) + (n > 0)


@lru_cache(None)
def optimum(n: int, free: int) -> int:
    """The fewest steps run again to reverse n steps from a kept initial state with `free`
    more states (Revolve with free + 1 snapshots): keep the state after j steps, reverse the
    rest with one state fewer, then the first j from the start."""
    if n <= 1:
        return 0
    if free == 0:
        return n * (n - 1) // 2
    return min(j + optimum(n - j, free - 1) + optimum(j, free) for j in range(1, n))


def gradient(f, u0, *args):
    g = np.zeros_like(u0)
    adjit.autodiff(adjit.Reverse, f, adjit.Duplicated(u0.copy(), g), *args)
    return g


@pytest.fixture(scope="module")
def g2b():
    u0 = np.random.default_rng(0).random((256, 256), dtype=np.float32)
    return u0, gradient(store_all, u0, 50)


@pytest.mark.parametrize("k", [1, 2, 5, 50])
def test_g2b_gradient_with_k_snapshots_equals_store_all(g2b, k):
    u0, expected = g2b
    before = adjit.memory_stats()["checkpoint_steps_recomputed"]
    got = gradient(REVOLVE[k], u0, 50)
    recomputed = adjit.memory_stats()["checkpoint_steps_recomputed"] - before
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert recomputed == rerun(50, k)


def test_periodic_and_byte_budget_schedules(g2b):
    u0, expected = g2b
    np.testing.assert_allclose(gradient(periodic_7, u0, 50), expected, rtol=1e-5, atol=1e-6)
    before = adjit.memory_stats()["checkpoint_steps_recomputed"]
    np.testing.assert_allclose(gradient(in_a_budget, u0, 50), expected, rtol=1e-5, atol=1e-6)
    # 1.6 MB holds 3 states of 512 KiB: Revolve with 3 snapshots
    assert adjit.memory_stats()["checkpoint_steps_recomputed"] - before == rerun(50, 3)


def _peak_extra(f, u0, steps):
    g = np.zeros_like(u0)
    x = u0.copy()
    adjit.release_cached_memory()
    adjit.reset_peak_memory()
    base = adjit.memory_stats()["bytes_in_use"]
    adjit.autodiff(adjit.Reverse, f, adjit.Duplicated(x, g), steps)
    return adjit.memory_stats()["peak_bytes"] - base


def test_memory_is_k_states_and_a_few_more(g2b):
    u0, _ = g2b
    state = 2 * u0.nbytes          # the loop carries two arrays (u, v = v, u)
    for k, f in ((2, revolve_2), (5, revolve_5)):
        extra = _peak_extra(f, u0, 50)
        # k states (the tape's initial one, k - 1 working slots), plus the arrays and
        # their shadows themselves and the final sum's work: a fixed number of states
        assert extra <= (k + 4) * state, (k, extra / state)
    store = _peak_extra(store_all, u0, 50)
    assert _peak_extra(revolve_2, u0, 50) < store / 3


# ---- small problems: finite differences, odd step counts, the state found by the pass ---------
@adjit.kernel
def damped(u, v, c: float):
    i = adjit.index()
    n = u.shape[0]
    left = u[(i + n - 1) % n]
    right = u[(i + 1) % n]
    v[i] = u[i] + c * (left - 2.0 * u[i] + right) - 0.1 * adjit.sin(u[i])


@adjit.jit
def energy(u0, c: float, steps: int):
    """A free Active scalar (c) used by every step, and a carried float (e) summed over
    the steps: the state is (u, v, e), found by the pass."""
    u = u0.copy()
    v = adjit.empty_like(u)
    e = 0.0
    for t in adjit.checkpointed(range(steps), snapshots=3):
        damped(u, v, c, ndrange=u.shape)
        e = e + adjit.sum(v * v) * (1.0 + 0.01 * t)
        u, v = v, u
    return e + adjit.sum(u)


@adjit.jit
def energy_all(u0, c: float, steps: int):
    u = u0.copy()
    v = adjit.empty_like(u)
    e = 0.0
    for t in range(steps):
        damped(u, v, c, ndrange=u.shape)
        e = e + adjit.sum(v * v) * (1.0 + 0.01 * t)
        u, v = v, u
    return e + adjit.sum(u)


@pytest.mark.parametrize("steps", [0, 1, 2, 7, 13])
def test_scalars_and_free_parameters_against_store_all_and_finite_differences(steps):
    u0 = np.random.default_rng(1).uniform(-1, 1, 17)
    c = 0.2
    g, g_all = np.zeros_like(u0), np.zeros_like(u0)
    dc = adjit.autodiff(adjit.Reverse, energy, adjit.Duplicated(u0.copy(), g),
                        adjit.Active(c), steps)[1]
    dc_all = adjit.autodiff(adjit.Reverse, energy_all, adjit.Duplicated(u0.copy(), g_all),
                            adjit.Active(c), steps)[1]
    np.testing.assert_allclose(g, g_all, rtol=1e-13, atol=1e-14)
    assert dc == pytest.approx(dc_all, rel=1e-13, abs=1e-14)
    h = 1e-6
    for k in (0, 8, 16):
        e = np.zeros_like(u0)
        e[k] = h
        fd = (energy(u0 + e, c, steps) - energy(u0 - e, c, steps)) / (2 * h)
        assert g[k] == pytest.approx(fd, rel=1e-6, abs=1e-8)
    fd = (energy(u0, c + h, steps) - energy(u0, c - h, steps)) / (2 * h)
    assert dc == pytest.approx(fd, rel=1e-6, abs=1e-8)


def test_a_tape_serves_several_reverse_calls():
    """The reverse pass only reads the tape (its initial state): split mode's reverse half
    can run twice."""
    u0 = np.random.default_rng(2).uniform(-1, 1, 17)
    fwd, rev = adjit.autodiff_thunk(adjit.ReverseSplitWithPrimal, energy, adjit.Duplicated,
                                    adjit.Active, adjit.Const)
    x, g1 = u0.copy(), np.zeros_like(u0)
    tape, value, _ = fwd(adjit.Duplicated(x, g1), adjit.Active(0.2), adjit.Const(9))
    assert value == pytest.approx(energy(u0, 0.2, 9), rel=1e-14)
    assert tape.nbytes >= u0.nbytes           # the initial state is on the tape
    d1 = rev(adjit.Duplicated(x, g1), adjit.Active(0.2), adjit.Const(9), 1.0, tape)
    g2 = np.zeros_like(u0)
    d2 = rev(adjit.Duplicated(x, g2), adjit.Active(0.2), adjit.Const(9), 1.0, tape)
    np.testing.assert_array_equal(g1, g2)
    assert d1[1] == d2[1]


@adjit.jit
def nested(u0, c: float, outer: int, inner: int):
    """A checkpointed loop in a checkpointed loop: the outer step's derivative checkpoints
    the inner loop in turn."""
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in adjit.checkpointed(range(outer), snapshots=2):
        for _ in adjit.checkpointed(range(inner), snapshots=2):
            damped(u, v, c, ndrange=u.shape)
            u, v = v, u
    return adjit.sum(u * u)


@adjit.jit
def nested_all(u0, c: float, outer: int, inner: int):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(outer):
        for _ in range(inner):
            damped(u, v, c, ndrange=u.shape)
            u, v = v, u
    return adjit.sum(u * u)


def test_nested_checkpointed_loops():
    u0 = np.random.default_rng(3).uniform(-1, 1, 17)
    g, g_all = np.zeros_like(u0), np.zeros_like(u0)
    dc = adjit.autodiff(adjit.Reverse, nested, adjit.Duplicated(u0.copy(), g),
                        adjit.Active(0.2), 4, 3)[1]
    dc_all = adjit.autodiff(adjit.Reverse, nested_all, adjit.Duplicated(u0.copy(), g_all),
                            adjit.Active(0.2), 4, 3)[1]
    np.testing.assert_allclose(g, g_all, rtol=1e-13, atol=1e-14)
    assert dc == pytest.approx(dc_all, rel=1e-13)


def test_forward_mode_and_the_primal_run_the_loop_as_it_is():
    u0 = np.random.default_rng(4).uniform(-1, 1, 17)
    assert energy(u0, 0.2, 7) == pytest.approx(energy_all(u0, 0.2, 7), rel=1e-15)
    t = adjit.autodiff(adjit.Forward, energy, adjit.Duplicated(u0.copy(), np.ones(17)),
                       adjit.Duplicated(0.2, 0.0), 7)
    t_all = adjit.autodiff(adjit.Forward, energy_all, adjit.Duplicated(u0.copy(), np.ones(17)),
                           adjit.Duplicated(0.2, 0.0), 7)
    assert t == pytest.approx(t_all, rel=1e-14)


# ---- refused ---------------------------------------------------------------------------------
def test_a_checkpointed_loop_cannot_break():
    @adjit.jit
    def f(x, n: int):
        s = 0.0
        for t in adjit.checkpointed(range(n), snapshots=2):
            if t > 3:
                break
            s += x[0]
        return s

    with pytest.raises(adjit.CompilationError, match="cannot break or return"):
        f(np.ones(3), 5)


def test_an_array_made_by_the_step_is_copied_into_the_carried_one():
    """`y = y * 0.5 + 1.0` makes a new array each step: the loop copies it into the array it
    carries (a copy of x: x itself is not written), so the state lives where it did."""
    @adjit.jit
    def f(x, n: int):
        y = x
        for t in adjit.checkpointed(range(n), snapshots=2):
            y = y * 0.5 + 1.0
        return adjit.sum(y * y)

    x = np.ones(3)
    assert f(x, 2) == pytest.approx(3 * 1.75 ** 2)
    g = np.zeros(3)
    adjit.autodiff(adjit.Reverse, f, adjit.Duplicated(x, g), 2)
    np.testing.assert_allclose(g, 2 * 1.75 * 0.25)
    np.testing.assert_array_equal(x, 1.0)


@pytest.mark.parametrize("kwargs, message", [
    ("snapshots=0", "must be a positive integer"),
    ("snapshots=2, every=3", "takes one of"),
    ("", "takes one of"),
    ("snapshot=2", "has no argument 'snapshot'"),
])
def test_bad_schedules(tmp_path, kwargs, message):
    source = tmp_path / "bad_schedule.py"
    source.write_text(f"""import adjit


@adjit.jit
def f(x, n: int):
    s = 0.0
    for t in adjit.checkpointed(range(n), {kwargs}):
        s += x[0]
    return s
""")
    import importlib.util
    spec = importlib.util.spec_from_file_location("bad_schedule", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(adjit.CompilationError, match=message):
        module.f(np.ones(3), 4)


def test_outside_compiled_code_it_is_the_range():
    assert list(adjit.checkpointed(range(3), snapshots=2)) == [0, 1, 2]
    with pytest.raises(ValueError, match="takes one of"):
        adjit.checkpointed(range(3))


@adjit.jit
def recorded(u0, c: float, rounds: int, steps: int):
    """A checkpointed loop inside a plain loop, whose step also writes a free array (the
    record of each step's energy, read after the loop): the record is part of the state."""
    u = u0.copy()
    v = adjit.empty_like(u)
    record = adjit.zeros(steps, adjit.f64)
    total = 0.0
    for _ in range(rounds):
        for t in adjit.checkpointed(range(steps), snapshots=2):
            damped(u, v, c, ndrange=u.shape)
            record[t] = adjit.sum(v * v)
            u, v = v, u
        for t in range(steps):
            total += record[t] * (t + 1.0)
    return total


@adjit.jit
def recorded_all(u0, c: float, rounds: int, steps: int):
    u = u0.copy()
    v = adjit.empty_like(u)
    record = adjit.zeros(steps, adjit.f64)
    total = 0.0
    for _ in range(rounds):
        for t in range(steps):
            damped(u, v, c, ndrange=u.shape)
            record[t] = adjit.sum(v * v)
            u, v = v, u
        for t in range(steps):
            total += record[t] * (t + 1.0)
    return total


def test_inside_a_plain_loop_with_a_free_array_written():
    u0 = np.random.default_rng(5).uniform(-1, 1, 9)
    g, g_all = np.zeros_like(u0), np.zeros_like(u0)
    dc = adjit.autodiff(adjit.Reverse, recorded, adjit.Duplicated(u0.copy(), g),
                        adjit.Active(0.3), 3, 5)[1]
    dc_all = adjit.autodiff(adjit.Reverse, recorded_all, adjit.Duplicated(u0.copy(), g_all),
                            adjit.Active(0.3), 3, 5)[1]
    np.testing.assert_allclose(g, g_all, rtol=1e-13, atol=1e-14)
    assert dc == pytest.approx(dc_all, rel=1e-13)


@adjit.jit
def until(u0, c: float, threshold: float):
    """A while loop whose step count is known only when it ends."""
    u = u0.copy()
    v = adjit.empty_like(u)
    e = 0.0
    t = 0
    while adjit.checkpointed(adjit.sum(u * u) > threshold and t < 1000, snapshots=3):
        damped(u, v, c, ndrange=u.shape)
        e = e + adjit.sum(v) * 0.1
        u, v = v, u
        t += 1
    return e + adjit.sum(u * u)


@adjit.jit
def until_all(u0, c: float, threshold: float):
    u = u0.copy()
    v = adjit.empty_like(u)
    e = 0.0
    t = 0
    while adjit.sum(u * u) > threshold and t < 1000:
        damped(u, v, c, ndrange=u.shape)
        e = e + adjit.sum(v) * 0.1
        u, v = v, u
        t += 1
    return e + adjit.sum(u * u)


def test_a_while_loop_with_a_step_count_known_only_at_the_end():
    u0 = np.random.default_rng(6).uniform(-1, 1, 17)
    threshold = 0.002 * float(np.sum(u0 * u0))     # 11 steps
    assert until(u0, 0.2, threshold) == pytest.approx(until_all(u0, 0.2, threshold), rel=1e-15)
    g, g_all = np.zeros_like(u0), np.zeros_like(u0)
    before = adjit.memory_stats()["checkpoint_steps_recomputed"]
    dc = adjit.autodiff(adjit.Reverse, until, adjit.Duplicated(u0.copy(), g),
                        adjit.Active(0.2), threshold)[1]
    assert adjit.memory_stats()["checkpoint_steps_recomputed"] > before
    dc_all = adjit.autodiff(adjit.Reverse, until_all, adjit.Duplicated(u0.copy(), g_all),
                            adjit.Active(0.2), threshold)[1]
    np.testing.assert_allclose(g, g_all, rtol=1e-13, atol=1e-14)
    assert dc == pytest.approx(dc_all, rel=1e-13)
    h = 1e-6
    e = np.zeros_like(u0)
    e[4] = h
    fd = (until(u0 + e, 0.2, threshold) - until(u0 - e, 0.2, threshold)) / (2 * h)
    assert g[4] == pytest.approx(fd, rel=1e-6, abs=1e-8)


@adjit.jit
def revolve_2_spilled(u0, steps: int):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in adjit.checkpointed(range(steps), snapshots=2, spill=True):
        reaction_diffusion_step(u, v, ndrange=u.shape)
        u, v = v, u
    return adjit.sum(u * u)


def test_spill_changes_nothing_on_the_cpu(g2b):
    """spill=True (working snapshots in host memory for device="cuda") is recorded on the
    loop and changes nothing on the CPU: the same gradient, bit for bit, and the same steps
    run again."""
    u0, expected = g2b
    before = adjit.memory_stats()["checkpoint_steps_recomputed"]
    plain = gradient(revolve_2, u0, 50)
    again_plain = adjit.memory_stats()["checkpoint_steps_recomputed"] - before
    before = adjit.memory_stats()["checkpoint_steps_recomputed"]
    spilled = gradient(revolve_2_spilled, u0, 50)
    again_spilled = adjit.memory_stats()["checkpoint_steps_recomputed"] - before
    # Bit for bit, as promised: on the CPU the two modules differ only in attributes the CPU
    # lowering ignores (spill = true, adj.host_memory on the slots' allocations), and a CPU
    # gradient is deterministic: the same bits for 1 to 16 threads, whichever thread runs
    # which block, in-process or shared-object code, first call or later (checked for this
    # loss). So a difference is a determinism defect, not rounding to allow for: say which.
    np.testing.assert_array_equal(gradient(revolve_2, u0, 50), plain,
                                  err_msg="the same gradient twice differs: nondeterminism")
    np.testing.assert_array_equal(gradient(revolve_2_spilled, u0, 50), spilled,
                                  err_msg="a first call (spilled's) differs from the next")
    np.testing.assert_array_equal(spilled, plain, err_msg="spill=True changed the gradient")
    np.testing.assert_allclose(spilled, expected, rtol=1e-5, atol=1e-6)
    assert again_spilled == again_plain == rerun(50, 2)
    assert revolve_2_spilled(u0, 3) == revolve_2(u0, 3)
    assert list(adjit.checkpointed(range(3), snapshots=2, spill=True)) == [0, 1, 2]


@pytest.mark.parametrize("kwargs, message", [
    ("snapshots=2, spill=1", "spill= must be True or False"),
    ("every=2, spill=n", "spill= must be a constant"),
])
def test_bad_spill(tmp_path, kwargs, message):
    source = tmp_path / "bad_spill.py"
    source.write_text(f"""import adjit


@adjit.jit
def f(x, n: int):
    s = 0.0
    for t in adjit.checkpointed(range(n), {kwargs}):
        s += x[0]
    return s
""")
    import importlib.util
    spec = importlib.util.spec_from_file_location("bad_spill", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(adjit.CompilationError, match=message):
        module.f(np.ones(3), 4)
    with pytest.raises(ValueError, match="spill= must be True or False"):
        adjit.checkpointed(range(3), snapshots=2, spill="yes")
