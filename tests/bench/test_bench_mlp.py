"""benchmarks/bench_mlp.py at a tiny size: the MLP's loss and gradient (adjit's, the NumPy
backpropagation's and, installed as in the test extra, JAX's) are checked against each other
before timing, and every framework's row reports a forward and a gradient time."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_mlp as bench  # noqa: E402


def test_the_gradient_is_numpy_s_backpropagation():
    args = bench.problem(7, 5, 6, 3, seed=1)
    value, grads = bench.grad_adjit(*args)
    want_value, want = bench.grad_numpy(*args)
    assert value == pytest.approx(want_value, rel=1e-5)
    for g, w in zip(grads, want):
        assert g.shape == w.shape and g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)
    # and a central difference of the loss along W2[0, 0] (float64 copies)
    w1, b1, w2, b2, x, y = (a.astype(np.float64) for a in args)
    e = np.zeros_like(w2)
    e[0, 0] = 1e-6
    fd = (bench.loss_numpy(w1, b1, w2 + e, b2, x, y)
          - bench.loss_numpy(w1, b1, w2 - e, b2, x, y)) / 2e-6
    assert grads[2][0, 0] == pytest.approx(fd, rel=1e-3)


def test_each_framework_reports_forward_and_gradient(capsys):
    times = bench.main(repeat=3, sizes=(9, 4, 5, 3))
    assert {"adjit", "numpy"} <= set(times)
    for row in times.values():
        assert row["forward"] > 0 and row["gradient"] > 0
    out = capsys.readouterr().out
    assert "MLP 9x4 -> 5 (tanh) -> 3" in out and "adjit" in out and "numpy" in out
