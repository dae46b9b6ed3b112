"""`--adj-lower-cpu`: the adj dialect to upstream dialects for the CPU.

Each `adj.launch` becomes an `scf.parallel` over its ndrange whose body calls the kernel
with the work item's ids and the sizes (a launch returning item sums, or whose kernel adds
into one element atomically: over chunks of items, each summing as it goes,
chunked_launch.py); `--adj-parallel-for` (parallel_for.py, in the LLVM pipeline) then hands
that loop to adjit's thread pool (runtime/native/parallel.cpp).
Launches block on the CPU, so `adj.sync` has nothing to wait for and is dropped.
`adj.check` becomes a store of the check's number into the call's error cell, which the
runtime reads after each call (a trap would kill the Python process). `adj.print` becomes a
printf (lower_print.py).

The error cell is per call, not a module global: a module with checks (a non-empty
`adj.error_table`) gives every function it defines one more, last, parameter, a
`memref<1xi64>`, and every call of a defined function passes its caller's cell
on; the runtime passes a cell of its own to each call of an entry (runtime/abi.py). So calls
of one module from several threads each get their own errors, and the workers of a parallel
launch (the pool's threads) write into the cell of the call that launched them, which
`--adj-parallel-for` passes to the loop's body like any other value it uses. A module without
checks keeps its signatures.
"""
from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from ..core.locations import file_position, with_line
from ..core.threads import default_num_threads
from .chunked_launch import (lower_accumulating_launch, lower_privatised_launch,
                             lower_summing_launch)
from .ir_util import symbol_table
from .kernel_abi import check_ndrange_bounds, expose_work_item, guarded_at, is_kernel, launched
from .registry import AdjPass
from .summation import expand_item_sums
from .unit_stride import version_unit_stride_launches
from .walk import ops_named, walk

ERROR_TABLE_ATTR = "adj.error_table"


def lower_launch_to_parallel(launch: ir.Operation, kernels: dict[str, ir.Operation]) -> None:
    call, name, ndrange = launched(launch, kernels)
    with ir.InsertionPoint(launch), launch.location:
        fits = check_ndrange_bounds(kernels[name], list(call.operands), ndrange)
    with guarded_at(launch, fits), launch.location:
        zero = arith.constant(ir.IndexType.get(), 0)
        one = arith.constant(ir.IndexType.get(), 1)
        n = len(ndrange)
        loop = scf.ParallelOp([], [zero] * n, ndrange, [one] * n, [])
        body = loop.regions[0].blocks.append(*([ir.IndexType.get()] * n))
        with ir.InsertionPoint(body):
            func.CallOp([], ir.FlatSymbolRefAttr.get(name),
                        list(call.operands) + list(body.arguments) + ndrange)
            scf.ReduceOp([], 0)
    launch.erase()


def _message(check: ir.Operation) -> str:
    """An adj.check's message, with the line the frontend located it at in user code (a
    callsite location names the innermost user line), so that the raised error names it."""
    message = ir.StringAttr(check.attributes["message"]).value
    at = file_position(str(check.location))
    if at is None or at[0] == "-":      # "-": IR parsed from a string
        return message
    return with_line(message, at[0], at[1])


def _table(module: ir.Operation) -> list[ir.Operation]:
    """The module's adj.check ops, numbered from 1 in `ERROR_TABLE_ATTR`."""
    checks = ops_named(module, "adj.check")
    table = [f"{ir.StringAttr(c.attributes['error']).value}\x1f{_message(c)}" for c in checks]
    module.attributes[ERROR_TABLE_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(t) for t in table])
    return checks


def _store_number(check: ir.Operation, number: int, cell: ir.Value) -> None:
    """Replaces `check` with: if its condition fails and no check failed before it, store
    `number` into `cell` (the first failure is the one to report: a later one may be its
    consequence, as an adjoint solve that fails after its primal did)."""
    i64 = ir.IntegerType.get_signless(64)
    with ir.InsertionPoint(check), check.location:
        failed = arith.xori(check.operands[0], arith.constant(ir.IntegerType.get_signless(1), 1))
        branch = scf.IfOp(failed)
        with ir.InsertionPoint(branch.then_block):
            at = [arith.constant(ir.IndexType.get(), 0)]
            first = arith.cmpi(arith.CmpIPredicate.eq, memref.load(cell, at),
                               arith.constant(i64, 0))
            store = scf.IfOp(first)
            with ir.InsertionPoint(store.then_block):
                memref.store(arith.constant(i64, number), cell, at)
                scf.YieldOp([])
            scf.YieldOp([])
    check.erase()


def _cell_type() -> ir.MemRefType:
    return ir.MemRefType.get([1], ir.IntegerType.get_signless(64))


def lower_checks_per_call(module: ir.Operation) -> None:
    """Checks store into the call's error cell, a last parameter of every function the
    module defines (the module docstring says why)."""
    checks = _table(module)
    if not checks:
        return
    numbers = {c: number for number, c in enumerate(checks, start=1)}
    functions = [op for op in symbol_table(module).values()
                 if op.name == "func.func" and len(op.regions[0].blocks) > 0]
    defined = {ir.StringAttr(fn.attributes["sym_name"]).value for fn in functions}
    for fn in functions:
        cell = add_cell_parameter(fn)
        calls: list[ir.Operation] = []
        found: list[ir.Operation] = []

        def visit(op: ir.Operation) -> ir.WalkResult:
            if (op.name == "func.call"
                    and ir.FlatSymbolRefAttr(op.attributes["callee"]).value in defined):
                calls.append(op)
            elif op.name == "adj.check":
                found.append(op)
            return ir.WalkResult.ADVANCE

        walk(fn, visit)
        for call in calls:
            pass_cell(call, cell)
        for check in found:
            _store_number(check, numbers[check], cell)


