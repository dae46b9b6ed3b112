"""The native extension `adjit.runtime._native` (runtime/native/: the dispatcher, the
counting allocator, memrefCopy), built by `pip install` (setup.py). Every process needs it:
compiled code allocates and copies through it. Loaded RTLD_GLOBAL, so that the shared
objects of the disk cache find those functions by name; ExecutionEngines are given their
addresses (`runtime_symbols`)."""
from __future__ import annotations

import ctypes
import os
import sys

from ..core.symbols import ALLOC_SYMBOL, CHECKPOINT_SYMBOLS, FREE_SYMBOL, GEMM_SYMBOLS
from ..core.threads import default_num_threads, thread_limit

try:
    from . import _native
except ImportError as e:     # the sources used without installing them
    raise ImportError(
        "adjit's native extension (adjit.runtime._native) is not built: install adjit with "
        "`pip install -e .` (it needs a C++17 compiler)") from e

# Importing it loaded it RTLD_LOCAL; opening it again RTLD_GLOBAL moves its exported symbols
# (allocator.cpp's and memref_copy.cpp's; the rest is hidden) into the global scope. Never
# closed.
library = ctypes.CDLL(_native.__file__, mode=ctypes.RTLD_GLOBAL)

# What compiled code calls by name (and checkpointed loops' schedule: checkpoint.cpp; the
# matrix products: gemm.cpp).
_RUNTIME = (ALLOC_SYMBOL, FREE_SYMBOL, "memrefCopy", *CHECKPOINT_SYMBOLS, *GEMM_SYMBOLS)


def address(name: str) -> int:
    """The address of the extension's exported symbol `name`."""
    return ctypes.cast(getattr(library, name), ctypes.c_void_p).value


def runtime_symbols() -> dict[str, int]:
    """The symbols compiled code calls in the extension, with their addresses."""
    return {name: address(name) for name in _RUNTIME}


def _register_blas() -> str | None:
    """Gives gemm.cpp the sgemm and dgemm of the OpenBLAS that NumPy's wheel bundles (in
    numpy.libs/ or numpy/.dylibs/, already loaded by `import numpy`; its cblas names carry
    the `scipy_` prefix and, with 64-bit integers, a `64_` suffix); returns its path, or
    None if there is none (products then run gemm.cpp's loop nest)."""
    import glob
    import os

    import numpy
    root = os.path.dirname(numpy.__file__)
    found = sorted(glob.glob(os.path.join(root + ".libs", "*openblas*"))
                   + glob.glob(os.path.join(root, ".dylibs", "*openblas*")))
    for path in found:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix, ilp64 in (("scipy_", "64_", 1), ("", "64_", 1), ("scipy_", "", 0),
                                      ("", "", 0)):
            try:
                s, d = (getattr(lib, f"{prefix}cblas_{t}gemm{suffix}") for t in "sd")
            except AttributeError:
                continue
            # (OpenBLAS >= 0.3.27: gemm.cpp keeps each call to one thread and splits large
            # products over adjit's own pool, whose spinning workers would otherwise compete
            # with OpenBLAS's for the cores: measured 36 ms for a 0.7 ms MLP forward on 2)
            local = next((getattr(lib, n) for n in ("openblas_set_num_threads_local",
                                                    f"{prefix}openblas_set_num_threads_local")
                          if hasattr(lib, n)), None)
            library.adj_gemm_register(
                ctypes.c_int64(_pointer(s)), ctypes.c_int64(_pointer(d)), ctypes.c_int64(ilp64),
                ctypes.c_int64(_pointer(local) if local is not None else 0),
                ctypes.c_int64(default_num_threads()))
            return path
    return None


def _pointer(fn) -> int:
    return ctypes.cast(fn, ctypes.c_void_p).value


# The BLAS the matrix products call (None: gemm.cpp's own loop nest).
BLAS_LIBRARY = _register_blas()


def _limit_threads(in_child: bool) -> None:
    """Gives the thread pool this process's thread_limit() (core/threads.py): processes that
    share the machine (MPI ranks, pytest-xdist workers, multiprocessing children) do not each
    start a thread per core."""
    try:
        limit = thread_limit(in_child)
    except ValueError:     # a bad ADJIT_NUM_THREADS: the first compile says so
        return
    library.adj_set_thread_limit(ctypes.c_int64(limit))


# A child of multiprocessing that imports adjit (spawn, forkserver: multiprocessing is loaded
# by then), or any forked child of a process that had (multiprocessing's fork workers).
_mp = sys.modules.get("multiprocessing")
_limit_threads(_mp is not None and _mp.parent_process() is not None)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _limit_threads(True))
