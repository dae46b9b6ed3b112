"""benchmarks/bench_calls.py at a tiny size: every adjit column's result (the native and the
Python call paths, the kernel, the gradient from Python and from @jit) is checked against
NumPy's before any timing (status 1 when one is wrong); a line per row."""
import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_calls as bench  # noqa: E402


def test_the_calls_benchmark_checks_and_runs(capsys):
    assert bench.main(["--small", "--peers", ""]) == 0
    out = capsys.readouterr().out
    for row in ("16 floats: scalar result", "16 floats: array result", "16 floats: gradient",
                "np.sqrt, 1024 float32", "np.exp, 1024 float32"):
        assert f"{row}: NumPy" in out
    assert "@jit, Python path" in out and "grad from Python" in out and "kernel" in out
    assert "@jit, profiler off" in out and "@jit, profiler on" in out


def test_a_wrong_result_is_reported_not_timed(capsys, monkeypatch):
    monkeypatch.setattr(bench, "_wrong", lambda got, want: "values differ")
    assert bench.main(["--small", "--peers", ""]) == 1
    assert "@jit values differ" in capsys.readouterr().out
