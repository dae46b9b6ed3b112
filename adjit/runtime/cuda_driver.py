"""The CUDA driver, started once per process (cuda-bindings), and device memory with its
accounting: what device arrays (device_array.py) and launches (cuda.py) both stand on."""
from __future__ import annotations

import ctypes
import functools
import threading
from dataclasses import dataclass
from typing import Any


@dataclass
class _Driver:
    api: Any          # the cuda.bindings.driver module
    device: Any
    context: Any


_driver: _Driver | None = None
_driver_error: RuntimeError | None = None
_lock = threading.Lock()
_current = threading.local()     # whether this thread has made the primary context current


def _start() -> _Driver:
    try:    # probe first: without libcuda, cuda-bindings raises its own, less clear, error
        ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        raise RuntimeError(f"no CUDA driver on this machine ({e})") from None
    try:
        from cuda.bindings import driver as api
    except ImportError:
        try:
            from cuda import cuda as api          # cuda-python before 12.6
        except ImportError:
            raise RuntimeError("GPU launches need cuda-bindings: pip install cuda-bindings") from None
    (err,) = api.cuInit(0)
    _check(api, err, "cuInit (is there a GPU?)")
    err, count = api.cuDeviceGetCount()
    _check(api, err, "cuDeviceGetCount")
    if count == 0:
        raise RuntimeError("the CUDA driver sees no GPU")
    err, device = api.cuDeviceGet(0)
    _check(api, err, "cuDeviceGet")
    err, context = api.cuDevicePrimaryCtxRetain(device)
    _check(api, err, "cuDevicePrimaryCtxRetain")
    return _Driver(api, device, context)


def driver() -> _Driver:
    """The initialised driver, its context current on this thread; RuntimeError without one."""
    global _driver, _driver_error
    if _driver is None:
        with _lock:
            if _driver is None and _driver_error is None:
                try:
                    _driver = _start()
                except RuntimeError as e:
                    _driver_error = e
    if _driver is None:
        raise RuntimeError(f"CUDA is not available: {_driver_error}")
    if not getattr(_current, "done", False):
        (err,) = _driver.api.cuCtxSetCurrent(_driver.context)
        check(err, "cuCtxSetCurrent")
        _current.done = True
    return _driver


def is_available() -> bool:
    """True when a CUDA driver, cuda-bindings and at least one GPU are present."""
    try:
        driver()
    except RuntimeError:
        return False
    return True


def _check(api: Any, err: Any, what: str) -> None:
    if err != api.CUresult.CUDA_SUCCESS:
        _, name = api.cuGetErrorName(err)
        raise RuntimeError(f"{what} failed: {name.decode() if name else err}")


def check(err: Any, what: str) -> None:
    """Raises RuntimeError naming the CUDA error when `err` (from driver().api) is not success."""
    _check(_driver.api, err, what)


def synchronize() -> None:
    """Waits for all work on the device (launches already do)."""
    (err,) = driver().api.cuCtxSynchronize()
    check(err, "cuCtxSynchronize")


# CU_MEM_ATTACH_GLOBAL: managed memory any stream, and the CPU, may access.
_ATTACH_GLOBAL = 1


class _Accounting:
    """Bytes of GPU memory adjit allocated (device arrays, tapes, managed memory of host
    programs) and not yet freed, and the most at any time: memory_stats' device_* keys."""

    def __init__(self) -> None:
        self.sizes: dict[int, int] = {}
        self.in_use = self.peak = 0
        self.lock = threading.Lock()

    def add(self, ptr: int, nbytes: int) -> None:
        with self.lock:
            self.sizes[ptr] = nbytes
            self.in_use += nbytes
            self.peak = max(self.peak, self.in_use)

    def remove(self, ptr: int) -> None:
        with self.lock:
            self.in_use -= self.sizes.pop(ptr, 0)


accounting = _Accounting()
# Host memory (alloc_host: a checkpointed loop's spilled snapshots), counted apart: it is no
# GPU memory.
host_accounting = _Accounting()


def alloc(nbytes: int) -> int:
    """`nbytes` of device memory (at least one byte)."""
    err, ptr = driver().api.cuMemAlloc(max(int(nbytes), 1))
    check(err, f"allocating {nbytes} bytes on the GPU")
    accounting.add(int(ptr), int(nbytes))
    return int(ptr)


def alloc_managed(nbytes: int) -> int:
    """`nbytes` of CUDA managed memory (at least one byte), addressable by the CPU and the
    GPU alike."""
    err, ptr = driver().api.cuMemAllocManaged(max(int(nbytes), 1), _ATTACH_GLOBAL)
    check(err, f"allocating {nbytes} bytes of managed memory")
    accounting.add(int(ptr), int(nbytes))
    return int(ptr)


def alloc_host(nbytes: int) -> int:
    """`nbytes` of page-locked host memory (at least one byte; cuMemAllocHost), which the
    GPU reaches at full speed and copies (cuMemcpy) move to and from device memory; plain
    malloc where the driver API has no cuMemAllocHost. `free` frees it."""
    api = driver().api
    n = max(int(nbytes), 1)
    if hasattr(api, "cuMemAllocHost"):
        err, ptr = api.cuMemAllocHost(n)
        check(err, f"allocating {nbytes} bytes of pinned host memory")
        ptr, pinned = int(ptr), True
    else:
        ptr, pinned = _libc().malloc(n), False
        if not ptr:
            raise MemoryError(f"allocating {nbytes} bytes of host memory")
    with _host_lock:
        _host[ptr] = pinned
    host_accounting.add(ptr, int(nbytes))
    return ptr


_host: dict[int, bool] = {}       # address -> pinned (cuMemAllocHost) or malloc'd
_host_lock = threading.Lock()


@functools.cache
def _libc() -> Any:
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.restype, libc.free.argtypes = None, [ctypes.c_void_p]
    return libc


def free(ptr: int) -> None:
    """Frees memory that alloc, alloc_managed or alloc_host gave."""
    with _host_lock:
        pinned = _host.pop(ptr, None)
    if pinned is not None:
        host_accounting.remove(ptr)
        if pinned:
            (err,) = driver().api.cuMemFreeHost(ptr)
            check(err, "cuMemFreeHost")
        else:
            _libc().free(ptr)
        return
    accounting.remove(ptr)
    (err,) = driver().api.cuMemFree(ptr)
    check(err, "cuMemFree")


def copy(dst: int, src: int, nbytes: int) -> None:
    """Copies `nbytes` between any two addresses the driver knows (unified addressing)."""
    if nbytes:
        (err,) = driver().api.cuMemcpy(dst, src, nbytes)
        check(err, "cuMemcpy")


def copy_and_wait(dst: int, src: int, nbytes: int) -> None:
    """`copy`, then waits for it: a device-to-device cuMemcpy may return before it is done
    (it is ordered with the launches of the default stream, not with the CPU)."""
    if nbytes:
        copy(dst, src, nbytes)
        (err,) = driver().api.cuStreamSynchronize(0)
        check(err, "cuMemcpy")
