"""Where the wheels' files are, without MLIR.

A process whose functions are all in the disk cache (runtime/source_index.py) never imports
the MLIR bindings (73 ms of imports) or builds IR: it loads shared objects and calls them
(runtime/compiled_module.py). So this module imports nothing of MLIR; the compiler
(compiler/engine.py) builds on it. What compiled code calls at run time (the allocator,
memrefCopy, the thread pool of parallel loops) is in adjit's native extension
(runtime/extension.py), libc and libm: no library of the MLIR wheel.
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path


def package_folder(name: str, marker: str) -> Path:
    """The folder of package `name` (a wheel's: mlir, llvm) holding the file `marker`,
    found on sys.path without importing the package (importing mlir costs 73 ms); where it
    is not a folder there (a zip, a custom finder), the package is imported and asked."""
    for entry in sys.path:
        folder = Path(entry or ".") / name
        if (folder / marker).is_file():
            return folder
    import importlib
    return Path(list(importlib.import_module(name).__path__)[0])


@functools.cache
def mlir_lib_dir() -> Path:
    """The MLIR wheel's folder of native libraries."""
    return package_folder("mlir", "lib/libMLIR.so") / "lib"
