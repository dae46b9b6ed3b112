"""adjit: a JIT compiler for Python array kernels on MLIR, with automatic differentiation.

    @adjit.kernel   a function run once per point of an index space (ndrange=)
    @adjit.func     a device function, callable from kernels and compiled functions
    @adjit.jit      a compiled host function: control flow, arrays, kernel launches

Importing adjit, decorating functions and launching kernels that the GPU kernel cache holds
need no MLIR: it is imported when something is compiled.
"""
from .lang.builtins import namespace as _ns
from .core.errors import CompilationError, InternalCompilerError
from .lang.functions import Function, Kernel, device_function as func, jit, kernel
from .core.types import Array, ArrayType, ScalarType, bool_, f32, f64, i32, i64
from .core.types import VecArrayType, VecType, mat, vec
from .lang.structs import struct, zeros_like as zeros_like_struct

# Warp's small vector, matrix and quaternion types (f32; the d suffix: f64)
vec2, vec3, vec4 = (vec(n, f32) for n in (2, 3, 4))
vec2d, vec3d, vec4d = (vec(n, f64) for n in (2, 3, 4))
mat22, mat33, mat44 = (mat(n, n, f32) for n in (2, 3, 4))
mat22d, mat33d, mat44d = (mat(n, n, f64) for n in (2, 3, 4))
quat, quatd = VecType("quat", (4,), f32), VecType("quat", (4,), f64)
from .lang.modes import (Active, BatchDuplicated, Const, Duplicated, DuplicatedNoNeed, Forward,
                             ForwardWithPrimal, Reverse, ReverseSplitWithPrimal,
                             ReverseWithPrimal)
from .api.autodiff import (Tape, autodiff, autodiff_thunk, check_grad, grad, hessian,
                                hvp, jacfwd, jacrev, jvp, value_and_grad, vjp)
from .lang import rules
from .lang.checkpointing import checkpointed
from .lang.fixed_point import fixed_point
from .lang.stop_gradient import stop_gradient
from .api.calls import ROUTES as _ROUTES
from .lang.functions import install as _install
from .runtime.device_array import DeviceArray, to_device

# Declarations know no compiler: their calls go through these routes (api/calls.py).
_install(_ROUTES)

globals().update(_ns)   # index, index_nd, sin, ..., atomic_add, zeros, sum, ...


def __getattr__(name: str):
    """`adjit.torch` and `adjit.jax` (adjit/interop/): imported on first use, so that
    `import adjit` imports neither PyTorch nor JAX."""
    if name == "torch":
        from .interop import torch as module
    elif name == "jax":
        from .interop import jax as module
    else:
        raise AttributeError(f"module 'adjit' has no attribute {name!r}")
    globals()[name] = module
    return module


def memory_stats() -> dict:
    """Bytes adjit itself allocated: `bytes_in_use`, `peak_bytes`."""
    from .runtime.memory import memory_stats as stats
    return stats()


def reset_peak_memory() -> None:
    from .runtime.memory import reset_peak_memory as reset
    reset()


def release_cached_memory() -> int:
    """Frees the large blocks (1 MiB or more, at most 256 MiB in all) that adjit keeps after
    compiled code frees them, for reuse without page faults; returns the bytes freed. They
    are not counted in memory_stats() (not in use), but they stay resident until then."""
    from .runtime.memory import release_cached_memory as release
    return release()


def wait_for_builds(timeout: float | None = None) -> bool:
    """Waits until the shared objects this process is building in the background for the
    CPU disk cache are built (each takes a core for ~0.2 s, which calls made meanwhile
    compete for); True when none is left, False if `timeout` seconds passed first.
    Benchmarks call it before timing; the code a call runs is the same before and after."""
    import sys
    cache = sys.modules.get("adjit.runtime.cpu_cache")   # not imported: nothing was built
    return True if cache is None else cache.wait_for_builds(timeout)


__all__ = ["kernel", "func", "jit", "Function", "Kernel", "CompilationError",
           "InternalCompilerError", "Array", "struct", "zeros_like_struct", "VecType", "VecArrayType", "vec", "mat",
           "vec2", "vec3", "vec4", "vec2d", "vec3d", "vec4d", "mat22", "mat33", "mat44",
           "mat22d", "mat33d", "mat44d", "quat", "quatd",
           "ArrayType", "ScalarType", "f32", "f64", "i32", "i64", "bool_", "memory_stats",
           "reset_peak_memory", "release_cached_memory", "wait_for_builds", "Active", "BatchDuplicated", "Const", "Duplicated",
           "DuplicatedNoNeed", "Forward",
           "ForwardWithPrimal", "Reverse", "ReverseSplitWithPrimal", "ReverseWithPrimal",
           "Tape", "autodiff", "autodiff_thunk", "check_grad", "grad", "hessian", "hvp", "jacfwd", "jacrev",
           "jvp", "value_and_grad",
           "vjp", "rules", "checkpointed", "fixed_point", "stop_gradient", "DeviceArray", "to_device", *sorted(_ns)]
