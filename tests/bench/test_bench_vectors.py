"""benchmarks/bench_vectors.py at a tiny size: the cloth written with adjit.vec3, with scalar
components and (where installed) with Warp give the same loss and gradient before any
timing; the table prints. And examples/cloth_toss.py's optimisation brings its loss down."""
import sys
from pathlib import Path

root = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(root / "benchmarks"))
sys.path.insert(0, str(root / "examples"))
import bench_vectors as bench  # noqa: E402
import cloth_toss  # noqa: E402


def test_the_vectors_benchmark_checks_and_runs(capsys):
    times = bench.main(k=4, steps=3, repeat=1)
    out = capsys.readouterr().out
    assert "adjit vec3" in out and "adjit scalar components" in out
    assert set(times) >= {"adjit vec3", "adjit scalar components"}


def test_the_cloth_toss_example_converges(capsys):
    cloth_toss.main(6)
    lines = capsys.readouterr().out.splitlines()
    losses = [float(line.split("loss")[1].split()[0]) for line in lines if "iteration" in line]
    assert len(losses) == 6 and losses[-1] < 0.1 * losses[0]
