"""`--adj-lower-cpu`: the adj dialect to upstream dialects for the CPU.

Each `adj.launch` becomes an `scf.parallel` over its ndrange whose body calls the kernel
with the work item's ids and the sizes; `async-parallel-for` (in the LLVM pipeline) then
spreads that loop over MLIR's async runtime thread pool, so no scheduler of ours exists.
Launches block on the CPU, so `adj.sync` has nothing to wait for and is dropped.
`adj.check` becomes a store of the check's number into the module's error cell, which the
runtime reads after each call (a trap would kill the Python process).
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from .kernel_abi import check_ndrange_bounds, expose_work_item, guarded_at, is_kernel, launched

ERROR_GLOBAL = "__adj_error"
ERROR_TABLE_ATTR = "adj.error_table"


def _ops_named(root: ir.Operation, *names: str) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in names:
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found


def _symbol_table(module: ir.Operation) -> dict[str, ir.Operation]:
    return {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
            for op in module.regions[0].blocks[0].operations if "sym_name" in op.attributes}


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


def _where(op: ir.Operation) -> str:
    """' (at file:line)' for an op the frontend located in user code, so that the raised
    error names the line (a callsite location names the innermost user line)."""
    loc = op.location
    while loc.is_a_callsite():
        loc = loc.callee
    named = loc.is_a_file() and loc.filename != "-"   # "-": IR parsed from a string
    return f" (at {loc.filename}:{loc.start_line})" if named else ""


def lower_checks(module: ir.Operation) -> None:
    checks = _ops_named(module, "adj.check")
    table = [f"{ir.StringAttr(c.attributes['error']).value}\x1f"
             f"{ir.StringAttr(c.attributes['message']).value}{_where(c)}" for c in checks]
    module.attributes[ERROR_TABLE_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(t) for t in table])
    if not checks:
        return
    i64 = ir.IntegerType.get_signless(64)
    cell = ir.MemRefType.get([1], i64)
    with ir.InsertionPoint.at_block_begin(module.regions[0].blocks[0]), module.location:
        memref.GlobalOp(ERROR_GLOBAL, cell, sym_visibility="public",
                        initial_value=ir.DenseElementsAttr.get_splat(
                            ir.RankedTensorType.get([1], i64), ir.IntegerAttr.get(i64, 0)))
    for number, check in enumerate(checks, start=1):
        with ir.InsertionPoint(check), check.location:
            failed = arith.xori(check.operands[0], arith.constant(ir.IntegerType.get_signless(1), 1))
            branch = scf.IfOp(failed)
            with ir.InsertionPoint(branch.then_block):
                slot = memref.get_global(cell, ERROR_GLOBAL)
                memref.store(arith.constant(i64, number), slot,
                             [arith.constant(ir.IndexType.get(), 0)])
                scf.YieldOp([])
        check.erase()


def error_table(op: ir.Operation) -> list[tuple[str, str]]:
    """(Python error name, message) of each check that lower_checks numbered in `op`."""
    return [tuple(ir.StringAttr(a).value.split("\x1f", 1))
            for a in ir.ArrayAttr(op.attributes[ERROR_TABLE_ATTR])]


def lower_cpu(module: ir.Operation) -> None:
    """Rewrites `module` in place; raises AdjError (with the op) on malformed adj IR."""
    with module.context, module.location:
        _lower_cpu(module)


def _lower_cpu(module: ir.Operation) -> None:
    symbols = _symbol_table(module)
    for launch in _ops_named(module, "adj.launch"):
        lower_launch_to_parallel(launch, symbols)
    for kernel in (op for op in symbols.values() if is_kernel(op)):
        expose_work_item(kernel)
    for op in _ops_named(module, "adj.sync"):
        op.erase()
    lower_checks(module)
