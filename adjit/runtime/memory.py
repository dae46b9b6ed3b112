"""Memory adjit allocates, and its accounting.

One allocator serves compiled code and Python: compiled modules lower `memref.alloc` and
`memref.dealloc` to calls of `_mlir_memref_to_llvm_alloc` / `_mlir_memref_to_llvm_free`
(passes/pipeline.py), and every engine resolves those to the functions below; Python's
`allocate` and arrays returned by compiled code use them too (an array over its block, which
goes back when the last array over it dies: `Block` below on the Python call path, a capsule
on the native one, runtime/native/dispatch.cpp). So `bytes_in_use` counts temporaries inside
compiled code, arrays it returns (until NumPy frees them), and tapes.

The allocator is native code (runtime/native/allocator.cpp, in the extension that `pip
install` builds): allocation happens on async-runtime worker threads, where a Python callback
would need the GIL. Counters are updated with atomic instructions. Each block carries a header
(offset to the start of the block, requested size, whether it is a cacheable large block, its
capacity) so that free knows what to subtract. Data starts on a cache line, and from 64 KiB
on, on a page: arrays left at different offsets within a page slow kernels that read one and
write the other (4K aliasing). Freed blocks of 1 MiB or more are kept, up to 256 MiB in 64
slots taken and returned atomically, for later allocations of a size they fit
(`release_cached_memory()` frees them): glibc unmaps such blocks (above its mmap threshold)
or trims them when freed, and every gradient call would fault in and zero its pages again.
Kept blocks are not in `bytes_in_use`. The extension is loaded RTLD_GLOBAL
(runtime/extension.py), where shared objects of compiled modules find the allocator by name;
ExecutionEngines are given its addresses (`extension.runtime_symbols`).
"""
from __future__ import annotations

import ctypes
import os
from math import prod
from typing import Sequence

import numpy as np

from ..core.types import ScalarType
from . import cuda_driver, extension
from .abi import array_over

# Blocks of CACHE_MIN_BYTES or more are kept when freed, for a later allocation to reuse:
# glibc serves them with fresh mmap'd pages, which every call would fault in and zero again.
# (allocator.cpp spells these three the same way.)
CACHE_MIN_BYTES = 1 << 20
CACHE_SLOTS = 64
CACHE_LIMIT_BYTES = 256 << 20


class _Allocator:
    """The allocator's functions and counters in the native extension."""

    def __init__(self) -> None:
        lib, address = extension.library, extension.address
        self.alloc_addr = address("_mlir_memref_to_llvm_alloc")
        self.free_addr = address("_mlir_memref_to_llvm_free")
        self.alloc = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int64)(self.alloc_addr)
        self.free = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self.free_addr)
        self.in_use = ctypes.c_int64.in_dll(lib, "adj_bytes_in_use")
        self.peak = ctypes.c_int64.in_dll(lib, "adj_peak_bytes")
        self.cached = ctypes.c_int64.in_dll(lib, "adj_cached_bytes")   # kept, not in use
        self.cache_limit = ctypes.c_int64.in_dll(lib, "adj_cache_limit")
        self.release = ctypes.CFUNCTYPE(ctypes.c_int64)(address("adj_release_cached_memory"))
        self.recomputed = ctypes.CFUNCTYPE(ctypes.c_int64)(address("adj_ckpt_steps_recomputed"))


_allocator = _Allocator()


def _after_fork_in_child() -> None:
    # The parent's kept blocks: the child's own cache starts empty (and its limit whole).
    _allocator.release()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _get() -> _Allocator:
    return _allocator


def memory_stats() -> dict[str, int]:
    """Bytes adjit allocated and has not freed yet, and the most at any time since the
    start or `reset_peak_memory()`: in the CPU's memory, and (`device_*`) the GPU's (the
    states a checkpointed loop keeps included); and `checkpoint_steps_recomputed`, the steps
    that the reverse passes of checkpointed loops have run again since the start."""
    a = _get()
    return {"bytes_in_use": a.in_use.value, "peak_bytes": a.peak.value,
            "device_bytes_in_use": cuda_driver.accounting.in_use,
            "device_peak_bytes": cuda_driver.accounting.peak,
            "checkpoint_steps_recomputed": a.recomputed()}


def release_cached_memory() -> int:
    """Frees the blocks adjit keeps for reuse (large blocks freed lately, see CACHE_MIN_BYTES,
    at most CACHE_LIMIT_BYTES in all), returning them to the system allocator; returns their
    bytes. They are not counted in `memory_stats()`."""
    return _allocator.release()


def reset_peak_memory() -> None:
    """Sets the peaks to the bytes in use now."""
    a = _get()
    a.peak.value = a.in_use.value
    with cuda_driver.accounting.lock:
        cuda_driver.accounting.peak = cuda_driver.accounting.in_use


class Block:
    """One block of the allocator, freed when the last array over it dies."""
    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = ptr

    def __del__(self) -> None:
        _allocator.free(self.ptr)


def allocate(shape: int | Sequence[int], dtype) -> np.ndarray:
    """An uninitialised C-contiguous array counted in memory_stats until it is freed
    (`dtype`: an adjit scalar type or anything np.dtype takes)."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(n < 0 for n in shape):
        raise ValueError(f"negative dimensions are not allowed: {shape}")
    dtype = dtype.np_dtype if isinstance(dtype, ScalarType) else np.dtype(dtype)
    nbytes = prod(shape) * dtype.itemsize
    ptr = _get().alloc(nbytes)
    if not ptr:
        raise MemoryError(f"adjit could not allocate {nbytes} bytes")
    return array_over(Block(ptr), ptr, shape, dtype)
