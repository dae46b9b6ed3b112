"""benchmarks/bench_fixed_point.py at its tiny size (8x8): adjit's gradient of the Dirichlet
fixed point is checked against the float64 implicit-function reference before anything is
timed, and the script exits 0 only if it agrees. JAX's rows are left out (its import and
compiles take longer than this test should); the script runs them at full size."""
import io
import sys
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_fixed_point as bench  # noqa: E402


def test_tiny_run_checks_then_times():
    out = io.StringIO()
    with redirect_stdout(out):
        status = bench.main(["--quick", "--no-jax"])
    text = out.getvalue()
    assert status == 0, text
    row = next(line for line in text.splitlines() if line.startswith("| adjit"))
    primal, grad, ratio = (float(c) for c in row.split("|")[2:5])
    assert primal > 0 and grad > 0 and ratio > 0, row     # (printed rounded: no ratio check)


def test_reference_is_the_limit_of_the_iteration():
    """The NumPy reference against the iteration itself (x*) and central differences."""
    x0, f, h2, w = bench.problem(6)
    value, g = bench.reference(x0, f, h2, w)
    x = x0.copy()
    for _ in range(5000):
        x[1:-1, 1:-1] = 0.25 * (x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:]
                                + h2 * f[1:-1, 1:-1])
    assert abs(value - np.sum(w * x)) < 1e-12 * abs(value)
    e = np.zeros_like(f)
    e[2, 3] = 1e-6
    fd = (bench.reference(x0, f + e, h2, w)[0] - bench.reference(x0, f - e, h2, w)[0]) / 2e-6
    assert abs(g[2, 3] - fd) < 1e-7 * max(1.0, abs(fd))
    assert np.all(g[0] == 0) and np.all(g[:, -1] == 0)
