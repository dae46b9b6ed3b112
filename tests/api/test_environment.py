"""The ADJIT_* environment variables (adjit/core/environment.py): every value is checked where
it is read, a value that is not valid is an EnvironmentValueError naming the variable, the
value and what is accepted (never int()'s traceback, never a default taken silently), an
unknown ADJIT_* name gets one warning naming the closest known one, and ADJIT_DUMP_IR's
files go to the folder it names and nowhere else, never through a planted symlink.

Cheap: the parsers are called directly; two compiles in all and one subprocess."""
from __future__ import annotations

import os
import pickle
import stat
import subprocess
import sys

import numpy as np
import pytest

import adjit
from adjit.compiler import ir_dump
from adjit.core import environment
from adjit.core.environment import STDOUT, VARIABLES, read
from adjit.runtime import native_dispatch

BAD = [
    ("ADJIT_NUM_THREADS", "abc"), ("ADJIT_NUM_THREADS", "0"), ("ADJIT_NUM_THREADS", "-3"),
    ("ADJIT_NUM_THREADS", "1e9"), ("ADJIT_NUM_THREADS", "1000000000"),
    ("ADJIT_NUM_THREADS", "2.5"),
    ("ADJIT_CACHE_MAX_MB", "-1"), ("ADJIT_CACHE_MAX_MB", "xyz"), ("ADJIT_CACHE_MAX_MB", "nan"),
    ("ADJIT_CACHE_MAX_MB", "inf"),
    ("ADJIT_DEBUG", "maybe"), ("ADJIT_DEBUG", "2"), ("ADJIT_DEBUG", "yes"),
    ("ADJIT_DISK_CACHE", "2"), ("ADJIT_DISK_CACHE", "no"), ("ADJIT_CACHE_SHARED", "true"),
    ("ADJIT_LOG", "compiles"), ("ADJIT_LOG", "compile,trace"),
    ("ADJIT_COMPILE_TIER", "7"), ("ADJIT_COMPILE_TIER", "-1"), ("ADJIT_COMPILE_TIER", "fast"),
    ("ADJIT_CUDA_CHIP", "sm_xx"), ("ADJIT_CUDA_CHIP", "90"), ("ADJIT_CUDA_CHIP", "sm_9"),
    ("ADJIT_CUDA_CHIP", "compute_90"),
    ("ADJIT_MPI_TIMEOUT", "nan"), ("ADJIT_MPI_TIMEOUT", "inf"), ("ADJIT_MPI_TIMEOUT", "-1"),
    ("ADJIT_MPI_TIMEOUT", "soon"),
    ("ADJIT_MPI_CHECK", "off-ish"), ("ADJIT_MPI_ABORT_GRACE", "-2"),
    ("ADJIT_MPI_ABORT_GRACE", "a while"),
]

GOOD = [
    ("ADJIT_NUM_THREADS", "1", 1), ("ADJIT_NUM_THREADS", " 8 ", 8),
    ("ADJIT_NUM_THREADS", "1024", 1024),
    ("ADJIT_CACHE_MAX_MB", "0", 0.0), ("ADJIT_CACHE_MAX_MB", "1.5", 1.5),
    ("ADJIT_DEBUG", "1", True), ("ADJIT_DEBUG", "0", False), ("ADJIT_DEBUG", " 1 ", True),
    ("ADJIT_DISK_CACHE", "0", False), ("ADJIT_DISK_CACHE", "1", True),
    ("ADJIT_CACHE_SHARED", "1", True), ("ADJIT_LOG", " compile , ", frozenset({"compile"})),
    ("ADJIT_COMPILE_TIER", "0", 0), ("ADJIT_COMPILE_TIER", "3", 3),
    ("ADJIT_CUDA_CHIP", "sm_80", "sm_80"), ("ADJIT_CUDA_CHIP", "sm_90a", "sm_90a"),
    ("ADJIT_CUDA_CHIP", "sm_100", "sm_100"),
    ("ADJIT_MPI_TIMEOUT", "0", 0.0), ("ADJIT_MPI_TIMEOUT", "2.5", 2.5),
    ("ADJIT_MPI_CHECK", "0", False), ("ADJIT_MPI_ABORT_GRACE", "0.25", 0.25),
    ("ADJIT_DUMP_IR", "1", STDOUT), ("ADJIT_DUMP_IR", "0", None),
    ("ADJIT_CACHE_DIR", "", None),
]


