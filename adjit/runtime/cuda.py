"""Launching compiled GPU kernels (`GpuKernel`, PTX) through the CUDA driver API.

Uses `cuda-bindings` and never imports MLIR, so that kernels compiled elsewhere run from a
kernel cache on a machine without a compiler. All work goes to the device's primary context
(the one CuPy, PyTorch and JAX share) and the legacy default stream, and every launch
synchronizes before it returns, as CPU launches do; so arrays from those libraries are
safe to pass in, and results are complete when `launch` returns.

A launch is a 1-D grid of ceil(prod(ndrange) / block) blocks of `block` threads, `block` being
prod(workgroupsize) or 256 (passes/lower_gpu.py builds the matching kernel entry).

A kernel with checks takes an error cell as a hidden last parameter: each thread has a device
cell of its own (`_ErrorCell`), and a thread's launches run one at a time (each waits for its
kernel), so each launch reads exactly its own errors, whatever other threads launch.
"""
from __future__ import annotations

import ctypes
import math
import struct
import threading
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..core.kernel import DEFAULT_BLOCK, GpuKernel, Param, check_ndrange_bounds
from ..core.types import ScalarType
from . import device_array as _device_array
from .abi import check_error, row_major_strides
# The driver and device memory (cuda_driver.py); the memory functions are this module's
# interface too (cuda.alloc, cuda.free, cuda.accounting...).
from .cuda_driver import (accounting, alloc, alloc_managed, check, copy, driver,  # noqa: F401
                          free, is_available, synchronize)

MAX_BLOCK = 1024


_load_lock = threading.Lock()


@dataclass
class _Loaded:
    module: Any
    function: Any


_loaded: dict[tuple[str, str], _Loaded] = {}


def _load(kernel: GpuKernel) -> _Loaded:
    key = (kernel.entry, kernel.ptx)     # the str hash of ptx is computed once and cached
    found = _loaded.get(key)
    if found is not None:
        return found
    api = driver().api
    err, module = api.cuModuleLoadData(kernel.ptx.encode() + b"\0")
    check(err, f"loading the PTX of kernel {kernel.name} (built for {kernel.chip})")
    err, function = api.cuModuleGetFunction(module, kernel.entry.encode())
    check(err, f"cuModuleGetFunction({kernel.entry})")
    with _load_lock:
        return _loaded.setdefault(key, _Loaded(module, function))


class _ErrorCell:
    """One thread's error cell in device memory (8 bytes: the number of the check that
    failed, 0 when none did), and the parameter words of the memref<1xi64> that passes it
    to a kernel (allocated, aligned, offset, size, stride). `clean`: known to hold 0, so a
    launch need not clear it first (a Ctrl-C between a kernel and the read of its cell
    leaves it unknown, and the next launch clears it: no stale error reaches a valid one).
    A cell whose thread ended goes back to `_spare_cells` for another thread: no CUDA call
    from a finaliser, and at most as many cells as threads ever launched at once."""

    def __init__(self, api: Any):
        self.api = api
        try:     # list.pop and append are atomic: no lock, which __del__ could deadlock on
            ptr = _spare_cells.get(api, []).pop()
        except IndexError:
            ptr = None
        if ptr is None:
            err, ptr = api.cuMemAlloc(8)
            check(err, "allocating a kernel error cell")
        self.ptr = int(ptr)
        self.words = (ctypes.c_int64 * 5)(self.ptr, self.ptr, 0, 1, 1)
        self.clean = False

    def __del__(self) -> None:
        try:
            _spare_cells.setdefault(self.api, []).append(self.ptr)
        except Exception:      # interpreter shutdown: the module's globals may be gone
            pass


# Keyed by the driver API object (the module; a test's fake driver), which it keeps alive.
_spare_cells: dict[Any, list[int]] = {}
_cells = threading.local()


def _error_cell() -> _ErrorCell:
    """This thread's cell, for the current driver."""
    api = driver().api
    cell = getattr(_cells, "cell", None)
    if cell is None or cell.api is not api:
        cell = _cells.cell = _ErrorCell(api)
    if not cell.clean:
        (err,) = api.cuMemsetD8(cell.ptr, 0, 8)
        check(err, "clearing the kernel error cell")
        cell.clean = True
    return cell


