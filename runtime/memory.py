"""Memory adjit allocates, and its accounting.

One allocator serves compiled code and Python: compiled modules lower `memref.alloc` and
`memref.dealloc` to calls of `_mlir_memref_to_llvm_alloc` / `_mlir_memref_to_llvm_free`
(passes/pipeline.py), and every engine resolves those to the functions below; Python's
`allocate` and arrays returned by compiled code use them too. So `bytes_in_use` counts
temporaries inside compiled code, arrays it returns (until NumPy frees them), and tapes.

The allocator is native code, written in the LLVM dialect: allocation happens on
async-runtime worker threads, where a Python callback would need the GIL. Counters are
updated with atomic instructions. Each block carries a header (offset to the start of the
block, requested size, whether it is a cacheable large block, its capacity) so that free knows
what to subtract. Data starts on a cache line, and from 64 KiB on, on a page: arrays left at
different offsets within a page slow kernels that read one and write the other (4K
aliasing). Freed blocks of 1 MiB or more are
kept, up to 256 MiB in 64 slots taken and returned atomically, for later allocations of a
size they fit (`release_cached_memory()` frees them): glibc unmaps such blocks (above its mmap
threshold) or trims them when freed, and every gradient call would fault in and zero its pages
again. Kept blocks are not in `bytes_in_use`. A process loads the allocator from the disk cache
(runtime/cpu_cache.py) RTLD_GLOBAL, where shared objects of compiled modules find it by name;
the first process (or every one, without the cache) builds it (~0.1 s). Only where `cc` or
the LLVM tools are missing is it compiled by an ExecutionEngine, which only modules compiled
in-process can reach.
"""
from __future__ import annotations

import ctypes
import functools
import os
import threading
from math import prod
from typing import Callable, Sequence

import numpy as np

from ..frontend.types import ScalarType
from . import cpu_cache, cuda, source_index
from .abi import array_over

_OPT_LEVEL = 2

# Blocks of CACHE_MIN_BYTES or more are kept when freed, for a later allocation to reuse:
# glibc serves them with fresh mmap'd pages, which every call would fault in and zero again.
CACHE_MIN_BYTES = 1 << 20
CACHE_SLOTS = 64
CACHE_LIMIT_BYTES = 256 << 20

