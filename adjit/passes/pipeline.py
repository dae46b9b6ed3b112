"""From adj-level IR to the LLVM dialect for the CPU: `lower_cpu`, then upstream passes.

Memory: compiled code frees what it allocates (ownership-based buffer deallocation); an
array an entry function returns comes back as a fresh allocation the caller owns (the pass
clones anything it does not own, such as an argument). Allocation goes through the generic
`_mlir_memref_to_llvm_alloc` and `_mlir_memref_to_llvm_free` symbols, which the runtime
provides so that it can count the bytes (runtime/memory.py).

Booleans: this MLIR build aborts (an assertion) when lowering a load or store of an `i1`
memref, so `widen_bool_memrefs` stores booleans as bytes, as NumPy does, before that.

Threads: each outermost `scf.parallel` (one per launch) becomes a call of adjit's thread
pool, one block of iterations per thread (parallel_for.py, runtime/native/parallel.cpp);
with one thread it stays a plain loop. Before that, a loop whose iterations' cost the IR
bounds runs on the calling thread when it is small (small_loops.py: the hand-off to the pool
costs more than such a loop's work).
"""
from __future__ import annotations

import re

from mlir import ir
from mlir.dialects import arith

from ..dialects.adj import ENTRY_ATTR
# Thread settings live with the runtime that starts the threads (and reads them without MLIR).
from ..core.threads import default_num_threads
from .registry import AdjPass, run_pipeline
from .walk import walk

_C_INTERFACE_ATTR = "llvm.emit_c_interface"

_PREPARE = "inline,symbol-dce,canonicalize,cse"
_DEALLOCATE = ("ownership-based-buffer-deallocation,canonicalize,buffer-deallocation-simplification,"
               "bufferization-lower-deallocations,cse,canonicalize,convert-bufferization-to-memref")
# What outline_parallel_loops leaves (nested loops, reductions), or with one thread every
# scf.parallel, as scf.for nests: split_interior works on those.
_NESTED_FORS = "func.func(scf-parallel-for-to-nested-fors)"
# math-to-funcs implements integer powers; math-to-llvm takes the ops LLVM has intrinsics
# for; math-to-libm calls libm for the rest. (log1p and expm1 are expanded before this:
# math-to-llvm would compute them as log(1+x) and exp(x)-1, cpu_math.py.) Then one
# convert-to-llvm for arith, index, func, cf and ub: one walk of the module instead of five
# (the same LLVM IR: tests/runtime/test_compile_imports.py; the heat gradient's conversions
# 88 -> 67-77 ms).
_TO_LLVM = ("convert-math-to-funcs,convert-scf-to-cf,expand-strided-metadata,lower-affine,"
            "finalize-memref-to-llvm{use-generic-functions=true},"
            "convert-math-to-llvm,convert-math-to-libm,convert-to-llvm,reconcile-unrealized-casts")


def _widened(t: ir.Type) -> ir.Type:
    if isinstance(t, ir.MemRefType) and t.element_type == ir.IntegerType.get_signless(1):
        return ir.MemRefType.get(t.shape, ir.IntegerType.get_signless(8), t.layout, t.memory_space)
    return t


def widen_bool_memrefs(module: ir.Operation) -> None:
    """Retypes every memref of i1 as a memref of i8 (the same bytes as NumPy's bools):
    loads compare the byte with 0, stores zero-extend. (MemRefToLLVM aborts the process on
    loads of i1; NumPy's bools are bytes, so no calling convention changes.) The CPU and the
    GPU lowerings both run it."""
    i1, i8 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(8)
    loads: list[ir.Operation] = []
    stores: list[ir.Operation] = []

    def retype(op: ir.Operation) -> ir.WalkResult:
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    arg.set_type(_widened(arg.type))
        for result in op.results:
            result.set_type(_widened(result.type))
        if op.name in ("func.func", "gpu.func"):   # (not printf's llvm.func: lower_print.py)
            ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            op.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
                [_widened(t) for t in ftype.inputs], [_widened(t) for t in ftype.results]))
        elif op.name == "memref.load" and op.result.type == i1:
            loads.append(op)
        elif op.name == "memref.store" and op.operands[0].type == i1:
            stores.append(op)
        return ir.WalkResult.ADVANCE

    walk(module, retype)
    for op in loads:
        op.result.set_type(i8)
        with ir.InsertionPoint.after(op), op.location:
            as_bool = arith.cmpi(arith.CmpIPredicate.ne, op.result, arith.constant(i8, 0))
        op.result.replace_all_uses_except(as_bool, as_bool.owner.operation)
    for op in stores:
        with ir.InsertionPoint(op), op.location:
            op.operands[0] = arith.extui(i8, op.operands[0])


class WidenBoolMemrefs(AdjPass):
    """--adj-widen-bool-memrefs: widen_bool_memrefs."""
    name = "adj-widen-bool-memrefs"

    def apply(self, module: ir.Operation) -> None:
        widen_bool_memrefs(module)


