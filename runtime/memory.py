"""Memory adjit allocates, and its accounting.

One allocator serves compiled code and Python: compiled modules lower `memref.alloc` and
`memref.dealloc` to calls of `_mlir_memref_to_llvm_alloc` / `_mlir_memref_to_llvm_free`
(passes/pipeline.py), and every engine resolves those to the functions below; Python's
`allocate` and arrays returned by compiled code use them too. So `bytes_in_use` counts
temporaries inside compiled code, arrays it returns (until NumPy frees them), and tapes.

The allocator is native code, written in the LLVM dialect: allocation happens on
async-runtime worker threads, where a Python callback would need the GIL. Counters are
updated with atomic instructions. Each block carries a 16-byte header (offset to the start
of the block, requested size) so that free knows what to subtract. A process loads it from
the disk cache (runtime/cpu_cache.py) RTLD_GLOBAL, where shared objects of compiled modules
find it by name; the first process (or every one, without the cache) builds it (~0.1 s).
Only where `cc` or the LLVM tools are missing is it compiled by an ExecutionEngine, which
only modules compiled in-process can reach.
"""
from __future__ import annotations

import ctypes
import functools
import os
import threading
from math import prod
from typing import Callable, Sequence

import numpy as np
from mlir import ir
from mlir.execution_engine import ExecutionEngine

from ..frontend.types import ScalarType
from . import cpu_cache, cuda
from .abi import array_over
from .engine_lookup import lookup

_OPT_LEVEL = 2

_ALLOCATOR = """
llvm.mlir.global external @adj_bytes_in_use(0 : i64) : i64
llvm.mlir.global external @adj_peak_bytes(0 : i64) : i64
llvm.func @malloc(i64) -> !llvm.ptr
llvm.func @free(!llvm.ptr)

llvm.func @_mlir_memref_to_llvm_alloc(%size: i64) -> !llvm.ptr {
  %header = llvm.mlir.constant(16 : i64) : i64
  %total = llvm.add %size, %header : i64
  %block = llvm.call @malloc(%total) : (i64) -> !llvm.ptr
  %null = llvm.mlir.zero : !llvm.ptr
  %failed = llvm.icmp "eq" %block, %null : !llvm.ptr
  llvm.cond_br %failed, ^fail, ^ok
^fail:
  llvm.return %null : !llvm.ptr
^ok:
  %p = llvm.getelementptr %block[16] : (!llvm.ptr) -> !llvm.ptr, i8
  %off_slot = llvm.getelementptr %p[-2] : (!llvm.ptr) -> !llvm.ptr, i64
  llvm.store %header, %off_slot : i64, !llvm.ptr
  %size_slot = llvm.getelementptr %p[-1] : (!llvm.ptr) -> !llvm.ptr, i64
  llvm.store %size, %size_slot : i64, !llvm.ptr
  %in_use = llvm.mlir.addressof @adj_bytes_in_use : !llvm.ptr
  %old = llvm.atomicrmw add %in_use, %size seq_cst : !llvm.ptr, i64
  %new = llvm.add %old, %size : i64
  %peak = llvm.mlir.addressof @adj_peak_bytes : !llvm.ptr
  %0 = llvm.atomicrmw max %peak, %new seq_cst : !llvm.ptr, i64
  llvm.return %p : !llvm.ptr
}

llvm.func @_mlir_memref_to_llvm_free(%p: !llvm.ptr) {
  %null = llvm.mlir.zero : !llvm.ptr
  %is_null = llvm.icmp "eq" %p, %null : !llvm.ptr
  llvm.cond_br %is_null, ^done, ^free
^free:
  %off_slot = llvm.getelementptr %p[-2] : (!llvm.ptr) -> !llvm.ptr, i64
  %off = llvm.load %off_slot : !llvm.ptr -> i64
  %size_slot = llvm.getelementptr %p[-1] : (!llvm.ptr) -> !llvm.ptr, i64
  %size = llvm.load %size_slot : !llvm.ptr -> i64
  %in_use = llvm.mlir.addressof @adj_bytes_in_use : !llvm.ptr
  %0 = llvm.atomicrmw sub %in_use, %size seq_cst : !llvm.ptr, i64
  %zero = llvm.mlir.constant(0 : i64) : i64
  %neg = llvm.sub %zero, %off : i64
  %block = llvm.getelementptr %p[%neg] : (!llvm.ptr, i64) -> !llvm.ptr, i8
  llvm.call @free(%block) : (!llvm.ptr) -> ()
  llvm.br ^done
^done:
  llvm.return
}
"""


