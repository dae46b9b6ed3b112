"""Derivative rules of the memory ops: load, store, atomic_rmw, copy, alloc, alloca, the views,
and a select between arrays. What they read, write and alias is op_facts.py's.

A float array has a shadow array of the same shape (activity_analysis.py says which do); each rule
does on the shadows what the op does on the arrays, in the direction of its mode:
forward:   the tangents go where the values go (load from / store into the shadow; with
           batched tangents, each lane's shadow: forward.py);
augmented: the op itself (the primal's clone; nothing to save: the reverse pass reloads
           what nothing overwrites, recompute.py);
reverse:   the adjoints go back: a load adds its result's adjoint into the shadow element
           (atomically in a kernel: gen.accumulate), a store moves the element's adjoint to
           the stored value and zeroes it (the old value no longer reaches anything).
An array the function makes gets its shadow when first needed (reverse: `alloc_shadow`,
`view_shadow`, called by the generator's materialize).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import arith, memref

from ....dialects.adj import AdjError
from ...ir_util import (ATOMIC_ADDF, clone_op, dims, fill_zero, for_each_index, index, is_ancestor,
                        is_memref, memref_type, view_of, zero, zeroed_like)
from ...op_facts import VIEW_OPS
from ..generate.gather import tag_row_site
from ..protocols import OpRules

if TYPE_CHECKING:
    from ..protocols import ForwardGenerator, ReverseGenerator


def indices(gen: "ReverseGenerator", op: ir.Operation, first: int) -> list[ir.Value]:
    """The primal indices of `op` (its operands from `first` on), in the reverse function."""
    return [gen.primal(i) for i in list(op.operands)[first:]]


def add_into(dst: ir.Value, src: ir.Value) -> None:
    """dst += src, element by element (two shadows of one array)."""
    def body(i: list[ir.Value]) -> None:
        memref.store(arith.addf(memref.load(dst, i), memref.load(src, i)), dst, i)
    for_each_index(dims(src), body)


# -- load ---------------------------------------------------------------------------------------
def forward_load(gen: "ForwardGenerator", op: ir.Operation) -> None:
    clone_op(op, gen.vmap)
    if gen.act.active(op.results[0]):
        at = [gen.vmap[i] for i in list(op.operands)[1:]]
        gen.tan[op.results[0]] = gen.pack([memref.load(s, at)
                                           for s in gen.shadows(op.operands[0])])


def reverse_load(gen: "ReverseGenerator", op: ir.Operation) -> None:
    r = op.results[0]
    d = gen.get_adj(r) if gen.act.active(r) else None
    if op.operation in getattr(gen, "covering_loads", ()):
        # A loop reading each element once into a shadow nothing else has touched
        # (control_flow_ops._reverse_covering): the element's adjoint is this one.
        s = gen.shadow(op.operands[0])
        at = indices(gen, op, 1)
        memref.store(d if d is not None else zero(memref_type(s.type).element_type), s, at)
        gen.covering_done.add(op.operation)
        return
    if d is not None:
        store = gen.accumulate(gen.shadow(op.operands[0]), indices(gen, op, 1), d)
        if store is not None:   # (an add gather.gather_rows may move: tagged)
            tag_row_site(gen, op.operation, store)


# -- store --------------------------------------------------------------------------------------
def forward_store(gen: "ForwardGenerator", op: ir.Operation) -> None:
    clone_op(op, gen.vmap)
    shadows = gen.shadows(op.operands[1])
    if shadows is not None:
        at = [gen.vmap[i] for i in list(op.operands)[2:]]
        for t, s in zip(gen.lanes(gen.tangent_or_zero(op.operands[0])), shadows):
            memref.store(t, s, at)


def reverse_store(gen: "ReverseGenerator", op: ir.Operation) -> None:
    m, v = op.operands[1], op.operands[0]
    if not gen.act.shadowed(m):
        return
    s, at = gen.shadow(m), indices(gen, op, 2)
    # The stored-over element's old value no longer reaches anything: its adjoint is 0.
    d = memref.load(s, at) if gen.act.active(v) else None
    memref.store(zero(memref_type(s.type).element_type), s, at)
    gen.add_adj(v, d)


# -- atomic_rmw ---------------------------------------------------------------------------------
def forward_atomic_rmw(gen: "ForwardGenerator", op: ir.Operation) -> None:
    clone_op(op, gen.vmap)
    shadows = gen.shadows(op.operands[1])
    if shadows is None:
        return
    if ir.IntegerAttr(op.attributes["kind"]).value != ATOMIC_ADDF:
        raise AdjError(op, "autodiff: of the float atomics only addf is differentiable")
    at = [gen.vmap[i] for i in list(op.operands)[2:]]
    olds = [memref.AtomicRMWOp(op.attributes["kind"], t, s, at).result
            for t, s in zip(gen.lanes(gen.tangent_or_zero(op.operands[0])), shadows)]
    if gen.act.active(op.results[0]):
        gen.tan[op.results[0]] = gen.pack(olds)


def reverse_atomic_rmw(gen: "ReverseGenerator", op: ir.Operation) -> None:
    m, v, r = op.operands[1], op.operands[0], op.results[0]
    if not gen.act.shadowed(m):
        return
    if ir.IntegerAttr(op.attributes["kind"]).value != ATOMIC_ADDF:
        raise AdjError(op, "autodiff: of the atomics on float arrays only addf is "
                           "differentiable")
    s, at = gen.shadow(m), indices(gen, op, 2)
    # m[i] = old + v: v and old both get m[i]'s adjoint; old's also flows to the result.
    if gen.act.active(v):
        gen.add_adj(v, memref.load(s, at))
    d = gen.get_adj(r) if gen.act.active(r) else None
    if d is not None:
        gen.accumulate(s, at, d)


# -- copy ---------------------------------------------------------------------------------------
def forward_copy(gen: "ForwardGenerator", op: ir.Operation) -> None:
    clone_op(op, gen.vmap)
    srcs, dsts = gen.shadows(op.operands[0]), gen.shadows(op.operands[1])
    for k, dst in enumerate(dsts or []):
        if srcs is not None:
            memref.copy(srcs[k], dst)
        else:
            fill_zero(dst)


def reverse_copy(gen: "ReverseGenerator", op: ir.Operation) -> None:
    src, dst = op.operands[0], op.operands[1]
    if not gen.act.shadowed(dst):
        return
    ddst = gen.shadow(dst)
    dsrc = gen.shadow(src) if gen.act.shadowed(src) else None
    elem = memref_type(ddst.type).element_type

    def body(i: list[ir.Value]) -> None:
        a = memref.load(ddst, i)
        memref.store(zero(elem), ddst, i)
        if dsrc is not None:
            memref.store(arith.addf(memref.load(dsrc, i), a), dsrc, i)
    for_each_index(dims(ddst), body)


# -- alloc, alloca ------------------------------------------------------------------------------
def forward_alloc(gen: "ForwardGenerator", op: ir.Operation) -> None:
    clone_op(op, gen.vmap)
    if gen.act.shadowed(op.results[0]):
        gen.tan[op.results[0]] = [zeroed_like(gen.vmap[op.results[0]])
                                  for _ in range(gen.width)]


def forward_alloca(gen: "ForwardGenerator", op: ir.Operation) -> None:
    """A kernel's local array: its tangent is local too (an alloca beside it)."""
    clone_op(op, gen.vmap)
    if gen.act.shadowed(op.results[0]):
        new = gen.vmap[op.results[0]]
        shadows = [memref.alloca(memref_type(new.type), list(new.owner.operation.operands), [])
                   for _ in range(gen.width)]
        for s in shadows:
            fill_zero(s)
        gen.tan[op.results[0]] = shadows


