"""benchmarks/bench_forward.py at a tiny size: adjit's W1-W5 kernels against NumPy (the
benchmark times them, this checks what they compute), and each framework's runner yields a
time for each of its rows. Needs neither JAX nor Numba (their runners say so when absent)."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_forward as bench  # noqa: E402
import forward_kernels as K  # noqa: E402


@pytest.fixture
def tiny(monkeypatch):
    for name, value in {"N1": 1001, "N2": 999, "GRID": 9, "STEPS": 3, "N4": 4097}.items():
        monkeypatch.setattr(bench, name, value)


def test_the_kernels_compute_what_numpy_does(tiny):
    rng = np.random.default_rng(1)
    x, y = rng.random(1001, dtype=np.float32), rng.random(1001, dtype=np.float32)
    want = np.float32(2.0) * x + y
    K.saxpy(np.float32(2.0), x, y, ndrange=1001)
    np.testing.assert_allclose(y, want, rtol=1e-6)
    z = rng.random(999, dtype=np.float32)
    x2 = rng.random(999, dtype=np.float32)
    np.testing.assert_allclose(K.transcendental(x2, z),
                               np.sin(np.exp(x2)) * z + 0.5 * x2 * x2, rtol=2e-6)
    u = rng.random((9, 9), dtype=np.float32)
    ref = u.copy()
    for _ in range(3):
        new = ref.copy()
        new[1:-1, 1:-1] = ref[1:-1, 1:-1] + 0.1 * (ref[:-2, 1:-1] + ref[2:, 1:-1] + ref[1:-1, :-2]
                                                   + ref[1:-1, 2:] - 4.0 * ref[1:-1, 1:-1])
        ref = new
    np.testing.assert_allclose(K.stencil(u, 3), ref, rtol=1e-5)
    x4 = rng.random(4097, dtype=np.float32)
    exact = np.sum(x4.astype(np.float64) ** 2)
    assert K.sum_squares(x4) == pytest.approx(exact, rel=1e-6)
    acc = np.zeros(1, np.float32)
    K.sum_squares_atomic(x4, acc, ndrange=4097)
    assert acc[0] == pytest.approx(exact, rel=1e-6)


@pytest.mark.parametrize("runner", ["run_adjit", "run_numpy"])
def test_each_runner_times_its_rows(tiny, runner):
    out = getattr(bench, runner)(1)
    rows = ["W1", "W2", "W3", "W4", "W5"] + (["W4a"] if runner == "run_adjit" else [])
    assert all(out[r] > 0 for r in rows), out
