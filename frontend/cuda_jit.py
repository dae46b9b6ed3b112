"""`@adjit.jit` functions called with `device="cuda"`: find the host program (the function's
code for the CPU, and the kernels it launches for the GPU; runtime/host_program.py) in the
disk cache, compiling it on a miss, and run it.

As for kernel launches (cuda_launch.py), the key is computed without MLIR: from the
function's Python source and that of everything it calls or launches (source.fingerprint),
the argument types, the compiler's version and the chip. So a GPU machine without MLIR runs
host programs that a machine with MLIR compiled into the same ADJIT_CACHE_DIR, and under
`compile_only()` a call compiles (and stores) without running.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..runtime import host_program, kernel_cache
from .cuda_launch import chip, compiler_fingerprint, device_value, is_compile_only
from .functions import Lowered, debug_enabled, specialise
from .source import fingerprint

if TYPE_CHECKING:
    from .functions import Function


def call(fn: Function, args: Sequence[Any]) -> Any:
    """`fn(*args, device="cuda")`."""
    types, values = _specialise(fn, args)
    program = _loaded(fn, types)
    return None if program is None else program(*values)


def lower(fn: Function, args: Sequence[Any]) -> Lowered:
    """`fn.lower(*args, device="cuda")`: compiled here and now, cache or not."""
    from .compiler import host_program as compile_program
    types, _ = _specialise(fn, args)
    adj_text, llvm_ir, program = compile_program(fn, types, debug_enabled(), chip())
    ptx = "\n".join(k.ptx for k in program.kernels)
    return Lowered(adj_text, lambda: llvm_ir, lambda: ptx)


def _specialise(fn: Function, args: Sequence[Any]) -> tuple[list, list]:
    return specialise(fn.__name__, fn.params, fn.annotations, [device_value(a) for a in args],
                      device="cuda")


def _loaded(fn: Function, types: list) -> host_program.LoadedProgram | None:
    """The loaded host program of `fn` for `types`: from this process's memo, the disk
    cache, or the compiler (which stores it there); None under compile_only()."""
    debug, target = debug_enabled(), chip()
    memo = ("cuda-host", tuple(types), debug, target)
    found = fn._cache.get(memo)
    if found is not None:
        return None if is_compile_only() else found
    directory = kernel_cache.default_cache_dir()
    what = "\0".join([fingerprint(fn), compiler_fingerprint(), "host-program",
                      repr(list(types)), "debug" if debug else "release"])
    key = kernel_cache.cache_key(what, fn.__name__, target)
    stored = host_program.load(directory, key)
    if stored is None:
        stored = _compile(fn, types, debug, target, directory, key)
    if is_compile_only():
        return None
    found = fn._cache[memo] = host_program.LoadedProgram(*stored)
    return found


def _compile(fn: Function, types: list, debug: bool, target: str, directory: Path,
             key: str) -> tuple[host_program.HostProgram, Path]:
    try:
        from .compiler import host_program as compile_program
    except ImportError as e:
        raise kernel_cache.KernelCacheError(
            f"{fn.__name__} for {list(types)} on device='cuda' is not in the kernel cache "
            f"{directory}, and compiling it needs MLIR, which cannot be imported here ({e}); "
            "compile it where adjit's compiler is installed, into the same ADJIT_CACHE_DIR") from e
    _, _, program = compile_program(fn, types, debug, target)
    return program, host_program.store(directory, key, program)
