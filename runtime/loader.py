"""The native libraries compiled CPU code calls, and the async runtime's thread pool,
without MLIR.

A process whose functions are all in the disk cache (runtime/source_index.py) never imports
the MLIR bindings (73 ms of imports) or builds IR: it loads shared objects and calls them
(runtime/compiled_module.py). So this module imports nothing of MLIR; the compiler
(runtime/engine.py) builds on it.

The async runtime (parallel launches) comes from the MLIR wheel's `lib` folder, found on
`sys.path` without importing the package, and is loaded RTLD_GLOBAL once, only when a module
needs it (it links libLLVM, ~10 ms to load). (The rest of what compiled code calls, the
allocator and memrefCopy, is in adjit's native extension: runtime/extension.py.) Loaded
globally, so that every engine and shared object resolves them from the process: passing
the async runtime in an engine's shared_libs instead makes that engine reset the runtime's
global state when destroyed, and the next engine to use it crashes.
"""
from __future__ import annotations

import ctypes
import functools
import os
import sys
import threading
from pathlib import Path

from . import abi

ASYNC = "async"
_LIBRARIES = {ASYNC: "libmlir_async_runtime.so"}
_loaded: dict[str, ctypes.CDLL] = {}
_lock = threading.Lock()
_async_pool_started = False
_one_thread = False


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
    return package_folder("mlir", f"lib/{_LIBRARIES[ASYNC]}") / "lib"


def require(*names: str) -> None:
    """Loads the runtime libraries `names` (ASYNC) RTLD_GLOBAL, once each."""
    with _lock:
        for name in names:
            if name not in _loaded:
                _loaded[name] = ctypes.CDLL(str(mlir_lib_dir() / _LIBRARIES[name]),
                                            mode=ctypes.RTLD_GLOBAL)


def start_async_pool(threads: int) -> None:
    """Creates the async runtime's thread pool, once, with `threads` threads at most.

    The pool sizes itself when first used, from the CPUs the creating thread may run on,
    and `async-parallel-for` splits a loop into more tasks than workers; so to cap the
    threads a launch uses, the pool is created while this thread may use only `threads`
    CPUs (its threads, created later, may run on any). The first module in a process
    fixes the size."""
    global _async_pool_started
    require(ASYNC)
    if _async_pool_started:
        return
    _async_pool_started = True
    cpus = sorted(os.sched_getaffinity(0))
    if threads >= len(cpus):
        return
    try:
        os.sched_setaffinity(0, cpus[:threads])
    except OSError:   # a sandbox that forbids it: the pool gets one thread per CPU
        return
    try:
        _loaded[ASYNC].mlirAsyncRuntimGetNumWorkerThreads()   # creates the runtime [sic]
    finally:
        os.sched_setaffinity(0, cpus)


def pool_started() -> bool:
    return _async_pool_started


def limit_to_one_thread() -> None:
    """From now on modules are compiled for one thread (in a forked child, whose copy of the
    async runtime's thread pool cannot run tasks: _after_fork_in_child)."""
    global _one_thread
    _one_thread = True


def default_num_threads() -> int:
    """ADJIT_NUM_THREADS, else every core this process may run on (1 after
    limit_to_one_thread)."""
    env = os.environ.get("ADJIT_NUM_THREADS")
    if _one_thread:
        return 1
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"ADJIT_NUM_THREADS must be a positive integer, got {env!r}") from None
        if n < 1:
            raise ValueError(f"ADJIT_NUM_THREADS must be a positive integer, got {env!r}")
        return n
    return len(os.sched_getaffinity(0))


def _after_fork_in_child() -> None:
    """A forked child (os.fork, multiprocessing's default start method on Linux) has only
    the thread that forked. Its copy of the async runtime's thread pool still counts the
    parent's workers, which do not exist here: a task queued there never runs, and even
    signalling its condition variable waits for those threads forever; the pool cannot be
    destroyed (that joins them) or replaced (the runtime offers no way). So once the parent
    may have started it, the child's launches run on the calling thread: the callables it
    inherited switch to a one-thread version of their module (abi.FORK), and modules it
    compiles or loads are for one thread (limit_to_one_thread). A lock another thread held at the fork
    would never be released in the child: this module's is made again."""
    global _lock
    _lock = threading.Lock()
    if _async_pool_started:
        abi.FORK.child_without_pool = True
        limit_to_one_thread()
        native = sys.modules.get("adjit.runtime._native")
        if native is not None:       # its calls miss: the Python path then takes FORK's
            native.set_forked()


os.register_at_fork(after_in_child=_after_fork_in_child)
