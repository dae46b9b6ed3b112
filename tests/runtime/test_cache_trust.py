"""The trust rule of runtime/trust.py: who may own and write the folders on the way to code
adjit loads, and the files it reads and writes there (issue 35, item 2).

Another user's files: as root (CI) the test chowns them to `nobody`; elsewhere it makes this
user look like someone else (os.geteuid patched), so that its own files are "another
user's". Shared mode's group membership needs root to chown, as do the second-user
tests below (CI runs as root)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from adjit.runtime import trust

NOBODY = 65534
IS_ROOT = os.geteuid() == 0
# A gid no user has as primary group and no group lists (none in the database).
STRANGER_GROUP = 4242


@pytest.fixture
def foreign(monkeypatch):
    """Makes a path another user's: chowned to nobody as root, else this process plays
    another user."""
    def make(path: Path) -> None:
        if IS_ROOT:
            os.lchown(path, NOBODY, -1)
        else:
            monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
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
    assert found.fix == "use a folder of your own"


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
        assert stat.S_IMODE(os.stat(shared_root).st_mode) == 0o770
        assert stat.S_IMODE(os.stat(shared_root / "gpu").st_mode) == 0o770
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
