"""Reverse mode of a kernel: the tape is one slot range per work item.

A kernel's augmented and reverse functions are kernels themselves (the launch rule in
rules/launch_ops.py runs them over the same ndrange), and work items cannot grow a shared
buffer, so the tape layout is fixed before the augmented kernel runs: per element type T one
memref<?xT> tape parameter with K_T slots per work item, item i owning [i*K_T, (i+1)*K_T). Each saved key has a
base offset within the item's range; a key inside scf.for loops takes one slot per iteration of
those loops (base + linearized iteration). K_T and the bases are sums of products of trip
counts: ints when the loops' bounds are constants, else expressions of the kernel's arguments
(uniform.py) that the kernels and the launch compute at run time, so that a loop over a
scalar argument (`for _ in range(steps)`) or an array's size can be taped. A value the reverse
pass needs from inside an scf.while, or from a loop whose bounds depend on the work item (its
index, loaded values), cannot have a slot that every item agrees on: it goes to the item's
range of a packed stack sized at run time (dynamic_tape.py).

When a loop's bounds read an enclosing loop's variable (a triangular `for k2 in range(k, n)`
in `for k in range(4)`), a key's slots are not a product but a sum over the enclosing loop
(("sum", ...) in core/tape_size.py): still the same for every item, computed by the
launch (an scf.for over the outer loop) or in Python for a GPU launch; its slot within the
item is the iterations before the current one, likewise summed.

A launch rule's kernels (private derivatives) take their fixed fields as views,
`memref<?xT, strided<[1], offset: ?>>` (tape.region_view_type): inside a loop the launch
passes a view of the function's in-place stack, so the augmented kernel writes its tape
where the reverse kernel will read it, with no copy in between (tape.py); elsewhere, its own
buffer cast to that type. Kernel derivatives requested by name keep `memref<?xT>`.

Adjoints of active scalar arguments are per work item too: the reverse kernel stores its
item's adjoint of each into an extra memref<?xT> parameter at [adj.index]; the caller sums
(summation.py), as it sums those of the elements every item reads (uniform_loads.py).

`generate_kernel_reverse` (which the driver calls for a kernel, where it calls
reverse.generate_reverse for other functions) builds the kernels from the generators here,
subclasses of reverse.py's and augment.py's that put their own rules before rules/lookup.py's
(`OWN_RULES`) for the ops a kernel treats differently.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from ....core.activity import SHADOWED
from ....core.tape_size import Expr, add, mentions, summation, trip
from ....dialects import adj
from ....dialects.adj import NDIM_ATTR
from ...ir_util import (add as add_adjoint, clone_op, index, is_ancestor, is_memref, or_zero,
                        parent_op, walk, zero)
from ..analysis.recompute import cheap
from ..analysis.uniform import emit, uniform
from ..analysis.uniform_loads import uniform_loads
from ..protocols import Rule
from ..rules.memory_ops import reverse_load
from ..signature import Derivative, Signature, TapeField
from .adjoints import Scope
from .augment import AugGen
from .context import ReverseContext
from .dynamic_tape import (ItemStackReader, ItemStacks, check_countable, check_ends, dynamic_blocks,
                           dynamic_types, is_dynamic, refuse_array)
from .gather import gathers, make_gather_kernel, own_elements
from .prune import prune_unneeded
from .reverse import RevGen, finish_pair, rev_twice
from .tape import Key, TapePlan, describe, key_block, region_view_type

if TYPE_CHECKING:
    from ..protocols import Host

Loop = tuple[ir.Operation, Expr, Expr, Expr]   # (scf.for, lb, ub, step)


def _enclosing_loops(block: ir.Block, fn: ir.Operation) -> list[Loop]:
    """The scf.for loops around `block`, outermost first, with their bounds as expressions
    of the kernel's arguments (uniform.py) and of the variables of the loops around them
    (("iv", d) for the d-th: a triangular `for k2 in range(k, n)` in `for k in range(m)`).
    Only for blocks outside dynamic loops (dynamic_tape.is_dynamic), whose values have fixed
    slots."""
    ops: list[ir.Operation] = []
    op = parent_op(block)
    while op != fn:
        assert op.name != "scf.while", "a block in a dynamic loop has no fixed slots"
        if op.name == "scf.for":
            ops.append(op)
        op = op.parent.operation
    loops: list[Loop] = []
    ivs: dict[ir.Value, int] = {}
    for d, op in enumerate(reversed(ops)):
        bounds = [uniform(v, fn, ivs) for v in list(op.operands)[:3]]
        assert None not in bounds, "a block in a dynamic loop has no fixed slots"
        lb, ub, step = bounds
        loops.append((op, lb, ub, step))
        ivs[op.regions[0].blocks[0].arguments[0]] = d
    return loops


def _count(loops: list[Loop], d: int = 0) -> Expr:
    """Iterations of loops[d:] nested, an expression of the variables of loops[:d]: a
    product of trip counts, or, where a loop's bounds read an enclosing loop's variable, a
    sum over that variable (core/tape_size.summation)."""
    if d == len(loops):
        return 1
    _, lb, ub, step = loops[d]
    return summation(d, lb, ub, step, _count(loops, d + 1))


def _offset(loops: list[Loop], d: int = 0) -> Expr:
    """The linearized iteration of loops[d:] (their variables ("iv", d'...)): the iterations
    of loops[d:] before this one of loop d, plus this one's offset within loops[d+1:]."""
    if d == len(loops):
        return 0
    _, lb, _, step = loops[d]
    before = summation(d, lb, ("iv", d), step, _count(loops, d + 1))
    return add(before, _offset(loops, d + 1))


def _triangular(loops: list[Loop]) -> bool:
    """Whether a loop's bounds read an enclosing loop's variable."""
    return any(mentions(b, e) for d, (_, lb, ub, step) in enumerate(loops)
               for b in (lb, ub, step) for e in range(d))


class KernelLayout:
    """Slots per item (K_T) and each key's base offset, per element type: expressions of the
    kernel's arguments (ints when every loop around taped values has constant bounds)."""

    def __init__(self, plan: TapePlan, fn: ir.Operation):
        self.per_item: dict[str, Expr] = {}
        self.types: dict[str, ir.Type] = {}
        self.base: dict[Key, Expr] = {}
        for block, keys in plan.blocks.items():
            if block != plan.top and is_dynamic(block, fn):
                continue    # on the item's packed stacks (dynamic_tape.py)
            slots = _count(_enclosing_loops(block, fn))
            for key in keys:
                t = plan.types[key]
                if is_memref(t):
                    refuse_array(key, "on its per-item tape, which holds numbers only")
                name = str(t)
                self.types.setdefault(name, t)
                self.base[key] = self.per_item.get(name, 0)
                self.per_item[name] = add(self.base[key], slots)


def field_type(t: ir.Type, views: bool) -> ir.MemRefType:
    """The type of a fixed per-item field of element type `t`: a view (at any offset) for a
    launch rule's kernels, which read and write the tape in place (`views`), else a buffer."""
    if views:
        return region_view_type(t)
    return ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], t)