class _Allocator:
    def __init__(self) -> None:
        folder = cpu_cache.directory()
        key = cpu_cache.key(_ALLOCATOR, _OPT_LEVEL, 1)
        entry = cpu_cache.load(folder, key, global_scope=True) if folder is not None else None
        if entry is None and cpu_cache.can_store():   # built now: shared objects need it global
            with ir.Context(), ir.Location.unknown():
                from mlir.dialects.llvm import translate_module_to_llvmir
                llvm_ir = str(translate_module_to_llvmir(ir.Module.parse(_ALLOCATOR).operation))
            try:
                entry = cpu_cache.load_built(
                    cpu_cache.build_shared_object(llvm_ir, _OPT_LEVEL, cpu_cache.host_target()),
                    [], folder, key, global_scope=True)
            except (OSError, RuntimeError):
                entry = None
        self.is_global = entry is not None
        if entry is not None:
            address: Callable[[str], int] = entry.address
        else:
            with ir.Context(), ir.Location.unknown():
                engine = ExecutionEngine(ir.Module.parse(_ALLOCATOR), opt_level=_OPT_LEVEL)
            # Never destroyed, not even while the interpreter shuts down: arrays it allocated
            # may be freed after every module is gone. (A shared object is never unloaded.)
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(engine))
            address = functools.partial(lookup, engine)
        self.alloc_addr = address("_mlir_memref_to_llvm_alloc")
        self.free_addr = address("_mlir_memref_to_llvm_free")
        self.alloc = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int64)(self.alloc_addr)
        self.free = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self.free_addr)
        self.in_use = ctypes.c_int64.from_address(address("adj_bytes_in_use"))
        self.peak = ctypes.c_int64.from_address(address("adj_peak_bytes"))


_allocator: _Allocator | None = None
_allocator_lock = threading.Lock()


def _after_fork_in_child() -> None:
    # Held by another thread at the fork (making the allocator), it would never be released.
    global _allocator_lock
    _allocator_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _get() -> _Allocator:
    global _allocator
    if _allocator is None:
        with _allocator_lock:
            if _allocator is None:
                _allocator = _Allocator()
    return _allocator


def allocator_is_global() -> bool:
    """Whether the allocator is in the process's global scope, where shared objects from
    the disk cache resolve it."""
    return _get().is_global


def runtime_symbols() -> dict[str, int]:
    """The symbols compiled code allocates through, with their addresses."""
    a = _get()
    return {"_mlir_memref_to_llvm_alloc": a.alloc_addr, "_mlir_memref_to_llvm_free": a.free_addr}


def memory_stats() -> dict[str, int]:
    """Bytes adjit allocated and has not freed yet, and the most at any time since the
    start or `reset_peak_memory()`: in the CPU's memory, and (`device_*`) the GPU's."""
    a = _get()
    return {"bytes_in_use": a.in_use.value, "peak_bytes": a.peak.value,
            "device_bytes_in_use": cuda.accounting.in_use,
            "device_peak_bytes": cuda.accounting.peak}


def reset_peak_memory() -> None:
    """Sets the peaks to the bytes in use now."""
    a = _get()
    a.peak.value = a.in_use.value
    with cuda.accounting.lock:
        cuda.accounting.peak = cuda.accounting.in_use


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