class PrivatizeHelpers(AdjPass):
    """--adj-privatize-helpers: only entries are called from outside, so every other function
    becomes private (inlined and dropped by symbol-dce instead of compiled on its own), and a
    call of a function that several entries call is kept (`no_inline`): a derivative's
    entries (rev_all, aug, rev) all call its augmented and reverse bodies, which inlined
    would be optimised and compiled once per entry (the heat gradient's LLVM JIT 2.1 s)."""
    name = "adj-privatize-helpers"

    def apply(self, module: ir.Operation) -> None:
        body = module.regions[0].blocks[0]
        functions = [op.operation for op in body.operations
                     if op.operation.name == "func.func" and len(op.operation.regions[0].blocks)]
        entries = []
        for op in functions:
            if ENTRY_ATTR in op.attributes:
                entries.append(op)
            elif _C_INTERFACE_ATTR not in op.attributes:
                op.attributes["sym_visibility"] = ir.StringAttr.get("private")
        callers: dict[str, set[str]] = {}
        calls = []
        for entry in entries:
            name = ir.StringAttr(entry.attributes["sym_name"]).value
            for block in entry.regions[0].blocks:
                for op in block.operations:
                    if op.operation.name == "func.call":
                        callee = ir.FlatSymbolRefAttr(op.operation.attributes["callee"]).value
                        callers.setdefault(callee, set()).add(name)
                        calls.append((callee, op.operation))
        for callee, call in calls:
            if len(callers[callee]) > 1:
                call.attributes["no_inline"] = ir.UnitAttr.get()


def cpu_passes(threads: int) -> list[str]:
    """The pipeline elements after `adj-lower-cpu`, for a module compiled for `threads`."""
    parallel = ["adj-serialise-small-loops", "adj-parallel-for"] if threads > 1 else []
    launchers = [f"adj-define-launchers{{threads={threads}}}"] if threads > 1 else []
    return ["adj-privatize-helpers", _PREPARE, _DEALLOCATE, "adj-widen-bool-memrefs", *parallel,
            _NESTED_FORS, "adj-split-interior", "canonicalize", "adj-expand-log1p-expm1", _TO_LLVM,
            "adj-relax-atomics", *launchers]


def cpu_pipeline(threads: int | None = None) -> str:
    """The whole CPU lowering, adj IR to the LLVM dialect with packed entries for native
    callers, as one pipeline (`adjit-opt --pass-pipeline` runs it as the runtime does)."""
    threads = default_num_threads() if threads is None else threads
    return (f"builtin.module(adj-lower-cpu{{threads={threads}}},"
            f"{','.join(cpu_passes(threads))},adj-packed-entries)")


def run_cpu_pipeline(module: ir.Module, num_threads: int | None = None) -> None:
    """Runs the passes after `lower_cpu` on a module it already lowered (no packed entries:
    the host programs of lower_cuda_host.py)."""
    threads = default_num_threads() if num_threads is None else num_threads
    run_pipeline(module.operation, f"builtin.module({','.join(cpu_passes(threads))})")


def cuda_host_pipeline() -> tuple[str, str]:
    """The host program of an `@jit(device="cuda")` function (lower_cuda_host.py), as two
    pipelines between which the launched kernels are compiled to PTX (gpu_pipeline): the
    launches become launcher calls; then the host code is lowered as CPU code on one thread
    (no async runtime on a GPU machine) and its runtime calls go through hooks."""
    return ("builtin.module(adj-lower-cuda-host)",
            f"builtin.module(adj-lower-cpu{{threads=1}},{','.join(cpu_passes(1))},"
            "adj-hook-runtime-calls)")


def lower_to_llvm(module: ir.Module, num_threads: int | None = None) -> None:
    """Lowers an adj-level module to the LLVM dialect in place (cpu_pipeline)."""
    run_pipeline(module.operation, cpu_pipeline(num_threads))


def llvm_dialect_text(module: ir.Module, num_threads: int | None = None) -> str:
    """The LLVM-dialect MLIR of an adj-level module (left unchanged)."""
    copy = ir.Module.parse(str(module), module.context)
    lower_to_llvm(copy, num_threads)
    return str(copy)


def llvm_ir_text(module: ir.Module, num_threads: int | None = None) -> str:
    """The LLVM IR of an adj-level module (left unchanged), before LLVM's optimisations."""
    from mlir._mlir_libs._mlirDialectsLLVM import translate_module_to_llvmir
    copy = ir.Module.parse(str(module), module.context)
    lower_to_llvm(copy, num_threads)
    return str(translate_module_to_llvmir(copy.operation))


# Inside each gpu.module: inline the body into the entry, then to the NVVM/LLVM dialects
# (views, memref.subview of a row or a slice, become descriptor arithmetic first, as on the
# CPU: expand-strided-metadata).
_TO_NVVM = ("gpu.module(inline,symbol-dce,canonicalize,arith-expand,expand-strided-metadata,"
            "lower-affine,convert-scf-to-cf,convert-math-to-llvm,convert-gpu-to-nvvm,"
            "canonicalize,cse),"
            "reconcile-unrealized-casts")


def ptx_features(chip: str) -> str:
    # LLVM's default PTX version for sm_90 is too old for it (and aborts); Blackwell needs 8.6.
    number = int(re.match(r"sm_(\d+)", chip).group(1))
    return "+ptx86" if number >= 100 else "+ptx80"


def gpu_binary_passes(chip: str) -> list[str]:
    """The pipeline elements from outlined gpu.modules to gpu.binary ops of PTX for `chip`."""
    target = f"nvvm-attach-target{{chip={chip} O=3 features={ptx_features(chip)}}}"
    return [target, _TO_NVVM, "adj-relax-gpu-atomics", "gpu-module-to-binary{format=isa}"]


def gpu_pipeline(chip: str) -> str:
    """The whole GPU lowering (lower_gpu.py), adj IR to gpu.binary ops holding PTX (format
    isa: no CUDA toolkit needed) and host code with gpu.launch_func, as one pipeline."""
    return f"builtin.module(adj-outline-kernels,{','.join(gpu_binary_passes(chip))})"
