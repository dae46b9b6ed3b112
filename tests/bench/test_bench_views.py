"""benchmarks/bench_views.py at a tiny size: the slice-written heat equation compiled by adjit
equals NumPy's (and Numba's and JAX's, where installed), and its gradient equals the kernel
version's and JAX's, before any timing; the tables print."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_views as bench  # noqa: E402


def test_the_views_benchmark_checks_and_runs(capsys):
    bench.main(n=17, steps=3, repeat=1)
    out = capsys.readouterr().out
    assert "adjit @jit (the same slices)" in out and "adjit grad (slices)" in out
