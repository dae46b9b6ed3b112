"""benchmarks/bench_mlp_dict.py at a tiny size: the dict-parameter MLP's SGD step, checked
against JAX's (1e-5, float32) before anything is timed, reports a time per step."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_mlp_dict as bench  # noqa: E402


def test_the_step_is_checked_and_timed(capsys):
    times = bench.main(batch=8, repeat=3)
    assert "adjit" in times and all(t > 0 for t in times.values())
    out = capsys.readouterr().out
    assert "parameters a dict, batch 8, float32" in out


def test_the_step_keeps_float32_and_the_dict():
    params, x, y = bench.problem(batch=4)
    value, new = bench.step(params, x, y, bench.LR)
    assert value.dtype == bench.DTYPE and list(new) == list(params)
    assert all(new[k].dtype == bench.DTYPE and new[k].shape == params[k].shape for k in new)
