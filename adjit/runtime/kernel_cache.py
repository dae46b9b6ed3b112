"""Compiled GPU kernels and their on-disk cache: compile where MLIR is, run where the GPU is.

A GPU machine may have no compiler on it, so a kernel compiles to a `GpuKernel` (PTX plus the
launch signature) that a folder stores as `<key>.ptx` and `<key>.json`; the runtime loads it
from there without importing MLIR. The JSON is sealed by files.write_entry: it records its
format version (a reader refuses any other rather than guessing at a layout it does not
know), its key, the PTX's size and SHA-256 and its own checksum. An entry that does not verify
is rebuilt where MLIR is, and refused, naming the file that is wrong, where it is not.

This module must not import MLIR: it is what the GPU machine imports.
"""
from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Callable, TypeVar

from ..core.kernel import FORMAT_VERSION, GpuKernel, KernelCacheError
from .files import (DamagedEntry, cache_settings, read_entry, warn_unwritable,
                    write_entry)


def cache_key(source: str, kernel: str, chip: str = "sm_90") -> str:
    """Key of `kernel` compiled from `source` for `chip`. `source` is whatever determines
    the compiled code: the module's IR text, or (api/cuda_launch.py) a digest of the
    Python source and argument types. It depends on text only: no MLIR needed."""
    data = "\0".join([str(FORMAT_VERSION), chip, kernel, source]).encode()
    return hashlib.sha256(data).hexdigest()[:32]


def default_cache_dir() -> Path | None:
    """The GPU kernel cache folder, None when the disk caches are off (files.cache_settings)."""
    return cache_settings().folder("gpu")


def store(directory: str | os.PathLike, key: str, kernel: GpuKernel) -> None:
    """Writes `<key>.ptx` then `<key>.json`, each atomically: the JSON's presence marks a
    complete entry, so a reader never sees half of one. OSError if the folder cannot be
    written."""
    meta = kernel.to_dict()
    ptx = meta.pop("ptx")
    write_entry(Path(directory), key, meta, {"ptx": ptx.encode()})


def load(directory: str | os.PathLike, key: str) -> GpuKernel | None:
    """The kernel stored under `key`, or None if there is none; KernelCacheError, naming the
    file that is wrong, if the entry has another format version, is damaged, misfiled under
    another key or cannot be read."""
    try:
        found = read_entry(Path(directory), key, FORMAT_VERSION, "GPU kernel cache entry")
    except DamagedEntry as e:
        raise KernelCacheError(str(e)) from e
    if found is None:
        return None
    meta, files = found
    ptx_path = Path(directory) / f"{key}.ptx"
    try:
        meta["ptx"] = files["ptx"].decode()
        return GpuKernel.from_dict(meta)
    except (KeyError, TypeError, ValueError) as e:
        # What the seal does not catch: an entry written by a broken adjit.
        bad = ptx_path if isinstance(e, UnicodeDecodeError) else ptx_path.with_suffix(".json")
        raise KernelCacheError(f"damaged GPU kernel cache entry {bad}: {e}") from e


_log = logging.getLogger("adjit.cache")
T = TypeVar("T")


def find_or_compile(what: str, load: Callable[[Path], T | None], compile: Callable[[], T],
                    store: Callable[[Path, T], object], *, for_another_machine: bool = False,
                    directory: Path | None = None) -> tuple[T, Path | None]:
    """(`what`, found in the GPU kernel cache or compiled and stored there; the folder it is
    in, None if it is not stored): `load(folder)` reads it (None: a miss; KernelCacheError:
    unusable), `compile()` makes it (ImportError: no MLIR here), `store(folder, value)`
    writes it (OSError: the folder cannot be written).

    The rule (files.cache_settings reads the settings). With the caches on, as a cache: an
    unusable entry is a miss, compiled again and replaced; a folder that cannot be written
    (read-only, not a folder) gives one warning, and what is compiled is used unstored. With
    the caches off (ADJIT_DISK_CACHE=0, empty ADJIT_CACHE_DIR) nothing is read or written,
    but for the two uses of the folder that are not caching: `for_another_machine`
    (compile_only(): preparing kernels for a GPU machine) reads and writes it, and a process
    that cannot compile (no MLIR: a GPU machine) reads it, since nothing else can give it
    the kernels. An explicit `directory` is used as a cache that is on."""
    settings = cache_settings()
    folder = (directory if directory is not None else settings.kernel_folder()
              if for_another_machine else settings.folder("gpu"))
    if for_another_machine and folder is None:
        raise KernelCacheError(f"compile_only() stores {what} in $ADJIT_CACHE_DIR/gpu for "
                               "another machine, but ADJIT_CACHE_DIR is empty: set it to a "
                               "folder")
    unusable: KernelCacheError | None = None

    def found_in(place: Path) -> T | None:
        nonlocal unusable
        try:
            return load(place)
        except KernelCacheError as e:
            unusable = e
            return None

    found = found_in(folder) if folder is not None else None
    if found is not None:
        return found, folder
    try:
        compiled = compile()
    except ImportError as e:
        place = folder or settings.kernel_folder()
        if folder is None and place is not None and (found := found_in(place)) is not None:
            return found, place
        why = f"its entry there is unusable ({unusable})" if unusable else "it is not there"
        raise KernelCacheError(
            f"{what} must come from the kernel cache {place or '(none: ADJIT_CACHE_DIR is empty)'}"
            f" but {why}, and compiling it needs MLIR, which cannot be imported here ({e}); "
            "compile it where adjit's compiler is installed, into the same ADJIT_CACHE_DIR"
        ) from e
    if unusable is not None:
        _log.debug("compiled again: %s", unusable)
    if folder is None:
        return compiled, None
    try:
        store(folder, compiled)
    except OSError as e:
        if for_another_machine:   # storing is all compile_only() is for
            raise KernelCacheError(f"compile_only() cannot store {what} in {folder}: {e}") from e
        warn_unwritable(folder, e)
        return compiled, None
    return compiled, folder


def get_or_compile(ir_text: str, kernel: str, chip: str = "sm_90",
                   directory: str | os.PathLike | None = None,
                   compile: Callable[[str, str, str], GpuKernel] | None = None) -> GpuKernel:
    """The kernel of `ir_text`, from the cache or made by `compile(ir_text, kernel, chip)`
    (passes/lower_gpu.compile_text, which needs MLIR; the compiler's get_or_compile passes
    it) and stored: in `directory` when given, whatever the settings say (an explicit folder
    of kernels), else by find_or_compile's rule. Without `compile` (a GPU machine) a miss is
    a KernelCacheError."""
    key = cache_key(ir_text, kernel, chip)

    def compiled() -> GpuKernel:
        if compile is None:
            raise ImportError("no compiler here: adjit.passes.lower_gpu needs MLIR")
        return compile(ir_text, kernel, chip)

    return find_or_compile(f"GPU kernel {kernel!r}", lambda folder: load(folder, key), compiled,
                           lambda folder, k: store(folder, key, k),
                           directory=None if directory is None else Path(directory))[0]
