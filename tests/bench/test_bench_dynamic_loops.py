"""benchmarks/bench_dynamic_loops.py at a tiny size: both rows run, and their gradients pass
the script's check against the exact flow of y' = -k y^2."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_dynamic_loops as bench  # noqa: E402


def test_rows_run_and_check_their_gradients(capsys):
    bench.main(m=257, mean_steps=3, repeat=1)
    out = capsys.readouterr().out
    assert "| fixed:" in out and "| per item:" in out
