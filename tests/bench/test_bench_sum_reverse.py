"""benchmarks/bench_sum_reverse.py at its tiny size (10^4): the three compiled variants of G3's
gradient (the sum's reverse serial with a zero-fill, in parallel adding, in parallel storing)
are checked against the float64 derivative and against each other, bit for bit, before
anything is timed; the script exits 0 only then. JAX is left out (its import and compile
take longer than this test should)."""
import io
import sys
from contextlib import redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_sum_reverse as bench  # noqa: E402


def test_tiny_run_checks_then_times():
    out = io.StringIO()
    with redirect_stdout(out):
        status = bench.main(["--quick", "--no-jax"])
    text = out.getvalue()
    assert status == 0, text
    rows = {line.split("|")[1].strip(): line for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| |")}
    assert set(rows) == {"before", "parallel adds", "after", "primal"}, text
    for row in rows.values():
        assert float(row.split("|")[2]) > 0, row
