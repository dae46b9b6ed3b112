"""adjit.mpi under mpiexec with 2 and 4 ranks: each case a subprocess (tests/mpi/launch.py),
bounded in time, so a hang fails the test. The programs (tests/mpi/programs/) assert on
every rank and print `PASS rank r`.

- decomposed.py: a 2-D reaction-diffusion stencil decomposed over a process grid (1-D and
  2-D decompositions, ghost width 1 and 2, periodic or not): the final state, the loss and
  the gradient in the diffusivity equal the same functions run on the whole grid in one
  process (to rounding), and the gradient and the forward-mode tangent equal central
  differences of the decomposed loss;
- rules.py: each operation alone (halo exchange 1-D/2-D/3-D arrays, allreduce sum/max/min,
  allreduce_array, bcast, bcast_array, send/recv, replicated), reverse and forward mode
  against finite differences;
- failure.py: a rank's Python exception, arrays whose shapes differ between ranks, and a
  rank that skips a collective raise (on every rank that waits) instead of hanging;
- the example, examples/heat_mpi.py, on 4 ranks.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import launch  # noqa: E402


@pytest.mark.parametrize("ranks, grid, width, periodic", [
    (2, "2", 1, 0),        # 1-D decomposition of the 2-D grid
    (4, "2x2", 1, 0),      # 2-D decomposition
    (4, "2x2", 2, 1),      # ghost width 2, periodic
    (4, "4", 2, 0),
])
def test_decomposed_run_equals_one_process_and_finite_differences(ranks, grid, width,
                                                                  periodic):
    launch.run_ok("decomposed.py", ranks, grid, width, periodic)


@pytest.mark.parametrize("ranks", [2, 4])
def test_each_rule_alone_against_finite_differences(ranks):
    out = launch.run_ok("rules.py", ranks)
    assert "11 rules" in out


def test_a_rank_whose_python_code_raises_makes_every_rank_raise():
    code, out, err = launch.run("failure.py", 4, "python", timeout=60)
    assert code != 0                       # rank 1's uncaught exception ends the job
    assert "ValueError: rank 1 found bad input" in err
    for r in (0, 2, 3):
        line = re.search(rf"RAISED rank {r}: (.*)", out)
        assert line, f"rank {r} did not raise:\n{out}\n{err[-3000:]}"
        assert "another rank failed: rank 1: ValueError: rank 1 found bad input" in line[1]
        assert "adjit.mpi.halo_exchange failed" in line[1]


def test_arrays_that_differ_between_ranks_raise_on_every_rank():
    code, out, err = launch.run("failure.py", 4, "shape", timeout=60)
    assert code == 0, err[-3000:]
    for r in range(4):
        assert f"RAISED rank {r}: " in out, f"rank {r} did not raise:\n{out}\n{err[-3000:]}"
    assert "the ranks' arrays differ in shape" in out or "truncated" in out


def test_a_rank_that_skips_a_collective_makes_every_rank_raise():
    # The ranks check that they call the same operation before any data moves: rank 0's
    # allreduce(op='max') meets the others' allreduce(op='sum') (a timeout was the only
    # sign before; tests/mpi/test_trust_mpi.py tests the timeout).
    code, out, err = launch.run("failure.py", 4, "skip", timeout=60,
                                env={"ADJIT_MPI_TIMEOUT": "20"})
    assert code == 0, err[-3000:]
    for r in (0, 1, 2, 3):
        assert f"RAISED rank {r}: " in out, f"rank {r} did not raise:\n{out}\n{err[-3000:]}"
    assert ("the ranks call different operations here: allreduce(op='sum') on some, "
            "allreduce(op='max') on others") in out


def test_the_example_matches_one_process_on_four_ranks():
    root = Path(__file__).resolve().parents[2]
    code, out, err = launch.run(str(root / "examples" / "heat_mpi.py"), 4, timeout=180)
    assert code == 0, f"{out}\n{err[-3000:]}"
    assert "4 ranks, grid (2, 2)" in out
    errs = re.search(r"loss rel. error (\S+), gradient rel. error (\S+)", out)
    assert errs and float(errs[1]) < 1e-12 and float(errs[2]) < 1e-12, out


def test_import_adjit_does_not_import_mpi4py():
    import subprocess
    code = ("import sys, adjit; assert 'mpi4py' not in sys.modules; "
            "from adjit import mpi; assert 'mpi4py' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
