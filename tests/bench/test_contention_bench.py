"""benchmarks/bench_contention.py at a tiny size: its forms pass their checks (stencil against
NumPy, the Jacobi solve against numpy.linalg.solve, its gradient against central differences)
and every scenario's row prints; no timing is asserted. Without Numba's forms (seconds when
pinned; the script runs them)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_contention as bench  # noqa: E402


def test_rows_run_and_check_their_results(capsys):
    bench.main(small=True, repeat=1, scenarios=("free", "busy", "pinned"), peers=False)
    out = capsys.readouterr().out
    for scenario in ("free", "busy", "pinned"):
        for form in ("adjit stencil", "adjit jacobi", "adjit jacobi grad"):
            assert f"| {scenario} | {form} |" in out
