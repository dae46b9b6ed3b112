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
product of the extents), or such an id computed on: `scale * id + offset` with constants
scale >= 1 and offset >= 0 (`x[i + 1]`, `x[2 * i]`; the fact carries them, and the check is
that the last item's index is inside). Other computed indices (data-dependent, negative
offsets, which wrap as in NumPy) are the kernel's to keep in bounds, as indices under an
`if` are (debug mode checks each access). Debug mode's per-access bounds checks
(`scf.if` marked GUARD_ATTR) run their access unconditionally for this purpose: they only
keep an out-of-bounds one from happening.

The result is a structured attribute on the kernel (BOUNDS_ATTR): an array of
`{arg, dim, id, message}` dictionaries. The messages use the user's names, which the
frontend records on the function (SOURCE_ATTR: `{name = "axpy", args = ["a", "x", "y"]}`).
"""
from __future__ import annotations

from mlir import ir

from ..dialects.adj import BOUNDS_ATTR, GUARD_ATTR, NDIM_ATTR, SOURCE_ATTR
from ..core.kernel import LINEAR
from ..core.locations import file_position
from .kernel_abi import is_kernel
from .registry import AdjPass

# op name -> position of the memref operand (its indices follow it)
_ACCESSES = {"memref.load": 0, "memref.store": 1, "memref.atomic_rmw": 1}


def ndrange_facts(kernel: ir.Operation) -> list[tuple[int, int, int, str, int, int]]:
    """(argument, dimension, ndrange dimension, message, scale, offset) of each array index
    that every work item of `kernel` takes from its own id (scale * id + offset), sorted."""
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
            form = _affine(index, ndim)
            if form is None:
                continue
            k, scale, offset = form
            p = array.arg_number
            param = params[p] if p < len(params) else f"#{p}"
            if k == LINEAR:
                ids = (f"the ndrange's item count (the product of its {ndim} extents)", "its "
                       "linear adjit.index()")
            else:
                ids = (f"ndrange[{k}]", "its id")
            if (scale, offset) == (1, 0):
                what = (f"{ids[0]} is larger than dimension {d} of argument {param!r}, which "
                        f"every work item indexes with {ids[1]}")
            else:
                term = ids[1] if scale == 1 else f"{scale} * {ids[1]}"
                what = (f"{ids[0]} is too large for dimension {d} of argument {param!r}, which "
                        f"every work item indexes with {term}" + (f" + {offset}" if offset
                                                                    else ""))
            found.add((p, d, k, f"kernel {name}: {what} (line {_line(op.location)})",
                       scale, offset))
    return sorted(found)


def annotate(kernel: ir.Operation) -> None:
    """Sets BOUNDS_ATTR on `kernel` to its ndrange_facts (removes it when there are none)."""
    facts = ndrange_facts(kernel)
    if not facts:
        if BOUNDS_ATTR in kernel.attributes:
            del kernel.attributes[BOUNDS_ATTR]
        return
    i64 = ir.IntegerType.get_signless(64)

    def entry(p, d, k, m, scale, offset):
        fact = {"arg": ir.IntegerAttr.get(i64, p), "dim": ir.IntegerAttr.get(i64, d),
                "id": ir.IntegerAttr.get(i64, k), "message": ir.StringAttr.get(m)}
        if (scale, offset) != (1, 0):         # (absent: the id itself)
            fact["scale"] = ir.IntegerAttr.get(i64, scale)
            fact["offset"] = ir.IntegerAttr.get(i64, offset)
        return ir.DictAttr.get(fact)
    kernel.attributes[BOUNDS_ATTR] = ir.ArrayAttr.get([entry(*f) for f in facts])


def _unconditional(block: ir.Block):
    """The ops of `block`, and those inside its bounds-guard ifs (recursively)."""
    for op in block.operations:
        op = op.operation
        yield op
        if op.name == "scf.if" and GUARD_ATTR in op.attributes:
            yield from _unconditional(op.regions[0].blocks[0])


def _affine(v: ir.Value, ndim: int) -> tuple[int, int, int] | None:
    """(k, scale, offset) when `v` is scale * (the id in ndrange dimension k, or LINEAR) +
    offset with constants scale >= 1, offset >= 0 (through index casts, and the wrap of a
    negative index, which such an index never takes), else None."""
    while isinstance(v, ir.OpResult) and v.owner.name in ("arith.index_cast",
                                                          "arith.index_castui", "arith.extsi"):
        v = v.owner.operands[0]
    if not isinstance(v, ir.OpResult):
        return None
    op = v.owner
    if op.name == "adj.global_id":
        return ir.IntegerAttr(op.attributes["dim"]).value, 1, 0
    if op.name == "adj.index":      # row-major over the whole ndrange: its item count
        return (0 if ndim == 1 else LINEAR), 1, 0
    if op.name == "arith.select" and _wraps_negative(op):
        return _affine(op.operands[2], ndim)
    if op.name not in ("arith.addi", "arith.subi", "arith.muli"):
        return None
    a, b = op.operands
    ca, cb = _constant(a), _constant(b)
    if op.name == "arith.subi":
        form, c = (_affine(a, ndim), -cb) if cb is not None else (None, None)
    elif cb is not None:
        form, c = _affine(a, ndim), cb
    elif ca is not None:
        form, c = _affine(b, ndim), ca
    else:
        return None
    if form is None:
        return None
    k, scale, offset = form
    if op.name == "arith.muli":
        return (k, scale * c, offset * c) if c >= 1 else None
    return (k, scale, offset + c) if offset + c >= 0 else None


def _constant(v: ir.Value) -> int | None:
    """The value of an integer constant (through index casts), else None."""
    while isinstance(v, ir.OpResult) and v.owner.name in ("arith.index_cast", "arith.extsi"):
        v = v.owner.operands[0]
    if isinstance(v, ir.OpResult) and v.owner.name == "arith.constant":
        value = v.owner.attributes["value"]
        if isinstance(value, ir.IntegerAttr):
            return ir.IntegerAttr(value).value
    return None


def _wraps_negative(select: ir.Operation) -> bool:
    """Whether `select` is the frontend's wrap of a run-time index (arrays.wrapped):
    `select(i < 0, i + size, i)`, which is `i` for an index never negative."""
    cond, _, value = select.operands
    if not (isinstance(cond, ir.OpResult) and cond.owner.name == "arith.cmpi"):
        return False
    compare = cond.owner
    predicate = ir.IntegerAttr(compare.attributes["predicate"]).value
    return (predicate == 2 and compare.operands[0] == value       # slt
            and _constant(compare.operands[1]) == 0)


def _source_names(fn: ir.Operation) -> tuple[str, list[str]]:
    """The user's name of `fn` and of its arguments (SOURCE_ATTR), else the IR's."""
    if SOURCE_ATTR in fn.attributes:
        source = ir.DictAttr(fn.attributes[SOURCE_ATTR])
        return (ir.StringAttr(source["name"]).value,
                [ir.StringAttr(a).value for a in ir.ArrayAttr(source["args"])])
    return ir.StringAttr(fn.attributes["sym_name"]).value, []


def _line(location: ir.Location) -> str:
    """The line, in the user's file, of an op's location, or `?`."""
    at = file_position(str(location))
    return str(at[1]) if at else "?"


class NdrangeBounds(AdjPass):
    """--adj-ndrange-bounds: annotate every kernel of the module."""
    name = "adj-ndrange-bounds"

    def apply(self, module: ir.Operation) -> None:
        with module.context:
            for op in module.regions[0].blocks[0].operations:
                if is_kernel(op.operation):
                    annotate(op.operation)
