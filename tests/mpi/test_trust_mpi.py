"""Issue 29 items 9 and 16, and the MPI error items: the ranks agree on every collective
operation (its kind, dtype, rank, shape, ghost width or root) before any data moves, and a
disagreement raises on every rank a CommunicationError that names the mismatch, the
operation that failed and the user's line (not one of adjit/mpi/); a communicator argument
that is not an adjit.mpi.Comm is a TypeError; a dead rank ends the others after a timeout
(ADJIT_MPI_TIMEOUT, 300 s by default). Each case is a real 2-rank program
(programs/trust.py) under mpiexec with a time limit."""
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import launch  # noqa: E402

PROGRAM = str(launch.PROGRAMS / "trust.py")


def raised(out: str, ranks=(0, 1)) -> dict:
    found = {}
    for r in ranks:
        m = re.search(rf"RAISED rank {r}: (\w+): (.*?) \|\| last_error", out, re.S)
        assert m, f"rank {r} did not raise:\n{out}"
        found[r] = (m[1], m[2])
    return found


def user_line(case: str) -> list[int]:
    lines = open(PROGRAM).read().splitlines()
    return [i + 1 for i, text in enumerate(lines) if text.endswith(f"# USER LINE {case}")]


@pytest.mark.parametrize("case, what", [
    ("reduce_length", "allreduce_array: the ranks' arrays differ in shape: axis 0 has from 3 "
                      "to 4 elements"),
    ("reduce_dtype", "allreduce_array: the ranks' arrays differ in dtype: f64 on some, f32 "
                     "on others"),
    ("halo_dtype", "halo_exchange: the ranks' arrays differ in dtype: f64 on some, f32 on "
                   "others"),
    ("reduce_jit", "allreduce_array: the ranks' arrays differ in shape: axis 0 has from 3 to "
                   "4 elements"),
    ("halo_jit", "halo_exchange: the ranks' arrays differ in shape: axis 1 has from 3 to 4 "
                 "elements"),
])
def test_a_disagreement_raises_on_every_rank_at_the_users_line(case, what):
    code, out, err = launch.run("trust.py", 2, case, timeout=60)
    assert code == 0, f"{out}\n{err[-3000:]}"
    assert "VALUES" not in out                   # nothing was reduced
    if case.endswith("_jit"):                    # the line inside the user's @jit function
        op = case.split("_")[0]
        name = {"reduce": "allreduce_array", "halo": "halo_exchange"}[op]
        lines = open(PROGRAM).read().splitlines()
        line = next(i + 1 for i, t in enumerate(lines) if f"mpi.{name}(u" in t)
    else:
        (line,) = user_line(case)
    for r, (kind, message) in raised(out).items():
        assert kind == "CommunicationError"
        assert message.startswith(f"{PROGRAM}:{line}: adjit.mpi."), message
        assert f"rank {r}: {what}" in message, message
        assert "adjit/mpi/" not in message, message


def test_different_operations_on_the_ranks_are_named():
    code, out, err = launch.run("trust.py", 2, "ops_differ", timeout=60)
    assert code == 0, f"{out}\n{err[-3000:]}"
    lines = user_line("ops_differ")
    for r, (kind, message) in raised(out).items():
        assert kind == "CommunicationError"
        assert message.startswith(f"{PROGRAM}:{lines[r]}: "), message
        assert ("the ranks call different operations here: allreduce_array on some, "
                "allreduce(op='max') on others") in message, message


def test_a_derivative_whose_exchange_disagrees_raises_on_every_rank():
    code, out, err = launch.run("trust.py", 2, "grad_mismatch", timeout=60)
    assert code == 0, f"{out}\n{err[-3000:]}"
    (line,) = user_line("grad_mismatch")
    for r, (kind, message) in raised(out).items():
        assert kind == "CommunicationError"
        assert message.startswith(f"{PROGRAM}:{line}: adjit.mpi.halo_exchange"), message
        assert (f"rank {r}: halo_exchange: the ranks' arrays differ in shape: axis 1 has "
                "from 3 to 4 elements") in message, message
        assert "adjit/mpi/" not in message, message     # (the traceback has the user's line)


