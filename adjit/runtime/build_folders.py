"""The temporary folders shared-object builds work in (runtime/cpu_cache.py), and the removal
of those that killed processes left behind.

A build works in `<temporary folder>/adjit-build-<pid>-<random>` and removes it when done;
a process killed during a build (SIGKILL, the OOM killer, a crash: nothing of it runs any
more) leaves its folder (~50 KB) forever. So the first build of each process removes the
folders whose owning process is gone. A folder is left alone while its process lives, or when
it changed in the last STALE_AFTER_S seconds: a pid seen from another pid namespace (a
container sharing /tmp) may look dead while its build runs, and a build takes about a second.
Folders named before the pid was in the name (`adjit-build-<random>`) count as orphans once
they are that old. Only this user's folders are removed, never through a link (a link under
the prefix is not a folder; shutil.rmtree removes a tree without following links in it).
Folders are made by tempfile.mkdtemp: mode 0700, a new random name.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

PREFIX = "adjit-build-"
STALE_AFTER_S = 60.0

_cleaned_in: int | None = None   # the pid of the process that already cleaned (a fork: again)


def new_folder() -> Path:
    """A new, empty folder for a build of this process (the caller removes it); the first
    call in a process first removes what dead processes left."""
    global _cleaned_in
    if _cleaned_in != os.getpid():   # no lock: two threads cleaning at once do no harm
        _cleaned_in = os.getpid()
        remove_stale()
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))


def owner(name: str) -> int | None:
    """The pid in a build folder's name, None for a name without one."""
    pid, dash, _ = name[len(PREFIX):].partition("-")
    return int(pid) if dash and pid.isdigit() else None


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:    # another user's process
        return True
    return True


def remove_stale(root: str | os.PathLike | None = None) -> list[Path]:
    """Removes the build folders in `root` (default: the temporary folder) that are orphans
    (the module docstring says which); returns them."""
    root = Path(root if root is not None else tempfile.gettempdir())
    removed: list[Path] = []
    now = time.time()
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        try:
            if not entry.name.startswith(PREFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
            # Only this user's folders: another user's build (a pid in another pid
            # namespace) is theirs to clean up, and a folder planted under the prefix is
            # not ours to touch.
            if st.st_uid != os.geteuid():
                continue
            pid = owner(entry.name)
            if pid is not None and _alive(pid):
                continue
            if now - st.st_mtime < STALE_AFTER_S:
                continue
        except OSError:   # gone meanwhile, or unreadable
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        if not os.path.lexists(entry.path):
            removed.append(Path(entry.path))
    return removed
