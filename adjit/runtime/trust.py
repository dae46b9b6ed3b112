"""Whether files on disk may be trusted to hold code this process runs: the one rule, for
the disk caches (runtime/files.py) and for loaded artifacts.

adjit loads native code from disk (shared objects, PTX, host programs) and records that
choose which code runs (the source index, the compiler's digest). Whoever can write a
folder on the way to such a file can make this process run their code. So a path is
trusted, as ssh's StrictModes and sudo decide it, when the path and every folder from it up
to `/` are owned by this user (the effective uid) or root and are not writable by group or
others, with two allowances:

- a folder ABOVE the trusted path (the cache root, an artifact) that has the sticky bit
  (`/tmp`: `drwxrwxrwt root`) may be writable by all: nobody but its owner and root can
  rename or remove what another user made in it;
- shared mode (`ADJIT_CACHE_SHARED=1`, a cache kept for a group): the trusted path and the
  folders below it may be writable by the path's group (the sharing group; never by others;
  a group-writable folder below it must belong to that group), and their owners, and those
  of the files read from them, may also be members of that group (a user whose primary
  group it is, or one the group database lists).

Symbolic links on the way are resolved one at a time: a link must be owned by this user or
root (fs.protected_symlinks' rule), and the folders of its target, from `/` down, are
checked like the rest, so the real folder and the way to it are both trusted. Below a
cache root nothing is followed: adjit makes those folders and files itself, and a link
there is refused.

A path that does not exist yet has its existing folders checked: what adjit creates in a
trusted folder is its own (make_folders creates folders mode 0700, 2770 shared (setgid:
their files are the group's), whatever the umask, and checks any it finds already made).

MLIR-free; each check is a few lstat calls (microseconds), made once per process per cache
folder by runtime/files.py.
"""
from __future__ import annotations

import errno
import functools
import os
import stat

# Shared: setgid, so that what is made in a folder is the folder's group's (the sharing
# group's), which can then read it.
FOLDER_MODE, SHARED_FOLDER_MODE = 0o700, 0o2770
# Entries: readable by the group in shared mode, never writable but by their owner: an entry
# is replaced by a rename, never rewritten in place.
FILE_MODE, SHARED_FILE_MODE = 0o600, 0o640
_MAX_LINKS = 40     # Linux's own limit on the links met while resolving one path


class Problem:
    """Why a path is not trusted: `path`, the first file or folder that fails the rule,
    `why` (its owner or mode), `fix` (what the user can do about it). (A plain class: a
    dataclass costs every `import adjit` 0.5 ms.)"""
    __slots__ = ("path", "why", "fix")

    def __init__(self, path: str, why: str, fix: str):
        self.path, self.why, self.fix = path, why, fix

    def __str__(self) -> str:
        return f"{self.path} {self.why}"

    def __repr__(self) -> str:
        return f"Problem({self.path!r}, {self.why!r}, {self.fix!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Problem)
                and (self.path, self.why, self.fix) == (other.path, other.why, other.fix))

    __hash__ = None     # (mutable, compared by value)


def folder_mode(shared: bool) -> int:
    """The mode of the folders adjit makes under a cache root."""
    return SHARED_FOLDER_MODE if shared else FOLDER_MODE


def file_mode(shared: bool) -> int:
    """The mode of the files adjit writes under a cache root."""
    return SHARED_FILE_MODE if shared else FILE_MODE


# pwd and grp are imported where used: only messages and shared mode need them (0.3 ms
# of every `import adjit` otherwise).
@functools.cache
def _user(uid: int) -> str:
    import pwd
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


@functools.cache
def _group(gid: int) -> str:
    import grp
    try:
        return f"{grp.getgrgid(gid).gr_name} (gid {gid})"
    except KeyError:
        return f"gid {gid}"


@functools.cache
def is_member(uid: int, gid: int) -> bool:
    """Whether user `uid` is a member of group `gid` by the user and group databases: its
    primary group, or a group that lists it (looked up once per pair per process)."""
    import grp
    import pwd
    try:
        user = pwd.getpwuid(uid)
    except KeyError:     # no such user: a member of nothing
        return False
    if user.pw_gid == gid:
        return True
    try:
        return user.pw_name in grp.getgrgid(gid).gr_mem
    except KeyError:
        return False


def _owner_ok(uid: int, group: int | None) -> bool:
    """This user, root, or (shared mode: `group` the sharing group) one of its members."""
    return uid in (os.geteuid(), 0) or (group is not None and is_member(uid, group))


def _owner_problem(path: str, st: os.stat_result, group: int | None) -> Problem | None:
    if _owner_ok(st.st_uid, group):
        return None
    whom = "you" + (", root or a member of its group " + _group(group)
                    if group is not None else " or root")
    return Problem(path, f"is owned by {_user(st.st_uid)}, not by {whom}",
                   "use a folder of your own (for the cache: set ADJIT_CACHE_DIR to one)")


