"""Reverse mode, split: an augmented forward function that records a tape, and a reverse
function that consumes it.

The reverse function is generated first (here; the augmented one in augment.py), by walking
the primal body backwards and accumulating adjoints (dict primal value -> adjoint SSA value;
None is an exact zero). When a rule needs a primal value, `RevGen.primal` materializes it at
the start of the reversed block where it was defined: recomputed there if it is pure and what
it depends on is free in the reverse function (arguments, constants, loop counters, memory
nothing overwrites later) or taped anyway, else taken from the tape (tape.py), which records
the request. The augmented function is then the primal body plus the saves the finished plan
asks for.

Control flow is reversed structurally: an scf.if becomes an scf.if on the same condition, an
scf.for an scf.for over the same iterations backwards, an scf.while an scf.for over its
recorded iteration count, an scf.parallel an scf.parallel when its iterations can add into
shared memory without racing (else a backward scf.for). Adjoints of values defined outside a
region and used in it are threaded through the reversed region (loop-carried, or if results),
as are the adjoints of loop-carried values and the shadows of arrays made inside the region.
In a reversed loop, such an outer value's adjoint is split over one accumulator per site that
adds to it (up to MAX_SLOTS), summed after the loop: see LoopSlots.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from ...core.activity import Activity, SHADOWED
from ...dialects.adj import NDIM_ATTR, AdjError
from .activity import ActivityAnalysis, terminator
from .augment import AugGen, prune_unneeded
from .context import ReverseContext, inputs
from .ir_util import (ATOMIC_ADDF, VIEW_OPS, add, clone_op, defining_block, dims,
                      for_each_index, func_type, index, is_ancestor, is_float, is_memref,
                      memref_type, or_zero, ops, parent_op, trip_count, unravel, view_of, walk,
                      zero, zeroed_like)
from . import gather
from .launch import launch_signature, reverse_launch
from .reduction import accumulator_type, pairwise_sum
from .rules import CASTS, RULES, ZERO_DERIVATIVE
from .signature import Derivative, Signature, adjoint_types, aug_inputs, dret_types
from .tape import (Key, StackReader, TapePlan, key_block, stack_fields, tape_param_names,
                   top_fields)

if TYPE_CHECKING:
    from .driver import Differentiator

TAPE_ATTR = "adj.tape"

# Most accumulators one outer value's adjoint gets in a reversed loop (LoopSlots): enough
# independent chains to hide the latency of float adds, and for LLVM to make vectors of them;
# few enough to stay in registers (8 measured slower where the body calls libm: every slot is
# spilled around each call).
MAX_SLOTS = 4


def generate_reverse(diff: "Differentiator", fn: ir.Operation, sig: Signature, name: str,
                     extra: dict[str, ir.Attribute]) -> Derivative:
    """Generates `{name}_aug` and `{name}_rev`; returns them as a Derivative."""
    ctx = ReverseContext(diff, fn, sig)
    private = name == sig.mangled()
    if ctx.kernel:
        # kernel_tape builds on this module's generators, hence the late import.
        from .kernel_tape import KernelAugGen, KernelCountGen, KernelRevGen, kernel_fields
        # A private kernel derivative is a launch rule's, which sums the adjoints of the
        # elements every item reads (uniform_loads.py); one requested by name keeps its ABI
        # unless the request asks for them (the GPU launcher's).
        from .uniform_loads import ELEMENTS_ATTR, SUM_UNIFORM_ATTR, element_attr
        summed = private or SUM_UNIFORM_ATTR in extra     # or a by-name request asking it
        rev, gen = _rev_twice(lambda *a: KernelRevGen(*a, sum_uniform=summed), ctx,
                              f"{name}_rev", extra, private)
        elements = gen.elements
        if summed:
            rev.attributes[ELEMENTS_ATTR] = element_attr(elements)
        fields = kernel_fields(ctx.plan)
        aug = KernelAugGen(ctx).emit(f"{name}_aug", extra, private, fields)
        count = None
        if any(f.dynamic for f in fields):
            count = KernelCountGen(ctx).emit(f"{name}_count", {}, True, fields)
            prune_unneeded(count)
            count.move_before(aug)
        # Plain adds into the items' own elements keep the ABI: any kernel derivative may
        # have them. Only a launch rule's runs gather kernels before the reverse kernel.
        ndim = ir.IntegerAttr(ctx.fn.attributes[NDIM_ATTR]).value
        gather.own_elements(rev, ndim)
        gathered = _gather(ctx, rev, name, ndim) if private else []
    else:
        rev, _ = _rev_twice(RevGen, ctx, f"{name}_rev", extra, private)
        elements, gathered, count = [], [], None
        fields = top_fields(ctx.plan) + stack_fields(ctx.plan)
        aug = AugGen(ctx).emit(f"{name}_aug", extra, private, fields)
    prune_unneeded(aug)
    aug.move_before(rev)
    tape_attr = ir.ArrayAttr.get([f.attr() for f in fields])
    aug.attributes[TAPE_ATTR] = tape_attr
    rev.attributes[TAPE_ATTR] = tape_attr
    return Derivative(aug=f"{name}_aug", rev=f"{name}_rev", tape=[f.type for f in fields],
                      per_item=[f.per_item for f in fields] if ctx.kernel else [],
                      uniform_loads=elements, gathers=gathered, count=count and f"{name}_count",
                      dynamic=[f.dynamic for f in fields] if ctx.kernel else [])


def _gather(ctx: ReverseContext, rev: ir.Operation, name: str,
            ndim: int) -> list[tuple[str, int]]:
    """Makes a gather kernel for each array whose adjoint can be gathered (gather.py) and
    drops its atomic adds from `rev`; returns (gather kernel, primal argument) for each."""
    found = gather.gathers(ctx.fn, rev, ctx.sig.activity, ndim)
    for k, g in enumerate(found):
        gather.make_gather_kernel(ctx.diff, rev, g, f"{name}_gather{k}", ndim)
    for g in found:
        for op, _ in g.sites:
            op.erase()
    return [(g.kernel, g.arg) for g in found]


def _rev_twice(gen, ctx: "ReverseContext", name: str, extra: dict[str, ir.Attribute],
               private: bool) -> tuple[ir.Operation, "RevGen"]:
    """Generates the reverse function twice: the first time tells which values it needs from
    the tape, so that the second can recompute from those whatever depends only on them
    (the first, deciding as it goes, may tape sin(a) before learning that a is taped too)."""
    first = gen(ctx).emit(name, extra, private)
    needed = frozenset(ctx.plan.types)
    first.erase()
    del ctx.diff.symbols[name]
    ctx.plan = TapePlan(top=ctx.entry)
    second = gen(ctx, needed)
    return second.emit(name, extra, private), second


def add_into(dst: ir.Value, src: ir.Value) -> None:
    """dst += src, element by element (two shadows of one array)."""
    def body(i: list[ir.Value]) -> None:
        memref.store(arith.addf(memref.load(dst, i), memref.load(src, i)), dst, i)
    for_each_index(dims(src), body)


class Scope:
    """A reversed primal block: where its values are materialized (before `marker`)."""

    def __init__(self, block: ir.Block, parent: "Scope | None", marker: ir.Operation):
        self.block = block
        self.parent = parent
        self.marker = marker
        self.values: dict[Key, ir.Value] = {}
        # Reversed as a parallel loop's body (or nested in one): nothing can be popped here.
        self.parallel = parent is not None and parent.parallel


class _NeedsTape(Exception):
    """A parallel reversal needed a saved value: it is redone sequentially."""


class LoopSlots:
    """How a reversed loop splits the adjoint of each outer value (from outside the loop, used
    in its body) over loop-carried accumulators, "slots": one per site that may add to it, up
    to MAX_SLOTS, dealt in program order (the k-th site gets slot k mod n), summed once after
    the loop. One accumulator would make a chain of dependent float adds of each iteration's
    contributions, which LLVM may not reassociate, and it leaves the body scalar. With a slot
    each, the lanes of an unrolled reduction (frontend/arrays.py `reduce`) stay independent
    in reverse as in the primal, and LLVM vectorises them as it does the primal's. The sum is
    the same up to reassociation across independent partial sums, as the primal's lanes.

    `sites`: in program order, (the op that RevGen.site names while the site is reversed,
    the ops reversed as that site)."""

    def __init__(self, act: ActivityAnalysis, outer: list[ir.Value],
                 sites: list[tuple[ir.Operation, list[ir.Operation]]]):
        used = [(key, {v for op in group if act.relevant(op) for inner in walk(op)
                       for v in inner.operands}) for key, group in sites]
        self.counts: list[int] = []
        self.slot_of: dict[ir.Value, dict[ir.Operation, int]] = {}
        for o in outer:
            keys = [key for key, values in used if o in values]
            n = min(max(len(keys), 1), MAX_SLOTS)
            self.counts.append(n)
            self.slot_of[o] = {key: k % n for k, key in enumerate(keys)}
        self.total = sum(self.counts)

    def split(self, values: list[ir.Value]) -> list[list[ir.Value]]:
        """`values`, one per slot in order, grouped by outer value."""
        it = iter(values)
        return [[next(it) for _ in range(n)] for n in self.counts]


class Frame:
    """The adjoints collected while reversing one region. Those of values from outside it
    (`outer`) collect the region's contributions from zero and are added to what came in
    (`carried`, one value per slot: see LoopSlots) only once, at RevGen._close, so that in a
    loop one iteration's sum does not wait on the previous iteration's."""

    def __init__(self, outer: list[ir.Value], carried: list[list[ir.Value | None]],
                 slot_of: dict[ir.Value, dict[ir.Operation, int]] | None = None):
        self.adj: dict[ir.Value, ir.Value | None] = {}
        self.slots = {o: [None] * len(c) for o, c in zip(outer, carried)}
        self.carried = carried
        self.slot_of = slot_of or {}

    def __contains__(self, v: ir.Value) -> bool:
        return v in self.slots or v in self.adj

    def _slot(self, v: ir.Value, site: ir.Operation | None) -> int:
        return self.slot_of.get(v, {}).get(site, 0)

    def get(self, v: ir.Value, site: ir.Operation | None) -> ir.Value | None:
        if v in self.slots:
            return self.slots[v][self._slot(v, site)]
        return self.adj.get(v)

    def set(self, v: ir.Value, value: ir.Value | None, site: ir.Operation | None) -> None:
        if v in self.slots:
            self.slots[v][self._slot(v, site)] = value
        else:
            self.adj[v] = value


def _marker() -> ir.Operation:
    """A placeholder op at the insertion point: materialized values go right before it."""
    return ir.Operation.create("arith.constant", results=[ir.IndexType.get()],
                               attributes={"value": ir.IntegerAttr.get(ir.IndexType.get(), 0)})


def _placeholder(t: ir.Type) -> ir.Value:
    return ir.Operation.create("builtin.unrealized_conversion_cast", results=[t]).result


def outer_values(act: ActivityAnalysis, region_op: ir.Operation) -> list[ir.Value]:
    """Active values defined outside `region_op` and used inside it: their adjoints are
    threaded through the reversed region."""
    found: list[ir.Value] = []
    for inner in list(walk(region_op))[1:]:
        for v in inner.operands:
            if act.active(v) and not is_ancestor(region_op, parent_op(defining_block(v))) \
                    and v not in found:
                found.append(v)
    return found


def _at(load: ir.Operation, iv: ir.Value) -> bool:
    """Whether `load` reads element [iv] (of a 1-D memref): the iteration's own element."""
    indices = list(load.operands)[1:]
    return len(indices) == 1 and indices[0] == iv


