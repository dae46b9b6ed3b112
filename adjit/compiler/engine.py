"""The CPU JIT: an adj-level module in, Python callables for its entry functions out.

`compile_module` finds the module's shared object in the disk cache (runtime/cpu_cache.py)
and loads it, or lowers a copy of the module (passes/pipeline.py), builds an MLIR
ExecutionEngine, and has the cache build the shared object in the background for the next
process. Where that O3 build cannot compute other numbers, the ExecutionEngine compiles at a
lower level first (compile tiers: first_tier) and the O3 build replaces it once built
(_tier_up, CompiledModule.swap). Compiled modules are also cached by key for the life of the process, and never
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

from mlir import ir
from mlir.execution_engine import ExecutionEngine

from ..dialects import shared_context
from ..passes.lower_cpu import error_table
from ..passes.pipeline import llvm_ir_text, lower_to_llvm
from ..runtime import cpu_cache, profiling
from ..runtime.compiled_module import CompiledModule
from ..runtime import lapack
from ..runtime.extension import runtime_symbols
from ..core.environment import read
from ..core.threads import default_num_threads
from . import ir_dump
from .engine_lookup import lookup

_log = logging.getLogger("adjit.cache")


def _after_fork_in_child() -> None:
    # A lock another thread held at the fork would never be released in the child.
    global _cache_lock
    _cache_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


_cache: dict[str, CompiledModule] = {}
_cache_lock = threading.Lock()


def compile_module(module: ir.Module, *, opt_level: int = 3) -> CompiledModule:
    """Compiles an adj-level module (left unchanged) for this CPU, or loads it from the disk
    cache."""
    # With locations: errors raised by compiled code (adj.check) name the user's line.
    return _compiled(module.operation.get_asm(enable_debug_info=True), module.context, opt_level)


def compile_text(text: str, opt_level: int = 3) -> CompiledModule:
    """compile_module for the module's text (a module loaded from the disk cache by source
    key has no IR: this makes it, for a forked child's one-thread version)."""
    return _compiled(text, shared_context(), opt_level)


def llvm_text(source: str, num_threads: int) -> str:
    """The LLVM IR of the adj-level module `source`, as compiled for `num_threads`."""
    return llvm_ir_text(ir.Module.parse(source, shared_context()), num_threads)


def _compiled(text: str, context: ir.Context, opt_level: int) -> CompiledModule:
    num_threads = default_num_threads()
    key = cpu_cache.key(text, opt_level, num_threads)
    with _cache_lock:
        compiled = _cache.get(key)
        if compiled is None:
            compiled = (_load(key, text, context, num_threads, opt_level)
                        or _compile(key, text, context, opt_level, num_threads))
            _cache[key] = compiled
    return compiled


def _load(key: str, source: str, context: ir.Context, num_threads: int,
          opt_level: int) -> CompiledModule | None:
    folder = cpu_cache.directory()
    # ADJIT_DUMP_IR asks to see the lowering happen.
    if folder is None or ir_dump.wanted():
        return None
    with profiling.phase("disk cache"):
        entry = cpu_cache.load(folder, key)
    profiling.note(shared_object="miss" if entry is None else "hit")
    if entry is None:
        return None
    return CompiledModule(entry.address, entry, entry.errors, source, num_threads, opt_level,
                          key)


def _compile(key: str, source: str, context: ir.Context, opt_level: int,
             num_threads: int) -> CompiledModule:
    with profiling.phase("MLIR passes"):
        module = ir.Module.parse(source, context)
        lower_to_llvm(module, num_threads)
    with profiling.phase("LLVM"):
        return _to_machine_code(module, key, source, opt_level, num_threads)


