"""Trust where features meet (issue 29): fixed points that do not converge are errors, not
silently returned iterates (item 6); a zero-size fixed point; checkpoint schedules with
huge parameters are refused or clamped, never a crash (item 15)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import adjit


@adjit.func
def slow_map(x: float, a: float) -> float:
    """A contraction with rate 0.999: far from converged after a few steps."""
    return 0.999 * x + a


@adjit.jit
def ten_steps(a: float):
    return adjit.fixed_point(slow_map, 0.0, a, tol=1e-12, max_iter=10)


@adjit.jit
def ten_steps_allowed(a: float):
    return adjit.fixed_point(slow_map, 0.0, a, tol=1e-12, max_iter=10, must_converge=False)


def test_a_fixed_point_that_hits_max_iter_is_an_error_at_the_users_line():
    with pytest.raises(RuntimeError, match=r"did not converge: after max_iter=10 iterations"
                       r".*largest change.*between 1e-01 and 1e\+00, above tol=1e-12"
                       r".*test_trust_schedules.py:\d+"):
        ten_steps(1.0)
    # and its gradient, which used to be a silent number
    with pytest.raises(RuntimeError, match="did not converge"):
        adjit.autodiff(adjit.Reverse, ten_steps, adjit.Active(1.0))


def test_must_converge_false_returns_the_last_iterate():
    x = 0.0
    for _ in range(10):
        x = 0.999 * x + 1.0
    assert ten_steps_allowed(1.0) == pytest.approx(x, rel=1e-15)


@adjit.func
def shrink(x: float, a: float) -> float:
    return 0.9 * x + a


@adjit.jit
def started_at_the_answer(x0: float, a: float):
    return adjit.fixed_point(shrink, x0, a, tol=1e-12, max_iter=10)


def test_an_adjoint_solve_that_does_not_converge_is_an_error_too():
    """x0 = a / (1 - 0.9) is the fixed point itself: the primal converges in one step, the
    adjoint iteration lambda <- 1 + 0.9 lambda needs hundreds."""
    assert started_at_the_answer(10.0, 1.0) == 10.0
    with pytest.raises(RuntimeError, match=r"adjoint \(reverse-mode\) solve did not converge"
                       r".*max_iter=10.*test_trust_schedules.py:\d+"):
        adjit.autodiff(adjit.Reverse, started_at_the_answer, adjit.Const(10.0),
                       adjit.Active(1.0))


@adjit.jit
def halve_towards(x, b):
    return 0.5 * x + b


@adjit.jit
def array_fixed_point(x0, b):
    return adjit.sum(adjit.fixed_point(halve_towards, x0, b, tol=1e-13, max_iter=5))


@adjit.jit
def array_root(b):
    return adjit.sum(adjit.fixed_point(halve_towards, adjit.zeros_like(b), b, tol=1e-13,
                                       max_iter=200))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_an_array_fixed_point_that_does_not_converge_is_an_error(dtype):
    b = np.linspace(1.0, 3.0, 5).astype(dtype)
    with pytest.raises(RuntimeError, match="after max_iter=5 iterations"):
        array_fixed_point(np.zeros(5, dtype), b)


def test_a_zero_size_fixed_point_is_its_start():
    b = np.zeros(0)
    assert array_root(b) == 0.0
    g = np.zeros(0)
    adjit.autodiff(adjit.Reverse, array_root, adjit.Duplicated(b, g))
    # and a converging one still gives the implicit derivative: x* = 2 b, d sum / d b = 2
    b = np.array([0.5, -1.0, 2.0])
    g = np.zeros(3)
    assert array_root(b) == pytest.approx(2 * b.sum(), rel=1e-12)
    adjit.autodiff(adjit.Reverse, array_root, adjit.Duplicated(b, g))
    np.testing.assert_allclose(g, 2.0, rtol=1e-12)
    h = 1e-6
    e = np.array([h, 0.0, 0.0])
    fd = (array_root(b + e) - array_root(b - e)) / (2 * h)
    assert g[0] == pytest.approx(fd, rel=1e-7)


def test_from_python_non_convergence_is_an_error_with_the_residual():
    step = lambda x, a: 0.999 * x + a    # noqa: E731
    with pytest.raises(RuntimeError, match=r"max_iter=10 .*was 0\.99"):
        adjit.fixed_point(step, np.zeros(2), 1.0, tol=1e-12, max_iter=10)
    x = adjit.fixed_point(step, np.zeros(2), 1.0, tol=1e-12, max_iter=10, must_converge=False)
    assert x[0] == pytest.approx(sum(0.999 ** k for k in range(10)))
    assert adjit.fixed_point(step, np.zeros(0), 1.0).shape == (0,)


def test_must_converge_must_be_a_constant_bool():
    @adjit.jit
    def bad(a: float, flag: bool):
        return adjit.fixed_point(slow_map, 0.0, a, must_converge=flag)

    with pytest.raises(adjit.CompilationError, match="must_converge= must be a constant bool"):
        bad(1.0, True)


# ---- checkpoint schedules with huge values (item 15) ----------------------------------------

_HUGE_SCHEDULES = textwrap.dedent('''
    import sys
    import numpy as np
    import adjit
    sys.path.insert(0, {tests!r})
    from test_checkpoint import with_schedule
    u0 = np.random.default_rng(3).random((16, 16))
    for schedule in {schedules!r}:
        g = np.zeros_like(u0)
        adjit.autodiff(adjit.Reverse, with_schedule(**schedule), adjit.Duplicated(u0.copy(), g),
                       12)
        np.save({out!r} + str(len(schedule)) + repr(sorted(schedule.items())) + ".npy", g)
    print("done")
''')


def _store_all_gradient(u0, steps):
    from test_checkpoint import store_all
    g = np.zeros_like(u0)
    adjit.autodiff(adjit.Reverse, store_all, adjit.Duplicated(u0.copy(), g), steps)
    return g


@pytest.fixture
def checkpoint_tests_on_path(monkeypatch):
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    monkeypatch.syspath_prepend(here)
    return here


def test_huge_checkpoint_schedules_mean_every_state_and_never_crash(tmp_path,
                                                                     checkpoint_tests_on_path):
    """snapshots=10**9, every=2**62, max_bytes=2**62 allocated working slots for that many
    states (a SIGSEGV); values past 64 bits were an internal error. A schedule past the step
    count is the step count: the gradient is the store-all one. In a subprocess: a crash
    must not take pytest down."""
    schedules = [dict(snapshots=10**9), dict(every=2**62), dict(max_bytes=2**62),
                 dict(snapshots=2**70), dict(every=2**64), dict(max_bytes=2**80),
                 dict(snapshots=12), dict(every=12)]
    out = str(tmp_path / "g")
    code = _HUGE_SCHEDULES.format(tests=checkpoint_tests_on_path, schedules=schedules, out=out)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "done" in done.stdout
    u0 = np.random.default_rng(3).random((16, 16))
    expected = _store_all_gradient(u0, 12)
    for schedule in schedules:
        g = np.load(out + str(len(schedule)) + repr(sorted(schedule.items())) + ".npy")
        np.testing.assert_allclose(g, expected, rtol=1e-13, atol=1e-15, err_msg=str(schedule))


def test_a_huge_schedule_keeps_no_more_than_the_steps_states(checkpoint_tests_on_path):
    """snapshots=10**9 on 12 steps keeps about what store-all keeps, not 10**9 states."""
    from test_checkpoint import with_schedule
    u0 = np.random.default_rng(3).random((16, 16))
    f = with_schedule(snapshots=10**9)
    g = np.zeros_like(u0)
    adjit.autodiff(adjit.Reverse, f, adjit.Duplicated(u0.copy(), g), 12)   # compiled
    adjit.release_cached_memory()
    adjit.reset_peak_memory()
    base = adjit.memory_stats()["bytes_in_use"]
    adjit.autodiff(adjit.Reverse, f, adjit.Duplicated(u0.copy(), g), 12)
    peak = adjit.memory_stats()["peak_bytes"] - base
    assert peak <= 2 * 16 * u0.nbytes        # 12 steps x (u, v) and a few more


# ---- a forward rule and a reverse rule without augmented_primal (issue 29, errors) -----------

@adjit.func
def squared(x: float) -> float:
    return x * x


@adjit.rules.forward(squared)
def _squared_forward(config, x):
    return x.val * x.val, 2.0 * x.val * x.dval


@adjit.rules.reverse(squared)
def _squared_reverse(config, dret, tape, x):
    return (2.0 * x.val * dret,)


@adjit.jit
def uses_squared(x: float):
    return squared(x) + 1.0


@adjit.func
def cubed(x: float) -> float:
    return x * x * x


@adjit.rules.augmented_primal(cubed)
def _cubed_augmented(config, x):
    return adjit.rules.AugmentedReturn(x.val * x.val * x.val, None, x.val)


@adjit.jit
def uses_cubed(x: float):
    return cubed(x)


def test_a_reverse_rule_without_augmented_primal_is_refused_at_the_rule():
    """Was a warning that the function "has a forward rule only" (it has a reverse rule
    too), then "a augmented rule is missing" at the caller's line."""
    import inspect
    import warnings
    # forward mode: the forward rule, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert adjit.autodiff(adjit.Forward, uses_squared, adjit.Duplicated(3.0, 1.0)) == 6.0
        line = inspect.getsourcelines(_squared_reverse)[1] + 1      # its def
        with pytest.raises(adjit.CompilationError,
                           match=rf"test_trust_schedules.py:{line}:\d+: custom rules of squared: "
                                 r"this reverse rule has no augmented_primal rule; reverse mode "
                                 r"needs both.*define @adjit.rules.augmented_primal\(squared\)"):
            adjit.autodiff(adjit.Reverse, uses_squared, adjit.Active(3.0))
        line = inspect.getsourcelines(_cubed_augmented)[1] + 1
        with pytest.raises(adjit.CompilationError,
                           match=rf"test_trust_schedules.py:{line}:\d+: custom rules of cubed: "
                                 r"this augmented_primal rule has no reverse rule.*"
                                 r"@adjit.rules.reverse\(cubed\)"):
            adjit.autodiff(adjit.Reverse, uses_cubed, adjit.Active(2.0))
    # forward mode of the lone augmented rule differentiates the body, and says what it has
    with pytest.warns(UserWarning, match=r"cubed \(.*\) has an augmented_primal rule only: "
                                         r"forward mode differentiates its body"):
        assert adjit.autodiff(adjit.Forward, uses_cubed, adjit.Duplicated(2.0, 1.0)) == 12.0
