"""Runs a program of tests/mpi/programs under mpiexec, bounded in time: a hang is a failure
(the process group is killed), and so is a missing MPI (the test extra installs mpi4py and
the mpich wheel, whose mpiexec sits beside the Python running the tests)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

PROGRAMS = Path(__file__).resolve().parent / "programs"
ROOT = Path(__file__).resolve().parents[2]


def mpiexec() -> str:
    here = Path(sys.executable).parent / "mpiexec"
    found = str(here) if here.exists() else shutil.which("mpiexec")
    assert found, ("mpiexec not found: install the test extra (pip install -e '.[test]' "
                   "brings mpi4py and the mpich wheel)")
    return found


def run(program: str, ranks: int, *args, timeout: float = 120, env: dict | None = None):
    """(exit status, stdout, stderr) of `program` on `ranks` ranks; fails the test if it has
    not ended after `timeout` seconds."""
    environ = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    environ.pop("ADJIT_NUM_THREADS", None)
    # One thread per rank: the ranks already share the cores.
    environ["ADJIT_NUM_THREADS"] = "1"
    cmd = [mpiexec(), "-n", str(ranks), sys.executable, str(PROGRAMS / program),
           *map(str, args)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=environ, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"{program} on {ranks} ranks hung (killed after {timeout} s)"
                             f"\n--- stdout\n{out}\n--- stderr\n{err}") from None
    return proc.returncode, out, err


def run_ok(program: str, ranks: int, *args, timeout: float = 120) -> str:
    """stdout of a run that must succeed on every rank (each prints `PASS rank r`)."""
    code, out, err = run(program, ranks, *args, timeout=timeout)
    assert code == 0, f"{program} {args} on {ranks} ranks: exit {code}\n{out}\n{err[-4000:]}"
    for r in range(ranks):
        assert f"PASS rank {r}" in out, f"rank {r} did not pass:\n{out}\n{err[-4000:]}"
    return out
