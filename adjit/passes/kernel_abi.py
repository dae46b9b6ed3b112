"""Make work-item indices explicit: the step shared by the CPU and GPU lowerings.

A kernel body reads its position with `adj.global_id`, `adj.global_size` and `adj.index`.
Lowering gives every kernel 2*ndim trailing `index` parameters (ids, then sizes), replaces
those ops with them, and turns each `adj.launch` into whatever the target iterates with
(scf.parallel on the CPU, a GPU grid there), which passes ids and sizes to a plain func.call.
Also shared by the lowerings: the checks of a launch (`launched`) and of its ndrange against
the arrays every work item indexes with its id (`check_ndrange_bounds`).
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref, scf

from ..core.kernel import LINEAR
from ..dialects import adj
from ..dialects.adj import BOUNDS_ATTR, KERNEL_ATTR, NDIM_ATTR, AdjError, launch_call
from .walk import walk


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


def ndrange_bounds(kernel: ir.Operation) -> list[tuple[int, int, int, str, int, int]]:
    """The kernel's (argument, dimension, ndrange dimension, message, scale, offset) facts
    (BOUNDS_ATTR; core/kernel.bound_fact)."""
    if BOUNDS_ATTR not in kernel.attributes:
        return []
    out = []
    for a in ir.ArrayAttr(kernel.attributes[BOUNDS_ATTR]):
        fact = ir.DictAttr(a)
        affine = tuple(ir.IntegerAttr(fact[key]).value if key in fact else default
                       for key, default in (("scale", 1), ("offset", 0)))
        out.append((*(ir.IntegerAttr(fact[key]).value for key in ("arg", "dim", "id")),
                    ir.StringAttr(fact["message"]).value, *affine))
    return out


def check_ndrange_bounds(kernel: ir.Operation, args: list[ir.Value],
                         ndrange: list[ir.Value]) -> ir.Value | None:
    """Before a launch of `kernel` on `args` over `ndrange`: an IndexError check per array
    index every work item takes with its id, that the ndrange fits the array there. Returns
    whether all hold (None when there is nothing to check): a check only reports, so the
    caller must not launch otherwise."""
    fits = None
    index = ir.IndexType.get()
    for param, dim, k, message, scale, offset in ndrange_bounds(kernel):
        size = memref.dim(args[param], arith.constant(index, dim))
        if k == LINEAR:           # the linear index takes as many values as there are items
            n = ndrange[0]
            for e in ndrange[1:]:
                n = arith.muli(n, e)
        else:
            n = ndrange[k]
        if (scale, offset) == (1, 0):
            ok = arith.cmpi(arith.CmpIPredicate.ule, n, size)
        else:                     # no items, or the last one's index scale (n - 1) + offset
            last = arith.addi(arith.muli(arith.subi(n, arith.constant(index, 1)),
                                         arith.constant(index, scale)),
                              arith.constant(index, offset))
            ok = arith.ori(arith.cmpi(arith.CmpIPredicate.eq, n, arith.constant(index, 0)),
                           arith.cmpi(arith.CmpIPredicate.ult, last, size))
        adj.check(ok, "IndexError", message)
        fits = ok if fits is None else arith.andi(fits, ok)
    return fits


def guarded_at(op: ir.Operation, condition: ir.Value | None) -> ir.InsertionPoint:
    """Where to build, before `op`, what runs only if `condition` holds: in a new scf.if
    (placed before `op`), or just before `op` when there is no condition."""
    if condition is None:
        return ir.InsertionPoint(op)
    with ir.InsertionPoint(op), op.location:
        branch = scf.IfOp(condition)
        with ir.InsertionPoint(branch.then_block):
            terminator = scf.YieldOp([])
    return ir.InsertionPoint(terminator)


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

    walk(fn, collect)
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