def kernel_fields(plan: TapePlan, views: bool = False) -> list[TapeField]:
    """The fixed per-item fields (views: field_type), then per element type of the packed
    stacks of values saved in dynamic loops (dynamic_tape.py): the stack and its offsets."""
    fn = parent_op(plan.top)
    layout = KernelLayout(plan, fn)
    dyn = ir.ShapedType.get_dynamic_size()
    fixed = [TapeField(f"{name} values per work item: " +
                       "; ".join(describe(k) for k in layout.base if str(plan.types[k]) == name),
                       field_type(t, views), per_item=layout.per_item[name])
             for name, t in layout.types.items()]
    blocks = dynamic_blocks(plan, fn)
    packed = []
    for t in dynamic_types(plan, fn):
        held = "; ".join(describe(k) for b in blocks for k in plan.blocks[b]
                         if str(plan.types[k]) == str(t))
        packed += [TapeField(f"{t} stack of all items, per run of its loop: {held}",
                             ir.MemRefType.get([dyn], t), dynamic="stack"),
                   TapeField(f"{t} stack: where each item's values start (items + 1)",
                             ir.MemRefType.get([dyn], ir.IndexType.get()), dynamic="offsets")]
    return fixed + packed


def _slot(item: ir.Value, per_item: ir.Value, base: ir.Value, block: ir.Block,
          fn: ir.Operation, iv: Callable[[ir.Operation], ir.Value],
          args: list[ir.Value]) -> ir.Value:
    """item * per_item + base + the linearized iteration of the loops around `block`
    (`args`: the kernel's arguments, from which runtime bounds are computed)."""
    offset = base
    loops = _enclosing_loops(block, fn)
    ivs = {}
    for d, (loop, *_) in enumerate(loops):
        i = iv(loop)
        ivs[d] = (i if isinstance(i.type, ir.IndexType) else
                  arith.index_cast(ir.IndexType.get(), i))
    if loops and _triangular(loops):
        offset = arith.addi(offset, emit(_offset(loops), args, ivs))
    elif loops:
        # Rectangular: Horner's form of the same offset, ((k0 * n1) + k1) * n2 + k2...
        linear = None
        for d, (loop, lb, ub, step) in enumerate(loops):
            k = arith.divsi(arith.subi(ivs[d], emit(lb, args)), emit(step, args))
            n = emit(trip(lb, ub, step), args)
            linear = k if linear is None else arith.addi(arith.muli(linear, n), k)
        offset = arith.addi(offset, linear)
    return arith.addi(arith.muli(item, per_item), offset)