_ALLOCATOR_TEMPLATE = """
llvm.mlir.global external @adj_bytes_in_use(0 : i64) : i64
llvm.mlir.global external @adj_peak_bytes(0 : i64) : i64
llvm.mlir.global external @adj_cached_bytes(0 : i64) : i64
llvm.mlir.global external @adj_cache_limit($LIMIT : i64) : i64
llvm.mlir.global internal @adj_cache_slots(dense<0> : tensor<$SLOTSxi64>)
    : !llvm.array<$SLOTS x i64>
llvm.mlir.global internal @adj_cache_caps(dense<0> : tensor<$SLOTSxi64>)
    : !llvm.array<$SLOTS x i64>
llvm.func @malloc(i64) -> !llvm.ptr
llvm.func @free(!llvm.ptr)

llvm.func @adj_release_cached_memory() -> i64 {
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %n = llvm.mlir.constant($SLOTS : i64) : i64
  %slots = llvm.mlir.addressof @adj_cache_slots : !llvm.ptr
  %cached = llvm.mlir.addressof @adj_cached_bytes : !llvm.ptr
  llvm.br ^loop(%c0, %c0 : i64, i64)
^loop(%i: i64, %total: i64):
  %more = llvm.icmp "ult" %i, %n : i64
  llvm.cond_br %more, ^take, ^done
^take:
  %slot = llvm.getelementptr %slots[%i] : (!llvm.ptr, i64) -> !llvm.ptr, i64
  %b = llvm.atomicrmw xchg %slot, %c0 seq_cst : !llvm.ptr, i64
  %next = llvm.add %i, %c1 : i64
  %has = llvm.icmp "ne" %b, %c0 : i64
  llvm.cond_br %has, ^drop, ^loop(%next, %total : i64, i64)
^drop:
  %p = llvm.inttoptr %b : i64 to !llvm.ptr
  %cap_slot = llvm.getelementptr %p[-4] : (!llvm.ptr) -> !llvm.ptr, i64
  %cap = llvm.load %cap_slot : !llvm.ptr -> i64
  %0 = llvm.atomicrmw sub %cached, %cap seq_cst : !llvm.ptr, i64
  %block = llvm.call @adj_block_of(%p) : (!llvm.ptr) -> !llvm.ptr
  llvm.call @free(%block) : (!llvm.ptr) -> ()
  %sum = llvm.add %total, %cap : i64
  llvm.br ^loop(%next, %sum : i64, i64)
^done:
  llvm.return %total : i64
}

llvm.func internal @adj_malloc(%total: i64) -> !llvm.ptr {
  %null = llvm.mlir.zero : !llvm.ptr
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %block = llvm.call @malloc(%total) : (i64) -> !llvm.ptr
  %failed = llvm.icmp "eq" %block, %null : !llvm.ptr
  llvm.cond_br %failed, ^release, ^ok
^release:
  %released = llvm.call @adj_release_cached_memory() : () -> i64
  %any = llvm.icmp "ne" %released, %c0 : i64
  llvm.cond_br %any, ^again, ^ok
^again:
  %retry = llvm.call @malloc(%total) : (i64) -> !llvm.ptr
  llvm.return %retry : !llvm.ptr
^ok:
  llvm.return %block : !llvm.ptr
}

// A block for `bytes` of data starting on an `align` boundary (a power of 2) after a 32-byte
// header, whose offset to the block's start (p[-2]) and kind (p[-3]: 1 for a cacheable
// large block) it fills; the data pointer, or null.
llvm.func internal @adj_aligned(%bytes: i64, %align: i64, %kind: i64) -> !llvm.ptr {
  %null = llvm.mlir.zero : !llvm.ptr
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %header = llvm.mlir.constant(32 : i64) : i64
  %pad = llvm.add %header, %align : i64
  %total = llvm.add %bytes, %pad : i64
  %block = llvm.call @adj_malloc(%total) : (i64) -> !llvm.ptr
  %failed = llvm.icmp "eq" %block, %null : !llvm.ptr
  llvm.cond_br %failed, ^fail, ^ok
^ok:
  %bi = llvm.ptrtoint %block : !llvm.ptr to i64
  %lowest = llvm.add %bi, %header : i64
  %less_1 = llvm.sub %align, %c1 : i64
  %up = llvm.add %lowest, %less_1 : i64
  %mask = llvm.sub %c0, %align : i64
  %pi = llvm.and %up, %mask : i64
  %off = llvm.sub %pi, %bi : i64
  %p = llvm.getelementptr %block[%off] : (!llvm.ptr, i64) -> !llvm.ptr, i8
  %off_slot = llvm.getelementptr %p[-2] : (!llvm.ptr) -> !llvm.ptr, i64
  llvm.store %off, %off_slot : i64, !llvm.ptr
  %kind_slot = llvm.getelementptr %p[-3] : (!llvm.ptr) -> !llvm.ptr, i64
  llvm.store %kind, %kind_slot : i64, !llvm.ptr
  llvm.return %p : !llvm.ptr
^fail:
  llvm.return %null : !llvm.ptr
}

// The block that the data pointer `p` (of adj_aligned) starts in.
llvm.func internal @adj_block_of(%p: !llvm.ptr) -> !llvm.ptr {
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %off_slot = llvm.getelementptr %p[-2] : (!llvm.ptr) -> !llvm.ptr, i64
  %off = llvm.load %off_slot : !llvm.ptr -> i64
  %neg = llvm.sub %c0, %off : i64
  %block = llvm.getelementptr %p[%neg] : (!llvm.ptr, i64) -> !llvm.ptr, i8
  llvm.return %block : !llvm.ptr
}

llvm.func internal @adj_cache_put(%p: !llvm.ptr, %cap: i64) -> i1 {
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %n = llvm.mlir.constant($SLOTS : i64) : i64
  %pi = llvm.ptrtoint %p : !llvm.ptr to i64
  %slots = llvm.mlir.addressof @adj_cache_slots : !llvm.ptr
  %caps = llvm.mlir.addressof @adj_cache_caps : !llvm.ptr
  llvm.br ^loop(%c0 : i64)
^loop(%i: i64):
  %more = llvm.icmp "ult" %i, %n : i64
  llvm.cond_br %more, ^look, ^full
^look:
  %slot = llvm.getelementptr %slots[%i] : (!llvm.ptr, i64) -> !llvm.ptr, i64
  %cur = llvm.load %slot atomic monotonic {alignment = 8 : i64} : !llvm.ptr -> i64
  %next = llvm.add %i, %c1 : i64
  %empty = llvm.icmp "eq" %cur, %c0 : i64
  llvm.cond_br %empty, ^claim, ^loop(%next : i64)
^claim:
  %r = llvm.cmpxchg %slot, %c0, %pi seq_cst seq_cst : !llvm.ptr, i64
  %ok = llvm.extractvalue %r[1] : !llvm.struct<(i64, i1)>
  llvm.cond_br %ok, ^put, ^loop(%next : i64)
^put:
  %hint = llvm.getelementptr %caps[%i] : (!llvm.ptr, i64) -> !llvm.ptr, i64
  llvm.store %cap, %hint atomic monotonic {alignment = 8 : i64} : i64, !llvm.ptr
  %yes = llvm.mlir.constant(true) : i1
  llvm.return %yes : i1
^full:
  %no = llvm.mlir.constant(false) : i1
  llvm.return %no : i1
}

llvm.func @_mlir_memref_to_llvm_alloc(%size: i64) -> !llvm.ptr {
  %null = llvm.mlir.zero : !llvm.ptr
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %n = llvm.mlir.constant($SLOTS : i64) : i64
  %min = llvm.mlir.constant($MIN : i64) : i64
  %max = llvm.mlir.constant(1099511627776 : i64) : i64
  %none = llvm.mlir.constant(-1 : i64) : i64
  %slots = llvm.mlir.addressof @adj_cache_slots : !llvm.ptr
  %caps = llvm.mlir.addressof @adj_cache_caps : !llvm.ptr
  %cached = llvm.mlir.addressof @adj_cached_bytes : !llvm.ptr
  %twice = llvm.add %size, %size : i64
  %big = llvm.icmp "uge" %size, %min : i64
  %not_huge = llvm.icmp "ult" %size, %max : i64
  %cacheable = llvm.and %big, %not_huge : i1
  llvm.cond_br %cacheable, ^scan(%c0, %none, %none : i64, i64, i64), ^small
^small:
  // Data 64-byte aligned (a cache line); from 64 KiB on, page aligned: two arrays at
  // different offsets within a page make a kernel's loads of one falsely wait on its stores
  // to the other (4K aliasing: a stencil over heap-placed 256 KiB arrays ran 6x slower).
  %c64 = llvm.mlir.constant(64 : i64) : i64
  %page = llvm.mlir.constant(4096 : i64) : i64
  %mid = llvm.mlir.constant(65536 : i64) : i64
  %is_mid = llvm.icmp "uge" %size, %mid : i64
  %align = llvm.select %is_mid, %page, %c64 : i1, i64
  %sp = llvm.call @adj_aligned(%size, %align, %c0) : (i64, i64, i64) -> !llvm.ptr
  %failed = llvm.icmp "eq" %sp, %null : !llvm.ptr
  llvm.cond_br %failed, ^fail, ^count(%sp : !llvm.ptr)
^scan(%i: i64, %best: i64, %best_cap: i64):
  %more = llvm.icmp "ult" %i, %n : i64
  llvm.cond_br %more, ^look, ^pick
^look:
  %slot = llvm.getelementptr %slots[%i] : (!llvm.ptr, i64) -> !llvm.ptr, i64
  %cur = llvm.load %slot atomic monotonic {alignment = 8 : i64} : !llvm.ptr -> i64
  %next = llvm.add %i, %c1 : i64
  %occupied = llvm.icmp "ne" %cur, %c0 : i64
  llvm.cond_br %occupied, ^hint, ^scan(%next, %best, %best_cap : i64, i64, i64)
^hint:
  %hint_slot = llvm.getelementptr %caps[%i] : (!llvm.ptr, i64) -> !llvm.ptr, i64
  %hint = llvm.load %hint_slot atomic monotonic {alignment = 8 : i64} : !llvm.ptr -> i64
  %hint_lo = llvm.icmp "uge" %hint, %size : i64
  %hint_hi = llvm.icmp "ult" %hint, %twice : i64
  %smaller = llvm.icmp "ult" %hint, %best_cap : i64
  %hint_fits = llvm.and %hint_lo, %hint_hi : i1
  %better = llvm.and %hint_fits, %smaller : i1
  llvm.cond_br %better, ^scan(%next, %i, %hint : i64, i64, i64),
                        ^scan(%next, %best, %best_cap : i64, i64, i64)
^pick:
  %found = llvm.icmp "ne" %best, %none : i64
  llvm.cond_br %found, ^take, ^fresh
^take:
  %best_slot = llvm.getelementptr %slots[%best] : (!llvm.ptr, i64) -> !llvm.ptr, i64
  %b = llvm.atomicrmw xchg %best_slot, %c0 seq_cst : !llvm.ptr, i64
  %got = llvm.icmp "ne" %b, %c0 : i64
  llvm.cond_br %got, ^check, ^fresh
^check:
  %cp = llvm.inttoptr %b : i64 to !llvm.ptr
  %ccap_slot = llvm.getelementptr %cp[-4] : (!llvm.ptr) -> !llvm.ptr, i64
  %ccap = llvm.load %ccap_slot : !llvm.ptr -> i64
  %fit_lo = llvm.icmp "uge" %ccap, %size : i64
  %fit_hi = llvm.icmp "ult" %ccap, %twice : i64
  %fits = llvm.and %fit_lo, %fit_hi : i1
  llvm.cond_br %fits, ^reuse, ^put_back
^reuse:
  %1 = llvm.atomicrmw sub %cached, %ccap seq_cst : !llvm.ptr, i64
  llvm.br ^count(%cp : !llvm.ptr)
^put_back:
  %kept = llvm.call @adj_cache_put(%cp, %ccap) : (!llvm.ptr, i64) -> i1
  llvm.cond_br %kept, ^fresh, ^drop
^drop:
  %2 = llvm.atomicrmw sub %cached, %ccap seq_cst : !llvm.ptr, i64
  %dblock = llvm.call @adj_block_of(%cp) : (!llvm.ptr) -> !llvm.ptr
  llvm.call @free(%dblock) : (!llvm.ptr) -> ()
  llvm.br ^fresh
^fresh:
  %page_less_1 = llvm.mlir.constant(4095 : i64) : i64
  %page_mask = llvm.mlir.constant(-4096 : i64) : i64
  %up = llvm.add %size, %page_less_1 : i64
  %cap = llvm.and %up, %page_mask : i64
  %lpage = llvm.mlir.constant(4096 : i64) : i64
  %lp = llvm.call @adj_aligned(%cap, %lpage, %c1) : (i64, i64, i64) -> !llvm.ptr
  %lfailed = llvm.icmp "eq" %lp, %null : !llvm.ptr
  llvm.cond_br %lfailed, ^fail, ^fresh_ok
^fresh_ok:
  %cap_slot = llvm.getelementptr %lp[-4] : (!llvm.ptr) -> !llvm.ptr, i64
  llvm.store %cap, %cap_slot : i64, !llvm.ptr
  llvm.br ^count(%lp : !llvm.ptr)
^count(%p: !llvm.ptr):
  %size_slot = llvm.getelementptr %p[-1] : (!llvm.ptr) -> !llvm.ptr, i64
  llvm.store %size, %size_slot : i64, !llvm.ptr
  %in_use = llvm.mlir.addressof @adj_bytes_in_use : !llvm.ptr
  %old = llvm.atomicrmw add %in_use, %size seq_cst : !llvm.ptr, i64
  %new = llvm.add %old, %size : i64
  %peak = llvm.mlir.addressof @adj_peak_bytes : !llvm.ptr
  %3 = llvm.atomicrmw max %peak, %new seq_cst : !llvm.ptr, i64
  llvm.return %p : !llvm.ptr
^fail:
  llvm.return %null : !llvm.ptr
}

llvm.func @_mlir_memref_to_llvm_free(%p: !llvm.ptr) {
  %null = llvm.mlir.zero : !llvm.ptr
  %is_null = llvm.icmp "eq" %p, %null : !llvm.ptr
  llvm.cond_br %is_null, ^done, ^free
^free:
  %size_slot = llvm.getelementptr %p[-1] : (!llvm.ptr) -> !llvm.ptr, i64
  %size = llvm.load %size_slot : !llvm.ptr -> i64
  %in_use = llvm.mlir.addressof @adj_bytes_in_use : !llvm.ptr
  %0 = llvm.atomicrmw sub %in_use, %size seq_cst : !llvm.ptr, i64
  %kind_slot = llvm.getelementptr %p[-3] : (!llvm.ptr) -> !llvm.ptr, i64
  %kind = llvm.load %kind_slot : !llvm.ptr -> i64
  %one = llvm.mlir.constant(1 : i64) : i64
  %large = llvm.icmp "eq" %kind, %one : i64
  llvm.cond_br %large, ^cache, ^release
^cache:
  %cap_slot = llvm.getelementptr %p[-4] : (!llvm.ptr) -> !llvm.ptr, i64
  %cap = llvm.load %cap_slot : !llvm.ptr -> i64
  %cached = llvm.mlir.addressof @adj_cached_bytes : !llvm.ptr
  %limit_at = llvm.mlir.addressof @adj_cache_limit : !llvm.ptr
  %limit = llvm.load %limit_at atomic monotonic {alignment = 8 : i64} : !llvm.ptr -> i64
  %before = llvm.atomicrmw add %cached, %cap seq_cst : !llvm.ptr, i64
  %after = llvm.add %before, %cap : i64
  %within = llvm.icmp "sle" %after, %limit : i64
  llvm.cond_br %within, ^keep, ^undo
^keep:
  %kept = llvm.call @adj_cache_put(%p, %cap) : (!llvm.ptr, i64) -> i1
  llvm.cond_br %kept, ^done, ^undo
^undo:
  %1 = llvm.atomicrmw sub %cached, %cap seq_cst : !llvm.ptr, i64
  llvm.br ^release
^release:
  %block = llvm.call @adj_block_of(%p) : (!llvm.ptr) -> !llvm.ptr
  llvm.call @free(%block) : (!llvm.ptr) -> ()
  llvm.br ^done
^done:
  llvm.return
}
"""

