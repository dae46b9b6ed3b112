"""`@adjit.jit` functions called with `device="cuda"`, and derivatives on the GPU (of such a
function or of a kernel's launch): get the host program (the function's code for the CPU,
and the kernels it launches for the GPU; runtime/host_program.py) from the compile service
(service.py: this process's memo, the disk cache, the compiler), and run it.

As for kernel launches (cuda_launch.py), the key is computed without MLIR: from the
function's Python source and that of everything it calls or launches (source.fingerprint),
the argument types, the compiler's version and the chip. So a GPU machine without MLIR runs
host programs that a machine with MLIR compiled into the same ADJIT_CACHE_DIR, and under
`compile_only()` a call compiles (and stores) without running.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..core.derivative_abi import DerivativeABI, DerivativeEntries
from ..core.kernel import bound_fact
from ..core.symbols import ENTRY
from ..core.types import parse_type
from . import service
from .cuda_launch import device_value
from ..lang.functions import Lowered, debug_enabled, specialise
from .gpu_target import chip
from .guard import compiling
from ..lang import pytrees

if TYPE_CHECKING:
    from ..lang.modes import Annotation, Mode
    from ..lang.functions import Function, Kernel
    from ..runtime.host_program import LoadedProgram


def call(fn: Function, args: Sequence[Any]) -> Any:
    """`fn(*args, device="cuda")`."""
    types, values = specialise_host(fn, args)
    program = service.host_program(fn, types)
    if program is None:              # compile_only(): compiled and stored, nothing run
        return None
    return run(program, values)


def run(program: LoadedProgram, values: Sequence[Any]) -> Any:
    """A function's host program called with argument `values` (specialise_host's): its
    result, a tree or tuple as the function returns it."""
    result = program.function(ENTRY)(*values)
    tree = program.program.meta.get("tree")
    if tree is not None:                    # a tree result: its leaves regrouped
        leaves = result if isinstance(result, tuple) else () if result is None else (result,)
        return pytrees.unflatten(pytrees.from_record(tree), leaves)
    if program.program.meta["tuple_result"] and not isinstance(result, tuple):
        return (result,)                    # `return (x,)` stays a tuple
    return result


def lower(fn: Function, args: Sequence[Any]) -> Lowered:
    """`fn.lower(*args, device="cuda")`: compiled here and now, cache or not."""
    types, _ = specialise_host(fn, args)
    adj_text, llvm_ir, program = compiling(fn, lambda: service.compile_host_call(
        fn, types, debug_enabled(), chip()))
    ptx = "\n".join(k.ptx for k in program.kernels)
    return Lowered(adj_text, lambda: llvm_ir, lambda: ptx)


@dataclass(frozen=True)
class GpuDerivative(DerivativeEntries):
    """A derivative compiled as a host program: what autodiff calls (derivative.Derivative's
    `calls`, `results`, `abi`, `written` and, for a kernel's launch, `ndrange_bounds`)."""
    calls: dict[str, Callable[..., Any]]
    results: list
    abi: DerivativeABI
    written: dict[str, frozenset]
    ndrange_bounds: tuple[tuple, ...]
    result_tree: Any = None


def derivative(target: Function | Kernel, mode: Mode, anns: Sequence[Annotation], types: list,
               ndrange: tuple[int, ...] | None = None,
               wgs: tuple[int, ...] | None = None) -> GpuDerivative | None:
    """`autodiff(mode, target, *anns, device="cuda")`'s compiled derivative (a kernel's: of
    its launch over an ndrange of `ndrange`'s rank in workgroups of `wgs`); None under
    compile_only()."""
    loaded = service.host_program(target, types, mode, anns, ndrange, wgs)
    if loaded is None:
        return None
    meta = loaded.program.meta
    return GpuDerivative({name: loaded.function(name) for name in loaded.program.entries},
                         [parse_type(c) for c in meta["results"]],
                         DerivativeABI.from_record(meta["abi"]),
                         {name: frozenset(w) for name, w in loaded.program.written.items()},
                         tuple(bound_fact(b) for b in meta["ndrange_bounds"]),
                         pytrees.from_record(meta["tree"]) if meta.get("tree") else None)


def specialise_host(fn: Function, args: Sequence[Any]) -> tuple[list, list]:
    """Argument types and values of `fn(*args, device="cuda")` (GPU arrays as DeviceArrays
    viewing them)."""
    return specialise(fn.__name__, fn.params, fn.annotations, [device_value(a) for a in args],
                      device="cuda")
