"""Background builds of the CPU disk cache: `adjit.wait_for_builds()` waits for them (so
that timings do not depend on one competing for a core), and the work folders of processes
killed during a build are removed by a later build (runtime/build_folders.py).

The processes that build run with the disk cache on (the suite turns it off), each with a
cache folder and a temporary folder of their own."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from adjit.runtime import build_folders

if shutil.which("cc") is None:
    pytest.skip("background builds need a C compiler (cc)", allow_module_level=True)

# Compiled by the ExecutionEngine and built in the background (no math calls: those modules
# are built at once). `SCALE` makes each process's module its own.
SCRIPT = '''
import os, sys, numpy as np, adjit
sys.path.insert(0, {folder!r})
from rt_fork_kernels import divide
x = np.arange(1000, dtype=np.int64) * {scale}
out = np.empty_like(x)
divide(x, np.ones_like(x), out, ndrange=len(x))
assert (out == x).all()
'''


def _env(tmp_path: Path) -> dict:
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {**os.environ, "ADJIT_DISK_CACHE": "1", "ADJIT_CACHE_DIR": str(tmp_path / "cache"),
            "TMPDIR": str(tmp_path / "tmp")}


def _script(scale: int, tail: str) -> str:
    return textwrap.dedent(SCRIPT).format(folder=os.path.dirname(__file__), scale=scale) + \
        textwrap.dedent(tail)


def test_wait_for_builds_returns_once_the_entry_is_stored(tmp_path):
    tail = '''
    from pathlib import Path
    from adjit.runtime import cpu_cache
    folder = Path(os.environ["ADJIT_CACHE_DIR"], "cpu")
    before = len(list(folder.glob("*.so")))
    writer = cpu_cache._writer
    assert writer is not None and writer.jobs.unfinished_tasks, "no build queued"
    assert adjit.wait_for_builds() is True
    assert len(list(folder.glob("*.so"))) == before + 1
    # (a module entry's .json; src-*.json are source records: runtime/source_index.py)
    assert len(list(folder.glob("[!s]*.json"))) == before + 1
    assert adjit.wait_for_builds(timeout=0) is True       # nothing left
    print("ok")
    '''
    done = subprocess.run([sys.executable, "-c", _script(3, tail)], env=_env(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr


def test_wait_for_builds_without_compiling_imports_no_mlir(tmp_path):
    code = "import sys, adjit; assert adjit.wait_for_builds() is True; print('mlir' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _aged(path: Path, seconds: float = 3600) -> Path:
    old = time.time() - seconds
    os.utime(path, (old, old))
    return path


def test_remove_stale_takes_only_orphans(tmp_path):
    dead = _dead_pid()
    made = {}
    for name, pid, age in [("dead_old", dead, 3600), ("dead_recent", dead, 0),
                           ("mine_old", os.getpid(), 3600), ("parent_old", os.getppid(), 3600),
                           ("unnamed_old", None, 3600), ("unnamed_recent", None, 0)]:
        folder = tmp_path / (f"{build_folders.PREFIX}{pid}-{name}" if pid is not None
                             else f"{build_folders.PREFIX}{name}")
        folder.mkdir()
        (folder / "module.ll").write_text("; a build's file")
        made[name] = _aged(folder, age) if age else folder
    (tmp_path / "adjit-other-dead").mkdir()            # not a build folder
    removed = build_folders.remove_stale(tmp_path)
    assert sorted(removed) == sorted([made["dead_old"], made["unnamed_old"]])
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {made[n].name for n in ("dead_recent", "mine_old", "parent_old",
                                           "unnamed_recent")} | {"adjit-other-dead"}
    assert build_folders.owner(made["dead_old"].name) == dead
    assert build_folders.owner(made["unnamed_old"].name) is None


def test_a_process_killed_during_a_build_leaves_a_folder_the_next_build_removes(tmp_path):
    env = _env(tmp_path)
    tmp = tmp_path / "tmp"
    # The process kills itself (SIGKILL: nothing of it runs) once its build folder exists.
    tail = '''
    import glob, signal, time
    pattern = os.path.join(os.environ["TMPDIR"], f"adjit-build-{os.getpid()}-*")
    for _ in range(10000):
        if glob.glob(pattern):
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.001)
    print("no build folder appeared")
    '''
    child = subprocess.Popen([sys.executable, "-c", _script(5, tail)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = child.communicate(timeout=300)
    assert child.returncode == -signal.SIGKILL, out + err
    [left] = list(tmp.glob("adjit-build-*"))
    assert build_folders.owner(left.name) == child.pid
    # The killed process's tools may still be finishing in it: wait until it stops changing.
    for _ in range(100):
        before = left.stat().st_mtime
        time.sleep(0.2)
        if left.stat().st_mtime == before:
            break
    _aged(left)
    tail = '''
    assert adjit.wait_for_builds() is True
    print("ok")
    '''
    done = subprocess.run([sys.executable, "-c", _script(7, tail)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr
    assert not left.exists()
    assert list(tmp.glob("adjit-build-*")) == []       # the build cleaned up its own folder