def alloc_shadow(gen: "ReverseGenerator", alloc: ir.Operation) -> ir.Value:
    """Reverse: the zeroed shadow of the array `alloc` makes, made where first needed (a
    kernel's local array, an alloca at its entry, gets a local shadow)."""
    m = alloc.results[0]
    sizes = iter(gen.materialize(v) for v in alloc.operands)
    t = memref_type(m.type)
    shape = [next(sizes) if n == ir.ShapedType.get_dynamic_size() else index(n)
             for n in t.shape]
    make = memref.alloca if alloc.name == "memref.alloca" else memref.alloc
    new = make(t, [s for s, n in zip(shape, t.shape)
                   if n == ir.ShapedType.get_dynamic_size()], [])
    for_each_index(shape, lambda i: memref.store(zero(t.element_type), new, i))
    return new


def zero_fill_of(shadow: ir.Value, besides: ir.Operation) -> ir.Operation | None:
    """The op of `shadow`'s block that zero-fills it (alloc_shadow's, zeroed_like's loop nest
    of one store of 0.0, or that store for a 0-d array), if that is its only store outside
    the op `besides`; else None."""
    stores = [u.owner for u in shadow.uses]
    stores = [s.operation if hasattr(s, "operation") else s for s in stores]
    stores = [s for s in stores if s.name == "memref.store" and not is_ancestor(besides, s)]
    if len(stores) != 1 or stores[0].operands[1] != shadow:
        return None
    value = stores[0].operands[0]
    if not (isinstance(value, ir.OpResult) and value.owner.operation.name == "arith.constant"
            and isinstance(value.owner.operation.attributes["value"], ir.FloatAttr)
            and ir.FloatAttr(value.owner.operation.attributes["value"]).value == 0.0):
        return None
    block = shadow.owner.operation.block if isinstance(shadow, ir.OpResult) else None
    op = stores[0]
    while op.block != block:
        op = op.parent.operation
        if op.name != "scf.for":
            return None
    return op


