"""The CPU JIT: an adj-level module in, Python callables for its entry functions out.

`compile_module` finds the module's shared object in the disk cache (runtime/cpu_cache.py)
and loads it, or lowers a copy of the module (passes/pipeline.py), builds an MLIR
ExecutionEngine, and has the cache build the shared object in the background for the next
process. Compiled modules are also cached by key for the life of the process, and never
destroyed or unloaded: after a launch returns, async-runtime workers may still be running the
last instructions of their task in the module's code (measured: destroying the engine right
after a parallel launch crashed 3 runs in 20).
"""
from __future__ import annotations

import ctypes
import functools
import logging
import os
import re
import threading
from pathlib import Path
from typing import Callable, Sequence

import mlir
from mlir import ir
from mlir.execution_engine import ExecutionEngine

from ..passes import pipeline
from ..passes.lower_cpu import error_table
from ..passes.pipeline import default_num_threads, llvm_ir_text, lower_to_llvm
from . import abi, cpu_cache
from .abi import Type, check_error, exception_class, make_caller
from .engine_lookup import lookup
from .memory import Block, allocator_is_global, runtime_symbols

_log = logging.getLogger("adjit.cache")
_LIB = Path(list(mlir.__path__)[0]) / "lib"
# Loaded once, globally, so that every engine resolves the async runtime from the process.
# Passing it in an engine's shared_libs instead makes that engine reset the runtime's global
# state when destroyed, and the next engine to use it crashes. c_runner_utils provides
# memrefCopy for copies that are not one block.
_async_runtime = ctypes.CDLL(str(_LIB / "libmlir_async_runtime.so"), mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL(str(_LIB / "libmlir_c_runner_utils.so"), mode=ctypes.RTLD_GLOBAL)
_async_pool_started = False


def _start_async_pool(threads: int) -> None:
    """Creates the async runtime's thread pool, once, with `threads` threads at most.

    The pool sizes itself when first used, from the CPUs the creating thread may run on,
    and `async-parallel-for` splits a loop into more tasks than workers; so to cap the
    threads a launch uses, the pool is created while this thread may use only `threads`
    CPUs (its threads, created later, may run on any). The first compile in a process
    fixes the size."""
    global _async_pool_started
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
        _async_runtime.mlirAsyncRuntimGetNumWorkerThreads()   # creates the runtime [sic]
    finally:
        os.sched_setaffinity(0, cpus)


def _after_fork_in_child() -> None:
    """A forked child (os.fork, multiprocessing's default start method on Linux) has only
    the thread that forked. Its copy of the async runtime's thread pool still counts the
    parent's workers, which do not exist here: a task queued there never runs, and even
    signalling its condition variable waits for those threads forever; the pool cannot be
    destroyed (that joins them) or replaced (the runtime offers no way). So once the parent
    may have started it, the child's launches run on the calling thread: its modules are
    compiled for one thread (pipeline.limit_to_one_thread), and the callables it inherited
    switch to such a version of their module (abi.FORK). A lock another thread held at
    the fork would never be released in the child: this module's is made again."""
    global _cache_lock
    _cache_lock = threading.Lock()
    if _async_pool_started:
        pipeline.limit_to_one_thread()
        abi.FORK.child_without_pool = True


os.register_at_fork(after_in_child=_after_fork_in_child)


class CompiledModule:
    """A compiled module: `function()` gives callables for its entry functions.

    `lookup` gives a symbol's address in the module's code (0 if absent), which `owner`, an
    ExecutionEngine or a cache entry's shared object, holds."""

    def __init__(self, lookup: Callable[[str], int], owner: object,
                 errors: Sequence[tuple[str, str]], source: str, context: ir.Context,
                 num_threads: int, opt_level: int = 3):
        self._lookup, self._owner = lookup, owner
        self._errors = [(exception_class(kind), message) for kind, message in errors]
        self._source, self._context, self._num_threads = source, context, num_threads
        self._opt_level = opt_level
        self._one_thread: CompiledModule | None = None

    def _raise_reported_error(self, number: int, where: str = "compiled code") -> None:
        """Raises the error of check `number` (1, 2...) that a call's cell reported (an
        InternalCompilerError naming `where` for a number the table lacks: abi.check_error)."""
        if number:
            raise check_error(self._errors, number, where)

    def llvm_text(self) -> str:
        """The module's LLVM IR as compiled (before LLVM's own optimisations)."""
        return llvm_ir_text(ir.Module.parse(self._source, self._context), self._num_threads)

    def function(self, name: str, arg_types: Sequence[Type], result_types: Sequence[Type] = (),
                 written: Sequence[int] = (), label: str | None = None,
                 params: Sequence[str] = ()) -> Callable:
        """A callable for entry function `name` with these adjit parameter and result
        types, which may write the arrays at indices `written`: it takes Python values and
        returns None, one value or a tuple; arrays come back as NumPy arrays that own their
        memory. Errors name the function `label` and its `params`."""
        address = self._lookup(f"_mlir_ciface_{name}")
        if not address:
            raise KeyError(f"no entry function {name!r} with a C interface in this module")
        in_child = None
        if self._num_threads > 1:
            serial: list[Callable] = []

            def in_child(*args):   # in a forked child (_after_fork_in_child)
                if not serial:
                    serial.append(self._one_thread_version().function(
                        name, arg_types, result_types, written, label, params))
                return serial[0](*args)
        # A module with checks passes each call an error cell of its own (passes/lower_cpu.py).
        report = functools.partial(self._raise_reported_error,
                                   where=f"{label or name} (entry function {name})")
        return make_caller(address, label or name, arg_types, result_types,
                           report, Block, written, params,
                           error_cell=bool(self._errors), in_forked_child=in_child)

    def _one_thread_version(self) -> CompiledModule:
        """This module compiled for one thread (in a forked child: default_num_threads()
        is 1 there), made once."""
        if self._one_thread is None:
            self._one_thread = _compiled(self._source, self._context, self._opt_level)
        return self._one_thread


_cache: dict[str, CompiledModule] = {}
_cache_lock = threading.Lock()


def compile_module(module: ir.Module, *, opt_level: int = 3) -> CompiledModule:
    """Compiles an adj-level module (left unchanged) for this CPU, or loads it from the disk
    cache."""
    # With locations: errors raised by compiled code (adj.check) name the user's line.
    return _compiled(module.operation.get_asm(enable_debug_info=True), module.context, opt_level)


def _compiled(text: str, context: ir.Context, opt_level: int) -> CompiledModule:
    num_threads = default_num_threads()
    key = cpu_cache.key(text, opt_level, num_threads)
    with _cache_lock:
        compiled = _cache.get(key)
        if compiled is None:
            if num_threads > 1:
                _start_async_pool(num_threads)
            compiled = (_load(key, text, context, num_threads, opt_level)
                        or _compile(key, text, context, opt_level, num_threads))
            _cache[key] = compiled
    return compiled


def _load(key: str, source: str, context: ir.Context, num_threads: int,
          opt_level: int) -> CompiledModule | None:
    folder = cpu_cache.directory()
    # ADJIT_DUMP_IR asks to see the lowering happen. Cached code calls the allocator by
    # name, so it can be loaded only where the allocator is in the global scope.
    if folder is None or os.environ.get("ADJIT_DUMP_IR") or not allocator_is_global():
        return None
    entry = cpu_cache.load(folder, key)
    if entry is None:
        return None
    return CompiledModule(entry.address, entry, entry.errors, source, context, num_threads,
                          opt_level)


def _compile(key: str, source: str, context: ir.Context, opt_level: int,
             num_threads: int) -> CompiledModule:
    module = ir.Module.parse(source, context)
    lower_to_llvm(module, num_threads)
    if os.environ.get("ADJIT_DUMP_IR"):
        print(f"// ----- adjit: LLVM dialect -----\n{module}")
    errors = error_table(module.operation)
    folder = cpu_cache.directory()
    build_now = (_vectorizable_math(source) and allocator_is_global()
                 and cpu_cache.can_store())
    llvm_ir = None
    if build_now or (folder is not None and cpu_cache.can_store()):
        # Translated here (a few ms) because the context is this thread's. (The import
        # costs ~25 ms: only if needed.)
        from mlir.dialects.llvm import translate_module_to_llvmir
        llvm_ir = str(translate_module_to_llvmir(module.operation))
    if build_now:
        try:
            entry = cpu_cache.load_built(
                cpu_cache.build_shared_object(llvm_ir, opt_level, cpu_cache.host_target()),
                errors, folder, key)
            return CompiledModule(entry.address, entry, errors, source, context, num_threads,
                                  opt_level)
        except (OSError, RuntimeError) as e:   # a tool failed: the ExecutionEngine then
            _log.debug("building %s failed, compiling in-process: %s", key, e)
    engine = ExecutionEngine(module, opt_level=opt_level)
    for symbol, address in runtime_symbols().items():
        engine.raw_register_runtime(symbol, ctypes.c_void_p(address))
    if folder is not None and llvm_ir is not None:   # for the next process, in the background
        cpu_cache.store_later(folder, key, llvm_ir, opt_level, errors)
    return CompiledModule(functools.partial(lookup, engine), engine, errors, source, context,
                          num_threads, opt_level)


# Math ops of the adj-level module that lower to libm calls or LLVM intrinsics libmvec has.
_MATH_OP = re.compile(r"\bmath\.(?:sin|cos|tan|exp|exp2|expm1|log|log2|log10|log1p|powf|sinh|"
                      r"cosh|tanh|asin|acos|atan|atan2|cbrt|erf)\b")


def _vectorizable_math(source: str) -> bool:
    """Whether the module (adj-level text) calls math functions that LLVM vectorises with
    libmvec: those modules are compiled by `opt`/`llc` (cpu_cache.build_shared_object),
    which the ExecutionEngine's optimiser does not do (its loops call sinf once a lane),
    ~70 ms slower to compile, up to 7x faster to run."""
    return bool(cpu_cache.vector_math()[0]) and _MATH_OP.search(source) is not None