def test_a_communicator_argument_that_is_not_a_comm_is_a_type_error():
    code, out, err = launch.run("trust.py", 2, "halo_not_comm", timeout=60)
    assert code == 0, f"{out}\n{err[-3000:]}"
    assert "ACCEPTED" not in out
    for r in (0, 1):
        errors = re.findall(rf"TYPEERROR rank {r}: (.*)", out)
        assert len(errors) == 8, out
        assert all("the communicator argument must be an adjit.mpi.Comm" in e for e in errors)
        assert any("wrap it, adjit.mpi.Comm(c)" in e for e in errors)     # an mpi4py one
        assert f"DONE rank {r}" in out


def test_an_int_that_is_no_communicator_is_refused_in_compiled_code():
    code, out, err = launch.run("trust.py", 2, "jit_not_comm", timeout=60)
    assert code == 0, f"{out}\n{err[-3000:]}"
    lines = open(PROGRAM).read().splitlines()
    line = next(i + 1 for i, t in enumerate(lines) if "mpi.halo_exchange(u, 1, comm)" in t)
    for r, (kind, message) in raised(out).items():
        assert kind == "CommunicationError"
        assert message.startswith(f"{PROGRAM}:{line}: adjit.mpi.halo_exchange failed"), message
        assert "its communicator argument (7) is not an adjit.mpi.Comm" in message, message


def test_a_bad_timeout_setting_is_refused(monkeypatch):
    from adjit.mpi import _native
    for bad in ("soon", "-1", "inf", "nan"):
        monkeypatch.setenv("ADJIT_MPI_TIMEOUT", bad)
        with pytest.raises(ValueError, match="ADJIT_MPI_TIMEOUT must be a finite number of s"):
            _native._timeout_setting()
    monkeypatch.delenv("ADJIT_MPI_TIMEOUT")
    assert _native._timeout_setting() == _native.DEFAULT_TIMEOUT_S == 300.0


@pytest.mark.parametrize("check", ["1", "0"])
def test_matching_arrays_and_an_uneven_split_still_work(check):
    # (ADJIT_MPI_CHECK=0 skips the agreement check: the operations work without it)
    code, out, err = launch.run("trust.py", 2, "matching", timeout=60,
                                env={"ADJIT_MPI_CHECK": check})
    assert code == 0 and "DONE rank 0" in out and "DONE rank 1" in out, f"{out}\n{err}"


def test_a_rank_that_exits_ends_the_others_after_the_timeout():
    code, out, err = launch.run("trust.py", 2, "dead_rank", timeout=60,
                                env={"ADJIT_MPI_TIMEOUT": "3"})
    kind, message = raised(out, ranks=(0,))[0]
    assert kind == "CommunicationError"
    (line,) = user_line("dies_after")      # (the line in the user's @jit function)
    assert message.startswith(f"{PROGRAM}:{line}: adjit.mpi.allreduce(op='sum') failed")
    assert "no message after 3 s (ADJIT_MPI_TIMEOUT, 300 s by default)" in message


@pytest.mark.parametrize("setting, want", [(None, "300.0"), ("7.5", "7.5"), ("0", "0.0")])
def test_the_timeout_has_a_default_and_the_environment_overrides_it(setting, want):
    env = {} if setting is None else {"ADJIT_MPI_TIMEOUT": setting}
    import os
    saved = os.environ.pop("ADJIT_MPI_TIMEOUT", None)
    try:
        code, out, err = launch.run("trust.py", 2, "timeout_setting", timeout=60, env=env)
    finally:
        if saved is not None:
            os.environ["ADJIT_MPI_TIMEOUT"] = saved
    assert code == 0, err[-3000:]
    # (the ranks' lines may interleave)
    assert sorted(re.findall(r"TIMEOUT rank (\d): (\d+\.\d+)", out)) == [
        ("0", want), ("1", want)], out
