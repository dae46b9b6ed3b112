"""Writing cache files safely: shared by the CPU and GPU caches (MLIR-free)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


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


# The disk caches' size cap: ADJIT_CACHE_MAX_MB megabytes per folder (cpu/, gpu/), 0 for none.
DEFAULT_MAX_MB = 2048


def mark_used(path: Path) -> None:
    """Records that the cache entry whose metadata file is `path` was just used: eviction
    removes the entries used longest ago first."""
    try:
        os.utime(path)
    except OSError:     # read-only cache, or removed meanwhile: nothing to record
        pass


def max_cache_bytes() -> int:
    """ADJIT_CACHE_MAX_MB in bytes (DEFAULT_MAX_MB without it; 0: no cap)."""
    text = os.environ.get("ADJIT_CACHE_MAX_MB", "")
    try:
        megabytes = float(text) if text else DEFAULT_MAX_MB
    except ValueError:
        raise ValueError(f"ADJIT_CACHE_MAX_MB must be a number of megabytes, got {text!r}") from None
    return int(megabytes * 2**20)


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
