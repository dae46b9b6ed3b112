"""Small IR helpers shared by the passes: types, constants, symbols, cloning, walking.

Everything here builds at the current insertion point and location, like the upstream builders.
"""
from __future__ import annotations

from typing import Iterator, Sequence

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from ..dialects import adj


# arith.atomic_rmw's `kind` enum value for addf (the only float atomic the frontend emits).
ATOMIC_ADDF = 0


def is_float(t: ir.Type) -> bool:
    return isinstance(t, (ir.F32Type, ir.F64Type, ir.F16Type, ir.BF16Type))


def is_memref(t: ir.Type) -> bool:
    return isinstance(t, ir.MemRefType)


def is_float_memref(t: ir.Type) -> bool:
    return is_memref(t) and is_float(ir.MemRefType(t).element_type)


def memref_type(t: ir.Type) -> ir.MemRefType:
    return ir.MemRefType(t)


def primal_used(op: ir.Operation, returned: bool) -> bool:
    """Whether a derivative of the function holding `op` needs `op`'s results: some op uses
    them, not counting the function's return when the derivative does not return the primal
    (`returned` False)."""
    return any(returned or use.owner.name != "func.return"
               for r in op.results for use in r.uses)


def func_type(fn: ir.Operation) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)


def symbol_name(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def symbol_ref(attr: ir.Attribute) -> str:
    return ir.FlatSymbolRefAttr(attr).value


def callee(call: ir.Operation) -> str:
    return symbol_ref(call.attributes["callee"])


def const(t: ir.Type, value: float | int) -> ir.Value:
    if is_float(t):
        return arith.constant(t, float(value))
    return arith.constant(t, int(value))


def zero(t: ir.Type) -> ir.Value:
    return const(t, 0)


def index(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


def constant_int(v: ir.Value) -> int | None:
    """The value of an integer or index `arith.constant`, else None."""
    if isinstance(v, ir.OpResult) and v.owner.operation.name == "arith.constant":
        attr = v.owner.operation.attributes["value"]
        if isinstance(attr, ir.IntegerAttr):
            return ir.IntegerAttr(attr).value
    return None


def add(a: ir.Value | None, b: ir.Value | None, reassoc: bool = False) -> ir.Value | None:
    """a + b for adjoints and tangents, where None stands for an exact zero; `reassoc` marks
    the add reassociable (a loop's running sum that LLVM may then vectorise)."""
    if a is None:
        return b
    if b is None:
        return a
    if reassoc:
        return arith.addf(a, b, fastmath=ir.Attribute.parse("#arith.fastmath<reassoc>"))
    return arith.addf(a, b)


def or_zero(v: ir.Value | None, t: ir.Type) -> ir.Value:
    return zero(t) if v is None else v


def defining_block(v: ir.Value) -> ir.Block:
    if isinstance(v, ir.BlockArgument):
        return v.owner
    return v.owner.operation.block


def symbol_table(module: ir.Operation) -> dict[str, ir.Operation]:
    """The ops with a `sym_name` in `module`'s body, by name."""
    return {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
            for op in module.regions[0].blocks[0].operations if "sym_name" in op.attributes}


def terminator(block: ir.Block) -> ir.Operation:
    return list(block.operations)[-1].operation


def parent_op(block: ir.Block) -> ir.Operation:
    return block.owner.operation


def ops(block: ir.Block) -> list[ir.Operation]:
    return [op.operation for op in block.operations]


def walk(op: ir.Operation) -> Iterator[ir.Operation]:
    """`op` and every op nested in it, in pre-order."""
    yield op
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                yield from walk(inner.operation)


def is_ancestor(outer: ir.Operation, inner: ir.Operation) -> bool:
    """Whether `inner` is `outer` or nested inside it."""
    op = inner
    while True:
        if op == outer:
            return True
        parent = op.parent
        if parent is None:
            return False
        op = parent.operation


def clone_op(op: ir.Operation, vmap: dict[ir.Value, ir.Value]) -> ir.Operation:
    """Clones `op` (with its regions) at the insertion point, renaming operands through `vmap`.

    Results and block arguments of the clone are recorded in `vmap`. Values that `vmap` does not
    name must dominate the insertion point (constants hoisted into the new function, say).
    """
    new = ir.Operation.create(
        op.name, results=[r.type for r in op.results],
        operands=[vmap.get(v, v) for v in op.operands],
        attributes={k: op.attributes[k] for k in op.attributes},
        regions=len(op.regions), loc=op.location)
    for old_region, new_region in zip(op.regions, new.regions):
        for old_block in old_region.blocks:
            block = new_region.blocks.append(*[a.type for a in old_block.arguments])
            for a, b in zip(old_block.arguments, block.arguments):
                vmap[a] = b
            with ir.InsertionPoint(block):
                for inner in old_block.operations:
                    clone_op(inner.operation, vmap)
    for a, b in zip(op.results, new.results):
        vmap[a] = b
    return new


def view_of(op: ir.Operation, source: ir.Value, vmap: dict[ir.Value, ir.Value]) -> ir.Value:
    """The view `op` makes, of `source` instead of its own first operand."""
    local = dict(vmap)
    local[op.operands[0]] = source
    return clone_op(op, local).results[0]


def dims(m: ir.Value) -> list[ir.Value]:
    return [memref.dim(m, index(d)) for d in range(memref_type(m.type).rank)]


def flat_view(m: ir.Value) -> ir.Value:
    """A contiguous array as 1-D (itself if it is)."""
    t = memref_type(m.type)
    if t.rank == 1:
        return m
    return memref.collapse_shape(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()],
                                                   t.element_type), m, [list(range(t.rank))])


