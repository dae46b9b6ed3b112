"""The workloads of benchmarks/bench_grad_workloads.py at a tiny size: adjit's gradients
against the float64 NumPy references, the references against central finite differences,
the hand-written NumPy (and, where installed, Numba) derivatives against the references, and
the benchmark's guard that refuses to time a wrong gradient. Needs neither JAX nor Numba."""
import io
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_grad_workloads as bench  # noqa: E402

NAMES = ["G1", "G1e", "G2", "G2b", "G2s", "G3", "kernel", "G4"]


@pytest.fixture(scope="module")
def tiny():
    # Grid 9 with 3 steps: the borders, the points next to them and an inner point all occur.
    # A table of 8 entries: the lookup's adjoint adds into private copies (chunked_launch.py).
    return {n: wl for n, wl in zip(NAMES, bench.workloads(n=1000, grid=9, steps=3, seed=1,
                                                              table=8))}


def test_names_are_the_issues_workloads(tiny):
    for key, wl in tiny.items():
        assert wl.name.split()[0] == key, wl.name


@pytest.mark.parametrize("key", NAMES)
def test_adjit_gradient_matches_float64_reference(tiny, key):
    wl = tiny[key]
    ref = wl.reference()
    answer = wl.grad()
    assert bench.rel_error(answer, ref) < 1e-5
    # The shadows are zeroed inside the timed call: a second call gives the same answer.
    assert bench.rel_error(wl.grad(), ref) < 1e-5
    # The value ReverseWithPrimal reports (a launch's: the array it writes), and the timed
    # primal's (a launch returns nothing).
    np.testing.assert_allclose(answer[1], ref[1], rtol=1e-5)
    value = wl.primal()
    if value is not None:
        assert float(value) == pytest.approx(ref[1], rel=1e-5)


@pytest.mark.parametrize("key", NAMES)
def test_reference_matches_finite_differences(tiny, key):
    wl = tiny[key]
    grads, value = wl.reference()
    assert np.sum(value) == pytest.approx(wl.ref_loss(*wl.wrt), rel=1e-12)
    rng = np.random.default_rng(7)
    dirs = [rng.standard_normal(np.shape(w)) for w in wl.wrt]
    h = 1e-6
    plus = wl.ref_loss(*(w + h * d for w, d in zip(wl.wrt, dirs)))
    minus = wl.ref_loss(*(w - h * d for w, d in zip(wl.wrt, dirs)))
    fd = (plus - minus) / (2 * h)
    analytic = sum(float(np.sum(np.asarray(g) * d)) for g, d in zip(grads, dirs))
    assert fd == pytest.approx(analytic, rel=1e-6)


@pytest.mark.parametrize("key", NAMES)
def test_hand_written_numpy_gradient_matches_reference(tiny, key):
    wl = tiny[key]
    assert bench.rel_error(wl.numpy_grad(), wl.reference()) < 1e-5


def test_stencil_reference_in_closed_form():
    # One heat step on a 3x3 grid: only the centre moves, v_c = 0.6 u_c + 0.1 (sum of its
    # four neighbours); L = sum(v^2), so dL/du = 2 v on the borders plus the centre's terms.
    u = np.arange(9.0).reshape(3, 3) / 10
    (g,), value = bench.stencil_grad_np(u, 1, reaction=False)
    v = u.copy()
    v[1, 1] = 0.6 * u[1, 1] + 0.1 * (u[0, 1] + u[2, 1] + u[1, 0] + u[1, 2])
    expect = 2 * v
    expect[1, 1] = 2 * v[1, 1] * 0.6
    for p in [(0, 1), (2, 1), (1, 0), (1, 2)]:
        expect[p] += 2 * v[1, 1] * 0.1
    np.testing.assert_allclose(g, expect, rtol=1e-14)
    assert value == pytest.approx(np.sum(v * v), rel=1e-14)


def test_numba_rows_match_reference(tiny):
    pytest.importorskip("numba", reason="Numba is an optional benchmark competitor ('.[bench]')")
    for key, wl in tiny.items():
        assert bench.rel_error(wl.numba()(), wl.reference()) < 1e-5, key


def test_rel_error_sees_wrong_gradients():
    ref = ((np.array([1.0, -2.0]), 3.0), 4.0)
    assert bench.rel_error(ref, ref) == 0.0
    assert bench.rel_error(((np.array([1.0, -2.0]), 3.3), 4.0), ref) == pytest.approx(0.1)
    assert bench.rel_error(((np.array([1.0, -2.0]), 3.0), 4.4), ref) == pytest.approx(0.1)
    assert bench.rel_error(((np.array([1.0]), 3.0), 4.0), ref) == float("inf")


def test_benchmark_refuses_to_time_a_wrong_gradient(tiny):
    wl = tiny["G3"]

    def wrong():
        (dx,), value = wl.grad()
        return (1.02 * dx,), value
    bad = replace(wl, grad=wrong, primal=lambda: pytest.fail("a wrong gradient was timed"),
                  jax=None, numba=None, numpy_grad=None, notes=[])
    out = io.StringIO()
    assert bench.run(bad, out) is False
    assert "WRONG" in bad.notes[0]
    row = out.getvalue().split(" | ")
    assert row[1:4] == ["-", "-", "-"]
