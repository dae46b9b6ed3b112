"""The trust rule of runtime/trust.py: who may own and write the folders on the way to code
adjit loads, and the files it reads and writes there (issue 35, item 2).

Another user's files: as root (CI) the tests chown them to `nobody`; elsewhere the rule is
shown another owner in the status of the paths named. Shared mode's group membership and the
second-user tests below need root (to chown, to setuid): CI runs as root. As another user,
those two are skipped, saying so, and the rest run (checked as `nobody`)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import pytest

from adjit.core.errors import CacheTrustWarning
from adjit.core.kernel import KernelCacheError
from adjit.runtime import cpu_cache, files, kernel_cache, trust

NOBODY = 65534
IS_ROOT = os.geteuid() == 0
# A gid no user has as primary group and no group lists (none in the database).
STRANGER_GROUP = 4242


@pytest.fixture
def foreign(monkeypatch):
    """Makes a path another user's: chowned to nobody as root; elsewhere the rule is shown
    the path's status with another owner (its folders, this user's, stay this user's)."""
    paths: set[str] = set()
    check = trust._owner_problem

    def owner_problem(path, st, group):
        if path in paths:
            fields = list(st[:10])
            fields[4] = os.getuid() + 1          # st_uid
            st = os.stat_result(fields)
        return check(path, st, group)

    def make(path: Path) -> None:
        if IS_ROOT:
            os.lchown(path, NOBODY, -1)
        else:
            paths.add(str(path))
            monkeypatch.setattr(trust, "_owner_problem", owner_problem)
    return make


def folder(tmp_path: Path, name: str, mode: int) -> Path:
    path = tmp_path / name
    path.mkdir()
    os.chmod(path, mode)
    return path


def test_own_folders_and_files_are_trusted(tmp_path):
    root = folder(tmp_path, "root", 0o700)
    (root / "entry").write_bytes(b"x")
    os.chmod(root / "entry", 0o600)
    assert trust.problem(root) is None
    assert trust.problem(root / "entry") is None
    assert trust.problem(root / "missing" / "more") is None      # existing folders checked


@pytest.mark.parametrize("mode, why", [(0o770, "writable by its group"),
                                       (0o775, "writable by its group"),
                                       (0o707, "writable by others"),
                                       (0o777, "writable by others")])
def test_a_root_others_or_its_group_can_write_is_refused(tmp_path, mode, why):
    root = folder(tmp_path, "root", mode)
    found = trust.problem(root)
    assert found is not None and found.path == str(root) and why in found.why
    assert stat.filemode(os.stat(root).st_mode) in found.why
    assert "chmod" in found.fix and str(root) in found.fix
    # Shared mode allows the group, never others.
    shared = trust.problem(root, shared=True)
    assert (shared is None) == (mode & 0o002 == 0)


def test_a_folder_above_is_checked_and_sticky_ones_are_allowed(tmp_path):
    above = folder(tmp_path, "above", 0o777)
    root = folder(above, "root", 0o700)
    found = trust.problem(root)
    assert found.path == str(above) and "not sticky" in found.why
    os.chmod(above, 0o1777)      # like /tmp
    assert trust.problem(root) is None
    assert trust.problem(root, shared=True) is None
    # The root itself gets no such allowance: a sticky folder anyone can write is not a cache.
    os.chmod(root, 0o1777)
    assert "writable by others" in trust.problem(root).why


def test_another_users_root_or_folder_above_is_refused(tmp_path, foreign):
    above = folder(tmp_path, "above", 0o755)
    root = folder(above, "root", 0o700)
    foreign(above)
    found = trust.problem(root)
    assert found.path == str(above) and "is owned by" in found.why
    assert found.fix.startswith("use a folder of your own")


