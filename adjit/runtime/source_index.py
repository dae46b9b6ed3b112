"""Compiled CPU code found by what it was compiled from, without MLIR.

A CPU cache entry (runtime/cpu_cache.py) is keyed by its module's text: to find it, a new
process had to import MLIR (73 ms), rebuild the IR and print it (150 ms in all for a small
kernel). Here a second kind of record, in the same folder, maps a *source key* to it: a
digest of what the compiler reads, computed without MLIR: the Python source of the function
and of everything it reaches with the global constants it compiles in
(lang/source.fingerprint), the compiler's own source, what is compiled (a function, a
kernel launch, which derivative), the argument types, the options and thread count, and the
machine and tools (`cpu_cache.light_environment`). The caller builds that text; `key` adds
the environment.

A record (`<source key>.json`, sealed by files.write_entry, with the module's adj-level text
as `<source key>.adj`) holds the module's cache key and what the caller needs to call it
without IR (entry names, types, written arguments...: `meta`), and where the sources it
was compiled from were (`sites`: file, first and last line of each, in the key's order). A
hit loads the
module's shared object and its runtime libraries (`load_entry`; compiled_module.py makes
the callables), and nothing else. A record
that does not verify, or whose module entry is gone or damaged, reads as a miss: the caller
compiles as before and records again. Editing any source the key covers changes the key,
so a stale record is never found.

The key leaves out where the code lives (lang/source.fingerprint), so one record serves
the same function text in two files; the module's error table names the lines of the file
it was compiled from. A hit therefore moves each check's "(at file:line)" from the
recorded sites to the caller's (`relocated`): a failed check names the line of the
function actually called.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Sequence

from ..core.locations import split_line, with_line
from ..core.threads import default_num_threads
from . import cpu_cache
from .files import DamagedEntry, read_entry, write_entry

_log = logging.getLogger("adjit.cache")
FORMAT_VERSION = 2          # 2: records hold their sites
_PREFIX = "src-"


def key(what: str) -> str:
    """The source key of `what` (the caller's description of what it compiles) on this
    machine, with this compiler, for this process's thread count."""
    data = "\0".join([*cpu_cache.light_environment(), f"threads={default_num_threads()}",
                      what])
    return _PREFIX + hashlib.sha256(data.encode()).hexdigest()[:32]


Site = tuple[str, int, int]     # a source's file, first line, last line


def record(skey: str, module_key: str, source: str, meta: dict,
           sites: Sequence[Site] = ()) -> None:
    """Records that `skey` compiles to the CPU cache entry `module_key` (module text
    `source`), compiled from sources at `sites`; `meta` (JSON) is what load_entry gives
    back. Nothing when the cache is off or cannot be written."""
    folder = cpu_cache.directory()
    if folder is None or not module_key:
        return
    try:
        json.dumps(meta)
        write_entry(folder, skey, {"format": FORMAT_VERSION, "module": module_key, "meta": meta,
                                   "threads": default_num_threads(),
                                   "sites": [list(site) for site in sites]},
                    {"adj": source.encode()})
    except (OSError, TypeError, ValueError) as e:
        _log.debug("no source record %s: %s", skey, e)


def _read(skey: str) -> tuple[Path, dict, str] | None:
    folder = cpu_cache.directory()
    if folder is None:
        return None
    try:
        found = read_entry(folder, skey, FORMAT_VERSION, "CPU cache source record")
    except (DamagedEntry, OSError, ValueError) as e:
        _log.debug("unusable source record %s: %s", skey, e)
        return None
    if found is None:
        return None
    meta, files = found
    try:
        return folder, meta, files["adj"].decode()
    except (KeyError, UnicodeDecodeError) as e:
        _log.debug("unusable source record %s: %s", skey, e)
        return None


def load_library(skey: str, *, global_scope: bool = False) -> tuple[cpu_cache.Entry, dict] | None:
    """(the CPU cache entry `skey` was recorded for, loaded; the record's meta), or None."""
    found = _read(skey)
    if found is None:
        return None
    folder, meta, _ = found
    entry = cpu_cache.load(folder, str(meta.get("module", "")), global_scope=global_scope)
    return None if entry is None else (entry, meta.get("meta", {}))


def load_entry(skey: str, sites: Sequence[Site] = ()
               ) -> tuple[cpu_cache.Entry, str, dict, list[tuple[str, str]]] | None:
    """(the CPU cache entry recorded under `skey`, loaded; its module's adj-level text; the
    record's meta; its error table with positions moved to `sites`, the caller's sources:
    `relocated`) for this process's thread count (its async pool started), or None on a
    miss: no record, a damaged one, one for another thread count, its module entry gone or
    damaged. (compiled_module.from_source_key makes it callable.)"""
    found = _read(skey)
    if found is None:
        return None
    folder, meta, source = found
    threads = default_num_threads()
    if meta.get("threads") != threads:
        return None
    entry = cpu_cache.load(folder, str(meta.get("module", "")))
    if entry is None:
        return None
    try:
        recorded = [(str(f), int(first), int(last)) for f, first, last in meta["sites"]]
    except (KeyError, TypeError, ValueError) as e:
        _log.debug("unusable source record %s: %s", skey, e)
        return None
    errors = relocated(entry.errors, recorded, sites) if sites else list(entry.errors)
    return entry, source, meta.get("meta", {}), errors


def relocated(errors: Sequence[tuple[str, str]], recorded: Sequence[Site],
              sites: Sequence[Site]) -> list[tuple[str, str]]:
    """The error table `errors` of code compiled from sources at `recorded`, for the same
    sources at `sites` (the same texts in the same order, elsewhere: the record's key says
    so): each "(at file:line)" inside a recorded source names the same line of the
    corresponding one. Tables whose sites do not correspond are returned as they are."""
    if len(recorded) != len(sites) or any(
            last - first != l2 - f2 for (_, first, last), (_, f2, l2) in zip(recorded, sites)):
        return list(errors)
    out = []
    for kind, message in errors:
        at = split_line(message)    # (a check's message ends with where it is)
        if at is not None:
            text, filename, line = at
            inside = [i for i, (f, first, last) in enumerate(recorded)
                      if f == filename and first <= line <= last]
            if inside:    # the innermost source (a function defined inside another)
                i = max(inside, key=lambda i: recorded[i][1])
                message = with_line(text, sites[i][0], sites[i][1] + line - recorded[i][1])
        out.append((kind, message))
    return out
