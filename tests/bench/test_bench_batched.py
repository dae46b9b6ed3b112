"""benchmarks/bench_batched.py at a tiny size: every Jacobian it times is checked against the
others, finite differences and JAX (when installed) before any timing, so a run at a small
size fails on a wrong batched derivative; the tables print."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_batched as bench  # noqa: E402


def test_the_batched_benchmark_checks_and_runs(capsys):
    bench.main(n_big=1001, repeat=1, repeat_big=1)
    out = capsys.readouterr().out
    assert "adjit.jacfwd width=16" in out and "BatchDuplicated (8 lanes)" in out