def test_another_users_entry_is_refused(tmp_path, foreign):
    root = folder(tmp_path, "root", 0o700)
    entry = root / "e.json"
    entry.write_bytes(b"{}")
    os.chmod(entry, 0o600)
    assert trust.read_file(entry)[0] == b"{}"
    foreign(entry)
    with pytest.raises(trust.UntrustedFile, match="is owned by"):
        trust.read_file(entry)


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_an_entry_others_can_write_is_refused(tmp_path, mode):
    entry = folder(tmp_path, "root", 0o700) / "e.so"
    entry.write_bytes(b"code")
    os.chmod(entry, mode)
    with pytest.raises(trust.UntrustedFile, match="writable by"):
        trust.read_file(entry)


def test_links_are_resolved_with_their_targets_checked(tmp_path, foreign):
    real = folder(tmp_path, "real", 0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    assert trust.problem(link) is None
    assert trust.problem(tmp_path / "link" / ".." / "real") is None
    # The target's folders are checked: a link to a folder others can write.
    os.chmod(real, 0o777)
    assert trust.problem(link).path == str(real)
    os.chmod(real, 0o700)
    # A link owned by another user is refused, whatever it points at.
    foreign(link)
    found = trust.problem(tmp_path / "link")
    assert found.path == str(link) and "symbolic link" in found.why


def test_link_loops_end(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert "too many symbolic links" in trust.problem(tmp_path / "a").why


def test_entries_are_read_without_following_links(tmp_path):
    root = folder(tmp_path, "root", 0o700)
    target = root / "own.json"
    target.write_bytes(b"{}")
    (root / "e.json").symlink_to(target)
    with pytest.raises(OSError):     # ELOOP: O_NOFOLLOW
        trust.read_file(root / "e.json")
    os.mkfifo(root / "fifo")
    with pytest.raises(trust.UntrustedFile, match="not a regular file"):
        trust.read_file(root / "fifo")          # and no hang on the open


def test_folders_below_the_root_are_checked(tmp_path):
    root = folder(tmp_path, "root", 0o700)
    sub = folder(root, "cpu", 0o777)
    assert trust.folder_problem(sub, root).path == str(sub)
    os.chmod(sub, 0o700)
    assert trust.folder_problem(sub, root) is None
    os.rmdir(sub)
    (root / "cpu").symlink_to(tmp_path)     # below the root nothing is followed
    assert "symbolic link" in trust.folder_problem(root / "cpu", root).why


def test_made_folders_are_0700_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        root = tmp_path / "new" / "root"
        assert trust.make_folders(root / "cpu", root) is None
        for path in (tmp_path / "new", root, root / "cpu"):
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o700, path
        shared_root = tmp_path / "shared"
        os.umask(0o077)
        assert trust.make_folders(shared_root / "gpu", shared_root, shared=True) is None
        assert stat.S_IMODE(os.stat(shared_root).st_mode) == 0o2770
        assert stat.S_IMODE(os.stat(shared_root / "gpu").st_mode) == 0o2770
    finally:
        os.umask(old)


def test_an_existing_folder_is_checked_never_changed(tmp_path):
    root = folder(tmp_path, "root", 0o775)
    found = trust.make_folders(root / "cpu", root)
    assert found.path == str(root)
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o775


def test_writes_replace_a_planted_link_never_follow_it(tmp_path):
    root = folder(tmp_path, "root", 0o700)
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    entry = root / "k.so"
    entry.symlink_to(victim)
    old = os.umask(0)
    try:
        trust.write_file(entry, b"new")
        trust.write_file(root / "shared.json", b"{}", shared=True)
    finally:
        os.umask(old)
    assert victim.read_bytes() == b"keep"
    assert not entry.is_symlink() and entry.read_bytes() == b"new"
    assert stat.S_IMODE(os.stat(entry).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(root / "shared.json").st_mode) == 0o640
    assert sorted(p.name for p in root.iterdir()) == ["k.so", "shared.json"]   # no temporaries


@pytest.mark.skipif(not IS_ROOT, reason="shared mode's group membership needs root to chown "
                    "files to another user; CI runs as root")
def test_shared_mode_trusts_members_of_the_roots_group_only(tmp_path):
    root = folder(tmp_path, "root", 0o770)
    entry = root / "e.so"
    entry.write_bytes(b"code")
    os.chown(entry, NOBODY, -1)
    # nobody's primary group is nogroup (65534): a member of that group, not of 4242.
    os.chown(root, -1, NOBODY)
    assert trust.problem(root, shared=True) is None
    group = trust.sharing_group(root)
    assert trust.read_file(entry, group)[0] == b"code"
    os.chown(root, -1, STRANGER_GROUP)
    with pytest.raises(trust.UntrustedFile, match=r"not by you, root or a member of its "
                       r"group gid 4242"):
        trust.read_file(entry, trust.sharing_group(root))
    # A group-writable folder below the root must be the sharing group's.
    sub = folder(root, "cpu", 0o770)
    os.chown(sub, -1, NOBODY)
    found = trust.folder_problem(sub, root, shared=True)
    assert found.path == str(sub) and "not by the cache's group" in found.why


def test_a_planted_temporary_name_is_skipped_never_followed(tmp_path, monkeypatch):
    """The temporary name is random; one taken (here: made predictable and planted as a link
    to a victim) is passed over (O_EXCL), never written through (O_NOFOLLOW)."""
    root = folder(tmp_path, "root", 0o700)
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    names = iter([b"\0" * 6])
    real = os.urandom
    monkeypatch.setattr(os, "urandom", lambda n: next(names, None) or real(n))
    (root / f"e.json.{'00' * 6}.tmp").symlink_to(victim)
    trust.write_file(root / "e.json", b"{}")
    assert victim.read_bytes() == b"keep" and (root / "e.json").read_bytes() == b"{}"


# ---- the disk caches under the rule (runtime/files.py) ---------------------------------


@pytest.fixture
def cache_at(monkeypatch):
    """Points the disk caches at a root (on) and forgets earlier verdicts."""
    def point(root: Path, shared: bool = False) -> None:
        monkeypatch.setenv("ADJIT_CACHE_DIR", str(root))
        monkeypatch.setenv("ADJIT_DISK_CACHE", "1")
        monkeypatch.setenv("ADJIT_CACHE_SHARED", "1" if shared else "0")
        files.forget_trust()
    yield point
    files.forget_trust()


def test_an_untrusted_root_turns_the_disk_caches_off_with_one_warning(tmp_path, cache_at,
                                                                       monkeypatch):
    root = folder(tmp_path, "root", 0o777)
    (root / "cpu").mkdir()
    reads = []
    monkeypatch.setattr(trust, "read_file", lambda *a: reads.append(a) or (b"", None))
    cache_at(root)

    def store(folder, value):
        files.write_entry(folder, "k" * 32, {"format": 1}, {"ptx": b"x"})

    def no_mlir():
        raise ImportError("no MLIR here")

    def load(folder):
        return kernel_cache.load(folder, "k" * 32)

    with pytest.warns(CacheTrustWarning) as warned:
        assert cpu_cache.directory() is None and cpu_cache.directory() is None
        assert kernel_cache.default_cache_dir() is None
        assert files.cache_settings().folder("compiler") is None
        # An explicit folder under it: not read, a miss that names why.
        with pytest.raises(files.UntrustedEntry, match="not trusted"):
            files.read_entry(root / "cpu", "k" * 32, cpu_cache.FORMAT_VERSION, "CPU entry")
        with pytest.raises(files.UntrustedFolder):
            files.write_entry(root / "cpu", "k" * 32, {"format": 1}, {"so": b"x"})
        # compile_only() and a machine without MLIR say why instead of using it.
        with pytest.raises(KernelCacheError, match="cannot store.*writable by others"):
            kernel_cache.find_or_compile("kernel k", load, lambda: 1, store,
                                         for_another_machine=True)
        monkeypatch.setenv("ADJIT_DISK_CACHE", "0")
        with pytest.raises(KernelCacheError, match="unusable.*writable by others"):
            kernel_cache.find_or_compile("kernel k", load, no_mlir, store)
    assert len(warned) == 1, [str(w.message) for w in warned]
    text = str(warned[0].message)
    assert text.startswith(f"adjit: not using the disk cache {root}: {root} is writable") and "writable by others" in text and f"chmod o-w {root}" in text
    assert "ADJIT_CACHE_DIR" in text
    assert warned[0].filename == __file__      # shown at the caller's line, not adjit's
    assert reads == [] and os.listdir(root / "cpu") == []


def test_a_group_writable_root_names_the_shared_mode_and_works_in_it(tmp_path, cache_at):
    root = folder(tmp_path, "root", 0o770)
    cache_at(root)
    with pytest.warns(CacheTrustWarning, match="ADJIT_CACHE_SHARED=1"):
        assert cpu_cache.directory() is None
    cache_at(root, shared=True)
    assert cpu_cache.directory() == root / "cpu"
    files.write_entry(root / "cpu", "k" * 32, {"format": 1}, {"so": b"x"})
    assert stat.S_IMODE(os.stat(root / "cpu").st_mode) == 0o2770
    assert stat.S_IMODE(os.stat(root / "cpu" / f"{'k' * 32}.so").st_mode) == 0o640
    assert files.read_entry(root / "cpu", "k" * 32, 1, "entry")[1] == {"so": b"x"}


def test_cache_folders_are_made_0700_under_a_permissive_umask(tmp_path, cache_at):
    root = tmp_path / "made"
    cache_at(root)
    old = os.umask(0)
    try:
        files.write_entry(root / "cpu", "k" * 32, {"format": 1}, {"so": b"x"})
    finally:
        os.umask(old)
    for path in (root, root / "cpu"):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    for name in os.listdir(root / "cpu"):
        assert stat.S_IMODE(os.stat(root / "cpu" / name).st_mode) == 0o600


def test_the_check_is_made_once_per_folder(tmp_path, cache_at, monkeypatch):
    root = folder(tmp_path, "root", 0o700)
    (root / "cpu").mkdir()
    (root / "compiler").mkdir()
    cache_at(root)
    walks, below = [], []
    walk, check = trust.problem, trust.below_problem
    monkeypatch.setattr(trust, "problem", lambda *a: walks.append(a) or walk(*a))
    monkeypatch.setattr(trust, "below_problem", lambda *a: below.append(a) or check(*a))
    for _ in range(3):
        assert cpu_cache.directory() == root / "cpu"
        assert files.cache_settings().folder("compiler") == root / "compiler"
    assert len(walks) == 1          # the root's chain, for both folders
    assert len(below) == 2          # each folder once


def test_the_setting_is_checked():
    env = {**os.environ, "ADJIT_CACHE_SHARED": "yes"}
    with pytest.MonkeyPatch.context() as m:
        m.setattr(os, "environ", env)
        with pytest.raises(ValueError, match="ADJIT_CACHE_SHARED must be 0 or 1"):
            files.cache_settings()


# ---- a second user plants code in a shared cache (issue 35, item 5) ---------------------
# The first user's processes are children of this one (as root in CI: this process's
# user), each a new interpreter that calls a @jit function whose compiled code the cache
# holds. The second user is `nobody`, in a child forked from this process that takes on
# nobody's uid and the cache's group (a fork, not a new interpreter: nobody may not be able
# to reach this Python at all, e.g. under /root). It does what an attacker with write access
# to the folder can: replaces the function's shared object by one whose constructor creates
# a marker file, reseals the metadata (sizes, SHA-256, checksum: what the seal cannot stop),
# and replaces the compiler's kept digest by a link to a file of the first user's.


MODULE = """\
import adjit

@adjit.jit
def poly(x: adjit.f64) -> adjit.f64:
    return 3.0 * x * x + 1.0
"""
CALL = """\
import json, sys, warnings
sys.path.insert(0, sys.argv[1])
import adjit, planted_module
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    value = planted_module.poly(2.0)
    adjit.wait_for_builds()
print(json.dumps({"value": value, "warnings": [[w.category.__name__, str(w.message)]
                                               for w in caught]}))
"""
EVIL_C = """\
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
    int fd = open("%s", O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) close(fd);
}
"""


def call_poly(tmp: Path, root: Path, shared: bool, check: bool = True) -> dict:
    """A process of the first user calls poly(2.0) with the cache at `root` (`check`: it
    must succeed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADJIT_CACHE")}
    env.update(ADJIT_CACHE_DIR=str(root), ADJIT_DISK_CACHE="1",
               ADJIT_CACHE_SHARED="1" if shared else "0")
    done = subprocess.run([sys.executable, "-c", CALL, str(tmp)], capture_output=True,
                          text=True, env=env, cwd=tmp, timeout=300)
    if not check:
        return {}
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def plant(root: Path, evil: bytes, victim: Path) -> str:
    """What the second user does to the cache at `root`; returns the key of the entry whose
    shared object it replaced."""
    cpu = root / "cpu"
    (record,) = cpu.glob("src-*.json")
    key = json.loads(record.read_text())["module"]
    meta = json.loads((cpu / f"{key}.json").read_text())
    meta["files"]["so"] = {"size": len(evil), "sha256": hashlib.sha256(evil).hexdigest()}
    del meta["checksum"]
    meta["checksum"] = hashlib.sha256(json.dumps(meta, sort_keys=True, separators=(",", ":"),
                                                 ensure_ascii=True).encode()).hexdigest()
    for name, data in ((f"{key}.so", evil), (f"{key}.json", json.dumps(meta).encode())):
        (cpu / f"{name}.new").write_bytes(data)
        os.replace(cpu / f"{name}.new", cpu / name)
    (kept,) = (root / "compiler").iterdir()
    os.unlink(kept)
    os.symlink(victim, kept)
    return key


def as_second_user(group: int, work) -> None:
    """Runs `work()` in a forked child as nobody with group `group` (as root), or in this
    process (another user cannot be had without root)."""
    if not IS_ROOT:
        work()
        return
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:      # the child: never returns into pytest
        status = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(group)
            os.setuid(NOBODY)
            work()
            status = 0
        except BaseException:
            os.write(write, traceback.format_exc().encode())
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        error = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, error


def copy_of(root: Path, dest: Path) -> Path:
    """`root` copied with owners, groups, modes and links as they are."""
    subprocess.run(["cp", "-a", str(root), str(dest)], check=True)
    return dest


@pytest.fixture(scope="module")
def planted_cache():
    """(work folder, a group-writable cache root in which the first user compiled poly and
    the second user then planted code, the victim file, the marker the code creates, the
    planted entry's key)."""
    # Not under pytest's folder (0700): the second user reaches the cache through it.
    tmp = Path(tempfile.mkdtemp(prefix="adjit-second-user-"))
    os.chmod(tmp, 0o755)
    try:
        yield _planted(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _planted(tmp: Path) -> tuple[Path, Path, Path, Path, str]:
    (tmp / "planted_module.py").write_text(MODULE)
    marker, victim = tmp / "marker", tmp / "victim"
    victim.write_text("the first user's file")
    (tmp / "evil.c").write_text(EVIL_C % marker)
    subprocess.run(["cc", "-shared", "-fPIC", str(tmp / "evil.c"), "-o", str(tmp / "evil.so")],
                   check=True)
    evil = (tmp / "evil.so").read_bytes()
    # The group: one nobody is not a member of (as root), else this user's own.
    group = STRANGER_GROUP if IS_ROOT else os.getgid()
    root = tmp / "shared"
    root.mkdir()
    os.chown(root, -1, group)
    os.chmod(root, 0o2770)        # setgid: what is made in it is the group's
    first = call_poly(tmp, root, shared=True)
    assert first["value"] == 13.0 and first["warnings"] == []
    keys = []
    as_second_user(group, lambda: keys.append(plant(root, evil, victim)))
    key = keys[0] if keys else json.loads(next((root / "cpu").glob("src-*.json")).read_text())["module"]
    assert (root / "cpu" / f"{key}.so").read_bytes() == evil
    return tmp, root, victim, marker, key


def test_the_planted_code_runs_where_the_cache_is_trusted(planted_cache, tmp_path):
    """The control: the same planted entry, owned by the first user (as if they had made it),
    is loaded and run. So what the tests below refuse is a working attack."""
    tmp, root, _, marker, key = planted_cache
    mine = copy_of(root, tmp_path / "mine")
    for path in (mine / "cpu").iterdir():
        os.lchown(path, os.geteuid(), -1)
    for path in (mine, mine / "cpu", mine / "compiler"):
        os.chmod(path, 0o700)
    try:
        call_poly(tmp, mine, shared=False, check=False)     # (the planted .so has no poly)
        assert marker.exists(), "the planted shared object was not loaded: no attack to refuse"
    finally:
        marker.unlink(missing_ok=True)


def test_a_group_writable_cache_is_not_used(planted_cache, tmp_path):
    tmp, root, victim, marker, _ = planted_cache
    cache = copy_of(root, tmp_path / "cache")
    before = sorted((p.name, p.stat(follow_symlinks=False).st_mtime_ns)
                    for p in cache.rglob("*"))
    run = call_poly(tmp, cache, shared=False)
    assert run["value"] == 13.0
    assert not marker.exists()
    (warning,) = run["warnings"]
    assert warning[0] == "CacheTrustWarning"
    assert f"{cache} is writable by its group" in warning[1]
    assert "chmod go-w" in warning[1] and "ADJIT_CACHE_SHARED=1" in warning[1]
    after = sorted((p.name, p.stat(follow_symlinks=False).st_mtime_ns)
                   for p in cache.rglob("*"))
    assert after == before and victim.read_text() == "the first user's file"


@pytest.mark.skipif(not IS_ROOT, reason="a second user's files need a second user: the "
                    "test runs as root (as CI does), which can setuid to nobody")
def test_a_second_users_entries_in_a_shared_cache_are_never_loaded(planted_cache, tmp_path):
    tmp, root, victim, marker, key = planted_cache
    cache = copy_of(root, tmp_path / "cache")
    so = cache / "cpu" / f"{key}.so"
    assert so.stat().st_uid == NOBODY
    run = call_poly(tmp, cache, shared=True)
    assert run["value"] == 13.0
    assert not marker.exists()
    (warning,) = run["warnings"]
    assert warning[0] == "CacheTrustWarning"
    assert (f"not loading {cache / 'cpu' / key}.json" in warning[1]
            and "owned by nobody (uid 65534)" in warning[1]
            and "not by you, root or a member of its group gid 4242" in warning[1]), warning
    # What the first user wrote since: their own files, in place of the planted ones; the
    # link planted at the compiler's digest replaced, its target untouched.
    assert victim.read_text() == "the first user's file"
    (kept,) = (cache / "compiler").iterdir()
    assert not kept.is_symlink() and kept.stat().st_uid == os.geteuid()
    assert so.stat().st_uid == os.geteuid() and so.read_bytes() != (tmp / "evil.so").read_bytes()


def test_build_folder_clean_up_touches_only_this_users_folders(tmp_path, monkeypatch):
    """runtime/build_folders.py removes dead processes' build folders: only this user's,
    never through a link."""
    from adjit.runtime import build_folders
    old = 0.0          # (the epoch: long dead)
    dead = 2**22 + 12345     # above any pid_max: no such process
    theirs = tmp_path / f"{build_folders.PREFIX}{dead}-theirs"
    theirs.mkdir()
    (theirs / "module.ll").write_text("another user's build")
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep").write_text("kept")
    link = tmp_path / f"{build_folders.PREFIX}{dead}-link"
    link.symlink_to(target)
    if IS_ROOT:
        os.chown(theirs, NOBODY, -1)
    else:     # (this user's folders become another's: the clean-up compares uids)
        monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
    for path in (theirs, target):
        os.utime(path, (old, old))
    assert build_folders.remove_stale(tmp_path) == []
    assert (theirs / "module.ll").exists() and (target / "keep").exists() and link.is_symlink()
