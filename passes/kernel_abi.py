"""Make work-item indices explicit: the step shared by the CPU and GPU lowerings.

A kernel body reads its position with `adj.global_id`, `adj.global_size` and `adj.index`.
Lowering gives every kernel 2*ndim trailing `index` parameters (ids, then sizes), replaces
those ops with them, and turns each `adj.launch` into whatever the target iterates with
(scf.parallel on the CPU, a GPU grid there), which passes ids and sizes to a plain func.call.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from ..dialects.adj import KERNEL_ATTR, NDIM_ATTR, AdjError, launch_call


def kernel_ndim(fn: ir.Operation) -> int:
    if NDIM_ATTR not in fn.attributes or not isinstance(fn.attributes[NDIM_ATTR], ir.IntegerAttr):
        raise AdjError(fn, f"a kernel needs an integer attribute {NDIM_ATTR} (its ndrange rank)")
    return ir.IntegerAttr(fn.attributes[NDIM_ATTR]).value


def is_kernel(op: ir.Operation) -> bool:
    return op.name == "func.func" and KERNEL_ATTR in op.attributes


def launched(launch: ir.Operation,
             symbols: dict[str, ir.Operation]) -> tuple[ir.Operation, str, list[ir.Value]]:
    """(the func.call inside `launch`, the launched kernel's name, the ndrange extents),
    after checking that it launches a kernel with one extent per dimension."""
    call = launch_call(launch)
    name = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
    kernel = symbols.get(name)
    if kernel is None or not is_kernel(kernel):
        raise AdjError(launch, f"adj.launch of @{name}, which is not a func.func marked adj.kernel")
    ndrange = list(launch.operands)
    if len(ndrange) != kernel_ndim(kernel):
        raise AdjError(launch, f"adj.launch gives {len(ndrange)} ndrange extents to a "
                               f"{kernel_ndim(kernel)}-D kernel @{name}")
    return call, name, ndrange


def expose_work_item(fn: ir.Operation) -> None:
    """Appends (ids..., sizes...) parameters to kernel `fn` and removes its adj index ops."""
    ndim = kernel_ndim(fn)
    entry = fn.regions[0].blocks[0]
    loc = fn.location
    idx = ir.IndexType.get()
    ids = [entry.add_argument(idx, loc) for _ in range(ndim)]
    sizes = [entry.add_argument(idx, loc) for _ in range(ndim)]
    ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    fn.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(list(ftype.inputs) + [idx] * (2 * ndim), list(ftype.results)))

    found: list[ir.Operation] = []

    def collect(op: ir.Operation) -> ir.WalkResult:
        if op.name in ("adj.global_id", "adj.global_size", "adj.index"):
            found.append(op)
        return ir.WalkResult.ADVANCE

    fn.walk(collect)
    for op in found:
        if op.name == "adj.index":
            with ir.InsertionPoint(op), op.location:
                value = ids[0]
                for d in range(1, ndim):   # row-major: ((i0*n1 + i1)*n2 + i2)...
                    value = arith.addi(arith.muli(value, sizes[d]), ids[d])
        else:
            dim = ir.IntegerAttr(op.attributes["dim"]).value
            if not 0 <= dim < ndim:
                raise AdjError(op, f"{op.name} dim {dim} is out of range for a {ndim}-D kernel")
            value = (ids if op.name == "adj.global_id" else sizes)[dim]
        op.result.replace_all_uses_with(value)
        op.erase()
