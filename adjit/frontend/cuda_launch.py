"""Kernel launches with `device="cuda"`, derivatives included: specialise the arguments, find
the compiled kernels through the compile service (service.py: this process's memo, the disk
cache, the compiler), launch them through the CUDA driver.

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

import math
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..core.activity import Activity
from ..core.kernel import GpuKernel, check_ndrange_bounds
from ..core.tape_size import per_item_count
from ..core.types import ArrayType, f64
from ..runtime import cuda
from ..runtime.device_array import DeviceArray, as_device_array
from . import service
from .builtins import namespace as _builtins
from .functions import Kernel, kernel, specialise
from .gpu_target import DEFAULT_CHIP, chip, compile_only, is_compile_only
from .modes import Forward, Reverse, flat_positions

if TYPE_CHECKING:
    from ..core.types import ScalarType

# What this module's users import from it (the GPU target's settings live in gpu_target.py).
__all__ = ["DEFAULT_CHIP", "cache_key", "chip", "compile_only", "derivative_kernels",
           "device_value", "gpu_kernel", "is_compile_only", "launch", "launch_derivative",
           "specialise_cuda"]


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
        if not is_compile_only():
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
    if is_compile_only():
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


# The adjit builtins _sum_into calls (`adjit.index()`... in a user's kernel).
_index, _ndrange, _atomic_add = (_builtins[n] for n in ("index", "ndrange", "atomic_add"))


@kernel
def _sum_into(x, total):
    """total[0] += sum(x) for ndrange <= len(x), total a float64 array: each work item adds up
    a strided part of x (consecutive items read consecutive elements), then adds that to
    total atomically, all in float64, as the CPU's launch rule sums (passes/autodiff/
    reduction.py): float32 adds stop growing at 2^24 and lose 1e-5 relative at 2^20 items."""
    item = _index()
    stride = _ndrange()[0]
    part = float(x[item])
    k = item + stride
    while k < x.shape[0]:
        part += float(x[k])
        k += stride
    _atomic_add(total, 0, part)


def gpu_kernel(k: Kernel, types: Sequence, ndim: int) -> GpuKernel:
    """`k` compiled for argument `types` and an `ndim`-D ndrange (service.gpu_kernels)."""
    return service.gpu_kernels(k, types, ndim)["kernel"]


def derivative_kernels(k: Kernel, types: Sequence, ndim: int, mode: str,
                       activity: Sequence[str]) -> dict[str, GpuKernel]:
    """The derivative kernels of a launch of `k` (derivative.kernel_derivative_to_gpu's) in
    `mode`, "forward" or "reverse" (service.gpu_kernels)."""
    return service.gpu_kernels(k, types, ndim, Reverse if mode == "reverse" else Forward,
                               activity)


def cache_key(k: Kernel, types: Sequence, ndim: int, debug: bool, target: str) -> str:
    """The disk-cache key of `k`'s GPU kernel for `types`, `ndim`, `debug` and chip `target`,
    computed without MLIR."""
    return service.gpu_kernel_key(k, types, ndim, debug, target)