def _mode_problem(path: str, st: os.stat_result, group: int | None) -> Problem | None:
    """Writability of a file or folder at or below the trusted path; `group`: the sharing
    group in shared mode, else None."""
    mode = st.st_mode
    if mode & stat.S_IWOTH:
        return Problem(path, f"is writable by others (mode {stat.filemode(mode)})",
                       f"chmod o-w {path} (or chmod 700 {path})")
    if mode & stat.S_IWGRP:
        if group is None:
            return Problem(path, "is writable by its group "
                           f"{_group(st.st_gid)} (mode {stat.filemode(mode)})",
                           f"chmod go-w {path} (or chmod 700 {path}), or set "
                           "ADJIT_CACHE_SHARED=1 to share the cache with that group")
        if st.st_gid != group:
            return Problem(path, f"is writable by group {_group(st.st_gid)}, not by the "
                           f"cache's group {_group(group)} (mode {stat.filemode(mode)})",
                           f"chgrp {group} {path} or chmod g-w {path}")
    return None


def _above_problem(path: str, st: os.stat_result) -> Problem | None:
    """A folder above the trusted path: this user's or root's, not writable by group or
    others unless it has the sticky bit."""
    if not stat.S_ISDIR(st.st_mode):
        return Problem(path, "is not a folder", "choose another path")
    found = _owner_problem(path, st, None)
    if found is None and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (
            st.st_mode & stat.S_ISVTX):
        found = Problem(path, "is writable by " + ("others" if st.st_mode & stat.S_IWOTH
                                                  else f"its group {_group(st.st_gid)}")
                        + f" (mode {stat.filemode(st.st_mode)}) and is not sticky",
                        f"chmod go-w {path}, or choose a folder elsewhere")
    return found


def _components(path: str) -> list[str]:
    return [c for c in path.split("/") if c not in ("", ".")]


def _walk(path: str) -> tuple[str, os.stat_result | None, Problem | None]:
    """(the real path of `path`, its lstat (None if it does not exist), a problem of a
    folder above it or a link on the way), checking every folder walked through and every
    link's owner; links resolved one component at a time."""
    pending = list(reversed(_components(os.path.abspath(path))))
    current = "/"
    st = os.lstat(current)
    links = 0
    while pending:
        name = pending.pop()
        if name == "..":
            current = os.path.dirname(current)     # real, so its parent is the real one
            st = os.lstat(current)
            continue
        if (found := _above_problem(current, st)) is not None:
            return current, st, found
        candidate = os.path.join(current, name)
        try:
            st = os.lstat(candidate)
        except FileNotFoundError:
            return candidate, None, None
        except NotADirectoryError:
            return candidate, None, Problem(current, "is not a folder", "choose another path")
        if stat.S_ISLNK(st.st_mode):
            links += 1
            if links > _MAX_LINKS:
                return candidate, st, Problem(candidate, "leads through too many symbolic "
                                              "links", "choose another path")
            if (found := _owner_problem(candidate, st, None)) is not None:
                return candidate, st, Problem(candidate, "is a symbolic link " + found.why,
                                              found.fix)
            target = os.readlink(candidate)
            if target.startswith("/"):
                current, st = "/", os.lstat("/")
            pending.extend(reversed(_components(target)))
            st = os.lstat(current)
            continue
        current = candidate
    return current, st, None


def problem(path: str | os.PathLike, shared: bool = False) -> Problem | None:
    """None when `path` (a file or a folder: a cache root, an artifact) can be trusted by
    the module docstring's rule, else the Problem of the first path that cannot. With
    `shared`, `path` may be writable by its group and owned by a member of it. A path that
    does not exist: its existing folders are checked."""
    real, st, found = _walk(os.fspath(path))
    if found is not None or st is None:
        return found
    group = st.st_gid if shared else None
    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
        return Problem(real, "is neither a folder nor a regular file", "choose another path")
    return _owner_problem(real, st, group) or _mode_problem(real, st, group)


def sharing_group(root: str | os.PathLike) -> int:
    """The group a shared cache is shared with: its root's (real) group."""
    return os.stat(root).st_gid


def inside_problem(path: str, st: os.stat_result, group: int | None,
                   folder: bool) -> Problem | None:
    """A file or folder (by its lstat or fstat `st`) at or below a trusted cache root: a real
    folder or regular file (no link: adjit makes these itself), this user's, root's or
    (shared mode, `group` the sharing group, else None) a member's, not writable by others,
    nor by the group unless shared."""
    if stat.S_ISLNK(st.st_mode) or not (folder or stat.S_ISREG(st.st_mode)):
        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        return Problem(path, f"is {what} (adjit makes its cache "
                       f"{'folders' if folder else 'files'} itself)",
                       f"remove {path}")
    if folder and not stat.S_ISDIR(st.st_mode):
        return None     # a file where a folder belongs: nothing can be read through it
    return _owner_problem(path, st, group) or _mode_problem(path, st, group)


