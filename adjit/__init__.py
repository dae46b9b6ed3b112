"""adjit: a JIT compiler for Python array kernels on MLIR, with automatic differentiation.

    @adjit.kernel   a function run once per point of an index space (ndrange=)
    @adjit.func     a device function, callable from kernels and compiled functions
    @adjit.jit      a compiled host function: control flow, arrays, kernel launches

Importing adjit, decorating functions and launching kernels that the GPU kernel cache holds
need no MLIR: it is imported when something is compiled.
"""
# A misspelt ADJIT_* variable would leave its setting at the default unseen: one warning each,
# first (a valid setting that fails the import later still gets its typo's warning).
from .core.environment import warn_unknown as _warn_unknown
_warn_unknown()
from .lang.builtins import namespace as _ns
from .core.errors import (ArtifactError, CacheTrustWarning, CompilationError,
                          EnvironmentValueError, InternalCompilerError)
from .lang.functions import Function, Kernel, device_function as func, jit, kernel
from .core import types as _types
from .core.types import ArrayType, ScalarType, VecArrayType, VecType, mat, vec
from .lang.structs import struct, zeros_like as zeros_like_struct

#: The scalar types, for annotations (``x: adjit.f64``) and dtypes
#: (``adjit.zeros(n, dtype=adjit.f32)``), 32- and 64-bit floats, 32- and 64-bit integers,
#: and booleans, NumPy's float32, float64, int32, int64 and bool. A Python float argument is
#: an f64, an int an i64.
#:
#: Example:
#:     ::
#:
#:         import numpy as np
#:         import adjit
#:
#:         @adjit.jit
#:         def half(x: adjit.f32) -> adjit.f32:
#:             return x / 2
#:
#:         print(half(np.float32(3.0)), adjit.f32.np_dtype)   # 1.5 float32
f32, f64, i32, i64, bool_ = _types.f32, _types.f64, _types.i32, _types.i64, _types.bool_

#: The annotation of an array argument, ``adjit.Array[dtype, ndim]``, a NumPy array of that
#: dtype and number of dimensions (an :class:`ArrayType`), or ``adjit.Array[adjit.vec3, 1]``
#: for an array of small vectors (a :class:`VecArrayType`). Anything else in the brackets is
#: a TypeError ("adjit.Array takes [dtype, ndim], e.g. adjit.Array[adjit.f32, 2]").
#:
#: Example:
#:     ::
#:
#:         import numpy as np
#:         import adjit
#:
#:         @adjit.kernel
#:         def double(x: adjit.Array[adjit.f64, 1]):
#:             i = adjit.index()
#:             x[i] = 2.0 * x[i]
#:
#:         x = np.arange(3.0)
#:         double(x, ndrange=len(x))
#:         print(x)   # [0. 2. 4.]
Array = _types.Array

#: Warp's small vector, matrix and quaternion types, ``vec2`` to ``vec4`` and ``mat22`` to ``mat44``
#: of f32, the ``d`` suffix of f64, ``quat``/``quatd`` (x, y, z, w). In compiled code
#: ``adjit.vec3(1.0, 2.0, 3.0)`` makes one, ``v[0]`` reads a component, ``+ - *`` and the
#: vector builtins (``adjit.dot``, ``adjit.cross``, ``adjit.length``, ...) apply; from Python
#: a vector is a NumPy array of its shape. Arrays of them: ``adjit.Array[adjit.vec3, 1]``,
#: passed as NumPy arrays of shape (n, 3).
#:
#: Example:
#:     ::
#:
#:         import numpy as np
#:         import adjit
#:
#:         @adjit.kernel
#:         def lengths(p: adjit.Array[adjit.vec3d, 1], out: adjit.Array[adjit.f64, 1]):
#:             i = adjit.index()
#:             out[i] = adjit.length(p[i] + adjit.vec3d(0.0, 0.0, 1.0))
#:
#:         p = np.zeros((2, 3)); p[1] = (3.0, 4.0, -1.0)
#:         out = np.zeros(2)
#:         lengths(p, out, ndrange=2)
#:         print(out)   # [1. 5.]
#:         print(adjit.vec3(1, 2, 3), adjit.mat22d.shape)
(vec2, vec3, vec4, vec2d, vec3d, vec4d, mat22, mat33, mat44, mat22d, mat33d, mat44d, quat,
 quatd) = (*[vec(n, t) for t in (f32, f64) for n in (2, 3, 4)],
           *[mat(n, n, t) for t in (f32, f64) for n in (2, 3, 4)],
           VecType("quat", (4,), f32), VecType("quat", (4,), f64))