def _to_machine_code(module: ir.Module, key: str, source: str, opt_level: int,
                     num_threads: int) -> CompiledModule:
    """`module`, lowered to the LLVM dialect, as machine code: a shared object built now, or
    an ExecutionEngine (with the shared object built in the background for the disk
    cache)."""
    ir_dump.dump("LLVM dialect", str(module))
    errors = error_table(module.operation)
    folder = cpu_cache.directory()
    build_now = _vectorizable_math(source) and cpu_cache.can_store()
    llvm_ir = None
    if build_now or (folder is not None and cpu_cache.can_store()):
        # Translated here (a few ms) because the context is this thread's. (From the
        # extension: mlir.dialects.llvm, which re-exports it, costs 12-25 ms to import.)
        from mlir._mlir_libs._mlirDialectsLLVM import translate_module_to_llvmir
        llvm_ir = str(translate_module_to_llvmir(module.operation))
    if build_now:
        try:
            entry = cpu_cache.load_built(
                cpu_cache.build_shared_object(llvm_ir, opt_level, cpu_cache.host_target()),
                errors, folder, key)
            return CompiledModule(entry.address, entry, errors, source, num_threads,
                                  opt_level, key)
        except (OSError, RuntimeError) as e:   # a tool failed: the ExecutionEngine then
            _log.debug("building %s failed, compiling in-process: %s", key, e)
    # The first tier: where the O3 build is made in the background anyway (for the disk
    # cache) and gives the same results, a lower LLVM level now, the O3 code swapped in.
    level = opt_level
    if folder is not None and llvm_ir is not None and opt_level == 3:
        level = first_tier(llvm_ir)
    engine = ExecutionEngine(module, opt_level=level)
    for symbol, address in {**runtime_symbols(), **lapack.symbols()}.items():
        engine.raw_register_runtime(symbol, ctypes.c_void_p(address))
    compiled = CompiledModule(functools.partial(lookup, engine), engine, errors, source,
                              num_threads, level, key, tiered=level != opt_level)
    if folder is not None and llvm_ir is not None:   # for the next process, in the background
        then = (functools.partial(_tier_up, compiled, folder, key, errors)
                if compiled.tiered else None)
        cpu_cache.store_later(folder, key, llvm_ir, opt_level, errors, then=then)
    return compiled


def compile_tier() -> int:
    """The LLVM level of the first tier (ADJIT_COMPILE_TIER: 0, 1, 2 or 3; 3, the default,
    compiles at O3 at once, without tiers; FIRST_TIER, 0, is the level to ask for tiers
    with). EnvironmentValueError naming the setting for another value.

    Tiers are opt-in because the swap happens between calls: a first call that runs long (a
    simulation of many steps) ran all of it at O0, 3-7x slower on stencils, and a program
    timing its first second of calls timed O0 code (W3 of bench_forward: 22 ms against 3.6
    at O3), against 40-150 ms saved on the first call."""
    return read("ADJIT_COMPILE_TIER")


# O0. Measured (CPU time of the calling thread, a saxpy kernel's module): the ExecutionEngine
# optimises at construction (O3 17 ms, O1 16 ms, O0 2 ms) and generates code at the first
# lookup (O3 19 ms, O1 20 ms, O0 13 ms): O1 saves nothing on small modules, O0 about 60% (the
# heat gradient's module, opt + llc: O3 0.83 s, O1 0.67 s, O0 0.17 s). O0's code is slower
# until the swap: a stencil kernel 7x, an element-wise @jit function 2x, saxpy 1.5x (O1's:
# 1.0-1.3x).
FIRST_TIER = 0

# What may make code at O3 compute other numbers than at a lower level: fast-math flags
# (`reassoc`: the vectoriser reorders such adds, and so it does in adjit.sum's and the
# gradients' accumulators; `contract`: fuses into fmas...), a fused multiply-add LLVM may or
# may not fuse (fmuladd), and math functions (libm's scalar calls against libmvec's vectors
# in the O3 build: cpu_cache's -vector-library). (Tried: a first tier without `reassoc`,
# then the O3 build without it where the two O3 builds differ: they did for the least-squares
# and heat gradients, whose O3 code without `reassoc` ran 1.7x slower.)
_FAST_MATH_FLAGS = ("reassoc", "fast", "nnan", "ninf", "nsz", "arcp", "contract", "afn")
_DECLARED = re.compile(r"\ndeclare [^@\n]*@([\w.$]+)\(")   # (a literal first: fast)
_EXACT_INTRINSIC = re.compile(
    r"llvm\.(?:memcpy|memmove|memset|smax|smin|umax|umin|abs|fabs|sqrt|fma|floor|ceil|trunc|"
    r"round|roundeven|rint|nearbyint|copysign|minnum|maxnum|minimum|maximum|ctpop|ctlz|cttz|"
    r"bswap|[su]add\.with\.overflow|[su]sub\.with\.overflow|[su]mul\.with\.overflow|"
    r"lifetime|assume|expect|stacksave|stackrestore|experimental\.noalias|invariant)\b")