class KernelRevGen(RevGen):
    """The reverse kernel: tape slots of this item; active scalars' adjoints stored per item,
    and, with `sum_uniform`, the adjoints of the elements that every item reads
    (uniform_loads.py), as for the launch rule's derivatives; with `views`, its fixed
    fields are views (field_type)."""

    def __init__(self, ctx: ReverseContext, taped: frozenset = frozenset(),
                 sum_uniform: bool = False, views: bool = False):
        super().__init__(ctx, taped)
        self.views = views
        shadowed = {k for k, a in enumerate(ctx.sig.activity) if a in SHADOWED}
        self.uniform = uniform_loads(ctx.fn, ctx.act, shadowed) if sum_uniform else {}
        # One per element, in order of first load: the reverse kernel's extra per-item outputs.
        self.elements = list(dict.fromkeys(self.uniform.values()))

    def outer(self, region_op: ir.Operation) -> list:
        inside = [u for load, u in self.uniform.items() if is_ancestor(region_op, load)]
        return super().outer(region_op) + list(dict.fromkeys(inside))

    def reverse_uniform_load(self, op: ir.Operation) -> None:
        """A load of an element every item reads adds into that element's adjoint, a value
        threaded like an Active scalar's (outer()), not into its shadow."""
        element = self.uniform.get(op)
        if element is None:
            reverse_load(self, op)
            return
        d = self.get_adj(op.results[0])
        if d is not None:
            self.set_adj(element, add_adjoint(self.get_adj(element), d))

    OWN_RULES: dict[str, Rule] = {"memref.load": reverse_uniform_load}

    def prologue(self, top: Scope) -> None:
        with ir.InsertionPoint(top.marker):
            self.item = adj.index()
        self.constants: dict = {}
        self.args = [top.values[a] for a in self.ctx.entry.arguments]
        self.stacks = ItemStackReader(ir.InsertionPoint(top.marker), self.param, self.item)

    def tape_read(self, key: Key, t: ir.Type, scope: Scope) -> ir.Value:
        block = key_block(key)
        if block != self.ctx.entry and is_dynamic(block, self.ctx.fn):
            if is_memref(t):
                dynamic_types(self.ctx.plan, self.ctx.fn)     # refuses, naming the array
            return self.stacks.pop(t)
        field = self.param(("field", str(t)), field_type(t, self.views))
        per_item = self._constant(("per_item", str(t)))
        base = self._constant(("base", key))
        addr = _slot(self.item, per_item, base, key_block(key), self.ctx.fn,
                     lambda loop: self.primal(loop.regions[0].blocks[0].arguments[0]),
                     self.args)
        return memref.load(field, [addr])

    def _constant(self, name) -> ir.Value:
        """An index known once the plan is complete (a placeholder until then): a constant,
        or computed from the kernel's arguments at entry."""
        if name not in self.constants:
            self.constants[name] = self.param(name, ir.IndexType.get())
        return self.constants[name]

    def epilogue(self, adjoints: list[ir.Value]) -> None:
        for k, a in enumerate(adjoints):
            out = self.param(("out", k), ir.MemRefType.get([ir.ShapedType.get_dynamic_size()],
                                                           a.type))
            memref.store(a, out, [self.item])
        for k, e in enumerate(self.elements):
            out = self.param(("uout", k), ir.MemRefType.get([ir.ShapedType.get_dynamic_size()],
                                                            e.type))
            memref.store(or_zero(self.get_adj(e), e.type), out, [self.item])
        func.ReturnOp([])

    def tape_params(self) -> list[tuple]:
        layout = KernelLayout(self.ctx.plan, self.ctx.fn)
        with ir.InsertionPoint.at_block_begin(self.entry), self.ctx.fn.location:
            for name, ph in list(self.placeholders.items()):
                if name[0] in ("per_item", "base"):
                    value = (layout.per_item[name[1]] if name[0] == "per_item"
                             else layout.base[name[1]])
                    ph.replace_all_uses_with(emit(value, self.args))
                    ph.owner.operation.erase()
                    del self.placeholders[name]
        dyn = ir.ShapedType.get_dynamic_size()
        params = [(("field", name), field_type(t, self.views))
                  for name, t in layout.types.items()]
        for t in dynamic_types(self.ctx.plan, self.ctx.fn):
            params += [(("dstack", str(t)), ir.MemRefType.get([dyn], t)),
                       (("doffsets", str(t)), ir.MemRefType.get([dyn], ir.IndexType.get()))]
        outs = sorted(n for n in self.placeholders if n[0] == "out")
        uouts = [("uout", k) for k in range(len(self.elements))]
        return params + [(n, self.placeholders[n].type) for n in outs + uouts]


