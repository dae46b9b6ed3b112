"""The disk caches' files: where they live (the one reader of the ADJIT_* cache settings),
how an entry is written, checked and evicted. Shared by the CPU cache (cpu_cache.py), the GPU
kernel cache (kernel_cache.py) and host programs (host_program.py); MLIR-free.

Settings, read here and nowhere else:
- `ADJIT_CACHE_DIR`: the root folder (unset: `~/.cache/adjit`); the CPU cache is `<root>/cpu`,
  the GPU kernel cache `<root>/gpu`. Set but empty: no folder, the caches are off.
- `ADJIT_DISK_CACHE`: `0` turns the caches off, `1` (or unset) on; anything else is refused.
- `ADJIT_CACHE_MAX_MB`: the cap of each folder, a finite number >= 0 (0: no cap).
Off means a process neither reuses nor keeps what it compiles. The GPU folder is also how
kernels travel to a machine without MLIR, and that is not a cache: kernel_cache.find_or_compile
says what still reads and writes it when the caches are off.

An entry is `<key>.json` (its metadata) and its code files `<key>.<ext>`. The metadata records
the entry's key, its format version, the size and SHA-256 of each code file, and a SHA-256 of
the metadata itself (`checksum`, over its canonical JSON without the checksum), so an entry
misfiled under another key, an edited metadata value or a changed code file reads as damaged
(`DamagedEntry`, naming the file that is wrong), which the caches treat as a miss and rebuild.
This guards against damage and misplaced files, not against someone who can write the folder
(they can write a consistent entry of their own).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

# The disk caches' size cap: ADJIT_CACHE_MAX_MB megabytes per folder (cpu/, gpu/), 0 for none.
DEFAULT_MAX_MB = 2048


@dataclass(frozen=True)
class CacheSettings:
    """What the ADJIT_* cache settings say, checked."""
    root: Path | None       # None: ADJIT_CACHE_DIR is set but empty
    enabled: bool           # False: ADJIT_DISK_CACHE=0 or no root
    max_bytes: int          # 0: no cap

    def folder(self, kind: str) -> Path | None:
        """The cache folder of `kind` ("cpu", "gpu"), or None when the caches are off."""
        return self.root / kind if self.enabled else None

    def kernel_folder(self) -> Path | None:
        """The GPU folder whether or not the caches are on (None without a root): where
        kernels compiled for another machine go and where a machine without MLIR finds them."""
        return self.root / "gpu" if self.root is not None else None


def cache_settings() -> CacheSettings:
    """ADJIT_CACHE_DIR, ADJIT_DISK_CACHE and ADJIT_CACHE_MAX_MB, read now (tests change them);
    ValueError naming the setting and its value when one is not valid."""
    switch = os.environ.get("ADJIT_DISK_CACHE", "")
    if switch not in ("", "0", "1"):
        raise ValueError(f"ADJIT_DISK_CACHE must be 0 (caches off) or 1 (on), got {switch!r}")
    text = os.environ.get("ADJIT_CACHE_DIR")
    root = (None if text == "" else Path(text).expanduser() if text is not None
            else Path.home() / ".cache" / "adjit")
    return CacheSettings(root, switch != "0" and root is not None, max_cache_bytes())


def max_cache_bytes() -> int:
    """ADJIT_CACHE_MAX_MB in bytes (DEFAULT_MAX_MB without it; 0: no cap)."""
    text = os.environ.get("ADJIT_CACHE_MAX_MB", "").strip()
    try:
        megabytes = float(text) if text else DEFAULT_MAX_MB
    except ValueError:
        megabytes = math.nan
    # "inf" is refused rather than read as no cap: 0 already says that, and NaN or a
    # negative cap is a typo, not a choice.
    if not math.isfinite(megabytes) or megabytes < 0:
        raise ValueError("ADJIT_CACHE_MAX_MB must be a finite number of megabytes >= 0 "
                         f"(0: no cap), got {text!r}")
    return int(megabytes * 2**20)


def write_atomic(path: Path, data: bytes | str) -> None:
    """Writes `path` through a temporary file in the same folder and a rename, so that a
    concurrent reader sees the old file or the whole new one, never a part."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


class DamagedEntry(ValueError):
    """A cache entry that does not verify; the message names the file that is wrong."""


_SEAL = ("key", "files", "checksum")


def _digest(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=True).encode()).hexdigest()


def write_entry(folder: Path, key: str, meta: dict, files: dict[str, bytes]) -> None:
    """Stores the entry `key`: each code file `<key>.<ext>` of `files`, then `<key>.json`,
    `meta` (which holds its `format`) sealed with the key, the files' sizes and SHA-256 and
    its own checksum; each file atomically, the metadata last, so that a reader in any
    process sees a whole entry or none. Then evicts what is over the cap. OSError when the
    folder cannot be written."""
    body = {**meta, "key": key,
            "files": {ext: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                      for ext, data in files.items()}}
    body["checksum"] = _digest(body)
    folder.mkdir(parents=True, exist_ok=True)
    for ext, data in files.items():
        write_atomic(folder / f"{key}.{ext}", data)
    write_atomic(folder / f"{key}.json", json.dumps(body, indent=1).encode())
    evict(folder, keep=key)


def read_entry(folder: Path, key: str, format_version: int,
               what: str) -> tuple[dict, dict[str, bytes]] | None:
    """(the metadata of entry `key`, without its seal; its code files' bytes by extension),
    having checked all of it; None when there is no entry. DamagedEntry (naming the file that
    is wrong, `what` saying what kind of entry) when it does not verify, has another format
    version, or cannot be read."""
    meta_path = folder / f"{key}.json"
    try:
        raw = meta_path.read_bytes()
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
            data = path.read_bytes()
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
    not a folder, full), so what is compiled is used without being stored."""
    if folder not in _warned:
        _warned.add(folder)
        warnings.warn(f"adjit: the cache folder {folder} cannot be written ({error}); "
                      "compiled code is used without being stored", RuntimeWarning,
                      stacklevel=2)


def mark_used(path: Path) -> None:
    """Records that the cache entry whose metadata file is `path` was just used: eviction
    removes the entries used longest ago first."""
    try:
        os.utime(path)
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
                if f.is_file() and not f.name.endswith(".tmp"):
                    entries.setdefault(f.name.split(".", 1)[0], []).append(f)
    except OSError:
        return []
    sizes = {key: sum(f.stat().st_size for f in files) for key, files in entries.items()}
    total = sum(sizes.values())
    if total <= max_bytes:
        return []
    removed = []
    for key in sorted(entries, key=lambda k: max(f.stat().st_mtime for f in entries[k])):
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
