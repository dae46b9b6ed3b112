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

from mlir import ir
from mlir.dialects import arith
from mlir.passmanager import PassManager

from ..dialects.adj import ENTRY_ATTR
# Thread settings live with the runtime that starts the threads (and reads them without MLIR).
from ..core.threads import default_num_threads
from .interior import split_interior
from .packed_entries import add_packed_entries
from .parallel_for import define_launchers, outline_parallel_loops
from .lower_cpu import lower_cpu, relax_atomics
from .small_loops import serialise_small_loops
from .walk import walk

_C_INTERFACE_ATTR = "llvm.emit_c_interface"

_PREPARE = "inline,symbol-dce,canonicalize,cse"
_DEALLOCATE = ("ownership-based-buffer-deallocation,canonicalize,buffer-deallocation-simplification,"
               "bufferization-lower-deallocations,cse,canonicalize,convert-bufferization-to-memref")
# What outline_parallel_loops leaves (nested loops, reductions), or with one thread every
# scf.parallel, as scf.for nests: split_interior works on those.
_NESTED_FORS = "func.func(scf-parallel-for-to-nested-fors)"
# math-to-funcs implements integer powers; math-to-llvm takes the ops LLVM has intrinsics
# for; math-to-libm calls libm for the rest.
_TO_LLVM = ("convert-math-to-funcs,convert-scf-to-cf,expand-strided-metadata,lower-affine,"
            "finalize-memref-to-llvm{use-generic-functions=true},"
            "convert-math-to-llvm,convert-math-to-libm,convert-arith-to-llvm,convert-index-to-llvm,"
            "convert-func-to-llvm,convert-cf-to-llvm,convert-ub-to-llvm,reconcile-unrealized-casts")


def _stages() -> tuple[str, str, str]:
    # (before, loops, after): widen_bool_memrefs runs between the first two (after
    # deallocation, whose lowering makes i1 memrefs of its own), outline_parallel_loops
    # before the second, split_interior between the last two (on the scf.for nests the
    # loops stage leaves), define_launchers after the last.
    return (",".join([_PREPARE, _DEALLOCATE]), _NESTED_FORS,
            ",".join(["canonicalize", _TO_LLVM]))


def cpu_pipeline() -> str:
    """The upstream passes that follow `lower_cpu`. Alone they abort on i1 memrefs, and run
    every loop on one thread: `run_cpu_pipeline` runs them with adjit's passes between."""
    return f"builtin.module({','.join(_stages())})"


def _widened(t: ir.Type) -> ir.Type:
    if isinstance(t, ir.MemRefType) and t.element_type == ir.IntegerType.get_signless(1):
        return ir.MemRefType.get(t.shape, ir.IntegerType.get_signless(8), t.layout, t.memory_space)
    return t


def widen_bool_memrefs(module: ir.Operation) -> None:
    """Retypes every memref of i1 as a memref of i8 (the same bytes as NumPy's bools):
    loads compare the byte with 0, stores zero-extend."""
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
        if op.name == "func.func":
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


def _privatize_non_entries(module: ir.Module) -> None:
    # Only entries are called from outside; private kernels and helpers can be inlined and
    # dropped (symbol-dce) instead of compiled on their own.
    for op in module.body.operations:
        op = op.operation
        if (op.name == "func.func" and len(op.regions[0].blocks) > 0
                and ENTRY_ATTR not in op.attributes and _C_INTERFACE_ATTR not in op.attributes):
            op.attributes["sym_visibility"] = ir.StringAttr.get("private")
    _share_bodies_between_entries(module)


def _share_bodies_between_entries(module: ir.Module) -> None:
    # A derivative's entries (rev_all, aug, rev) all call its augmented and reverse bodies:
    # inlined, each body would be optimised and compiled once per entry (the heat
    # gradient's LLVM JIT 2.1 s). Called, not inlined, from each entry, it is compiled once.
    entries = [op.operation for op in module.body.operations
               if op.operation.name == "func.func" and len(op.operation.regions[0].blocks)
               and ENTRY_ATTR in op.operation.attributes]
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


def run_cpu_pipeline(module: ir.Module, num_threads: int | None = None) -> None:
    """Runs the passes after `lower_cpu` on a module it already lowered: `cpu_pipeline`
    with `widen_bool_memrefs` in place."""
    threads = default_num_threads() if num_threads is None else num_threads
    before, loops, after = _stages()
    with module.context, ir.Location.unknown():
        _privatize_non_entries(module)
        pm = PassManager()
        pm.add(before)
        pm.add(lambda op, _pass: widen_bool_memrefs(op), name="adj-widen-bool-memrefs")
        if threads > 1:   # small loops stay on the calling thread (small_loops.py says why)
            pm.add(lambda op, _pass: serialise_small_loops(op), name="adj-serialise-small-loops")
            pm.add(lambda op, _pass: outline_parallel_loops(op), name="adj-parallel-for")
        pm.add(loops)
        pm.add(lambda op, _pass: split_interior(op), name="adj-split-interior")
        pm.add(after)
        pm.add(lambda op, _pass: relax_atomics(op), name="adj-relax-atomics")
        if threads > 1:
            pm.add(lambda op, _pass: define_launchers(op, threads), name="adj-define-launchers")
        pm.run(module.operation)


def lower_to_llvm(module: ir.Module, num_threads: int | None = None) -> None:
    """Lowers an adj-level module to the LLVM dialect in place."""
    threads = default_num_threads() if num_threads is None else num_threads
    with module.context, ir.Location.unknown():
        lower_cpu(module.operation, threads)
    run_cpu_pipeline(module, threads)
    with module.context, ir.Location.unknown():
        add_packed_entries(module)    # for native callers (runtime/native/dispatch.cpp)


def llvm_dialect_text(module: ir.Module, num_threads: int | None = None) -> str:
    """The LLVM-dialect MLIR of an adj-level module (left unchanged)."""
    copy = ir.Module.parse(str(module), module.context)
    lower_to_llvm(copy, num_threads)
    return str(copy)


def llvm_ir_text(module: ir.Module, num_threads: int | None = None) -> str:
    """The LLVM IR of an adj-level module (left unchanged), before LLVM's optimisations."""
    from mlir.dialects.llvm import translate_module_to_llvmir
    copy = ir.Module.parse(str(module), module.context)
    lower_to_llvm(copy, num_threads)
    return str(translate_module_to_llvmir(copy.operation))