class KernelAugGen(AugGen):
    """The augmented kernel: the primal body, saving this item's keys into its slots."""

    counting = False

    def __init__(self, ctx: ReverseContext):
        super().__init__(ctx)
        self.layout = KernelLayout(ctx.plan, ctx.fn)
        # Only the ops around dynamic blocks thread the packed stacks' cursors.
        self._threads = set()
        for block in dynamic_blocks(ctx.plan, ctx.fn):
            op = parent_op(block)
            while op != ctx.fn:
                self._threads.add(op)
                op = op.parent.operation
        self.dynamic = dynamic_types(ctx.plan, ctx.fn)
        if self.dynamic and not self.counting:    # (the counting kernel comes second)
            check_countable(ctx.fn)
        self.stacks = ItemStacks(self.dynamic, self.counting)

    def emit(self, name: str, extra: dict[str, ir.Attribute], private: bool,
             fields: list[TapeField]) -> ir.Operation:
        aug = super().emit(name, extra, private, fields)
        hoist_tape_stores(aug, set(self.fields.values()))
        return aug

    def prologue(self, tape_params: list[ir.Value]) -> None:
        self.fields = dict(zip(self.layout.types, tape_params))
        self.item = adj.index()
        self.args = [self.vmap[a] for a in self.ctx.entry.arguments]
        # Computed once at entry (not in each loop that saves): the layout's sizes.
        self.per_item = {name: emit(n, self.args) for name, n in self.layout.per_item.items()}
        packed = tape_params[len(self.layout.types):]
        stacks, offsets = packed[0::2], packed[1::2]
        starts = [memref.load(o, [self.item]) for o in offsets]
        self.ends = [memref.load(o, [arith.addi(self.item, index(1))]) for o in offsets]
        self.stacks.start(stacks, starts, self.ends)

    def epilogue(self, ret: ir.Operation) -> None:
        check_ends(self.stacks.cursors(), self.ends)
        func.ReturnOp([])

    def save(self, block: ir.Block) -> None:
        if block != self.ctx.entry and is_dynamic(block, self.ctx.fn):
            keys = self.ctx.plan.keys(block)
            self.stacks.push([self.key_value(k) for k in reversed(keys)])
            return
        for key in self.ctx.plan.keys(block):
            name = str(self.ctx.plan.types[key])
            addr = _slot(self.item, self.per_item[name], emit(self.layout.base[key], self.args),
                         block, self.ctx.fn,
                         lambda loop: self.vmap[loop.regions[0].blocks[0].arguments[0]],
                         self.args)
            memref.store(self.key_value(key), self.fields[name], [addr])