def launch(gpu_kernel: GpuKernel, args: Sequence[Any], ndrange: int | Sequence[int],
           workgroupsize: int | Sequence[int] | None = None) -> None:
    """Runs `gpu_kernel(*args)` over `ndrange` and waits for it.

    Array arguments: `DeviceArray`, anything with `__cuda_array_interface__` or a CUDA DLPack
    capsule (used in place), or NumPy arrays (copied in, and copied back unless read-only, so
    writes reach the caller's array as on the CPU; the same view passed twice is one device
    array, partly overlapping views are not). Scalars convert to the parameter's type.
    A failed `adj.check` raises its Python error (IndexError...); RuntimeError for CUDA errors.
    """
    extents = _extents(ndrange)
    if len(extents) != gpu_kernel.ndim:
        raise ValueError(f"kernel {gpu_kernel.name} is {gpu_kernel.ndim}-D; ndrange {ndrange} "
                         f"has {len(extents)} dimensions")
    if len(args) != len(gpu_kernel.params):
        raise TypeError(f"kernel {gpu_kernel.name} takes {len(gpu_kernel.params)} arguments, "
                        f"got {len(args)}")
    block = _block_size(workgroupsize)
    grid = _grid(math.prod(extents), block)
    if grid == 0:
        return
    check_ndrange_bounds(gpu_kernel.ndrange_bounds, args, extents)
    frame = _frame(gpu_kernel)
    values = frame.values
    values.clear()
    copies: dict[tuple, tuple[np.ndarray, _device_array.DeviceArray]] = {}
    for position, (param, arg) in enumerate(zip(gpu_kernel.params, args)):
        if param.kind == "memref":
            if (position in gpu_kernel.written and isinstance(arg, np.ndarray)
                    and not arg.flags.writeable):
                raise ValueError(f"argument {position} of kernel {gpu_kernel.name} is written "
                                 "by the kernel, but this NumPy array is read-only")
            array = _device_operand(arg, param, gpu_kernel, position, copies)
            # (allocated, aligned, offset, sizes..., strides...), strides in elements: the
            # operand is C-contiguous (device_array checked it)
            values += [array.ptr, array.ptr, 0, *array.shape, *row_major_strides(array.shape)]
        else:
            values.append(_scalar(arg, param, gpu_kernel, position))
    values += extents
    cell = _error_cell() if gpu_kernel.checks else None
    if cell is not None:
        values.extend(cell.words)
    frame.pack()
    _run(gpu_kernel, grid, block, frame.kernel_params, cell)
    for host, device in copies.values():          # before raising, as writes persist on the CPU
        if host.flags.writeable:                  # (read-only ones are not written)
            device.copy_to_host(out=host)
    if cell is not None:
        _raise_failed_check(gpu_kernel, cell)


def launch_words(gpu_kernel: GpuKernel, words: int, nwords: int, items: int, block: int) -> None:
    """Runs `gpu_kernel` over `items` work items in blocks of `block` threads and waits for
    it. Its parameters are ready at address `words`: `nwords` 64-bit words, one per PTX
    parameter (a host program packs them: passes/lower_cuda_host.py) but the error cell's,
    which this thread's cell provides."""
    expected = _frame(gpu_kernel).given
    if nwords != expected:
        raise RuntimeError(f"kernel {gpu_kernel.name} takes {expected} parameter words, the "
                           f"host program gave {nwords}")
    _block_size(block)
    grid = _grid(items, block)
    if grid == 0:
        return
    addresses = list(range(words, words + 8 * nwords, 8))
    cell = _error_cell() if gpu_kernel.checks else None
    if cell is not None:
        base = ctypes.addressof(cell.words)
        addresses += range(base, base + 8 * len(cell.words), 8)
    pointers = (ctypes.c_void_p * len(addresses))(*addresses)
    _run(gpu_kernel, grid, block, ctypes.addressof(pointers), cell)
    if cell is not None:
        _raise_failed_check(gpu_kernel, cell)


