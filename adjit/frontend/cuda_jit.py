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

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..runtime import host_program, kernel_cache
from ..core.symbols import ENTRY
from ..core.types import parse_type
from .cuda_launch import chip, device_value, is_compile_only
from .functions import Lowered, debug_enabled, specialise
from .guard import compiling
from .source import compiler_fingerprint, fingerprint

if TYPE_CHECKING:
    from .autodiff import Annotation, Mode
    from .functions import Function


def call(fn: Function, args: Sequence[Any]) -> Any:
    """`fn(*args, device="cuda")`."""
    types, values = _specialise(fn, args)
    program = _loaded(fn, types, "call", _compile_call)
    if program is None:
        return None
    result = program.function(ENTRY)(*values)
    if program.program.meta["tuple_result"] and not isinstance(result, tuple):
        return (result,)                    # `return (x,)` stays a tuple
    return result


def lower(fn: Function, args: Sequence[Any]) -> Lowered:
    """`fn.lower(*args, device="cuda")`: compiled here and now, cache or not."""
    types, _ = _specialise(fn, args)
    adj_text, llvm_ir, program = compiling(fn, lambda: _compile_call(fn, types, debug_enabled(),
                                                                     chip()))
    ptx = "\n".join(k.ptx for k in program.kernels)
    return Lowered(adj_text, lambda: llvm_ir, lambda: ptx)


def _compile_call(fn: Function, types: list, debug: bool,
                  target: str) -> tuple[str, str, host_program.HostProgram]:
    from .compiler import function_unit, host_program as compile_program
    unit, results, is_tuple = function_unit(fn, types, debug, ENTRY)
    adj_text = str(unit.module)
    llvm_ir, program = compile_program(unit, fn.__name__, {ENTRY: (types, results)},
                                       {"tuple_result": is_tuple}, target)
    return adj_text, llvm_ir, program


@dataclass(frozen=True)
class GpuDerivative:
    """A derivative compiled as a host program: what autodiff calls (derivative.Derivative's
    `calls`, `results`, `ret_activity` and `written`)."""
    calls: dict[str, Callable[..., Any]]
    results: list
    ret_activity: str
    written: dict[str, frozenset]


def derivative(fn: Function, mode: Mode, anns: Sequence[Annotation],
               types: list) -> GpuDerivative | None:
    """`autodiff(mode, fn, *anns, device="cuda")`'s compiled derivative; None under
    compile_only()."""
    def compile_program(fn: Function, types: list, debug: bool, target: str) -> tuple:
        from .derivative import Derivative
        d = Derivative(fn, mode, list(anns), types, None, None)
        llvm_ir, program = d.host_program(fn.__name__, target)
        return d.adj_text, llvm_ir, program

    variant = f"{mode.name}({','.join(a.activity for a in anns)})"
    loaded = _loaded(fn, types, variant, compile_program)
    if loaded is None:
        return None
    meta = loaded.program.meta
    return GpuDerivative({name: loaded.function(name) for name in loaded.program.entries},
                         [parse_type(c) for c in meta["results"]],
                         meta["ret_activity"],
                         {name: frozenset(w) for name, w in loaded.program.written.items()})


def _specialise(fn: Function, args: Sequence[Any]) -> tuple[list, list]:
    return specialise(fn.__name__, fn.params, fn.annotations, [device_value(a) for a in args],
                      device="cuda")


def _loaded(fn: Function, types: list, variant: str,
            compile_program: Callable[[Function, list, bool, str], tuple]
            ) -> host_program.LoadedProgram | None:
    """The loaded host program `variant` (a call, or which derivative) of `fn` for `types`:
    from this process's memo, the disk cache, or `compile_program` (whose result is stored
    there); None under compile_only()."""
    debug, target = debug_enabled(), chip()
    memo = ("cuda-host", variant, tuple(types), debug, target)
    loaded = fn._cache.get(memo)
    # compile_only() is asked to store, even what this process compiled with the caches off.
    if loaded is not None and not is_compile_only():
        return loaded
    what = "\0".join([fingerprint(fn), compiler_fingerprint(), f"host-program:{variant}",
                      repr(list(types)), "debug" if debug else "release"])
    key = kernel_cache.cache_key(what, fn.__name__, target)

    def load(folder: Path) -> host_program.HostProgram | None:
        stored = host_program.load(folder, key)
        return None if stored is None else stored[0]

    def compile() -> host_program.HostProgram:
        if loaded is not None:
            return loaded.program
        return compiling(fn, lambda: compile_program(fn, types, debug, target))[2]

    # Where it is read from and written to, with the caches on or off: find_or_compile's rule.
    program, folder = kernel_cache.find_or_compile(
        f"{fn.__name__} ({variant}) for {list(types)} on device='cuda'", load, compile,
        lambda folder, program: host_program.store(folder, key, program),
        for_another_machine=is_compile_only())
    if is_compile_only():
        return None
    if loaded is None:
        loaded = fn._cache[memo] = host_program.LoadedProgram(
            program, None if folder is None else folder / f"{key}.so")
    return loaded
