"""benchmarks/bench_interop.py at a tiny size: each wrapped call (adjit.torch without and
with autograd, a kernel's, a gradient through backward(); adjit.jax under jax.jit and its
gradient) is checked against the bare adjit call before timing; the tables print."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_interop as bench  # noqa: E402


def test_the_interop_benchmark_checks_and_runs(capsys):
    bench.main(n=64, inner=20, repeat=3)
    out = capsys.readouterr().out
    assert "| function: adjit.torch, no grad |" in out
    assert "| gradient: jax.jit(jax.grad) through adjit.jax |" in out
    assert out.count("x) |") == 6          # six overheads, each as a ratio
