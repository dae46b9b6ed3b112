"""The LAPACK routines of the OpenBLAS that NumPy's wheel bundles, as compiled code calls them
(compiler/linalg_calls.py: np.linalg.solve, inv, det, cholesky).

NumPy has loaded that library into the process already (runtime/extension.py finds it for the
matrix products); its LAPACK symbols carry the prefix and suffix of its build (NumPy 2's
wheels: `scipy_dgetrf_64_`, 64-bit integers). Compiled code calls them by those names: the
ExecutionEngine is given their addresses (`symbols`), and the library is opened once more
RTLD_GLOBAL here so that the disk cache's shared objects find them when they are loaded
(runtime/cpu_cache.py imports this module: a process that only loads compiled code too). Every
argument of a Fortran LAPACK routine is a pointer (the integers too: `INT_BITS` wide), and a
CHARACTER argument has a hidden length after the others (passed, ignored by OpenBLAS)."""
from __future__ import annotations

import ctypes

from .extension import BLAS_LIBRARY

# The routines compiled code calls, for f32 ("s") and f64 ("d").
ROUTINES = ("getrf", "getrs", "potrf", "gesvd")


def _find() -> tuple[dict[str, tuple[str, int]], int]:
    """{"dgetrf": (its symbol in the library, its address), ...} and the width of the
    library's integers; ({}, 0) where NumPy bundles no OpenBLAS with them."""
    if BLAS_LIBRARY is None:
        return {}, 0
    try:
        lib = ctypes.CDLL(BLAS_LIBRARY, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return {}, 0
    for prefix, suffix, bits in (("scipy_", "_64_", 64), ("", "_64_", 64), ("scipy_", "_", 32),
                                 ("", "_", 32)):
        names = {t + r: f"{prefix}{t}{r}{suffix}" for t in "sd" for r in ROUTINES}
        if all(hasattr(lib, n) for n in names.values()):
            return ({k: (n, ctypes.cast(getattr(lib, n), ctypes.c_void_p).value)
                     for k, n in names.items()}, bits)
    return {}, 0


_ROUTINES, INT_BITS = _find()


def available() -> bool:
    """Whether compiled code can call LAPACK in this process."""
    return bool(_ROUTINES)


def symbol(name: str) -> str:
    """The library's symbol of routine `name` ("dgetrf")."""
    return _ROUTINES[name][0]


def symbols() -> dict[str, int]:
    """The routines' symbols with their addresses (for the ExecutionEngine)."""
    return dict(_ROUTINES.values())