def _cheap(op: ir.Operation) -> bool:
    """An arith op (a few cycles, less than a store and a load of a tape slot per item);
    math ops (exp, tanh, pow...) cost more and are taped instead."""
    return op.name.startswith("arith.") and not op.regions


def _bits(t: ir.Type) -> int:
    """Bits a value of type `t` takes on a tape (index: 64)."""
    if isinstance(t, ir.IndexType):
        return 64
    if isinstance(t, (ir.IntegerType, ir.FloatType)):
        return t.width
    return 1 << 30   # memrefs and the rest: never traded for a narrower result


class RevGen:
    def __init__(self, ctx: ReverseContext, taped: frozenset = frozenset()):
        self.ctx = ctx
        self.taped = taped   # what an earlier generation took from the tape
        self._hand: dict[ir.Value, bool] = {}
        self.act = ctx.act
        self.scope: Scope | None = None
        self.adj: list[Frame] = [Frame([], [])]
        self.site: ir.Operation | None = None   # the op being reversed in the innermost block
        self.markers: list[ir.Operation] = []
        self.placeholders: dict = {}

    # -- function ----------------------------------------------------------------------------
    def emit(self, name: str, extra: dict[str, ir.Attribute], private: bool) -> ir.Operation:
        ctx = self.ctx
        ftype = func_type(ctx.fn)
        inputs = aug_inputs(ftype, ctx.sig) + dret_types(ftype, ctx.sig)
        results = [] if ctx.kernel else adjoint_types(ftype, ctx.sig)
        rev = ctx.diff.new_function(name, inputs, results, ctx.fn, extra, private)
        self.rev = rev
        self.entry = rev.regions[0].blocks[0]
        params = iter(self.entry.arguments)
        with ir.InsertionPoint(self.entry), ctx.fn.location:
            top = self.enter(ctx.entry)
            self.shadow_params: dict[ir.Value, ir.Value] = {}
            for arg, act in zip(ctx.entry.arguments, ctx.sig.activity):
                top.values[arg] = next(params)
                if act in SHADOWED:
                    self.shadow_params[arg] = next(params)
            self.prologue(top)
            ret = terminator(ctx.entry)
            if ctx.sig.ret_activity == Activity.ACTIVE:
                for v in ret.operands:
                    if is_float(v.type):
                        self.add_adj(v, next(params))
            self.reverse_block(ctx.entry)
            self.epilogue([or_zero(self.get_adj(a), a.type)
                           for a, act in zip(ctx.entry.arguments, ctx.sig.activity)
                           if act == Activity.ACTIVE])
        self.finish()
        return rev

    def prologue(self, top: Scope) -> None:
        self.stacks = StackReader(ir.InsertionPoint(top.marker), self.param)

    def epilogue(self, adjoints: list[ir.Value]) -> None:
        func.ReturnOp(adjoints)

    def tape_params(self) -> list[tuple]:
        """(name, type) of the tape parameters, in order, once the plan is complete."""
        fields = top_fields(self.ctx.plan) + stack_fields(self.ctx.plan)
        return [(n, f.type) for n, f in zip(tape_param_names(self.ctx.plan), fields)]

    def param(self, name, t: ir.Type) -> ir.Value:
        """A tape parameter, by name; real block arguments replace these in finish()."""
        if name not in self.placeholders:
            with ir.InsertionPoint.at_block_begin(self.entry):
                self.placeholders[name] = _placeholder(t)
        return self.placeholders[name]

    def finish(self) -> None:
        loc = self.ctx.fn.location
        for name, t in self.tape_params():
            arg = self.entry.add_argument(t, loc)
            if name in self.placeholders:
                ph = self.placeholders.pop(name)
                ph.replace_all_uses_with(arg)
                ph.owner.operation.erase()
        assert not self.placeholders, "tape values asked for but not planned"
        ftype = func_type(self.rev)
        self.ctx.diff.set_signature(self.rev, [a.type for a in self.entry.arguments],
                                    list(ftype.results))
        for m in self.markers:
            m.erase()

    # -- scopes and primal values ------------------------------------------------------------
    def enter(self, block: ir.Block) -> Scope:
        """Opens the reversed `block` at the insertion point."""
        marker = _marker()
        self.markers.append(marker)
        self.scope = Scope(block, self.scope, marker)
        return self.scope

    def leave(self) -> None:
        self.scope = self.scope.parent

    def scope_of(self, block: ir.Block) -> Scope:
        s = self.scope
        while s is not None and s.block != block:
            s = s.parent
        if s is None:
            raise AssertionError("a primal value is used outside the block defining it")
        return s

    def primal(self, v: ir.Value) -> ir.Value:
        return self.materialize(v)

    def materialize(self, key: Key) -> ir.Value:
        scope = self.scope_of(key_block(key))
        if key in scope.values:
            return scope.values[key]
        loc = self._location(key)
        with ir.InsertionPoint(scope.marker), loc:
            if isinstance(key, tuple) and key[0] == "shadow":
                value = self._new_shadow(key[1], scope)
            elif isinstance(key, ir.Value) and self.ctx.joined(key) and \
                    self.ctx.sites(key) is not None:
                value = self._select(key, self.primal)
            elif isinstance(key, ir.OpResult) and self._recompute(key.owner.operation):
                op = key.owner.operation
                vmap = {v: self.materialize(v) for v in inputs(op)}
                value = clone_op(op, vmap).results[key.result_number]
            else:
                value = self._from_tape(key, scope)
        scope.values[key] = value
        return value

    def _recompute(self, op: ir.Operation) -> bool:
        """Recompute `op` rather than save it: it is pure, and what it reads is free, or
        already at hand, or taped anyway (so saving it too would cost a slot for nothing).

        Or it is one arith op of a single value not at hand (the root), no wider than its
        result, and of free values (constants, arguments, ids): the tape then keeps the root
        instead, never more slots nor bytes, and fewer where several values derive from one
        root (`0.05 * c` and `1 - c` of reaction-diffusion: c once instead of both).
        Recomputing costs that one op (no chain of other recomputations: `q - dt * sin(p)`
        stays taped). docs/architecture.md gives the rule."""
        if self.ctx.recomputable(op):
            return True
        if not self.ctx.pure(op):
            return False
        ins = inputs(op)
        missing = list(dict.fromkeys(v for v in ins if not self._at_hand(v)))   # c * c: c
        if not missing:
            return True
        return len(missing) == 1 and _cheap(op) and \
            _bits(missing[0].type) <= _bits(op.results[0].type) and \
            all(v == missing[0] or self.ctx.cheap(v) for v in ins)

    def _at_hand(self, v: ir.Value) -> bool:
        """Whether the reverse pass has `v` without a tape slot of its own: free, taped
        anyway, already materialized, pure of such values, or a function's top-level joined
        array with sites (the loop's result `u` of `u, v = v, u`: one index on the tape says
        which array it is, so `sum(u * u)` after the loop reloads u instead of taping its
        elements; not in a kernel, where that index would be a slot per item)."""
        if v not in self._hand:
            self._hand[v] = (
                self.ctx.cheap(v) or v in self.taped or v in self.scope_of(key_block(v)).values
                or (not self.ctx.kernel and key_block(v) == self.ctx.entry
                    and self.ctx.joined(v) and self.ctx.sites(v) is not None)
                or (isinstance(v, ir.OpResult) and self.ctx.pure(v.owner.operation) and all(
                    self._at_hand(u) for u in inputs(v.owner.operation))))
        return self._hand[v]

    def _location(self, key: Key) -> ir.Location:
        if isinstance(key, ir.OpResult):
            return key.owner.operation.location
        if isinstance(key, ir.BlockArgument):
            return parent_op(key.owner).location
        owner = key[1]
        return owner.location if isinstance(owner, ir.Operation) else self._location(owner)

    def key_type(self, key: Key) -> ir.Type:
        if isinstance(key, ir.Value):
            return key.type
        if key[0] in ("count", "site", "dim"):
            return ir.IndexType.get()
        return self.tape_types(key[1])[key[2]]

    def tape_types(self, op: ir.Operation) -> list[ir.Type]:
        if op.name == "func.call":
            return self.ctx.call_info(op)[1].tape
        return launch_signature(self.ctx, op)[1].tape

    def _from_tape(self, key: Key, scope: Scope) -> ir.Value:
        if scope.parallel:
            raise _NeedsTape()
        t = self.key_type(key)
        self.ctx.plan.add(scope.block, key, t)
        return self.tape_read(key, t, scope)

    def tape_read(self, key: Key, t: ir.Type, scope: Scope) -> ir.Value:
        if scope.block == self.ctx.entry:
            return self.param(("field", key), t)
        if is_memref(t):
            return self.stacks.pop_array(t)
        return self.stacks.pop(t)

    # -- shadows -----------------------------------------------------------------------------
    def shadow(self, m: ir.Value) -> ir.Value:
        if m in self.shadow_params:
            return self.shadow_params[m]
        return self.materialize(("shadow", m))

    def _new_shadow(self, m: ir.Value, scope: Scope) -> ir.Value:
        """A zeroed shadow for an array the function allocates (or a const argument that
        shares an alias class with a shadowed array)."""
        if isinstance(m, ir.BlockArgument) and parent_op(m.owner) == self.ctx.fn:
            return zeroed_like(self.primal(m))
        if isinstance(m, ir.OpResult) and m.owner.operation.name in ("memref.alloc",
                                                                      "memref.alloca"):
            # A kernel's local array (an alloca at its entry) gets a local shadow.
            alloc = m.owner.operation
            sizes = iter(self.materialize(v) for v in alloc.operands)
            t = memref_type(m.type)
            shape = [next(sizes) if n == ir.ShapedType.get_dynamic_size() else index(n)
                     for n in t.shape]
            make = memref.alloca if alloc.name == "memref.alloca" else memref.alloc
            new = make(t, [s for s, n in zip(shape, t.shape)
                           if n == ir.ShapedType.get_dynamic_size()], [])
            for_each_index(shape, lambda i: memref.store(zero(t.element_type), new, i))
            return new
        if self.ctx.joined(m):
            if self.ctx.sites(m) is not None:
                return self._select(m, self.shadow)
            # Threaded: a fresh shadow, which the reversed control flow that made `m` takes.
            t = memref_type(m.type)
            sizes = [self.materialize(("dim", m, d)) for d in range(t.rank)]
            return zeroed_like(m, sizes)
        if isinstance(m, ir.OpResult) and m.owner.operation.name in VIEW_OPS:
            view = m.owner.operation
            return view_of(view, self.shadow(view.operands[0]),
                           {v: self.materialize(v) for v in list(view.operands)[1:]})
        raise AdjError(m.owner.operation, "autodiff: reverse mode cannot make a shadow for an "
                                          "array that a call returns (such calls are inlined "
                                          "unless the callee is recursive, has custom rules "
                                          "or has several blocks)")

    def _select(self, v: ir.Value, of) -> ir.Value:
        """`of(site)` for the site (argument or top-level allocation) that the loop-carried or
        selected array `v` is this time: the augmented pass saved which."""
        sites = self.ctx.sites(v)
        value = of(sites[0])
        if len(sites) > 1:
            which = self.materialize(("site", v))
            for k, site in enumerate(sites[1:], start=1):
                is_k = arith.cmpi(arith.CmpIPredicate.eq, which, index(k))
                value = arith.select(is_k, of(site), value)
        return value

    # -- adjoints ----------------------------------------------------------------------------
    def outer(self, region_op: ir.Operation) -> list:
        """What a reversed region threads adjoints of (outer_values; a kernel adds the
        elements its items all read, kernel_tape.KernelRevGen)."""
        return outer_values(self.act, region_op)

    def get_adj(self, v: ir.Value) -> ir.Value | None:
        for frame in reversed(self.adj):
            if v in frame:
                return frame.get(v, self.site)
        return None

    def add_adj(self, v: ir.Value, contribution: ir.Value | None) -> None:
        if contribution is None or not self.act.active(v):
            return
        self.adj[-1].set(v, add(self.get_adj(v), contribution), self.site)

    def accumulate(self, shadow: ir.Value, indices: list[ir.Value], d: ir.Value) -> None:
        """shadow[indices] += d (atomically in a kernel: work items may share an element)."""
        if self.ctx.kernel:
            memref.AtomicRMWOp(ir.IntegerAttr.get(ir.IntegerType.get_signless(64), ATOMIC_ADDF),
                               d, shadow, indices)
        else:
            memref.store(arith.addf(memref.load(shadow, indices), d), shadow, indices)

    # -- traversal ---------------------------------------------------------------------------
    def reverse_block(self, block: ir.Block) -> None:
        outside = self.site
        for op in reversed(ops(block)[:-1]):
            if self.act.relevant(op):
                self.site = op
                with op.location:
                    self.reverse_op(op)
        self.site = outside

    def reverse_op(self, op: ir.Operation) -> None:
        handler = getattr(self, "rev_" + op.name.replace(".", "_"), None)
        if handler is not None:
            handler(op)
        elif op.name in RULES or op.name in CASTS:
            self.rev_arith(op)
        elif not op.regions and (op.name in ZERO_DERIVATIVE or
                                 not any(self.act.active(r) for r in op.results)):
            return
        else:
            raise AdjError(op, f"autodiff: no derivative rule for {op.name}")

    def rev_arith(self, op: ir.Operation) -> None:
        if not op.results or not self.act.active(op.results[0]):
            return
        result = op.results[0]
        d = self.get_adj(result)
        if d is None:
            return
        if op.name in CASTS:
            self.add_adj(op.operands[0], CASTS[op.name][1](d, op.operands[0].type))
            return
        primals = _LazyPrimals(self, list(op.operands))
        for v, rule in zip(op.operands, RULES[op.name]):
            if rule is not None and self.act.active(v):
                self.add_adj(v, rule(primals, lambda: self.primal(result), d))

    def rev_arith_select(self, op: ir.Operation) -> None:
        if is_memref(op.results[0].type):
            if self.act.shadowed(op.results[0]):
                raise AdjError(op, "autodiff: reverse mode of a select between differentiated "
                                   "arrays is not supported")
            return
        self.rev_arith(op)

    # -- memory ------------------------------------------------------------------------------
    def _indices(self, op: ir.Operation, first: int) -> list[ir.Value]:
        return [self.primal(i) for i in list(op.operands)[first:]]

    def rev_memref_load(self, op: ir.Operation) -> None:
        r = op.results[0]
        d = self.get_adj(r) if self.act.active(r) else None
        if d is not None:
            self.accumulate(self.shadow(op.operands[0]), self._indices(op, 1), d)

    def rev_memref_store(self, op: ir.Operation) -> None:
        m, v = op.operands[1], op.operands[0]
        if not self.act.shadowed(m):
            return
        s, idx = self.shadow(m), self._indices(op, 2)
        # The stored-over element's old value no longer reaches anything: its adjoint is 0.
        d = memref.load(s, idx) if self.act.active(v) else None
        memref.store(zero(memref_type(s.type).element_type), s, idx)
        self.add_adj(v, d)

    def rev_memref_atomic_rmw(self, op: ir.Operation) -> None:
        m, v, r = op.operands[1], op.operands[0], op.results[0]
        if not self.act.shadowed(m):
            return
        if ir.IntegerAttr(op.attributes["kind"]).value != ATOMIC_ADDF:
            raise AdjError(op, "autodiff: of the atomics on float arrays only addf is "
                               "differentiable")
        s, idx = self.shadow(m), self._indices(op, 2)
        # m[i] = old + v: v and old both get m[i]'s adjoint; old's also flows to the result.
        if self.act.active(v):
            self.add_adj(v, memref.load(s, idx))
        d = self.get_adj(r) if self.act.active(r) else None
        if d is not None:
            self.accumulate(s, idx, d)

    def rev_memref_copy(self, op: ir.Operation) -> None:
        src, dst = op.operands[0], op.operands[1]
        if not self.act.shadowed(dst):
            return
        ddst = self.shadow(dst)
        dsrc = self.shadow(src) if self.act.shadowed(src) else None
        elem = memref_type(ddst.type).element_type

        def body(i: list[ir.Value]) -> None:
            a = memref.load(ddst, i)
            memref.store(zero(elem), ddst, i)
            if dsrc is not None:
                memref.store(arith.addf(memref.load(dsrc, i), a), dsrc, i)
        for_each_index(dims(ddst), body)

    # -- calls -------------------------------------------------------------------------------
    def rev_func_call(self, op: ir.Operation) -> None:
        sig, d = self.ctx.call_info(op)
        args: list[ir.Value] = []
        for v, a in zip(op.operands, sig.activity):
            args.append(self.primal(v))
            if a in SHADOWED:
                args.append(self.shadow(v))
        if sig.ret_activity == Activity.ACTIVE:
            args += [or_zero(self.get_adj(r) if self.act.active(r) else None, r.type)
                     for r in op.results if is_float(r.type)]
        args += [self.materialize(("tape", op, k)) for k in range(len(d.tape))]
        ftype = func_type(self.ctx.diff.symbols[sig.fn])
        call = func.CallOp(adjoint_types(ftype, sig), ir.FlatSymbolRefAttr.get(d.rev), args)
        grads = iter(call.results)
        for v, a in zip(op.operands, sig.activity):
            if a == Activity.ACTIVE:
                self.add_adj(v, next(grads))

    def rev_adj_launch(self, op: ir.Operation) -> None:
        reverse_launch(self, op)

    # -- control flow ------------------------------------------------------------------------
    def _open(self, outer: list[ir.Value], carried: list[list[ir.Value | None]],
              slots: LoopSlots | None = None) -> None:
        """A new Frame for a reversed region; `carried[k]`: outer[k]'s adjoint coming in, as
        one value, or in a loop one per slot."""
        self.adj.append(Frame(outer, carried, slots.slot_of if slots else None))

    def _close(self, outer: list[ir.Value]) -> list[ir.Value | None]:
        """The adjoints of `outer` going out of the region: each one's slots, in order."""
        frame = self.adj.pop()
        # Reassociable: in a reversed loop this is the running sum of an outer value's
        # adjoint (a slot), and LLVM vectorises a loop over it only if it may reorder it.
        return [add(c, v, reassoc=True) for o, cs in zip(outer, frame.carried)
                for c, v in zip(cs, frame.slots[o])]

    def _set_outer(self, outer: list[ir.Value], values: list[ir.Value | None]) -> None:
        for o, v in zip(outer, values):
            self.adj[-1].set(o, v, self.site)

    def _carry_in(self, outer: list[ir.Value], slots: LoopSlots) -> list[ir.Value]:
        """The slots a reversed loop starts from. A single one starts from the adjoint so
        far; several start from zero, alike, so that LLVM sees them as one vector."""
        return [or_zero(self.get_adj(o) if n == 1 else None, o.type)
                for o, n in zip(outer, slots.counts) for _ in range(n)]

    def _sum_slots(self, outer: list[ir.Value], slots: LoopSlots,
                   results: list[ir.Value]) -> None:
        """After a reversed loop: each outer value's adjoint, from its slots. Several are
        added to the adjoint so far one by one, that first: were the sum of the slots made
        first, LLVM would fold it into a constant for a loop that does not run (the slots'
        zeros), then pair the sums of different outer values, and their slots, in 2-wide
        vectors that leave the body's lanes scalar."""
        for o, values in zip(outer, slots.split(results)):
            total = self.get_adj(o) if len(values) > 1 else None
            for v in values:
                total = add(total, v)
            self.adj[-1].set(o, total, self.site)

    def rev_scf_if(self, op: ir.Operation) -> None:
        outer = self.outer(op)
        results = [r for r in op.results if self.act.active(r)]
        seeds = {r: self.get_adj(r) for r in results}
        ms = self._threaded_positions(list(op.results))
        shadows = [self.shadow(op.results[k]) for k in ms]
        cond = self.primal(op.operands[0])
        new = scf.IfOp(cond, [o.type for o in outer], has_else=True)
        for region, block in ((op.regions[0], new.then_block), (op.regions[1], new.else_block)):
            with ir.InsertionPoint(block):
                self._open(outer, [[self.get_adj(o)] for o in outer])
                if len(region.blocks):
                    old = region.blocks[0]
                    scope = self.enter(old)
                    yields = list(terminator(old).operands)
                    for r in results:
                        self.add_adj(yields[r.result_number], seeds[r])
                    self._thread_shadows(scope, [yields[k] for k in ms], shadows)
                    self.reverse_block(old)
                    self.leave()
                out = self._close(outer)
                scf.YieldOp([or_zero(v, o.type) for v, o in zip(out, outer)])
        self._set_outer(outer, list(new.results))

    def rev_scf_for(self, op: ir.Operation) -> None:
        body = op.regions[0].blocks[0]
        args, inits = list(body.arguments)[1:], list(op.operands)[3:]
        yields = list(terminator(body).operands)
        ks = [k for k in range(len(args)) if self.act.active(args[k])
              or self.act.active(op.results[k])]
        ms = self._threaded_positions(args)
        outer = self.outer(op)
        # The body's yield is reversed by this handler, before the body.
        slots = LoopSlots(self.act, outer, [(inner, [inner]) for inner in ops(body)[:-1]] +
                          [(op, [terminator(body)])])
        m = slots.total
        lb, ub, step = (self.primal(v) for v in list(op.operands)[:3])
        n = trip_count(lb, ub, step)
        carried = [or_zero(self.get_adj(op.results[k]), args[k].type) for k in ks] + \
                  self._carry_in(outer, slots) + [self.shadow(op.results[k]) for k in ms]
        zero_i, one_i = arith.constant(lb.type, 0), arith.constant(lb.type, 1)
        loop = scf.ForOp(zero_i, n, one_i, carried)
        with ir.InsertionPoint(loop.body):
            scope = self.enter(body)
            with ir.InsertionPoint(scope.marker):
                j = loop.induction_variable
                scope.values[body.arguments[0]] = arith.addi(
                    lb, arith.muli(arith.subi(arith.subi(n, one_i), j), step))
            c = list(loop.body.arguments)[1:]
            self._open(outer, slots.split(c[len(ks):len(ks) + m]), slots)
            for k, ck in zip(ks, c):
                self.add_adj(yields[k], ck)
            self._thread_shadows(scope, [yields[k] for k in ms], c[len(ks) + m:])
            self.reverse_block(body)
            out_shadows = [self.shadow(args[k]) for k in ms]
            self.leave()
            out_args = [or_zero(self.get_adj(args[k]), args[k].type) for k in ks]
            out_outer = self._close(outer)
            scf.YieldOp(out_args + [or_zero(v, c.type) for v, c in
                                    zip(out_outer, c[len(ks):len(ks) + m])] + out_shadows)
        res = list(loop.results)
        self._sum_slots(outer, slots, res[len(ks):len(ks) + m])
        for k, r in zip(ks, res):
            self.add_adj(inits[k], r)
        for k, r in zip(ms, res[len(ks) + m:]):
            add_into(self.shadow(inits[k]), r)

    def _threaded_positions(self, values: list[ir.Value]) -> list[int]:
        """Positions of shadowed arrays that control flow joins without known sites."""
        return [k for k, v in enumerate(values) if is_memref(v.type) and self.act.shadowed(v)
                and self.ctx.sites(v) is None]

    def _thread_shadows(self, scope: Scope, yielded: list[ir.Value],
                        shadows: list[ir.Value]) -> None:
        """In a reversed region, the shadows of the arrays it yields are the ones threaded in:
        bound to values of the region, added into those of values from outside it."""
        for v, s in zip(yielded, shadows):
            key = ("shadow", v)
            if key_block(key) != scope.block:
                add_into(self.shadow(v), s)
            elif key in scope.values:
                add_into(scope.values[key], s)
            else:
                scope.values[key] = s

    def rev_scf_parallel(self, op: ir.Operation) -> None:
        if op.results:
            raise AdjError(op, "autodiff: scf.parallel with reductions is not supported")
        if self._parallel_safe(op):
            state = (self.scope, len(self.adj), len(self.markers), self.site)
            try:
                self._reverse_parallel(op)
                return
            except _NeedsTape:
                self.scope, self.markers = state[0], self.markers[:state[2]]
                self.site = state[3]
                del self.adj[state[1]:]
                for attempt in reversed(self._attempt):
                    attempt.erase()
                self.ctx.plan.drop_inside(op)
        self._reverse_sequential(op)

    def _parallel_safe(self, op: ir.Operation) -> bool:
        """Whether the reversed iterations may run in parallel: one-dimensional, and adding
        into no shadow that another iteration may also add into (loads, atomics, copies,
        calls and launches might; a store's element belongs to its iteration, and so does a
        load at the iteration's own index, as in the frontend's element-wise loops).
        (Marking the frontend's reduction chunks, which read disjoint ranges, parallel too
        made gradients slower: 1.3 -> 3 ms on sum((a*x+b-y)**2), 4M f32, whose sequential
        reversal LLVM vectorises; measured again once reversed loops vectorised with Active
        scalars: 2.7 -> 4.1 ms. The sequential reversal runs from the arrays' ends, which the
        augmented pass touched last and the cache still holds; the parallel one starts each
        thread's share from its beginning, evicted by then.)"""
        args = list(op.regions[0].blocks[0].arguments)
        if len(args) != 1:
            return False
        for inner in walk(op):
            if inner.name == "memref.load" and _at(inner, args[0]):
                continue
            if inner.name in ("memref.load", "memref.atomic_rmw", "memref.copy", "func.call",
                              "adj.launch") and self.act.relevant(inner):
                return False
        return True

    def _reverse_parallel(self, op: ir.Operation) -> None:
        """scf.parallel again; each iteration's adjoints of outer values go to a buffer slot,
        summed afterwards. Values the iterations need must be recomputable (_NeedsTape)."""
        body = op.regions[0].blocks[0]
        lb, ub, step = (self.primal(v) for v in op.operands)
        total = trip_count(lb, ub, step)
        outer = self.outer(op)
        # Per-iteration adjoints of outer floats in their accumulator type (f64 for f32),
        # added pairwise afterwards as adjit.sum adds (a serial f32 sum over the iterations
        # lost precision as a naive running sum does).
        acc = [accumulator_type(o.type) if is_float(o.type) else o.type for o in outer]
        partials = [memref.alloc(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], t),
                                 [total], []) for t in acc]
        loop = scf.ParallelOp([], [lb], [ub], [step], [])
        self._attempt = [p.owner.operation for p in partials] + [loop.operation]
        block = loop.regions[0].blocks.append(ir.IndexType.get())
        with ir.InsertionPoint(block):
            scope = self.enter(body)
            scope.parallel = True
            scope.values[body.arguments[0]] = block.arguments[0]
            self._open(outer, [[None] for _ in outer])
            self.reverse_block(body)
            self.leave()
            out = self._close(outer)
            slot = arith.divui(arith.subi(block.arguments[0], lb), step)
            for v, o, buf, t in zip(out, outer, partials, acc):
                value = or_zero(v, o.type)
                memref.store(value if t == o.type else arith.extf(t, value), buf, [slot])
            scf.ReduceOp([], 0)
        for o, buf, t in zip(outer, partials, acc):
            value = pairwise_sum(buf, total, t)
            self.add_adj(o, value if t == o.type else arith.truncf(o.type, value))

    def _reverse_sequential(self, op: ir.Operation) -> None:
        """Independent iterations: reversed as one sequential loop over the linearized
        iteration space, backwards, since the augmented pass may have run it forwards."""
        body = op.regions[0].blocks[0]
        dims_ = len(body.arguments)
        bounds = [self.primal(v) for v in op.operands]
        counts = [trip_count(bounds[d], bounds[dims_ + d], bounds[2 * dims_ + d])
                  for d in range(dims_)]
        total = index(1)
        for c in counts:
            total = arith.muli(total, c)
        outer = self.outer(op)
        slots = LoopSlots(self.act, outer, [(inner, [inner]) for inner in ops(body)[:-1]])
        loop = scf.ForOp(index(0), total, index(1), self._carry_in(outer, slots))
        with ir.InsertionPoint(loop.body):
            scope = self.enter(body)
            with ir.InsertionPoint(scope.marker):
                last = arith.subi(arith.subi(total, index(1)), loop.induction_variable)
                for d, iv in zip(range(dims_), unravel(last, counts)):
                    scope.values[body.arguments[d]] = arith.addi(
                        bounds[d], arith.muli(iv, bounds[2 * dims_ + d]))
            self._open(outer, slots.split(list(loop.inner_iter_args)), slots)
            self.reverse_block(body)
            self.leave()
            out = self._close(outer)
            scf.YieldOp([or_zero(v, c.type) for v, c in zip(out, loop.inner_iter_args)])
        self._sum_slots(outer, slots, list(loop.results))

    def rev_scf_while(self, op: ir.Operation) -> None:
        before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
        b_args, a_args = list(before.arguments), list(after.arguments)
        if self._threaded_positions(b_args + a_args):
            raise AdjError(op, "autodiff: reverse mode of an scf.while that carries arrays made "
                               "inside it is not supported")
        again = list(terminator(after).operands)
        kb = [k for k, a in enumerate(b_args) if self.act.active(a)]
        ka = [j for j, a in enumerate(a_args) if self.act.active(a)
              or self.act.active(op.results[j])]
        outer = self.outer(op)
        # This handler reverses the before region and the after region's yield, as one site.
        slots = LoopSlots(self.act, outer, [(op, ops(before) + [terminator(after)])] +
                          [(inner, [inner]) for inner in ops(after)[:-1]])
        count = self.materialize(("count", op))
        # The last run of the condition region, the one that exits.
        adj_b = self._reverse_before(op, outer, ka, [self.get_adj(op.results[j]) for j in ka])
        carried = [or_zero(d, b_args[k].type) for k, d in zip(kb, adj_b)] + \
                  self._carry_in(outer, slots)
        loop = scf.ForOp(index(0), count, index(1), carried)
        with ir.InsertionPoint(loop.body):
            c = list(loop.body.arguments)[1:]
            self._open(outer, slots.split(c[len(kb):]), slots)
            self.enter(after)
            for k, ck in zip(kb, c):
                self.add_adj(again[k], ck)
            self.reverse_block(after)
            self.leave()
            adj_a = [self.get_adj(a_args[j]) for j in ka]
            adj_b = self._reverse_before(op, outer, ka, adj_a)
            out_outer = self._close(outer)
            scf.YieldOp([or_zero(d, b_args[k].type) for k, d in zip(kb, adj_b)] +
                        [or_zero(v, s.type) for v, s in zip(out_outer, c[len(kb):])])
        res = list(loop.results)
        self._sum_slots(outer, slots, res[len(kb):])
        inits = list(op.operands)
        for k, r in zip(kb, res):
            self.add_adj(inits[k], r)

    def _reverse_before(self, op: ir.Operation, outer: list[ir.Value], ka: list[int],
                        seeds: list[ir.Value | None]) -> list[ir.Value | None]:
        """Reverses one run of a while's condition region, inline; returns the adjoints of
        its arguments (the active ones)."""
        before = op.regions[0].blocks[0]
        forwarded = list(terminator(before).operands)[1:]
        self._open(outer, [[self.get_adj(o)] for o in outer])
        self.enter(before)
        for j, d in zip(ka, seeds):
            self.add_adj(forwarded[j], d)
        self.reverse_block(before)
        self.leave()
        adj_b = [self.get_adj(a) for a in before.arguments if self.act.active(a)]
        self._set_outer(outer, self._close(outer))
        return adj_b


class _LazyPrimals:
    """Primal operands for a rule, materialized only when the rule reads them."""

    def __init__(self, gen: RevGen, operands: list[ir.Value]):
        self.gen = gen
        self.operands = operands

    def __getitem__(self, i: int) -> ir.Value:
        return self.gen.primal(self.operands[i])