def hoist_tape_stores(aug: ir.Operation, fields: set[ir.Value]) -> None:
    """Moves each store into a tape field out of the scf.ifs around it (not out of loops):
    the if yields the value on the store's side and 0 on the other, and the store after it
    runs for every item. Each key has its own slots, which the reverse kernel reads only on
    the path that saved them, so the 0 is never read. Conditional, the store kept the
    augmented kernel of a guarded stencil scalar: LLVM merged it with the other branch's
    store of the same value into one store through a selected address (the G2b aug kernel
    ran at 66 us per launch against 9 us for the primal)."""
    for store in [op for op in walk(aug) if op.name == "memref.store" and
                  op.operands[1] in fields]:
        while store is not None:
            store = _hoist_once(store)


def _hoist_once(store: ir.Operation) -> ir.Operation | None:
    """Moves `store` out of its enclosing scf.if; the new store, or None where it stays."""
    branch = store.parent.operation
    if branch.name != "scf.if":
        return None
    chain = _outside(list(store.operands)[2:], branch)
    if chain is None:
        return None
    value, field = store.operands[0], store.operands[1]
    old_then = branch.regions[0].blocks[0]
    old_else = branch.regions[1].blocks[0] if len(branch.regions[1].blocks) else None
    with ir.InsertionPoint(branch), branch.location:
        new = scf.IfOp(branch.operands[0], [r.type for r in branch.results] + [value.type],
                       has_else=True)
    for old, block in ((old_then, new.then_block), (old_else, new.else_block)):
        if old is not None:
            for op in list(old.operations):
                block.append(op.operation)
        yielded = list(block.operations[len(block.operations) - 1].operands) if old else []
        with ir.InsertionPoint(block), branch.location:
            if old is not None:
                block.operations[len(block.operations) - 1].operation.erase()
            mine = block == (new.then_block if store.block == new.then_block else new.else_block)
            scf.YieldOp(yielded + [value if mine else zero(value.type)])
    for old_result, new_result in zip(branch.results, new.results):
        old_result.replace_all_uses_with(new_result)
    with ir.InsertionPoint(branch), store.location:
        vmap: dict[ir.Value, ir.Value] = {}
        for op in chain:
            clone_op(op, vmap)
        at = [vmap.get(i, i) for i in list(store.operands)[2:]]
        hoisted = memref.store(new.results[len(new.results) - 1], field, at)
    store.erase()
    branch.erase()
    return hoisted.operation if hasattr(hoisted, "operation") else hoisted


def _outside(values: list[ir.Value], branch: ir.Operation) -> list[ir.Operation] | None:
    """The ops inside `branch` to clone before it so that `values` are defined there (pure
    arith ops only, in order), or None where one cannot be."""
    chain: list[ir.Operation] = []

    def visit(v: ir.Value) -> bool:
        if not isinstance(v, ir.OpResult):
            return not is_ancestor(branch, v.owner.owner.operation)
        op = v.owner.operation
        if not is_ancestor(branch, op):
            return True
        if op in chain:
            return True
        if not cheap(op) or not all(visit(x) for x in op.operands):   # arith ops only
            return False
        chain.append(op)
        return True

    return chain if all(visit(v) for v in values) else None