@pytest.mark.parametrize("name, value", BAD)
def test_a_value_not_valid_is_refused_by_name(name, value):
    with pytest.raises(adjit.EnvironmentValueError) as info:
        read(name, {name: value})
    e = info.value
    assert str(e).startswith(f"{name} must be {VARIABLES[name].accepted}, got {value!r}")
    assert (e.name, e.value) == (name, value)
    assert "invalid literal" not in str(e) and "could not convert" not in str(e)
    assert isinstance(e, ValueError)


@pytest.mark.parametrize("name, value, meaning", GOOD)
def test_a_valid_value_means_what_the_table_says(name, value, meaning):
    assert read(name, {name: value}) == meaning


@pytest.mark.parametrize("name", sorted(VARIABLES))
def test_unset_or_blank_is_the_default(name):
    assert read(name, {}) == environment.default(name)
    if not VARIABLES[name].takes_empty:
        assert read(name, {name: "  "}) == environment.default(name)


def test_defaults():
    assert read("ADJIT_CACHE_DIR", {}) == environment.Path.home() / ".cache" / "adjit"
    assert [read(n, {}) for n in ("ADJIT_DEBUG", "ADJIT_DISK_CACHE", "ADJIT_COMPILE_TIER",
                                  "ADJIT_CUDA_CHIP", "ADJIT_MPI_TIMEOUT", "ADJIT_NUM_THREADS",
                                  "ADJIT_DUMP_IR", "ADJIT_CACHE_MAX_MB")] == [
        False, True, 3, "sm_90", 300.0, None, None, 2048.0]


def test_folders_are_checked(tmp_path):
    file = tmp_path / "a-file"
    file.write_text("")
    assert read("ADJIT_DUMP_IR", {"ADJIT_DUMP_IR": str(tmp_path)}) == tmp_path
    with pytest.raises(adjit.EnvironmentValueError, match=r"got '.*a-file' \(it is not a folder\)"):
        read("ADJIT_DUMP_IR", {"ADJIT_DUMP_IR": str(file)})
    with pytest.raises(adjit.EnvironmentValueError, match=r"\(no such folder\)"):
        read("ADJIT_DUMP_IR", {"ADJIT_DUMP_IR": str(tmp_path / "missing")})
    assert read("ADJIT_CACHE_DIR", {"ADJIT_CACHE_DIR": str(tmp_path / "new")}) == tmp_path / "new"


def test_the_error_pickles_with_its_fields():
    e = pickle.loads(pickle.dumps(adjit.EnvironmentValueError("ADJIT_X", "y", "z", "why")))
    assert (e.name, e.value, e.accepted, e.reason) == ("ADJIT_X", "y", "z", "why")
    assert str(e) == "ADJIT_X must be z, got 'y' (why)"


def test_unknown_names_warn_once_each_with_the_closest_known_name():
    env = {"ADJIT_NUM_THREAD": "2", "ADJIT_CACHEDIR": "/x", "ADJIT_QWERTYUIOP": "1",
           "ADJIT_DEBUG": "1", "ADJIT_DIFFERENTIAL_SEED": "3", "PATH": "/bin"}
    assert environment.unknown(env) == ["ADJIT_CACHEDIR", "ADJIT_NUM_THREAD", "ADJIT_QWERTYUIOP"]
    with pytest.warns(UserWarning) as record:
        environment.warn_unknown(env)
    messages = [str(w.message) for w in record]
    assert len(messages) == 3
    assert "ADJIT_CACHEDIR is set but adjit does not read it; did you mean ADJIT_CACHE_DIR?" \
        in messages[0]
    assert "did you mean ADJIT_NUM_THREADS?" in messages[1]
    assert "did you mean" not in messages[2]


def test_adjit_debug_is_checked_on_the_python_path(monkeypatch):
    monkeypatch.setenv("ADJIT_DEBUG", "maybe")
    with pytest.raises(adjit.EnvironmentValueError, match="ADJIT_DEBUG must be 0 or 1"):
        native_dispatch.debug_enabled()
    with pytest.raises(adjit.EnvironmentValueError, match="ADJIT_DEBUG"):
        twice(np.ones(2))                    # refused before anything is compiled or keyed
    monkeypatch.setenv("ADJIT_DEBUG", " 0")          # set: the native read says on
    assert native_dispatch.debug_enabled() is False
    monkeypatch.delenv("ADJIT_DEBUG")
    assert native_dispatch.debug_enabled() is False


