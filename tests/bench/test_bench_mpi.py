"""benchmarks/bench_mpi.py at a tiny size on 1 and 2 ranks: each run checks its gradient
against finite differences before timing (a wrong one fails the run), and the table
prints."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_mpi as bench  # noqa: E402


def test_the_mpi_benchmark_checks_and_runs(capsys):
    assert bench.main(n=16, steps=3, ranks=(1, 2), repeat=1) == 0
    out = capsys.readouterr().out
    assert "| 1 | 1x1 | 16x16 |" in out and "| 2 | 2x1 | 32x16 |" in out