_ALLOCATOR = (_ALLOCATOR_TEMPLATE.replace("$SLOTS", str(CACHE_SLOTS))
              .replace("$LIMIT", str(CACHE_LIMIT_BYTES)).replace("$MIN", str(CACHE_MIN_BYTES)))


class _Allocator:
    def __init__(self) -> None:
        # Found by its text's source key first: a process that loads everything from the
        # disk cache never imports MLIR (runtime/source_index.py).
        skey = source_index.key(f"allocator\0{_OPT_LEVEL}\0{_ALLOCATOR}")
        found = source_index.load_library(skey, global_scope=True)
        entry = found[0] if found is not None else self._build()
        if found is None and entry is not None:
            source_index.record(skey, entry.key, "", {})
        self.is_global = entry is not None
        if entry is not None:
            address: Callable[[str], int] = entry.address
        else:
            from mlir import ir
            from mlir.execution_engine import ExecutionEngine

            from .engine_lookup import lookup
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
        self.cached = ctypes.c_int64.from_address(address("adj_cached_bytes"))   # kept, not in use
        self.cache_limit = ctypes.c_int64.from_address(address("adj_cache_limit"))
        self.release = ctypes.CFUNCTYPE(ctypes.c_int64)(address("adj_release_cached_memory"))

    @staticmethod
    def _build() -> cpu_cache.Entry | None:
        """The allocator's cache entry by its module key, built now if missing (shared
        objects need it global); None where it cannot be built (no cc or LLVM tools)."""
        folder = cpu_cache.directory()
        key = cpu_cache.key(_ALLOCATOR, _OPT_LEVEL, 1)
        entry = cpu_cache.load(folder, key, global_scope=True) if folder is not None else None
        if entry is None and cpu_cache.can_store():
            from mlir import ir
            from mlir.dialects.llvm import translate_module_to_llvmir
            with ir.Context(), ir.Location.unknown():
                llvm_ir = str(translate_module_to_llvmir(ir.Module.parse(_ALLOCATOR).operation))
            try:
                entry = cpu_cache.load_built(
                    cpu_cache.build_shared_object(llvm_ir, _OPT_LEVEL, cpu_cache.host_target()),
                    [], folder, key, global_scope=True, needs=cpu_cache.needs_of(llvm_ir))
            except (OSError, RuntimeError):
                entry = None
        return entry


_allocator: _Allocator | None = None
_allocator_lock = threading.Lock()


def _after_fork_in_child() -> None:
    # Held by another thread at the fork (making the allocator), it would never be released.
    global _allocator_lock
    _allocator_lock = threading.Lock()
    # The parent's kept blocks: the child's own cache starts empty (and its limit whole).
    if _allocator is not None:
        _allocator.release()


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


def release_cached_memory() -> int:
    """Frees the blocks adjit keeps for reuse (large blocks freed lately, see CACHE_MIN_BYTES,
    at most CACHE_LIMIT_BYTES in all), returning them to the system allocator; returns their
    bytes. They are not counted in `memory_stats()`."""
    a = _allocator
    return 0 if a is None else a.release()


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
