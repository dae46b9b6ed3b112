"""Reverse mode, split: an augmented forward function that records a tape, and a reverse
function that consumes it.

The reverse function is generated first (here; the augmented one in augment.py), by walking
the primal body backwards and accumulating adjoints (dict primal value -> adjoint SSA value;
None is an exact zero; adjoints.py's frames). When a rule needs a primal value,
`RevGen.primal` materializes it at the start of the reversed block where it was defined:
recomputed there or taken from the tape (tape.py), which records the request, as
recompute.py's policy decides. The augmented function is then the primal body plus the saves
the finished plan asks for, pruned (prune.py).

RevGen keeps the traversal, the scopes where primal values are materialized and the adjoint
bookkeeping; each op's reverse rule is rules/scalar.py's (scalar ops) or rules/lookup.py's
(memory ops, calls, control flow, launches). A kernel's reverse mode builds on these generators
(kernel_tape.py); the driver picks one or the other.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import arith, func, memref

from ....core.activity import Activity, SHADOWED
from ....dialects.adj import AdjError
from ...ir_util import terminator
from ...ir_util import (ATOMIC_ADDF, add, clone_op, func_type, index, is_float, is_memref, ops,
                        or_zero, parent_op, zeroed_like)
from ...op_facts import facts
from ..analysis.recompute import Policy, inputs
from ..protocols import Rule
from ..rules.checkpoint import tape_types as checkpoint_tape_types
from ..rules.launch_ops import tape_key_types
from ..rules.lookup import rule as op_rule
from ..rules.memory_ops import alloc_shadow, view_shadow
from ..rules.scalar import CASTS, RULES, ZERO_DERIVATIVE
from ..signature import Derivative, Signature, TapeField, adjoint_types, aug_inputs, dret_types
from .adjoints import Frame, NeedsTape, Scope, marker, outer_values, placeholder
from .augment import AugGen
from .context import ReverseContext
from .prune import prune_unneeded
from .tape import Key, StackReader, TapePlan, key_block, stack_fields, tape_param_names, top_fields

if TYPE_CHECKING:
    from ..protocols import Host

TAPE_ATTR = "adj.tape"


def generate_reverse(diff: "Host", fn: ir.Operation, sig: Signature, name: str,
                     extra: dict[str, ir.Attribute]) -> Derivative:
    """Generates `{name}_aug` and `{name}_rev` for a function that is not a kernel
    (kernel_tape.generate_kernel_reverse does kernels); returns them as a Derivative."""
    ctx = ReverseContext(diff, fn, sig)
    private = name == sig.mangled()
    rev, _ = rev_twice(RevGen, ctx, f"{name}_rev", extra, private)
    fields = top_fields(ctx.plan) + stack_fields(ctx.plan)
    aug = AugGen(ctx).emit(f"{name}_aug", extra, private, fields)
    finish_pair(aug, rev, fields)
    return Derivative(aug=f"{name}_aug", rev=f"{name}_rev", tape=[f.type for f in fields])


def finish_pair(aug: ir.Operation, rev: ir.Operation, fields: list[TapeField]) -> None:
    """Prunes the augmented function, puts it before the reverse one and describes their
    tape on both (`adj.tape`)."""
    prune_unneeded(aug)
    aug.move_before(rev)
    tape_attr = ir.ArrayAttr.get([f.attr() for f in fields])
    aug.attributes[TAPE_ATTR] = tape_attr
    rev.attributes[TAPE_ATTR] = tape_attr


def rev_twice(gen, ctx: ReverseContext, name: str, extra: dict[str, ir.Attribute],
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


class RevGen:
    """The reverse generator (protocols.ReverseGenerator): walks the primal body backwards
    (reverse_block), materializes the primal values the rules ask for (primal, materialize,
    shadow), keeps the adjoints in a stack of frames, one per reversed region (get_adj,
    add_adj, set_adj, open_frame, close_frame), and collects the tape parameters it reads
    (param, finish). The ops' rules are rules/scalar.py's and rules/lookup.py's; a subclass may
    put its own first (OWN_RULES: kernel_tape.KernelRevGen)."""

    # Rules of this generator that take the place of rules/lookup.py's, by op name.
    OWN_RULES: dict[str, Rule] = {}

    def __init__(self, ctx: ReverseContext, taped: frozenset = frozenset()):
        self.ctx = ctx
        # `taped`: what an earlier generation took from the tape (rev_twice).
        self.policy = Policy(ctx, taped, lambda v: v in self.scope_of(key_block(v)).values)
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
        params_in = aug_inputs(ftype, ctx.sig) + dret_types(ftype, ctx.sig)
        results = [] if ctx.kernel else adjoint_types(ftype, ctx.sig)
        rev = ctx.diff.new_function(name, params_in, results, ctx.fn, extra, private)
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
                self.placeholders[name] = placeholder(t)
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
        at = marker()
        self.markers.append(at)
        self.scope = Scope(block, self.scope, at)
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
        """The value of `key` in the reverse function, made at the start of the reversed block
        that defines it the first time it is asked for: a shadow, the array a joined array
        is, a recomputation or a tape read (recompute.py decides between the last two)."""
        scope = self.scope_of(key_block(key))
        if key in scope.values:
            return scope.values[key]
        loc = self._location(key)
        with ir.InsertionPoint(scope.marker), loc:
            if isinstance(key, tuple) and key[0] == "shadow":
                value = self._new_shadow(key[1], scope)
            elif (isinstance(key, ir.Value) and self.ctx.joined(key) and
                    self.ctx.sites(key) is not None):
                value = self._select(key, self.primal)
            elif isinstance(key, ir.OpResult) and self.policy.recompute(key.owner.operation):
                op = key.owner.operation
                vmap = {v: self.materialize(v) for v in inputs(op)}
                value = clone_op(op, vmap).results[key.result_number]
            else:
                value = self._from_tape(key, scope)
        scope.values[key] = value
        return value

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
        if op.name in ("scf.for", "scf.while"):   # a checkpointed loop's initial state
            return checkpoint_tape_types(self.ctx, op)
        return tape_key_types(self.ctx, op)   # an offset for a tape kept in place

    def _from_tape(self, key: Key, scope: Scope) -> ir.Value:
        if scope.parallel:
            raise NeedsTape()
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
            return alloc_shadow(self, m.owner.operation)
        if self.ctx.joined(m):
            if self.ctx.sites(m) is not None:
                return self._select(m, self.shadow)
            # Threaded: a fresh shadow, which the reversed control flow that made `m` takes.
            sizes = [self.materialize(("dim", m, d)) for d in range(ir.MemRefType(m.type).rank)]
            return zeroed_like(m, sizes)
        if isinstance(m, ir.OpResult) and facts(m.owner.operation.name).view:
            return view_shadow(self, m.owner.operation)
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

    def set_adj(self, v: ir.Value, value: ir.Value | None) -> None:
        """Sets `v`'s adjoint in the innermost frame (at the slot of the op being reversed)."""
        self.adj[-1].set(v, value, self.site)

    def accumulate(self, shadow: ir.Value, indices: list[ir.Value],
                   d: ir.Value) -> ir.Operation | None:
        """shadow[indices] += d (atomically in a kernel: work items may share an element);
        outside kernels, the store it makes."""
        if self.ctx.kernel:
            memref.AtomicRMWOp(ir.IntegerAttr.get(ir.IntegerType.get_signless(64), ATOMIC_ADDF),
                               d, shadow, indices)
            return None
        return memref.store(arith.addf(memref.load(shadow, indices), d), shadow,
                            indices).operation

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
        handler = op_rule(op.name, "reverse", self.OWN_RULES)
        if handler is not None:
            handler(self, op)
        elif op.name in RULES or op.name in CASTS:
            self.arith(op)
        elif not op.regions and (op.name in ZERO_DERIVATIVE or
                                 not any(self.act.active(r) for r in op.results)):
            return
        else:
            raise AdjError(op, f"autodiff: no derivative rule for {op.name}")

    def arith(self, op: ir.Operation) -> None:
        """The adjoints of a table op's operands (rules/scalar.py)."""
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

    # -- adjoint frames (rules/control_flow_ops.py's reversed regions) -------------------------
    def open_frame(self, outer: list[ir.Value], carried: list[list[ir.Value | None]],
                   slot_of: dict | None = None) -> None:
        """A new Frame for a reversed region; `carried[k]`: outer[k]'s adjoint coming in, as
        one value, or in a loop one per slot (`slot_of`: loop_slots.LoopSlots)."""
        self.adj.append(Frame(outer, carried, slot_of))

    def close_frame(self, outer: list[ir.Value]) -> list[ir.Value | None]:
        """The adjoints of `outer` going out of the region: each one's slots, in order."""
        frame = self.adj.pop()
        # Reassociable: in a reversed loop this is the running sum of an outer value's
        # adjoint (a slot), and LLVM vectorises a loop over it only if it may reorder it.
        return [add(c, v, reassoc=True) for o, cs in zip(outer, frame.carried)
                for c, v in zip(cs, frame.slots[o])]

    def checkpoint(self) -> tuple:
        """Where the generation stands, for rollback() (an attempt at reversing a parallel
        loop that needs the tape: control_flow_ops.reverse_parallel)."""
        return self.scope, len(self.adj), len(self.markers), self.site

    def rollback(self, state: tuple) -> None:
        scope, frames, markers, site = state
        self.scope, self.markers, self.site = scope, self.markers[:markers], site
        del self.adj[frames:]


class _LazyPrimals:
    """Primal operands for a rule, materialized only when the rule reads them."""

    def __init__(self, gen: RevGen, operands: list[ir.Value]):
        self.gen = gen
        self.operands = operands

    def __getitem__(self, i: int) -> ir.Value:
        return self.gen.primal(self.operands[i])
