"""`--adj-ndrange-bounds`: which arrays a kernel's every work item indexes with its own id.

A kernel that runs `y[i] = a * x[i]` with `i = adjit.index()` on each item writes out of
bounds when launched over more items than y has elements. So each launch checks, before any
item runs, that the ndrange fits every such array (kernel_abi.check_ndrange_bounds on IR,
core/kernel.check_ndrange_bounds from Python), and raises IndexError naming the kernel, the
argument and the line otherwise.

The facts come from the IR: an element access (`memref.load`, `memref.store`,
`memref.atomic_rmw`) of an argument of the kernel, at the top level of its body (every item
runs it: an access under the user's `if` or in a loop is left to the kernel, which may guard
it), whose index in dimension d is the item's id in ndrange dimension k (`adj.global_id k`,
or `adj.index` of a 1-D kernel, through index casts), or the linear `adj.index` of an N-D
kernel, which reaches the ndrange's item count less one (k = LINEAR: the check is on the
product of the extents). Debug mode's per-access bounds checks
(`scf.if` marked GUARD_ATTR) run their access unconditionally for this purpose: they only
keep an out-of-bounds one from happening.

The result is a structured attribute on the kernel (BOUNDS_ATTR): an array of
`{arg, dim, id, message}` dictionaries. The messages use the user's names, which the
frontend records on the function (SOURCE_ATTR: `{name = "axpy", args = ["a", "x", "y"]}`).
"""
from __future__ import annotations

import re

from mlir import ir

from ..dialects.adj import BOUNDS_ATTR, GUARD_ATTR, NDIM_ATTR, SOURCE_ATTR
from ..core.kernel import LINEAR
from .kernel_abi import is_kernel
from .registry import AdjPass

# op name -> position of the memref operand (its indices follow it)
_ACCESSES = {"memref.load": 0, "memref.store": 1, "memref.atomic_rmw": 1}


def ndrange_facts(kernel: ir.Operation) -> list[tuple[int, int, int, str]]:
    """(argument, dimension, ndrange dimension, message) of each array index that every work
    item of `kernel` takes with its own id, sorted."""
    entry = kernel.regions[0].blocks[0]
    ndim = ir.IntegerAttr(kernel.attributes[NDIM_ATTR]).value
    name, params = _source_names(kernel)
    found = set()
    for op in _unconditional(entry):
        if op.name not in _ACCESSES:
            continue
        at = _ACCESSES[op.name]
        array = op.operands[at]
        if not isinstance(array, ir.BlockArgument) or array.owner != entry:
            continue
        for d, index in enumerate(list(op.operands)[at + 1:]):
            k = _work_item_dim(index, ndim)
            if k is None:
                continue
            p = array.arg_number
            param = params[p] if p < len(params) else f"#{p}"
            if k == LINEAR:
                what = (f"the ndrange's item count (the product of its {ndim} extents) is "
                        f"larger than dimension {d} of argument {param!r}, which every work "
                        "item indexes with its linear adjit.index()")
            else:
                what = (f"ndrange[{k}] is larger than dimension {d} of argument {param!r}, "
                        "which every work item indexes with its id")
            found.add((p, d, k, f"kernel {name}: {what} (line {_line(op.location)})"))
    return sorted(found)


def annotate(kernel: ir.Operation) -> None:
    """Sets BOUNDS_ATTR on `kernel` to its ndrange_facts (removes it when there are none)."""
    facts = ndrange_facts(kernel)
    if not facts:
        if BOUNDS_ATTR in kernel.attributes:
            del kernel.attributes[BOUNDS_ATTR]
        return
    i64 = ir.IntegerType.get_signless(64)
    kernel.attributes[BOUNDS_ATTR] = ir.ArrayAttr.get([ir.DictAttr.get({
        "arg": ir.IntegerAttr.get(i64, p), "dim": ir.IntegerAttr.get(i64, d),
        "id": ir.IntegerAttr.get(i64, k), "message": ir.StringAttr.get(m)})
        for p, d, k, m in facts])


def _unconditional(block: ir.Block):
    """The ops of `block`, and those inside its bounds-guard ifs (recursively)."""
    for op in block.operations:
        op = op.operation
        yield op
        if op.name == "scf.if" and GUARD_ATTR in op.attributes:
            yield from _unconditional(op.regions[0].blocks[0])


def _work_item_dim(v: ir.Value, ndim: int) -> int | None:
    """The ndrange dimension whose id `v` is (through index casts), or None."""
    while isinstance(v, ir.OpResult) and v.owner.name == "arith.index_cast":
        v = v.owner.operands[0]
    if not isinstance(v, ir.OpResult):
        return None
    op = v.owner
    if op.name == "adj.global_id":
        return ir.IntegerAttr(op.attributes["dim"]).value
    if op.name == "adj.index":      # row-major over the whole ndrange: its item count
        return 0 if ndim == 1 else LINEAR
    return None


def _source_names(fn: ir.Operation) -> tuple[str, list[str]]:
    """The user's name of `fn` and of its arguments (SOURCE_ATTR), else the IR's."""
    if SOURCE_ATTR in fn.attributes:
        source = ir.DictAttr(fn.attributes[SOURCE_ATTR])
        return (ir.StringAttr(source["name"]).value,
                [ir.StringAttr(a).value for a in ir.ArrayAttr(source["args"])])
    return ir.StringAttr(fn.attributes["sym_name"]).value, []


def _line(location: ir.Location) -> str:
    """The line, in the user's file, of an op's location, or `?`."""
    m = re.search(r'"[^"]*":(\d+)', str(location))
    return m.group(1) if m else "?"


class NdrangeBounds(AdjPass):
    """--adj-ndrange-bounds: annotate every kernel of the module."""
    name = "adj-ndrange-bounds"

    def apply(self, module: ir.Operation) -> None:
        with module.context:
            for op in module.regions[0].blocks[0].operations:
                if is_kernel(op.operation):
                    annotate(op.operation)