def _grid(items: int, block: int) -> int:
    grid = -(-items // block) if items > 0 else 0
    if grid > 2**31 - 1:
        raise ValueError(f"{items} work items need {grid} blocks, over CUDA's limit of 2**31-1")
    return grid


def _run(gpu_kernel: GpuKernel, grid: int, block: int, kernel_params: int,
         cell: _ErrorCell | None) -> _Loaded:
    """Launches the kernel (a 1-D grid) on its packed parameters and waits for it; `cell`
    (the kernel's error cell, None without checks) is unknown until it is read."""
    loaded = _load(gpu_kernel)
    api = driver().api
    if cell is not None:
        cell.clean = False
    (err,) = api.cuLaunchKernel(loaded.function, grid, 1, 1, block, 1, 1, 0, 0,
                                kernel_params, 0)
    check(err, f"launching kernel {gpu_kernel.name}")
    (err,) = api.cuStreamSynchronize(0)
    check(err, f"kernel {gpu_kernel.name}")
    return loaded


def _extents(ndrange: int | Sequence[int]) -> tuple[int, ...]:
    extents = (ndrange,) if isinstance(ndrange, (int, np.integer)) else tuple(ndrange)
    if any(int(n) < 0 for n in extents):
        raise ValueError(f"ndrange {ndrange} has a negative extent")
    return tuple(int(n) for n in extents)


def _block_size(workgroupsize: int | Sequence[int] | None) -> int:
    if workgroupsize is None:
        return DEFAULT_BLOCK
    block = math.prod(_extents(workgroupsize))
    if not 1 <= block <= MAX_BLOCK:
        raise ValueError(f"workgroupsize {workgroupsize} gives {block} threads per block; "
                         f"CUDA allows 1 to {MAX_BLOCK}")
    return block


def _describe(param: Param) -> str:
    return f"a {param.rank}-D {param.scalar_type.memory_dtype.name} array"


def _device_operand(arg: Any, param: Param, kernel: GpuKernel, position: int,
                    copies: dict) -> _device_array.DeviceArray:
    if isinstance(arg, np.ndarray):
        _matching(arg, param, kernel, position)
        key = _device_array.array_identity(arg)     # one device copy per distinct view
        if key not in copies:
            copies[key] = (arg, _device_array.DeviceArray.from_numpy(arg))
        return copies[key][1]
    array = _device_array.as_device_array(arg)
    if array is None:
        raise TypeError(f"argument {position} of kernel {kernel.name} must be {_describe(param)} "
                        f"(NumPy, adjit.DeviceArray, __cuda_array_interface__ or DLPack), "
                        f"got {type(arg).__name__}")
    _matching(array, param, kernel, position)
    return array


def _matching(array: Any, param: Param, kernel: GpuKernel, position: int) -> Any:
    if array.ndim != param.rank or array.dtype != param.scalar_type.memory_dtype:
        raise TypeError(f"argument {position} of kernel {kernel.name} must be {_describe(param)}, "
                        f"got a {array.ndim}-D {array.dtype} array")
    return array


def _scalar(arg: Any, param: Param, kernel: GpuKernel, position: int) -> Any:
    if isinstance(arg, np.ndarray) and arg.ndim > 0 or hasattr(arg, "__cuda_array_interface__"):
        raise TypeError(f"argument {position} of kernel {kernel.name} must be a scalar "
                        f"({param.dtype}), got an array")
    if param.scalar_type.is_bool:
        return bool(arg)
    if param.scalar_type.is_float:
        return float(arg)
    return int(arg)


class _Frame:
    """cuLaunchKernel's kernelParams for one kernel, reused by every launch of it on one
    thread (launches wait for the kernel, so the previous launch is done with it): one 8-byte
    word per expanded parameter (each PTX parameter here fits in 8 bytes, little-endian at the
    word's start), and the array of their addresses."""

    def __init__(self, kernel: GpuKernel):
        self.kernel = kernel
        formats = []
        for p in kernel.params:
            formats += (["Q", "Q"] + ["q"] * (1 + 2 * p.rank) if p.kind == "memref"
                        else [_word_format(p.scalar_type)])
        formats += ["q"] * kernel.ndim
        self.given = len(formats)          # what a host program packs (launch_words)
        if kernel.checks:
            formats += ["q"] * 5           # the error cell's memref<1xi64>
        self.nwords = len(formats)
        self.layout = struct.Struct("<" + "".join(formats))
        self.words = ctypes.create_string_buffer(8 * self.nwords)
        base = ctypes.addressof(self.words)
        self.pointers = (ctypes.c_void_p * self.nwords)(*range(base, base + 8 * self.nwords, 8))
        self.kernel_params = ctypes.addressof(self.pointers)
        self.values: list[Any] = []

    def pack(self) -> None:
        self.layout.pack_into(self.words, 0, *self.values)


def _word_format(t: ScalarType) -> str:
    """The struct format of a scalar in an 8-byte word: its bytes, then padding."""
    size = struct.calcsize("<" + t.struct_code)
    return t.struct_code + (f"{8 - size}x" if size < 8 else "")


_frames = threading.local()


def _frame(kernel: GpuKernel) -> _Frame:
    frames = getattr(_frames, "by_kernel", None)
    if frames is None:
        frames = _frames.by_kernel = {}
    frame = frames.get(id(kernel))
    if frame is None or frame.kernel is not kernel:
        frame = frames[id(kernel)] = _Frame(kernel)
    return frame


def _raise_failed_check(kernel: GpuKernel, cell: _ErrorCell) -> None:
    """Reads this launch's cell; raises the failed check's error (and clears the cell)."""
    api = cell.api
    word = np.zeros(1, dtype=np.int64)
    (err,) = api.cuMemcpyDtoH(word.ctypes.data, cell.ptr, 8)
    check(err, "reading the kernel's error cell")
    number = int(word[0])
    if number == 0:
        cell.clean = True
        return
    (err,) = api.cuMemsetD8(cell.ptr, 0, 8)      # reset for the next launch
    check(err, "resetting the kernel's error cell")
    cell.clean = True
    raise check_error(kernel.checks, number, f"kernel {kernel.name}")
