"""benchmarks/bench_mlp_train.py at a tiny size: every framework's trained parameters are
checked against NumPy's before timing, and each reports a time (Numba left out: its
compile alone takes ~4 s)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_mlp_train as bench  # noqa: E402


def test_each_framework_trains_and_reports(capsys):
    times = bench.main(steps=3, batch=8, repeat=3, numba=False)
    assert {"adjit", "NumPy (hand backprop)"} <= set(times)
    assert all(t > 0 for t in times.values())
    out = capsys.readouterr().out
    assert "MLP 4-32-32-1 (tanh), batch 8" in out and "3 SGD steps" in out
