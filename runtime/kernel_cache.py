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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, TypeVar

from .files import (DamagedEntry, cache_settings, read_entry, warn_unwritable,
                    write_entry)

# 6: the metadata records its key, the PTX's hash and its own checksum (files.write_entry).
# 7: a reverse kernel's `uniform_loads` (its extra per-item outputs).
# 8: a kernel with checks takes its launch's error cell as a hidden last parameter (no
#    module global `error_global`).
FORMAT_VERSION = 8
# The launch contract between passes/lower_gpu.py and runtime/cuda.py: a 1-D grid of blocks
# of prod(workgroupsize) threads, or of this many.
DEFAULT_BLOCK = 256


@dataclass(frozen=True)
class Param:
    """One kernel argument: a scalar, or a memref (passed as allocated, aligned, offset,
    sizes[rank], strides[rank])."""
    kind: str            # "scalar" | "memref"
    dtype: str           # "f32" "f64" "i32" "i64" "i1" "index", as MLIR spells them
    rank: int = 0        # memrefs only


@dataclass(frozen=True)
class GpuKernel:
    """A kernel compiled to PTX, with what a launcher needs to call it.

    The entry's parameters are `params` expanded, then `ndim` index extents of the ndrange,
    then, when it has `checks`, the launch's error cell (a hidden memref<1xi64>: allocated,
    aligned, offset, size, stride), which the launcher provides (runtime/cuda.py).
    `checks[i]` is the (Python error name, message) of `adj.check` number i+1, which the
    kernel stores in the cell when it fails. An augmented kernel of
    reverse mode (passes/autodiff) ends its params with per-item tapes: the caller allocates
    prod(ndrange) * `tape_per_item[k]` elements for the k-th of them: an int, or (since format
    4) the text of an expression of the kernel's arguments (runtime/tape_size.py). `written`
    are the indices of the array parameters the kernel may write; `ndrange_bounds` the (parameter,
    dimension, ndrange dimension, message) of each index every work item takes with its id,
    which the launcher checks the ndrange against (dialects/adj.py: BOUNDS_ATTR).
    A reverse kernel's `uniform_loads` (since format 7) are the elements every work item
    reads (passes/autodiff/uniform_loads.py): per element, the primal kernel argument and its
    indices as expression texts of the kernel's arguments (runtime/tape_size.py); the kernel's
    params end with one per-item output per element, after those of the Active scalars,
    which the launcher sums and adds into the element of the argument's shadow.
    """
    name: str
    entry: str
    ptx: str
    chip: str
    params: tuple[Param, ...]
    ndim: int
    checks: tuple[tuple[str, str], ...] = ()
    tape_per_item: tuple[int | str, ...] = ()
    written: tuple[int, ...] = ()
    ndrange_bounds: tuple[tuple[int, int, int, str], ...] = ()
    uniform_loads: tuple[tuple[int, tuple[str, ...]], ...] = ()
    format: int = field(default=FORMAT_VERSION)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "GpuKernel":
        if data.get("format") != FORMAT_VERSION:
            raise KernelCacheError(f"GPU kernel format {data.get('format')!r} is not the "
                                   f"supported version {FORMAT_VERSION}; recompile it")
        fields = dict(data)
        fields["params"] = tuple(Param(**p) for p in data["params"])
        fields["checks"] = tuple(tuple(c) for c in data.get("checks", ()))
        fields["tape_per_item"] = tuple(data.get("tape_per_item", ()))
        fields["written"] = tuple(data.get("written", ()))
        fields["ndrange_bounds"] = tuple(tuple(b) for b in data.get("ndrange_bounds", ()))
        fields["uniform_loads"] = tuple((int(arg), tuple(at))
                                        for arg, at in data.get("uniform_loads", ()))
        return cls(**fields)


def check_ndrange_bounds(bounds: tuple[tuple[int, int, int, str], ...], args: list,
                         extents: tuple[int, ...]) -> None:
    """IndexError (the fact's message) when the ndrange is larger than an array that every
    work item indexes with its id: `bounds` are GpuKernel.ndrange_bounds' facts about the
    kernel's arguments `args` (arrays of any kind with a `shape`)."""
    for param, dim, k, message in bounds:
        shape = getattr(args[param], "shape", None)
        if shape is not None and len(shape) > dim and extents[k] > shape[dim]:
            raise IndexError(message)


class KernelCacheError(RuntimeError):
    """A cache entry that cannot be used: another format version, or damaged."""


def cache_key(source: str, kernel: str, chip: str = "sm_90") -> str:
    """Key of `kernel` compiled from `source` for `chip`. `source` is whatever determines
    the compiled code: the module's IR text, or (frontend/cuda_launch.py) a digest of the
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
                   directory: str | os.PathLike | None = None) -> GpuKernel:
    """The kernel of `ir_text`, from the cache or compiled (importing MLIR only then) and
    stored: in `directory` when given, whatever the settings say (an explicit folder of
    kernels), else by find_or_compile's rule."""
    key = cache_key(ir_text, kernel, chip)

    def compile() -> GpuKernel:
        from ..passes.lower_gpu import compile_text
        return compile_text(ir_text, kernel, chip)

    return find_or_compile(f"GPU kernel {kernel!r}", lambda folder: load(folder, key), compile,
                           lambda folder, k: store(folder, key, k),
                           directory=None if directory is None else Path(directory))[0]
