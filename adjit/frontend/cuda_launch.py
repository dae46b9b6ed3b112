"""Kernel launches with `device="cuda"`, derivatives included: specialise the arguments, find
the compiled kernels in the disk cache (compiling them on a miss), launch them through the
CUDA driver.

Compile here, run there: the cache key is computed without MLIR, from the kernel's Python
source (and that of what it calls, see source.fingerprint), the argument types, the ndrange's
rank, what is compiled (the kernel, or which derivative), the chip and the versions of the
cache format and of adjit's compiler. So a machine with a GPU but no MLIR launches kernels that
a machine with MLIR compiled into the same cache folder (`ADJIT_CACHE_DIR`); MLIR is imported
on a miss only. Kernels are found (or compiled) before the driver is needed; under
`compile_only()` that is all a launch does, which is how a machine without a GPU prepares the
cache for one without the compiler: it makes the same calls (on NumPy arrays of the same
dtypes and ranks) under compile_only().

`workgroupsize` is not part of the key: a compiled kernel reads its block size at run time
(passes/lower_gpu.py), so one compiled kernel serves every block size.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np

# adjit's own kernels (_sum_into) are written as users write them; this module is imported
# lazily, when the package is complete.
import adjit

from ..core.activity import Activity
from ..runtime import cuda, kernel_cache
from ..runtime.device_array import DeviceArray, as_device_array
from ..core.kernel import GpuKernel, check_ndrange_bounds
from ..core.tape_size import per_item_count
from .autodiff import flat_positions
from .functions import debug_enabled, specialise
from .guard import compiling
from .source import compiler_fingerprint, fingerprint
from ..core.types import ArrayType, f64

if TYPE_CHECKING:
    from .functions import Kernel
    from ..core.types import ScalarType

# A compiling machine has no GPU to ask for its architecture: PTX for sm_90 runs on Hopper
# and, JIT-compiled by the driver, on later GPUs.
DEFAULT_CHIP = "sm_90"

_compile_only = contextvars.ContextVar("adjit_cuda_compile_only", default=False)


@contextlib.contextmanager
def compile_only() -> Iterator[None]:
    """Within it, `device="cuda"` launches (and autodiff of them) find or compile their
    kernels, storing them in the disk cache, and return without running anything (autodiff
    returns zeros): no GPU or driver is needed."""
    token = _compile_only.set(True)
    try:
        yield
    finally:
        _compile_only.reset(token)


def is_compile_only() -> bool:
    """Whether this call is inside compile_only()."""
    return _compile_only.get()


def chip() -> str:
    """The GPU architecture kernels compile for: ADJIT_CUDA_CHIP, or sm_90."""
    return os.environ.get("ADJIT_CUDA_CHIP", DEFAULT_CHIP)


def launch(k: Kernel, args: Sequence[Any], ndrange: tuple[int, ...],
           workgroupsize: tuple[int, ...] | None) -> None:
    """`k(*args, ndrange=..., workgroupsize=..., device="cuda")`: blocks until done."""
    types, values = specialise_cuda(k, args)
    kernel = gpu_kernel(k, types, len(ndrange))
    if not _compile_only.get():
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


def launch_derivative(k: Kernel, reverse: bool, activity: Sequence[str],
                      types: Sequence[ScalarType | ArrayType], args: Sequence[Any],
                      ndrange: tuple[int, ...], workgroupsize: tuple[int, ...] | None) -> list:
    """`autodiff` of a launch of `k` on the GPU, which does what the autodiff pass's launch
    rule does on the CPU (passes/autodiff/launch.py). `args` are the derivative kernels'
    (each argument, then its shadow or tangent unless it is "const" or "active").

    Forward mode launches the forward kernel and returns []. Reverse mode launches the
    augmented kernel (the primal effects, and each work item's tape), then the reverse kernel,
    which gives each work item's adjoint of each "active" scalar, and of each element every
    item reads (`rev.uniform_loads`: `p[0]`, `w[k]`), in float64 sums (_sum_into); adds
    each element's sum into the element of its shadow, and returns the scalars' sums.
    """
    ndim = len(ndrange)
    if not reverse:
        kernel = derivative_kernels(k, types, ndim, "forward", activity)["forward"]
        check_ndrange_bounds(kernel.ndrange_bounds, args, tuple(ndrange))
        if not _compile_only.get():
            cuda.launch(kernel, args, ndrange, workgroupsize)
        return []
    kernels = derivative_kernels(k, types, ndim, "reverse", activity)
    aug, rev = kernels["aug"], kernels["rev"]
    # Before the tapes are allocated: the launch would refuse it only after that.
    check_ndrange_bounds(aug.ndrange_bounds, args, tuple(ndrange))
    active = [t for t, a in zip(types, activity) if a == Activity.ACTIVE]
    # The element type of each element every item reads (uniform_loads.py): its array's.
    element_t = [types[arg].dtype for arg, _ in rev.uniform_loads]
    sums = {t: gpu_kernel(_sum_into, [ArrayType(t, 1), ArrayType(f64, 1)], 1)
            for t in active + element_t}
    if _compile_only.get():
        return [t.np_dtype.type(0) for t in active]
    items = math.prod(ndrange)
    # Where loops around taped values run a number of times given by the kernel's arguments,
    # the slots per item are an expression of them (core/tape_size.py): of these ones.
    at = flat_positions(activity)
    slots = [per_item_count(n, lambda k: args[at[k]], lambda k, d: args[at[k]].shape[d])
             for n in aug.tape_per_item]
    tape_params = aug.params[len(aug.params) - len(aug.tape_per_item):]
    tapes = [DeviceArray.empty(items * n, cuda.NUMPY_DTYPES[p.dtype])
             for n, p in zip(slots, tape_params)]
    adjoints = [DeviceArray.zeros(items, t.np_dtype) for t in active]
    # Not one float32 atomic add per item into one address: that stops growing at 2^24.
    element_adjoints = [DeviceArray.zeros(items, t.np_dtype) for t in element_t]
    cuda.launch(aug, [*args, *tapes], ndrange, workgroupsize)
    cuda.launch(rev, [*args, *tapes, *adjoints, *element_adjoints], ndrange, workgroupsize)

    def total_of(per_item: DeviceArray, t) -> Any:
        total = DeviceArray.zeros(1, np.float64)
        cuda.launch(sums[t], [per_item, total], min(items, _SUM_ITEMS))
        return per_item.dtype.type(total.numpy()[0])

    for (arg, at_text), per_item, t in zip(rev.uniform_loads, element_adjoints, element_t):
        shadow = args[at[arg] + 1]     # a Duplicated argument: its shadow follows it
        index = tuple(per_item_count(x, lambda k: args[at[k]], lambda k, d: args[at[k]].shape[d])
                      for x in at_text)
        _add_to_element(shadow, index, total_of(per_item, t))
    return [total_of(per_item, t) for per_item, t in zip(adjoints, active)]


def _add_to_element(shadow: Any, index: tuple[int, ...], total: Any) -> None:
    """shadow[index] += total (in the shadow's dtype, as the CPU's launch rule adds), where
    `index` is inside the array: outside it no item read the element (it would have failed
    in the augmented kernel) and total is 0 (passes/autodiff/uniform_loads.py)."""
    if len(index) != len(shadow.shape) or not all(
            0 <= i < n for i, n in zip(index, shadow.shape)):
        return
    if isinstance(shadow, np.ndarray):
        shadow[index] = shadow[index] + total
    else:
        cuda.add_to_element(shadow, index, total)


# Work items of _sum_into: enough to fill a GPU, few enough that their atomic adds are cheap.
_SUM_ITEMS = 1 << 16


@adjit.kernel
def _sum_into(x, total):
    """total[0] += sum(x) for ndrange <= len(x), total a float64 array: each work item adds up
    a strided part of x (consecutive items read consecutive elements), then adds that to
    total atomically, all in float64, as the CPU's launch rule sums (passes/autodiff/
    reduction.py): float32 adds stop growing at 2^24 and lose 1e-5 relative at 2^20 items."""
    item = adjit.index()
    stride = adjit.ndrange()[0]
    part = float(x[item])
    k = item + stride
    while k < x.shape[0]:
        part += float(x[k])
        k += stride
    adjit.atomic_add(total, 0, part)


def gpu_kernel(k: Kernel, types: Sequence, ndim: int) -> GpuKernel:
    """`k` compiled for argument `types` and an `ndim`-D ndrange: from this process's memo,
    the disk cache, or the compiler (which stores it in the disk cache)."""
    def compile_kernel(debug: bool, target: str) -> dict[str, GpuKernel]:
        from .compiler import kernel_to_gpu
        return {"kernel": kernel_to_gpu(k, list(types), ndim, debug, target)}

    return _compiled(k, types, ndim, "kernel", ("kernel",), compile_kernel)["kernel"]


def derivative_kernels(k: Kernel, types: Sequence, ndim: int, mode: str,
                       activity: Sequence[str]) -> dict[str, GpuKernel]:
    """The derivative kernels of a launch of `k` (derivative.kernel_derivative_to_gpu's),
    as gpu_kernel finds them."""
    def compile_derivative(debug: bool, target: str) -> dict[str, GpuKernel]:
        from .derivative import kernel_derivative_to_gpu
        return kernel_derivative_to_gpu(k, list(types), ndim, mode, tuple(activity), debug,
                                        target)

    names = ("forward",) if mode == "forward" else ("aug", "rev")
    return _compiled(k, types, ndim, f"{mode}({','.join(activity)})", names,
                     compile_derivative)


def _compiled(k: Kernel, types: Sequence, ndim: int, variant: str, names: tuple[str, ...],
              compile_all: Callable[[bool, str], dict[str, GpuKernel]]) -> dict[str, GpuKernel]:
    """The kernels `names` of `variant` (what is compiled from `k`): from this process's
    memo, else all from the disk cache, else from `compile_all`, then stored there."""
    debug, target = debug_enabled(), chip()
    memo = ("cuda", variant, tuple(types), ndim, debug, target)
    memoised = k._cache.get(memo)
    # compile_only() is asked to store, even what this process compiled with the caches off.
    if memoised is not None and not is_compile_only():
        return memoised
    keys = {name: cache_key(k, types, ndim, debug, target, f"{variant}:{name}")
            for name in names}

    def load(folder: Path) -> dict[str, GpuKernel] | None:
        found = {name: kernel_cache.load(folder, key) for name, key in keys.items()}
        return None if None in found.values() else found

    def store(folder: Path, kernels: dict[str, GpuKernel]) -> None:
        for name, key in keys.items():
            kernel_cache.store(folder, key, kernels[name])

    # Where it is read from and written to, with the caches on or off: find_or_compile's rule.
    found, _ = kernel_cache.find_or_compile(
        f"kernel {k.__name__} ({variant}) for {list(types)} ({ndim}-D)", load,
        lambda: memoised or compiling(k, lambda: compile_all(debug, target)), store,
        for_another_machine=is_compile_only())
    k._cache[memo] = found
    return found


def cache_key(k: Kernel, types: Sequence, ndim: int, debug: bool, target: str,
              variant: str = "kernel:kernel") -> str:
    """The disk-cache key of `variant` (what is compiled: the kernel, or which derivative
    kernel) of `k` for `types`, `ndim`, `debug` and chip `target`, computed without MLIR."""
    what = "\0".join([fingerprint(k), compiler_fingerprint(), variant, repr(list(types)),
                      str(ndim), "debug" if debug else "release"])
    return kernel_cache.cache_key(what, k.__name__, target)
