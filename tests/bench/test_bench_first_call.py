"""benchmarks/bench_first_call.py at its tiny size: a kernel's and a gradient's first call,
each in a new process with an empty cache, their results checked against NumPy, every stage
of the budget reported, and the second process's first call a disk-cache hit."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_first_call as bench  # noqa: E402


def test_tiny_first_calls_report_every_stage():
    for name in ("K", "G"):
        out = bench.sample("adjit", name, 256, 8, hit=True)
        assert "error" not in out, out
        assert out["ok"], out
        for stage in (*bench.STAGES, "import", "mlir import", "first", "hit"):
            assert out[stage] >= 0, (stage, out)
        # The stages are parts of the first call, the compiler's import included.
        assert sum(out[s] for s in bench.STAGES) + out["mlir import"] <= out["first"] * 1.001
        assert out["llvm"] > 0 and out["mlir"] > 0
        if name == "G":
            assert out["autodiff"] > 0


def test_every_workload_has_an_adjit_program_and_a_jax_one():
    for name in bench.WORKLOADS:
        assert ("adjit", name) in bench._CODE and ("jax", name) in bench._CODE
