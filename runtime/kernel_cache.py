"""Compiled GPU kernels and their on-disk cache: compile where MLIR is, run where the GPU is.

A GPU machine may have no compiler on it, so a kernel compiles to a `GpuKernel` (PTX plus the
launch signature) that a folder stores as `<key>.ptx` and `<key>.json`; the runtime loads it
from there without importing MLIR. The JSON carries `format`: a reader refuses any other
version rather than guessing at a layout it does not know.

This module must not import MLIR: it is what the GPU machine imports.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .files import evict, mark_used, write_atomic

FORMAT_VERSION = 5
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

    The entry's parameters are `params` expanded, then `ndim` index extents of the ndrange.
    `checks[i]` is the (Python error name, message) of `adj.check` number i+1, which the
    kernel stores in the module global `error_global` when it fails. An augmented kernel of
    reverse mode (passes/autodiff) ends its params with per-item tapes: the caller allocates
    prod(ndrange) * `tape_per_item[k]` elements for the k-th of them: an int, or (since format
    4) the text of an expression of the kernel's arguments (runtime/tape_size.py). `written`
    are the indices of the array parameters the kernel may write; `ndrange_bounds` the (parameter,
    dimension, ndrange dimension, message) of each index every work item takes with its id,
    which the launcher checks the ndrange against (dialects/adj.py: BOUNDS_ATTR).
    """
    name: str
    entry: str
    ptx: str
    chip: str
    params: tuple[Param, ...]
    ndim: int
    checks: tuple[tuple[str, str], ...] = ()
    error_global: str = "__adj_error"
    tape_per_item: tuple[int | str, ...] = ()
    written: tuple[int, ...] = ()
    ndrange_bounds: tuple[tuple[int, int, int, str], ...] = ()
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


def default_cache_dir() -> Path:
    return Path(os.environ.get("ADJIT_CACHE_DIR", Path.home() / ".cache" / "adjit")) / "gpu"


def store(directory: str | os.PathLike, key: str, kernel: GpuKernel) -> None:
    """Writes `<key>.ptx` then `<key>.json`, each atomically: the JSON's presence marks a
    complete entry, so a reader never sees half of one."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    meta = kernel.to_dict()
    ptx = meta.pop("ptx")
    write_atomic(directory / f"{key}.ptx", ptx)
    write_atomic(directory / f"{key}.json", json.dumps(meta, indent=1))
    evict(directory, keep=key)


def load(directory: str | os.PathLike, key: str) -> GpuKernel | None:
    """The kernel stored under `key`, or None if there is none; KernelCacheError if the entry
    has another format version or is damaged."""
    meta_path = Path(directory) / f"{key}.json"
    try:
        meta = json.loads(meta_path.read_text())
        meta["ptx"] = meta_path.with_suffix(".ptx").read_text()
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise KernelCacheError(f"damaged GPU kernel cache entry {meta_path}: {e}") from e
    mark_used(meta_path)
    try:
        return GpuKernel.from_dict(meta)
    except (KeyError, TypeError) as e:
        raise KernelCacheError(f"damaged GPU kernel cache entry {meta_path}: {e}") from e


def get_or_compile(ir_text: str, kernel: str, chip: str = "sm_90",
                   directory: str | os.PathLike | None = None) -> GpuKernel:
    """The cached kernel, compiled (importing MLIR only then) and stored on a miss."""
    directory = default_cache_dir() if directory is None else directory
    key = cache_key(ir_text, kernel, chip)
    found = load(directory, key)
    if found is not None:
        return found
    try:
        from ..passes.lower_gpu import compile_text
    except ImportError as e:
        raise KernelCacheError(f"GPU kernel {kernel!r} is not in the cache {directory} and "
                               f"MLIR, needed to compile it, is not installed ({e})") from e
    compiled = compile_text(ir_text, kernel, chip)
    store(directory, key, compiled)
    return compiled
