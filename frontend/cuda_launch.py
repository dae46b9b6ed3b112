"""Kernel launches with `device="cuda"`: specialise the arguments, find the compiled kernel in
the disk cache (compiling it on a miss), launch it through the CUDA driver.

Compile here, run there: the cache key is computed without MLIR, from the kernel's Python
source (and that of what it calls, see source.fingerprint), the argument types, the ndrange's
rank, the chip and the versions of the cache format and of adjit's compiler. So a machine with
a GPU but no MLIR launches kernels that a machine with MLIR compiled into the same cache
folder (`ADJIT_CACHE_DIR`); MLIR is imported on a miss only. The kernel is found (or compiled)
before the driver is needed, so launching on a machine without a GPU fills the cache, then
raises RuntimeError.

`workgroupsize` is not part of the key: the compiled kernel reads its block size at run time
(passes/lower_gpu.py), so one compiled kernel serves every block size.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..runtime import cuda, kernel_cache
from ..runtime.device_array import as_device_array
from ..runtime.kernel_cache import GpuKernel
from .functions import debug_enabled, specialise
from .source import fingerprint

if TYPE_CHECKING:
    from .functions import Kernel

# A compiling machine has no GPU to ask for its architecture: PTX for sm_90 runs on Hopper
# and, JIT-compiled by the driver, on later GPUs.
DEFAULT_CHIP = "sm_90"


def chip() -> str:
    """The GPU architecture kernels compile for: ADJIT_CUDA_CHIP, or sm_90."""
    return os.environ.get("ADJIT_CUDA_CHIP", DEFAULT_CHIP)


def launch(k: "Kernel", args: Sequence[Any], ndrange: tuple[int, ...],
           workgroupsize: tuple[int, ...] | None) -> None:
    """`k(*args, ndrange=..., workgroupsize=..., device="cuda")`: blocks until done."""
    types, values = specialise_cuda(k, args)
    cuda.launch(gpu_kernel(k, types, len(ndrange)), values, ndrange, workgroupsize)


def specialise_cuda(k: "Kernel", args: Sequence[Any]) -> tuple[list, list]:
    """Argument types and launch values: GPU arrays of any library as DeviceArrays (views,
    no copy), NumPy arrays as they are (the launcher copies them in and back), scalars
    converted to their annotations as on the CPU."""
    values = []
    for a in args:
        device_array = None if isinstance(a, np.ndarray) else as_device_array(a)
        values.append(a if device_array is None else device_array)
    return specialise(k.__name__, k.params, k.annotations, values, device="cuda")


def gpu_kernel(k: "Kernel", types: list, ndim: int) -> GpuKernel:
    """`k` compiled for argument `types` and an `ndim`-D ndrange: from this process's memo,
    the disk cache, or the compiler (which stores it in the disk cache)."""
    debug, target = debug_enabled(), chip()
    memo = ("cuda", tuple(types), ndim, debug, target)
    found = k._cache.get(memo)
    if found is None:
        directory = kernel_cache.default_cache_dir()
        key = cache_key(k, types, ndim, debug, target)
        found = kernel_cache.load(directory, key)
        if found is None:
            found = _compile(k, types, ndim, debug, target, directory)
            kernel_cache.store(directory, key, found)
        k._cache[memo] = found
    return found


def cache_key(k: "Kernel", types: list, ndim: int, debug: bool, target: str) -> str:
    """The disk-cache key of `k` compiled for `types`, `ndim`, `debug` and chip `target`,
    computed without MLIR."""
    what = "\0".join([fingerprint(k), compiler_fingerprint(), repr(list(types)), str(ndim),
                      "debug" if debug else "release"])
    return kernel_cache.cache_key(what, f"{k.pyfn.__module__}.{k.pyfn.__qualname__}", target)


@functools.cache
def compiler_fingerprint() -> str:
    """A digest of adjit's compiler (the frontend, dialect and passes sources): a cached
    kernel is reused only by the compiler version that made it."""
    digest = hashlib.sha256()
    for package in ("adjit.frontend", "adjit.dialects", "adjit.passes"):
        root = Path(importlib.util.find_spec(package).origin).parent
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".mlir"):
                digest.update(f"\0{path.relative_to(root)}\0".encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def _compile(k: "Kernel", types: list, ndim: int, debug: bool, target: str,
             directory: Path) -> GpuKernel:
    try:
        from .compiler import kernel_to_gpu
    except ImportError as e:
        raise kernel_cache.KernelCacheError(
            f"kernel {k.__name__} for {types} ({ndim}-D) is not in the kernel cache "
            f"{directory} and MLIR, needed to compile it, is not installed ({e}); compile it "
            "on a machine with adjit's compiler into the same ADJIT_CACHE_DIR") from e
    return kernel_to_gpu(k, types, ndim, debug, target)