def add_cell_parameter(fn: ir.Operation) -> ir.Value:
    cell = fn.regions[0].blocks[0].add_argument(_cell_type(), fn.location)
    ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    fn.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get([*ftype.inputs, _cell_type()], list(ftype.results)))
    if "arg_attrs" in fn.attributes:
        fn.attributes["arg_attrs"] = ir.ArrayAttr.get(
            [*ir.ArrayAttr(fn.attributes["arg_attrs"]), ir.DictAttr.get({})])
    return cell


def pass_cell(call: ir.Operation, cell: ir.Value) -> None:
    """Rebuilds `call` with `cell` as one more, last, operand."""
    attributes = {name: call.attributes[name] for name in call.attributes}
    if "arg_attrs" in attributes:
        attributes["arg_attrs"] = ir.ArrayAttr.get(
            [*ir.ArrayAttr(attributes["arg_attrs"]), ir.DictAttr.get({})])
    with ir.InsertionPoint(call):
        new = ir.Operation.create("func.call", results=[r.type for r in call.results],
                                  operands=[*call.operands, cell], attributes=attributes,
                                  loc=call.location)
    for old, result in zip(call.results, new.results):
        old.replace_all_uses_with(result)
    call.erase()


# LLVM's AtomicOrdering (mlir.dialects.llvm.AtomicOrdering: importing that module, its op
# classes, cost every compiling process 12-25 ms for these two numbers;
# tests/runtime/test_shared_object_speed_paths.py checks them against it).
_MONOTONIC, _ACQ_REL = 2, 6


def relax_atomics(module: ir.Operation) -> None:
    """Makes the `llvm.atomicrmw` ops that `memref.atomic_rmw` lowered to (acq_rel, which
    finalize-memref-to-llvm always gives) monotonic. They are sums into shadows and counters:
    no other memory access is ordered by them, and a launch's end synchronises its workers
    anyway, so acq_rel only keeps LLVM from combining or moving them. Atomics with another
    ordering (the runtime's seq_cst byte counters) are left alone."""
    acq_rel = _ACQ_REL
    relaxed = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), _MONOTONIC)
    for op in ops_named(module, "llvm.atomicrmw"):
        if ir.IntegerAttr(op.attributes["ordering"]).value == acq_rel:
            op.attributes["ordering"] = relaxed


def error_table(op: ir.Operation) -> list[tuple[str, str]]:
    """(Python error name, message) of each check that lower_checks_per_call numbered in
    `op`."""
    return [tuple(ir.StringAttr(a).value.split("\x1f", 1))
            for a in ir.ArrayAttr(op.attributes[ERROR_TABLE_ATTR])]


def lower_cpu(module: ir.Operation, threads: int = 2) -> None:
    """Rewrites `module` in place; raises AdjError (with the op) on malformed adj IR.
    `threads`: those the module's parallel loops will run on (privatised atomics make
    copies per thread)."""
    with module.context, module.location:
        _lower_cpu(module, threads)


def _lower_cpu(module: ir.Operation, threads: int) -> None:
    version_unit_stride_launches(module)   # views of unit innermost stride: a twin kernel
    symbols = symbol_table(module)
    copies: dict[tuple[str, str], str | None] = {}
    for launch in ops_named(module, "adj.launch"):
        if len(launch.results):
            if not lower_summing_launch(launch, symbols, copies):
                expand_item_sums(launch)
        elif not lower_accumulating_launch(launch, symbols, copies):
            lower_privatised_launch(launch, symbols, copies, threads)
    symbols = symbol_table(module)    # with the kernels' summing copies
    for launch in ops_named(module, "adj.launch"):
        lower_launch_to_parallel(launch, symbols)
    for kernel in (op for op in symbols.values() if is_kernel(op)):
        expose_work_item(kernel)
    prints = []
    for op in ops_named(module, "adj.sync", "adj.print"):
        if op.name == "adj.sync":
            op.erase()
        else:
            prints.append(op)
    lower_checks_per_call(module)
    if prints:
        # (imported here: lower_print imports mlir.dialects.llvm, 12-25 ms, which a CPU
        # compile otherwise never loads; only code that prints pays for it)
        from .lower_print import lower_prints
        lower_prints(module, prints)


@dataclasses.dataclass
class LowerCpu(AdjPass):
    """--adj-lower-cpu{threads=N}: lower_cpu."""
    name = "adj-lower-cpu"
    threads: int = dataclasses.field(default_factory=default_num_threads)

    def apply(self, module: ir.Operation) -> None:
        lower_cpu(module, self.threads)


class RelaxAtomics(AdjPass):
    """--adj-relax-atomics: relax_atomics, on the LLVM dialect."""
    name = "adj-relax-atomics"

    def apply(self, module: ir.Operation) -> None:
        relax_atomics(module)
