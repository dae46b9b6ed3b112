"""Kernel launches with `device="cuda"`: specialise the arguments, find the compiled kernel
through the compile service (service.py: this process's memo, the disk cache, the compiler),
launch it through the CUDA driver. (A launch's derivative on the GPU is a host program, as
an @adjit.jit function's is: cuda_jit.derivative.)

Compile here, run there: the cache key is computed without MLIR, from the kernel's Python
source (and that of what it calls, see source.fingerprint), the argument types, the ndrange's
rank, the chip and the versions of the cache format and of adjit's compiler. So a machine
with a GPU but no MLIR launches kernels that a machine with MLIR compiled into the same cache
folder (`ADJIT_CACHE_DIR`); MLIR is imported on a miss only. Kernels are found (or
compiled) before the driver is needed; under `compile_only()` that is all a launch does,
which is how a machine without a GPU prepares the cache for one without the compiler: it
makes the same calls (on NumPy arrays of the same dtypes and ranks) under compile_only().

`workgroupsize` is not part of the key: a compiled kernel reads its block size at run time
(passes/lower_gpu.py), so one compiled kernel serves every block size. (It is part of a
launch derivative's: the host program's launchers pass it as a constant.)
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..core.kernel import GpuKernel
from ..runtime import cuda
from ..runtime.device_array import as_device_array
from . import service
from ..lang.functions import Kernel, specialise
from .gpu_target import DEFAULT_CHIP, chip, compile_only, is_compile_only

# What this module's users import from it (the GPU target's settings live in gpu_target.py).
__all__ = ["DEFAULT_CHIP", "cache_key", "chip", "compile_only", "device_value", "gpu_kernel",
           "is_compile_only", "launch", "specialise_cuda"]


def launch(k: Kernel, args: Sequence[Any], ndrange: tuple[int, ...],
           workgroupsize: tuple[int, ...] | None) -> None:
    """`k(*args, ndrange=..., workgroupsize=..., device="cuda")`: blocks until done."""
    types, values = specialise_cuda(k, args)
    kernel = gpu_kernel(k, types, len(ndrange))
    if not is_compile_only():
        cuda.launch(kernel, values, ndrange, workgroupsize)


def device_value(a: Any) -> Any:
    """A GPU array of any library as a DeviceArray viewing it (no copy); anything else (NumPy
    arrays, which the launcher copies in and back, scalars) as it is."""
    on_device = None if isinstance(a, np.ndarray) else as_device_array(a)
    return a if on_device is None else on_device


def specialise_cuda(k: Kernel, args: Sequence[Any]) -> tuple[list, list]:
    """Argument types and launch values (device_value's), scalars converted to their
    annotations as on the CPU."""
    return specialise(k.__name__, k.params, k.annotations, [device_value(a) for a in args],
                      device="cuda")


def gpu_kernel(k: Kernel, types: Sequence, ndim: int) -> GpuKernel:
    """`k` compiled for argument `types` and an `ndim`-D ndrange (service.gpu_kernels)."""
    return service.gpu_kernels(k, types, ndim)["kernel"]


def cache_key(k: Kernel, types: Sequence, ndim: int, debug: bool, target: str) -> str:
    """The disk-cache key of `k`'s GPU kernel for `types`, `ndim`, `debug` and chip `target`,
    computed without MLIR."""
    return service.gpu_kernel_key(k, types, ndim, debug, target)