# -- views --------------------------------------------------------------------------------------
def forward_view(gen: "ForwardGenerator", op: ir.Operation) -> None:
    """Run whatever the activity (a view is not `relevant` itself): the view of the shadow,
    where its array has one."""
    clone_op(op, gen.vmap)
    shadows = gen.shadows(op.operands[0])
    if shadows is not None:
        gen.tan[op.results[0]] = [view_of(op, s, gen.vmap) for s in shadows]


def view_shadow(gen: "ReverseGenerator", view: ir.Operation) -> ir.Value:
    """Reverse: a view's shadow is the same view of its array's shadow."""
    return view_of(view, gen.shadow(view.operands[0]),
                   {v: gen.materialize(v) for v in list(view.operands)[1:]})


# -- select -------------------------------------------------------------------------------------
def forward_select(gen: "ForwardGenerator", op: ir.Operation) -> None:
    """Of arrays: the select of their shadows; of scalars, a table op (rules/scalar.py)."""
    if not is_memref(op.results[0].type):
        gen.arith(op)
        return
    clone_op(op, gen.vmap)
    if gen.carried(op.results[0]):
        c = gen.vmap[op.operands[0]]
        gen.tan[op.results[0]] = [arith.select(c, a, b) for a, b in zip(
            gen.derivatives_of(op.operands[1]), gen.derivatives_of(op.operands[2]))]


def reverse_select(gen: "ReverseGenerator", op: ir.Operation) -> None:
    if not is_memref(op.results[0].type):
        gen.arith(op)
        return
    if gen.act.shadowed(op.results[0]):
        raise AdjError(op, "autodiff: reverse mode of a select between differentiated arrays "
                           "is not supported")


RULES: dict[str, OpRules] = {
    "memref.load": OpRules(forward=forward_load, reverse=reverse_load),
    "memref.store": OpRules(forward=forward_store, reverse=reverse_store),
    "memref.atomic_rmw": OpRules(forward=forward_atomic_rmw, reverse=reverse_atomic_rmw),
    "memref.copy": OpRules(forward=forward_copy, reverse=reverse_copy),
    "memref.alloc": OpRules(forward=forward_alloc),       # reverse: alloc_shadow
    "memref.alloca": OpRules(forward=forward_alloca),     # reverse: alloc_shadow
    "arith.select": OpRules(forward=forward_select, reverse=reverse_select),
    **{name: OpRules(forward=forward_view) for name in VIEW_OPS},   # reverse: view_shadow
}