@adjit.jit
def twice(x):
    return 2.0 * x


@adjit.jit
def dumped(x):
    return np.sin(x) + 3.0


def test_dump_ir_writes_to_the_folder_it_names_and_nowhere_else(tmp_path, monkeypatch):
    dumps, cache, work = tmp_path / "dumps", tmp_path / "cache", tmp_path / "work"
    for folder in (dumps, cache, work):
        folder.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(cache))
    # A value that is not valid reaches the caller as itself, not as an error at the
    # line being compiled.
    monkeypatch.setenv("ADJIT_CACHE_MAX_MB", "lots")
    with pytest.raises(adjit.EnvironmentValueError, match="ADJIT_CACHE_MAX_MB"):
        dumped(np.ones(3))
    monkeypatch.delenv("ADJIT_CACHE_MAX_MB")
    monkeypatch.setenv("ADJIT_DUMP_IR", str(dumps))
    np.testing.assert_allclose(dumped(np.ones(3)), np.sin(1.0) + 3.0)
    files = sorted(dumps.iterdir())
    assert [f.name.rsplit("-", 1)[-1] for f in files] == ["adj.mlir", "dialect.mlir"], files
    assert all(f.name.startswith(f"adjit-{os.getpid()}-") for f in files)
    adj, llvm = (f.read_text() for f in files)
    assert adj.startswith("// ----- adjit: entry (adj) -----\n") and "math.sin" in adj
    assert llvm.startswith("// ----- adjit: LLVM dialect -----\n") and "llvm.func" in llvm
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    assert list(work.iterdir()) == []
    assert not [p for p in cache.rglob("*") if p.suffix == ".mlir"]


def test_dump_ir_never_follows_a_planted_name(tmp_path, monkeypatch):
    """Names taken already (a symlink to a file of the user's, a file) are skipped, not
    opened: the user's file is unchanged and the text lands under the next free name."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    monkeypatch.setattr(ir_dump, "_numbers", iter(range(10)))
    first = dumps / f"adjit-{os.getpid()}-0000-LLVM-dialect.mlir"
    first.symlink_to(victim)
    (dumps / f"adjit-{os.getpid()}-0001-LLVM-dialect.mlir").write_text("someone's")
    monkeypatch.setenv("ADJIT_DUMP_IR", str(dumps))
    ir_dump.dump("LLVM dialect", "module {}")
    assert victim.read_text() == "precious" and first.is_symlink()
    assert (dumps / f"adjit-{os.getpid()}-0001-LLVM-dialect.mlir").read_text() == "someone's"
    assert ((dumps / f"adjit-{os.getpid()}-0002-LLVM-dialect.mlir").read_text()
            == "// ----- adjit: LLVM dialect -----\nmodule {}\n")


def test_dump_ir_one_prints_to_stdout(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ADJIT_DUMP_IR", "1")
    ir_dump.dump("entry (adj)", "module {}")
    assert capsys.readouterr().out == "// ----- adjit: entry (adj) -----\nmodule {}\n"
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("ADJIT_DUMP_IR", "0")
    assert not ir_dump.wanted()


def test_a_bad_value_at_import_is_a_clear_error_and_a_typo_a_warning():
    """In a fresh process: ADJIT_NUM_THREADS is read at import; the typo's warning comes
    first; the process ends with the error's one line, not int()'s."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADJIT_")}
    env.update(ADJIT_NUM_THREADS="1e9", ADJIT_NUM_THREAD="2",
               ADJIT_CACHE_DIR=os.environ.get("ADJIT_CACHE_DIR", ""))
    run = subprocess.run([sys.executable, "-c", "import adjit"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert "ADJIT_NUM_THREAD is set but adjit does not read it; did you mean " \
        "ADJIT_NUM_THREADS?" in lines[0]
    assert lines[0].startswith("<string>:1: UserWarning")    # the user's `import adjit`
    assert lines[-1] == ("adjit.core.errors.EnvironmentValueError: ADJIT_NUM_THREADS must be "
                         "a whole number from 1 to 1024, got '1e9'")
    assert "invalid literal" not in run.stderr
