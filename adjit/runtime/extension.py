"""The native extension `adjit.runtime._native` (runtime/native/: the dispatcher, the
counting allocator, memrefCopy), built by `pip install` (setup.py). Every process needs it:
compiled code allocates and copies through it. Loaded RTLD_GLOBAL, so that the shared
objects of the disk cache find those functions by name; ExecutionEngines are given their
addresses (`runtime_symbols`)."""
from __future__ import annotations

import ctypes

from ..core.symbols import ALLOC_SYMBOL, CHECKPOINT_SYMBOLS, FREE_SYMBOL

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

# What compiled code calls by name (and checkpointed loops' schedule: checkpoint.cpp).
_RUNTIME = (ALLOC_SYMBOL, FREE_SYMBOL, "memrefCopy", *CHECKPOINT_SYMBOLS)


def address(name: str) -> int:
    """The address of the extension's exported symbol `name`."""
    return ctypes.cast(getattr(library, name), ctypes.c_void_p).value


def runtime_symbols() -> dict[str, int]:
    """The symbols compiled code calls in the extension, with their addresses."""
    return {name: address(name) for name in _RUNTIME}