#: Warp's rigid transform, a position ``p`` (a vec3) and a rotation ``q`` (a quat) in 7 floats
#: (``transform`` f32, ``transformd`` f64): ``adjit.transform(p, q)``, ``t.p``, ``t.q``,
#: ``adjit.transform_point(t, x)``, ``transform_vector``, ``transform_multiply`` (also
#: ``t1 * t2``), ``transform_inverse``, ``transform_identity``. From Python, a NumPy array of 7.
#:
#: Example:
#:     ::
#:
#:         import numpy as np
#:         import adjit
#:
#:         @adjit.jit
#:         def moved(t: adjit.transformd, x: adjit.vec3d):
#:             back = adjit.transform_inverse(t) * t          # the identity
#:             return adjit.transform_point(t, x), adjit.transform_point(back, x), t.p
#:
#:         q = adjit.quat_from_axis_angle(np.array([0.0, 0.0, 1.0]), np.pi / 2)
#:         t = adjit.transformd(np.array([1.0, 0.0, 0.0]), q)   # turn 90 degrees about z, then shift
#:         x = np.array([1.0, 0.0, 0.0])
#:         p, same, shift = moved(t, x)
#:         print(p.round(12), same, shift)   # [1. 1. 0.] [1. 0. 0.] [1. 0. 0.]
#:         assert np.allclose(p, [1.0, 1.0, 0.0]) and np.allclose(same, x)
transform, transformd = VecType("transform", (7,), f32), VecType("transform", (7,), f64)
from .lang import modes as _modes
from .lang.modes import Active, BatchDuplicated, Const, Duplicated, DuplicatedNoNeed

#: The modes of :func:`autodiff` (Enzyme's). ``Forward`` returns the tangent of the result
#: (arguments ``Duplicated(x, dx)`` carry the tangents in; ``dx`` may be a float for a
#: scalar ``x``); ``ForwardWithPrimal`` returns ``(tangent, primal)``; ``Reverse`` returns a
#: tuple with one entry per argument, the derivative of each ``Active`` one and None for the
#: others (arrays' derivatives are added into their ``Duplicated`` shadows);
#: ``ReverseWithPrimal`` returns ``(derivatives, primal)``. ``ReverseSplitWithPrimal`` is
#: :func:`autodiff_thunk`'s: the forward and reverse halves run as two calls, with a
#: :class:`Tape` between them.
#:
#: Example:
#:     ::
#:
#:         import adjit
#:
#:         @adjit.jit
#:         def f(x: adjit.f64, y: adjit.f64) -> adjit.f64:
#:             return x * x * y
#:
#:         print(adjit.autodiff(adjit.Forward, f, adjit.Duplicated(3.0, 1.0), 2.0))   # 12.0
#:         print(adjit.autodiff(adjit.ForwardWithPrimal, f, adjit.Duplicated(3.0, 1.0), 2.0))
#:         print(adjit.autodiff(adjit.Reverse, f, adjit.Active(3.0), adjit.Const(2.0)))
#:         print(adjit.autodiff(adjit.ReverseWithPrimal, f, adjit.Active(3.0), adjit.Active(2.0)))
#:         fwd, rev = adjit.autodiff_thunk(adjit.ReverseSplitWithPrimal, f, adjit.Active,
#:                                         adjit.Const)
#:         tape, primal, shadow = fwd(adjit.Active(3.0), adjit.Const(2.0))
#:         print(primal, rev(adjit.Active(3.0), adjit.Const(2.0), 1.0, tape))   # 18.0 (12.0, None)
Forward, ForwardWithPrimal, Reverse, ReverseWithPrimal, ReverseSplitWithPrimal = (
    _modes.Forward, _modes.ForwardWithPrimal, _modes.Reverse, _modes.ReverseWithPrimal,
    _modes.ReverseSplitWithPrimal)
from .api.autodiff import (Tape, autodiff, autodiff_thunk, check_grad, grad, hessian,
                                hvp, jacfwd, jacrev, jvp, value_and_grad, vjp)