def numel(sizes: Sequence[ir.Value]) -> ir.Value:
    n = index(1)
    for s in sizes:
        n = arith.muli(n, s)
    return n


def linear_index(indices: Sequence[ir.Value], sizes: Sequence[ir.Value]) -> ir.Value:
    """Row-major position of `indices` in an array of extents `sizes`."""
    linear = index(0)
    for i, n in zip(indices, sizes):
        linear = arith.addi(arith.muli(linear, n), i)
    return linear


def alloc_like(m: ir.Value, shape: Sequence[ir.Value] | None = None) -> ir.Value:
    """A new buffer of `m`'s type and shape (dynamic extents from `shape`, else from `m`)."""
    t = memref_type(m.type)
    sizes = list(shape) if shape is not None else dims(m)
    dynamic = [s for s, n in zip(sizes, t.shape) if n == ir.ShapedType.get_dynamic_size()]
    return alloc_as(t, dynamic)


def alloc_as(t: ir.MemRefType, dynamic: Sequence[ir.Value]) -> ir.Value:
    """A new C-contiguous buffer usable as a `t` (dynamic extents `dynamic`): of a strided
    type (a view's: its offset and strides are not the allocation's to choose), the
    contiguous buffer cast to it."""
    if not isinstance(t.layout, ir.StridedLayoutAttr):
        return memref.alloc(t, list(dynamic), [])
    plain = ir.MemRefType.get(t.shape, t.element_type, memory_space=t.memory_space)
    return memref.cast(t, memref.alloc(plain, list(dynamic), []))


def for_each_index(sizes: Sequence[ir.Value], body) -> None:
    """Emits a loop nest over `sizes` calling `body(indices)` at the innermost level."""
    def level(k: int, idx: list[ir.Value]) -> None:
        if k == len(sizes):
            body(idx)
            return
        loop = scf.ForOp(index(0), sizes[k], index(1))
        with ir.InsertionPoint(loop.body):
            level(k + 1, idx + [loop.induction_variable])
            scf.YieldOp([])
    level(0, [])


def fill_zero(m: ir.Value) -> None:
    elem = memref_type(m.type).element_type
    sizes = dims(m)
    for_each_index(sizes, lambda idx: memref.store(zero(elem), m, idx))


def zeroed_like(m: ir.Value, shape: Sequence[ir.Value] | None = None) -> ir.Value:
    new = alloc_like(m, shape)
    fill_zero(new)
    return new


def trip_count(lb: ir.Value, ub: ir.Value, step: ir.Value) -> ir.Value:
    """Iterations of scf.for(lb, ub, step): ceil((ub - lb) / step), at least 0."""
    t = lb.type
    span = arith.subi(ub, lb)
    one = arith.constant(t, 1)
    n = arith.divsi(arith.subi(arith.addi(span, step), one), step)
    return arith.maxsi(n, arith.constant(t, 0))


def unravel(linear: ir.Value, counts: list[ir.Value]) -> list[ir.Value]:
    """Row-major multi-index of `linear` in a space of extents `counts`."""
    out = []
    for c in reversed(counts[1:]):
        out.append(arith.remui(linear, c))
        linear = arith.divui(linear, c)
    out.append(linear)
    return out[::-1]


def one_dimensional_kernel(block: ir.Block, name: str, types: Sequence[ir.Type],
                           body) -> ir.Operation:
    """The private kernel @name of `block` (a module's body), launched over one dimension,
    made if it is not there: its body `body(arguments, item index)` emits."""
    for op in block.operations:
        if ("sym_name" in op.operation.attributes and
                ir.StringAttr(op.operation.attributes["sym_name"]).value == name):
            return op.operation
    with ir.InsertionPoint(block), ir.Location.unknown():
        fn = func.FuncOp(name, ir.FunctionType.get(list(types), []), visibility="private")
        fn.attributes[adj.KERNEL_ATTR] = ir.UnitAttr.get()
        fn.attributes[adj.NDIM_ATTR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1)
        entry = fn.add_entry_block()
        with ir.InsertionPoint(entry):
            body(list(entry.arguments), adj.index())
            func.ReturnOp([])
    return fn.operation