class KernelCountGen(KernelAugGen):
    """The counting kernel of a kernel with dynamic loops (dynamic_tape.py): the augmented
    kernel without its writes to arrays and without its saves, storing how many values of
    each type its item would push into counts[item] (one array per type)."""
    counting = True

    def emit(self, name: str, extra: dict[str, ir.Attribute], private: bool,
             fields: list[TapeField]) -> ir.Operation:
        counts = [TapeField("", ir.MemRefType.get([ir.ShapedType.get_dynamic_size()],
                                                  ir.IndexType.get()))] * len(self.dynamic)
        return AugGen.emit(self, name, extra, private, counts)

    def prologue(self, tape_params: list[ir.Value]) -> None:
        self.counts = tape_params
        self.item = adj.index()
        self.args = [self.vmap[a] for a in self.ctx.entry.arguments]
        self.stacks.start(self.counts, [index(0)] * len(self.counts), [])

    def epilogue(self, ret: ir.Operation) -> None:
        for c, n in zip(self.counts, self.stacks.cursors()):
            memref.store(n, c, [self.item])
        func.ReturnOp([])

    def save(self, block: ir.Block) -> None:
        if block != self.ctx.entry and is_dynamic(block, self.ctx.fn):
            self.stacks.push([self.key_value(k) for k in reversed(self.ctx.plan.keys(block))])

    def unless_into_argument(self, op: ir.Operation) -> None:
        """A store or atomic: dropped where it writes an array the kernel is given (its local
        arrays it writes as the augmented kernel does)."""
        target = op.operands[1]
        if not (isinstance(target, ir.BlockArgument) and target.owner == self.ctx.entry):
            clone_op(op, self.vmap)

    OWN_RULES: dict[str, Rule] = {"memref.store": unless_into_argument,
                                  "memref.atomic_rmw": unless_into_argument}


def generate_kernel_reverse(diff: "Host", fn: ir.Operation, sig: Signature, name: str,
                            extra: dict[str, ir.Attribute]) -> Derivative:
    """Generates the reverse mode of kernel `fn`: `{name}_aug` and `{name}_rev`, kernels
    (and `{name}_count` for dynamic loops, `{name}_gather<k>` for a launch rule's gathered
    adjoints: gather.py); returns them as a Derivative."""
    ctx = ReverseContext(diff, fn, sig)
    private = name == sig.mangled()
    # A private kernel derivative is a launch rule's, which sums the adjoints of the
    # elements every item reads (uniform_loads.py); one requested by name keeps its ABI.
    # Its fixed fields are views too, which the launch rule places in the caller's tape.
    rev, gen = rev_twice(lambda *a: KernelRevGen(*a, sum_uniform=private, views=private), ctx,
                         f"{name}_rev", extra, private)
    elements = gen.elements
    fields = kernel_fields(ctx.plan, views=private)
    aug = KernelAugGen(ctx).emit(f"{name}_aug", extra, private, fields)
    count = None
    if any(f.dynamic for f in fields):
        count = KernelCountGen(ctx).emit(f"{name}_count", {}, True, fields)
        prune_unneeded(count)
        count.move_before(aug)
    # Plain adds into the items' own elements keep the ABI: any kernel derivative may
    # have them. Only a launch rule's runs gather kernels before the reverse kernel.
    ndim = ir.IntegerAttr(ctx.fn.attributes[NDIM_ATTR]).value
    own_elements(rev, ndim)
    gathered = _gather(ctx, rev, name, ndim) if private else []
    finish_pair(aug, rev, fields)
    return Derivative(aug=f"{name}_aug", rev=f"{name}_rev", tape=[f.type for f in fields],
                      per_item=[f.per_item for f in fields], uniform_loads=elements,
                      gathers=gathered, count=count and f"{name}_count",
                      dynamic=[f.dynamic for f in fields])


def _gather(ctx: ReverseContext, rev: ir.Operation, name: str,
            ndim: int) -> list[tuple[str, int]]:
    """Makes a gather kernel for each array whose adjoint can be gathered (gather.py) and
    drops its atomic adds from `rev`; returns (gather kernel, primal argument) for each."""
    found = gathers(ctx.fn, rev, ctx.sig.activity, ndim)
    for k, g in enumerate(found):
        make_gather_kernel(ctx.diff, rev, g, f"{name}_gather{k}", ndim)
    for g in found:
        for op, _ in g.sites:
            op.erase()
    return [(g.kernel, g.arg) for g in found]