def first_tier(llvm_ir: str) -> int:
    """The LLVM level to compile module `llvm_ir` (LLVM IR before optimisation) at first:
    compile_tier(), or 3 where the O3 build might give other numbers (a fast-math flag,
    fmuladd, a call of anything but adjit's runtime and exact intrinsics) or the O0 code
    might exhaust the stack (an alloca in a loop: _alloca_in_a_loop)."""
    level = compile_tier()
    if (level == 3 or "@llvm.fmuladd." in llvm_ir
            or any(_has_word(llvm_ir, flag) for flag in _FAST_MATH_FLAGS)
            or _alloca_in_a_loop(llvm_ir)):
        return 3
    for name in _DECLARED.findall(llvm_ir):
        if name.startswith("llvm."):
            if not _EXACT_INTRINSIC.match(name):
                return 3
        elif not (name in runtime_symbols() or name.startswith(("adj_", "_adj", "_mlir_"))):
            return 3
    return level


def _alloca_in_a_loop(text: str) -> bool:
    """Whether an `alloca` of LLVM IR `text` is outside its function's entry block (so may
    run once per iteration of a loop: the lowering leaves a scalar's cell, a reverse
    accumulator, in a loop body). O3 promotes such cells to registers; O0 keeps each one,
    and the stack grows by one cell per iteration until the process crashes (a fixed point's
    gradient at O0: a per-element cell times 3355 iterations of a 32x32 grid overflowed the
    8 MiB main stack). Such a module is not tiered."""
    i = text.find(" alloca ")
    while i >= 0:
        start = text.rfind("\ndefine ", 0, i)
        if start >= 0 and _LABEL.search(text, start, i):
            return True
        i = text.find(" alloca ", i + 8)
    return False


# A basic block's label at a line start (`2019:`, `bb1:`): past the entry block.
_LABEL = re.compile(r"\n[\w.$-]+:")


def _has_word(text: str, word: str) -> bool:
    """Whether `word` occurs in LLVM IR `text` as a keyword, not inside a name (`%fast`,
    `fastcc`). (str.find: a regular expression without a literal prefix took 10 ms on the
    heat gradient's 185 KB.)"""
    i = text.find(word)
    while i >= 0:
        end = i + len(word)
        if _word_at(text, i, "_.@%") and not (end < len(text) and (text[end].isalnum()
                                                                   or text[end] in "_.")):
            return True
        i = text.find(word, end)
    return False


def _tier_up(compiled: CompiledModule, folder, key: str, errors, data: bytes) -> None:
    """On the cache writer's thread, once the O3 shared object `data` of `compiled` is
    built (and stored): loads it and swaps it in."""
    entry = cpu_cache.load(folder, key) or cpu_cache.load_built(data, errors, None, key)
    compiled.swap(entry.address, entry)


# Math ops of the adj-level module that lower to libm calls or LLVM intrinsics libmvec has.
# (No leading \b: a pattern that starts with a literal is searched for by that literal: on
# the heat gradient's 100 KB module 1.8 -> 0.05 ms; _word_at checks the boundary.)
_MATH_OP = re.compile(r"math\.(?:sin|cos|tan|exp|exp2|expm1|log|log2|log10|log1p|powf|sinh|"
                      r"cosh|tanh|asin|acos|atan|atan2|cbrt|erf|asinh|acosh|atanh)\b")


def _vectorizable_math(source: str) -> bool:
    """Whether the module (adj-level text) calls math functions that LLVM vectorises with
    libmvec: those modules are compiled by `opt`/`llc` (cpu_cache.build_shared_object),
    which the ExecutionEngine's optimiser does not do (its loops call sinf once a lane),
    ~70 ms slower to compile, up to 7x faster to run."""
    return bool(cpu_cache.vector_math()[0]) and "math." in source and any(
        _word_at(source, m.start(), "_") for m in _MATH_OP.finditer(source))


def _word_at(text: str, start: int, joined: str) -> bool:
    """Whether the match at `start` in `text` follows no letter, digit or character of
    `joined` (`joined` "_": a regular expression's \\b)."""
    return start == 0 or not (text[start - 1].isalnum() or text[start - 1] in joined)


def shared_object(source: str, num_threads: int) -> tuple[bytes, list[tuple[str, str]]]:
    """The adj-level module `source` built now as a shared object for this CPU at O3, as the
    disk cache builds it (so it computes what a cache hit computes), with its error table:
    what adjit.export puts in an artifact. RuntimeError when a build tool is missing."""
    module = ir.Module.parse(source, shared_context())
    lower_to_llvm(module, num_threads)
    errors = error_table(module.operation)
    from mlir._mlir_libs._mlirDialectsLLVM import translate_module_to_llvmir
    llvm_ir = str(translate_module_to_llvmir(module.operation))
    return cpu_cache.build_shared_object(llvm_ir, 3, cpu_cache.host_target()), errors
