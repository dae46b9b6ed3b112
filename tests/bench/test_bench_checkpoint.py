"""benchmarks/bench_checkpoint.py at a tiny size (16^2, 20 steps, one repetition): every
checkpointed gradient it times (snapshots=10, 32, every=32) is checked against the store-all
one, and JAX's (plain, remat'd step, remat'd blocks, when installed) against adjit's, before
any timing; the tables print."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_checkpoint as bench  # noqa: E402


def test_revolve_optimum_matches_small_cases():
    # one state: 4 + 3 + 2 + 1 in all, the first 4 the loop's own run
    assert bench.revolve_optimum(5, 1) == 6
    assert bench.revolve_optimum(50, 5) == 122 - 49   # tests/autodiff/test_checkpoint.py


def test_the_checkpoint_benchmark_checks_and_runs(capsys):
    bench.main(steps=20, grid=16, repeat=1)
    out = capsys.readouterr().out
    assert "checkpointed snapshots=10" in out and "checkpointed every=32" in out
    assert "| store-all (plain `for`) |" in out
