"""The disk caches' files: where they live (the one reader of the ADJIT_* cache settings),
how an entry is written, checked and evicted. Shared by the CPU cache (cpu_cache.py), the GPU
kernel cache (kernel_cache.py) and host programs (host_program.py); MLIR-free.

Settings, read here (through core/environment.py, which checks them) and nowhere else:
- `ADJIT_CACHE_DIR`: the root folder (unset: `~/.cache/adjit`); the CPU cache is `<root>/cpu`,
  the GPU kernel cache `<root>/gpu`. Set but empty: no folder, the caches are off.
- `ADJIT_DISK_CACHE`: `0` turns the caches off, `1` (or unset) on; anything else is refused.
- `ADJIT_CACHE_MAX_MB`: the cap of each folder, a finite number >= 0 (0: no cap).
- `ADJIT_CACHE_SHARED`: `1` for a cache kept for a group (its root and folders may be
  writable by the root's group, and hold entries of the group's members), `0` (or unset): a
  cache of this user's alone.
Off means a process neither reuses nor keeps what it compiles. The GPU folder is also how
kernels travel to a machine without MLIR, and that is not a cache: kernel_cache.find_or_compile
says what still reads and writes it when the caches are off.

An entry is `<key>.json` (its metadata) and its code files `<key>.<ext>`. The metadata records
the entry's key, its format version, the size and SHA-256 of each code file, and a SHA-256 of
the metadata itself (`checksum`, over its canonical JSON without the checksum), so an entry
misfiled under another key, an edited metadata value or a changed code file reads as damaged
(`DamagedEntry`, naming the file that is wrong), which the caches treat as a miss and rebuild.
This guards against damage and misplaced files, not against someone who can write the folder
(they can write a consistent entry of their own): trust does that. A cache folder is used
only when runtime/trust.py's rule trusts it (the root and every folder up to `/` are this
user's or root's and not writable by group or others; `ADJIT_CACHE_SHARED=1` allows the
root's group), checked once per process per folder (`CacheSettings.problem`); an untrusted
one is not read nor written, with one CacheTrustWarning naming the folder, why, and the fix.
Folders adjit makes are mode 0700 (2770 shared), whatever the umask. Every file is read
with O_NOFOLLOW and checked on the open file (a regular file, this user's or root's (or a
member's, shared), not writable by others); every file is written under a new name made
with O_EXCL|O_NOFOLLOW and renamed into place, so a link planted under an entry's name is
replaced, never written through. Entries are loaded by path once checked: only those the
folder's rule trusts can replace them meanwhile.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..core.environment import read
from ..core import user_warnings
from ..core.errors import CacheTrustWarning
from . import trust


@dataclass(frozen=True)
class CacheSettings:
    """What the ADJIT_* cache settings say, checked."""
    root: Path | None       # None: ADJIT_CACHE_DIR is set but empty
    enabled: bool           # False: ADJIT_DISK_CACHE=0 or no root
    max_bytes: int          # 0: no cap
    shared: bool = False    # ADJIT_CACHE_SHARED=1: a group's cache

    def folder(self, kind: str) -> Path | None:
        """The cache folder of `kind` ("cpu", "gpu", "compiler"), or None when the caches
        are off or it is not trusted (problem(): one CacheTrustWarning)."""
        if not self.enabled:
            return None
        folder = self.root / kind
        return folder if self.problem(folder) is None else None

    def kernel_folder(self) -> Path | None:
        """The GPU folder whether or not the caches are on (None without a root): where
        kernels compiled for another machine go and where a machine without MLIR finds them.
        Trusted or not: read_entry and write_entry refuse an untrusted one, naming why."""
        return self.root / "gpu" if self.root is not None else None

    def _root_of(self, folder: Path) -> str:
        """The cache root `folder` is in: the settings' root, or (a folder of kernels named
        explicitly elsewhere) the folder itself."""
        path = os.path.abspath(folder)
        if self.root is not None:
            root = os.path.abspath(self.root)
            if path == root or path.startswith(root.rstrip("/") + "/"):
                return root
        return path

    def _verdict(self, folder: Path) -> tuple[trust.Problem | None, int | None]:
        key = (str(self.root), str(folder), self.shared)     # (no path arithmetic on a hit)
        found = _verdicts.get(key)
        if found is None:
            root = self._root_of(folder)
            # The root's verdict serves every folder in it (cpu/, gpu/, compiler/).
            problem, group = _root_verdicts.get((root, self.shared)) or (None, None)
            if (root, self.shared) not in _root_verdicts:
                problem = trust.problem(root, self.shared)
                group = (trust.sharing_group(root) if self.shared and problem is None
                         and os.path.isdir(root) else None)
                if problem is not None or os.path.isdir(root):
                    _root_verdicts[(root, self.shared)] = (problem, group)
            if problem is None:
                problem = trust.below_problem(folder, root, group)
            found = (problem, group)
            if problem is not None or os.path.isdir(folder):  # a missing one: checked when made
                _verdicts[key] = found
        if found[0] is not None:
            warn_untrusted(self._place(folder, found[0]), found[0])
        return found

    def _place(self, folder: Path, found: trust.Problem) -> Path:
        """What a warning says is not used: `folder`, or the whole cache when the problem
        is its root or above."""
        root = self._root_of(folder)
        return folder if found.path.startswith(root.rstrip("/") + "/") else Path(root)

    def problem(self, folder: Path) -> trust.Problem | None:
        """Why cache folder `folder` may not be used (trust.folder_problem, from its cache
        root), None when it may; decided once per process per folder (a folder that does
        not exist yet is checked when made), with one CacheTrustWarning for a problem."""
        return self._verdict(folder)[0]

    def group(self, folder: Path) -> int | None:
        """The group sharing the cache `folder` is in (shared mode), else None."""
        return self._verdict(folder)[1]

    def make(self, folder: Path) -> None:
        """Makes cache folder `folder` and its way from the root (trust.make_folders: 0700,
        2770 shared); UntrustedFolder (warned once) when one is not trusted, OSError when
        one cannot be made."""
        found = trust.make_folders(folder, self._root_of(folder), self.shared)
        if found is not None:
            _verdicts[(str(self.root), str(folder), self.shared)] = (found, None)
            warn_untrusted(self._place(folder, found), found)
            raise UntrustedFolder(found)


# Each cache folder's trust verdict (problem, sharing group), by (root setting, folder, shared):
# decided once per process (forget_trust: tests that change a folder's mode).
_verdicts: dict[tuple[str, str, bool], tuple[trust.Problem | None, int | None]] = {}
_root_verdicts: dict[tuple[str, bool], tuple[trust.Problem | None, int | None]] = {}
_warned_untrusted: set[tuple[str, str]] = set()


def forget_trust() -> None:
    """Forgets the verdicts on cache folders and the warnings given (for tests)."""
    _verdicts.clear()
    _root_verdicts.clear()
    _warned_untrusted.clear()


class UntrustedFolder(OSError):
    """A cache folder that is not trusted (CacheSettings.make): nothing is written there."""

    def __init__(self, problem: trust.Problem):
        super().__init__(str(problem))
        self.problem = problem


def warn_untrusted(place: Path, found: trust.Problem, entry: bool = False) -> None:
    """One CacheTrustWarning per problem per process: the cache folder `place` (or, with
    `entry`, a file in it) is not used, why, and the fix."""
    if (found.path, found.why) not in _warned_untrusted:
        _warned_untrusted.add((found.path, found.why))
        user_warnings.warn(trust.warning_text(str(place), found, entry), CacheTrustWarning)


_SETTINGS = ("ADJIT_CACHE_DIR", "ADJIT_DISK_CACHE", "ADJIT_CACHE_MAX_MB", "ADJIT_CACHE_SHARED",
             "HOME")
_last_settings: tuple[tuple, CacheSettings] | None = None


def cache_settings() -> CacheSettings:
    """ADJIT_CACHE_DIR, ADJIT_DISK_CACHE, ADJIT_CACHE_MAX_MB and ADJIT_CACHE_SHARED, read now
    (tests change them); EnvironmentValueError naming the setting and its value when one is
    not valid. (Made again only when one of their texts, or HOME, changed: a cache hit's first
    call asks ~8 times, 9 us a time to read them all.)"""
    global _last_settings
    texts = tuple(map(os.environ.get, _SETTINGS))
    last = _last_settings
    if last is not None and last[0] == texts:
        return last[1]
    root = read("ADJIT_CACHE_DIR")
    settings = CacheSettings(root, read("ADJIT_DISK_CACHE") and root is not None,
                             max_cache_bytes(), read("ADJIT_CACHE_SHARED"))
    _last_settings = (texts, settings)
    return settings


def max_cache_bytes() -> int:
    """ADJIT_CACHE_MAX_MB in bytes, the cap of each cache folder (cpu/, gpu/; 2048 MB without
    it; 0: no cap)."""
    return int(read("ADJIT_CACHE_MAX_MB") * 2**20)


def write_atomic(path: Path, data: bytes | str, shared: bool | None = None) -> None:
    """Writes `path` through a new file in the same folder and a rename (trust.write_file:
    O_EXCL|O_NOFOLLOW, mode 0600, 0640 `shared` (default: ADJIT_CACHE_SHARED)), so that a
    concurrent reader sees the old file or the whole new one, never a part, and a link
    planted under the name is replaced, never written through."""
    if shared is None:
        shared = cache_settings().shared
    trust.write_file(path, data.encode() if isinstance(data, str) else data, shared)


def read_file(path: Path) -> bytes:
    """The bytes of file `path` in a cache folder: refused (trust.UntrustedFile, an OSError)
    when its folder or the file is not trusted (the file opened without following a link),
    FileNotFoundError when there is none."""
    settings = cache_settings()
    found = settings.problem(path.parent)
    if found is not None:
        raise trust.UntrustedFile(found)
    return trust.read_file(path, settings.group(path.parent))[0]


class DamagedEntry(ValueError):
    """A cache entry that does not verify; the message names the file that is wrong."""


class UntrustedEntry(DamagedEntry):
    """A cache entry in a folder that is not trusted, or a file of it that is not (owned by
    another user, writable by others, a link): never read, a miss."""


_SEAL = ("key", "files", "checksum")


def _digest(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=True).encode()).hexdigest()


def write_entry(folder: Path, key: str, meta: dict, files: dict[str, bytes]) -> None:
    """Stores the entry `key`: each code file `<key>.<ext>` of `files`, then `<key>.json`,
    `meta` (which holds its `format`) sealed with the key, the files' sizes and SHA-256 and
    its own checksum; each file atomically, the metadata last, so that a reader in any
    process sees a whole entry or none. Then evicts what is over the cap. OSError when the
    folder cannot be written; UntrustedFolder (an OSError, warned once) when it, or a folder
    on the way to it, is not trusted."""
    body = {**meta, "key": key,
            "files": {ext: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                      for ext, data in files.items()}}
    body["checksum"] = _digest(body)
    settings = cache_settings()
    settings.make(folder)
    for ext, data in files.items():
        write_atomic(folder / f"{key}.{ext}", data, settings.shared)
    write_atomic(folder / f"{key}.json", json.dumps(body, indent=1).encode(), settings.shared)
    evict(folder, keep=key)


def read_entry(folder: Path, key: str, format_version: int,
               what: str) -> tuple[dict, dict[str, bytes]] | None:
    """(the metadata of entry `key`, without its seal; its code files' bytes by extension),
    having checked all of it; None when there is no entry. DamagedEntry (naming the file that
    is wrong, `what` saying what kind of entry) when it does not verify, has another format
    version, or cannot be read; UntrustedEntry when it, or its folder, is not trusted
    (runtime/trust.py: warned once), whose files are then never read."""
    settings = cache_settings()
    found = settings.problem(folder)
    if found is not None:
        raise UntrustedEntry(f"{what} {folder / key} not read: the folder is not trusted "
                             f"({found})")
    group = settings.group(folder)

    def read(path: Path) -> bytes:
        try:
            return trust.read_file(path, group)[0]
        except trust.UntrustedFile as e:
            warn_untrusted(folder, e.problem, entry=True)
            raise UntrustedEntry(f"{what} {path} not read: {e}") from e

    meta_path = folder / f"{key}.json"
    try:
        raw = read(meta_path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise DamagedEntry(f"unreadable {what} {meta_path}: {e}") from e
    try:
        body = json.loads(raw.decode("utf-8"))
    except ValueError as e:
        raise DamagedEntry(f"damaged {what} {meta_path}: {e}") from e
    if not isinstance(body, dict):
        raise DamagedEntry(f"damaged {what} {meta_path}: not a JSON object")
    if body.get("format") != format_version:
        raise DamagedEntry(f"{what} {meta_path} has format {body.get('format')!r}, not the "
                           f"supported version {format_version}; recompile it")
    checksum = body.pop("checksum", None)
    if checksum != _digest(body):
        raise DamagedEntry(f"damaged {what} {meta_path}: its checksum does not match")
    if body.get("key") != key:
        raise DamagedEntry(f"misfiled {what} {meta_path}: it is the entry of key "
                           f"{body.get('key')!r}")
    records = body.get("files")
    if not isinstance(records, dict):
        raise DamagedEntry(f"damaged {what} {meta_path}: no file records")
    files = {}
    for ext, record in records.items():
        path = folder / f"{key}.{ext}"
        try:
            data = read(path)
        except OSError as e:
            raise DamagedEntry(f"damaged {what}: {path} cannot be read ({e})") from e
        if (not isinstance(record, dict) or len(data) != record.get("size")
                or hashlib.sha256(data).hexdigest() != record.get("sha256")):
            raise DamagedEntry(f"damaged {what}: {path} is not the file its metadata "
                               f"{meta_path.name} records (size or SHA-256 differs)")
        files[ext] = data
    mark_used(meta_path)
    return {k: v for k, v in body.items() if k not in _SEAL}, files


_warned: set[Path] = set()


def warn_unwritable(folder: Path, error: OSError) -> None:
    """One warning per folder per process: `folder` cannot hold cache entries (read-only,
    not a folder, full), so what is compiled is used without being stored. (Nothing for an
    UntrustedFolder: its own warning said why.)"""
    if folder not in _warned and not isinstance(error, UntrustedFolder):
        _warned.add(folder)
        user_warnings.warn(f"adjit: the cache folder {folder} cannot be written ({error}); "
                           "compiled code is used without being stored", RuntimeWarning)


def mark_used(path: Path) -> None:
    """Records that the cache entry whose metadata file is `path` was just used: eviction
    removes the entries used longest ago first."""
    try:
        os.utime(path, follow_symlinks=False)
    except OSError:     # read-only cache, or removed meanwhile: nothing to record
        pass


def evict(folder: Path, max_bytes: int | None = None, keep: str = "") -> list[str]:
    """When the entries in `folder` (files `<key>.<ext>`) take more than `max_bytes`
    (default: max_cache_bytes()), removes whole entries, least recently used first (by the
    newest modification time of their files: loads mark_used them), down to 80% of it, but
    never entry `keep` (the one just stored, about to be loaded). Returns the keys removed.
    Files being written (`*.tmp`) are left alone; a process that loses an entry it is about
    to read finds no entry and compiles it again."""
    max_bytes = max_cache_bytes() if max_bytes is None else max_bytes
    if max_bytes <= 0:
        return []
    entries: dict[str, list[os.DirEntry]] = {}
    try:
        with os.scandir(folder) as listing:
            for f in listing:
                if f.is_file(follow_symlinks=False) and not f.name.endswith(".tmp"):
                    entries.setdefault(f.name.split(".", 1)[0], []).append(f)
    except OSError:
        return []
    sizes = {key: sum(f.stat(follow_symlinks=False).st_size for f in files)
             for key, files in entries.items()}
    total = sum(sizes.values())
    if total <= max_bytes:
        return []
    removed = []
    for key in sorted(entries, key=lambda k: max(f.stat(follow_symlinks=False).st_mtime
                                                 for f in entries[k])):
        if total <= 0.8 * max_bytes:
            break
        if key == keep:
            continue
        # The metadata first: a reader then sees a miss, never half an entry.
        for f in sorted(entries[key], key=lambda f: not f.name.endswith(".json")):
            try:
                os.unlink(f.path)
            except OSError:
                pass
        total -= sizes[key]
        removed.append(key)
    return removed