def folder_problem(folder: str | os.PathLike, root: str | os.PathLike,
                   shared: bool = False) -> Problem | None:
    """`root`'s problem (problem()), else that of the first folder from it down to `folder`
    (a folder at or below it) that is not trusted (below_problem). Missing folders are
    not problems: make_folders makes and checks them."""
    found = problem(root, shared)
    if found is not None:
        return found
    group = sharing_group(root) if shared and os.path.exists(root) else None
    return below_problem(folder, root, group)


def below_problem(folder: str | os.PathLike, root: str | os.PathLike,
                  group: int | None) -> Problem | None:
    """The problem of the first folder below trusted cache root `root` down to `folder`
    (inside_problem; `group`: the sharing group in shared mode, else None), None if all
    are trusted or missing."""
    current = os.fspath(root)
    for name in _components(os.path.relpath(folder, root)):
        current = os.path.join(current, name)
        try:
            st = os.lstat(current)
        except (FileNotFoundError, NotADirectoryError):    # nothing there to read
            return None
        if (found := inside_problem(current, st, group, folder=True)) is not None:
            return found
    return None


def make_folders(folder: str | os.PathLike, root: str | os.PathLike,
                 shared: bool = False) -> Problem | None:
    """Makes `folder` (at or below cache root `root`) and what is missing of the way to it,
    each made folder mode 0700 (shared: 2770, and the root's group below it) whatever the
    umask; a folder found already made is checked instead, never changed. The Problem of the
    first untrusted one, None when all are trusted. OSError when a folder cannot be made."""
    root, folder = os.path.abspath(root), os.path.abspath(folder)
    # Folders above the root: not writable but by this user (the rule above it); in shared
    # mode readable by all, so that the group's members reach the root.
    above_mode = 0o755 if shared else FOLDER_MODE
    missing = []
    current = folder
    while not os.path.lexists(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for path in reversed(missing):
        inside = os.path.commonpath([root, path]) == root
        mode = folder_mode(shared) if inside else above_mode
        try:
            os.mkdir(path, mode)
        except FileExistsError:     # made meanwhile by another process: checked below
            continue
        if shared and inside and path != root:
            try:
                os.chown(path, -1, sharing_group(root))
            except OSError as e:
                if e.errno not in (errno.EPERM, errno.EACCES):
                    raise
        os.chmod(path, mode)        # the umask may have taken bits off (0770 -> 0750)
    return folder_problem(folder, root, shared)


class UntrustedFile(OSError):
    """A file that may not be read as code or as a record of it (trust.read_file)."""

    def __init__(self, problem: Problem):
        super().__init__(str(problem))
        self.problem = problem


def read_file(path: str | os.PathLike, group: int | None = None) -> tuple[bytes, os.stat_result]:
    """(the bytes of the file at `path`, its fstat), opened without following a link and
    checked on the open file (inside_problem: `group` the sharing group in shared mode);
    UntrustedFile when it fails the rule, FileNotFoundError when there is none, OSError
    when it cannot be read (ELOOP: a link)."""
    # O_NONBLOCK: a FIFO planted under the name does not hang the open (regular files
    # ignore it).
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        found = inside_problem(os.fspath(path), st, group, folder=False)
        if found is not None:
            raise UntrustedFile(found)
        # One read of the size fstat gave, and one byte more: a short read is the end of a
        # regular file, so one system call reads a file that did not grow meanwhile.
        data = os.read(fd, st.st_size + 1)
        if len(data) > st.st_size:       # it grew meanwhile: the rest too
            chunks = [data]
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
            data = b"".join(chunks)
        return data, st
    finally:
        os.close(fd)


def write_file(path: str | os.PathLike, data: bytes, shared: bool = False) -> None:
    """Writes `path` atomically without following any link: a new file created with
    O_CREAT|O_EXCL|O_NOFOLLOW (mode 0600, shared 0640, whatever the umask) under a random
    name in the same folder, then renamed over `path` (a rename replaces a link there, never
    writes through it). A reader sees the old file or all of the new one."""
    path = os.fspath(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    mode = file_mode(shared)
    for _ in range(100):
        tmp = f"{path}.{os.urandom(6).hex()}.tmp"
        try:
            fd = os.open(tmp, flags, mode)
        except FileExistsError:     # a name taken (planted): another one
            continue
        break
    else:
        raise FileExistsError(errno.EEXIST, "no free temporary name", path)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def warning_text(place: str, found: Problem, entry: bool = False) -> str:
    """The warning that the disk cache folder `place` is not used (with `entry`: that a
    file in it is not loaded, and is compiled again): which path, why, and the fix."""
    other = ("" if "ADJIT_CACHE_DIR" in found.fix
             else "; or set ADJIT_CACHE_DIR to a folder of your own")
    if entry:
        return (f"adjit: not loading {found.path} from the disk cache {place}: it "
                f"{found.why}, so it may not be code you compiled; it is compiled again. "
                f"Fix: {found.fix}{other}")
    return (f"adjit: not using the disk cache {place}: {found}, so others could make this "
            "process run code of theirs; compiled code is used without the disk cache. "
            f"Fix: {found.fix}{other}")