from .lang import debug, rules
from .lang.checkpointing import checkpointed
from .lang.fixed_point import fixed_point
from .lang.stop_gradient import stop_gradient
from .lang.interpreter import interpret
from .api.calls import ROUTES as _ROUTES
from .lang.functions import install as _install
from .runtime.device_array import DeviceArray, to_device
from .runtime.profiling import Profile, profile
from .api.export import export, load

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
    """What adjit itself allocated, and how much checkpointed loops recomputed.

    Returns:
        dict: ``bytes_in_use`` and ``peak_bytes`` (the bytes adjit allocated in CPU memory
        and not freed yet, and the most at any time since the start or
        :func:`reset_peak_memory`; arrays NumPy made are not counted), the same for GPU
        memory (``device_bytes_in_use``, ``device_peak_bytes``), and
        ``checkpoint_steps_recomputed``: the steps that reverse passes of
        :func:`checkpointed` loops ran again, since the process started. The counts are
        this process's: under MPI each rank counts its own.

    Example:
        ::

            import numpy as np
            import adjit

            @adjit.jit
            def total(n: adjit.i64) -> adjit.f64:
                return adjit.sum(adjit.ones(n))

            adjit.reset_peak_memory()
            print(total(1_000_000))
            stats = adjit.memory_stats()
            assert stats["peak_bytes"] >= 8_000_000   # the array of ones
            print(sorted(stats))
    """
    from .runtime.memory import memory_stats as stats
    return stats()


def reset_peak_memory() -> None:
    """Sets the peaks of :func:`memory_stats` (``peak_bytes``, ``device_peak_bytes``) to the
    bytes in use now, to measure the peak of what runs next.

    Example:
        ::

            import adjit

            adjit.reset_peak_memory()
            stats = adjit.memory_stats()
            assert stats["peak_bytes"] == stats["bytes_in_use"]
    """
    from .runtime.memory import reset_peak_memory as reset
    reset()


def release_cached_memory() -> int:
    """Frees the large blocks (1 MiB or more, at most 256 MiB in all) that adjit keeps after
    compiled code frees them, for reuse without page faults.

    They are not counted in :func:`memory_stats` (not in use), but they stay resident until
    released.

    Returns:
        int: the bytes freed.

    Example:
        ::

            import adjit

            @adjit.jit
            def total(n: adjit.i64) -> adjit.f64:
                return adjit.sum(adjit.ones(n))

            total(1_000_000)
            print(adjit.release_cached_memory() >= 0, adjit.release_cached_memory())  # True 0
    """
    from .runtime.memory import release_cached_memory as release
    return release()


def wait_for_builds(timeout: float | None = None) -> bool:
    """Waits until the shared objects this process is building in the background for the
    CPU disk cache are built (each takes a core for ~0.2 s, which calls made meanwhile
    compete for).

    Benchmarks call it before timing; the code a call runs is the same before and after.

    Args:
        timeout: seconds to wait at most; None waits as long as it takes.

    Returns:
        bool: True when no build is left, False if ``timeout`` seconds passed first.

    Example:
        ::

            import adjit

            @adjit.jit
            def inc(x: adjit.f64) -> adjit.f64:
                return x + 1.0

            inc(1.0)
            assert adjit.wait_for_builds(timeout=60.0)
    """
    import sys
    cache = sys.modules.get("adjit.runtime.cpu_cache")   # not imported: nothing was built
    return True if cache is None else cache.wait_for_builds(timeout)


__all__ = ["kernel", "func", "jit", "Function", "Kernel", "CompilationError", "CacheTrustWarning",
           "EnvironmentValueError", "InternalCompilerError", "Array", "struct", "zeros_like_struct", "VecType", "VecArrayType", "vec", "mat",
           "vec2", "vec3", "vec4", "vec2d", "vec3d", "vec4d", "mat22", "mat33", "mat44",
           "mat22d", "mat33d", "mat44d", "quat", "quatd", "transform", "transformd",
           "ArrayType", "ScalarType", "f32", "f64", "i32", "i64", "bool_", "memory_stats",
           "reset_peak_memory", "release_cached_memory", "wait_for_builds", "Active", "BatchDuplicated", "Const", "Duplicated",
           "DuplicatedNoNeed", "Forward",
           "ForwardWithPrimal", "Reverse", "ReverseSplitWithPrimal", "ReverseWithPrimal",
           "Tape", "autodiff", "autodiff_thunk", "check_grad", "grad", "hessian", "hvp", "jacfwd", "jacrev",
           "jvp", "value_and_grad",
           "vjp", "rules", "debug", "checkpointed", "fixed_point", "stop_gradient", "DeviceArray",
           "to_device", "profile", "Profile", "export", "load", "ArtifactError",
           "interpret", *sorted(_ns)]
