"""benchmarks/bench_rows.py runs every row of docs/performance.md's table: each row names a
script that exists in benchmarks/, its tiny form (where it has one) passes arguments that
script understands, and a row whose script fails makes the whole run fail. The rows
themselves run in their own tests (test_contention_bench, test_transcendentals_bench...)."""
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import bench_rows  # noqa: E402


def test_every_row_names_a_script_of_benchmarks():
    names = [name for name, *_ in bench_rows.ROWS]
    assert len(names) == len(set(names))
    for name, _title, full, tiny in bench_rows.ROWS:
        for args in (full, tiny):
            if args is not None:
                assert (BENCH / args[0]).is_file(), (name, args)


def test_a_failing_row_fails_the_run(tmp_path, monkeypatch):
    (tmp_path / "ok.py").write_text("print('fine')\n")
    (tmp_path / "bad.py").write_text("import sys; sys.exit(3)\n")
    monkeypatch.setattr(bench_rows, "HERE", tmp_path)
    monkeypatch.setattr(bench_rows, "ROWS", [("ok", "a row", ["ok.py"], ["ok.py"]),
                                             ("bad", "a row", ["bad.py"], ["bad.py"])])
    assert bench_rows.main(["--small", "ok"]) == 0
    assert bench_rows.main(["--small"]) == 1


def test_the_command_line_runs_a_chosen_row():
    done = subprocess.run([sys.executable, str(BENCH / "bench_rows.py"), "--small", "softplus"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "## softplus" in done.stdout, done.stdout + done.stderr
