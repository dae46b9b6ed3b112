"""benchmarks/bench_transcendentals.py at a tiny size: adjit's @jit and kernel results of each
builtin it runs are checked against NumPy's before any timing (status 1 when one is wrong);
the table prints a row per builtin and dtype."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_transcendentals as bench  # noqa: E402


def test_the_transcendentals_benchmark_checks_and_runs(capsys):
    assert bench.main(["--small", "--peers", "", "tanh", "log1p", "atan2"]) == 0
    out = capsys.readouterr().out
    for name in ("tanh", "log1p", "atan2"):
        for dtype in ("float32", "float64"):
            assert f"| `{name}` | {dtype} |" in out


def test_a_wrong_result_is_reported_not_timed(capsys, monkeypatch):
    # NumPy's tanh standing in for the reference: adjit's (right) sinh disagrees with it
    monkeypatch.setattr(bench, "numpy_function", lambda name: np.tanh)
    assert bench.main(["--small", "--peers", "", "sinh"]) == 1
    out = capsys.readouterr().out
    assert "| `sinh` | float32 |" in out and "off by" in out
