"""The augmented forward function of reverse mode: the primal body, performing all of its
effects, plus saving at the end of each block the values the tape plan gives that block (the
reverse function, generated first, asked for them). Stacks are threaded through the control
flow that pushes onto them; an scf.while also carries its iteration count
(rules/control_flow_ops.py's augmented rules; calls' and launches' in rules/call_ops.py and
rules/launch_ops.py). prune.py then erases what the augmented function computes for nothing.
"""
from __future__ import annotations

from typing import Callable

from mlir import ir
from mlir.dialects import arith, func, memref

from ....core.activity import SHADOWED
from ...ir_util import terminator
from ...ir_util import clone_op, func_type, index, ops, parent_op, trip_count, zeroed_like
from ..protocols import Rule
from ..rules.call_ops import reads_values
from ..rules.lookup import rule as op_rule
from ..signature import TapeField, aug_inputs
from .context import ReverseContext
from .tape import Key, Stacks


class AugGen:
    """The primal body, plus saving each block's planned keys at its end (the augmented
    generator of protocols.AugmentedGenerator: the traversal, the value map, the saves; the
    rules of the ops are rules/lookup.py's)."""

    # Rules of this generator that take the place of rules/lookup.py's, by op name.
    OWN_RULES: dict[str, Rule] = {}

    def __init__(self, ctx: ReverseContext):
        self.ctx = ctx
        self.vmap: dict[ir.Value, ir.Value] = {}
        self.extra: dict[Key, ir.Value] = {}
        self.shadow_params: dict[ir.Value, ir.Value] = {}
        self.stacks = Stacks(ctx.plan.stack_types(), ctx.plan.region_types())
        self._threads = set()
        # Primal loops that run their body a known number of times, mapped to the
        # augmented loop's (induction variable, lower bound, upper bound, step): runs_left.
        self.counted: dict[ir.Operation, tuple[ir.Value, ...]] = {}
        for block in ctx.plan.nested_blocks():
            op = parent_op(block)
            while op != ctx.fn:
                self._threads.add(op)
                op = op.parent.operation

    def emit(self, name: str, extra: dict[str, ir.Attribute], private: bool,
             fields: list[TapeField]) -> ir.Operation:
        ctx = self.ctx
        ftype = func_type(ctx.fn)
        inputs, results = aug_inputs(ftype, ctx.sig), []
        if ctx.kernel:
            inputs += [f.type for f in fields]
        else:
            primal = list(ftype.results) if ctx.sig.with_primal else []
            results = primal + [f.type for f in fields]
        aug = ctx.diff.new_function(name, inputs, results, ctx.fn, extra, private)
        entry = aug.regions[0].blocks[0]
        params = iter(entry.arguments)
        for arg, act in zip(ctx.entry.arguments, ctx.sig.activity):
            self.vmap[arg] = next(params)
            if act in SHADOWED:
                self.shadow_params[arg] = next(params)
        with ir.InsertionPoint(entry), ctx.fn.location:
            self.prologue(list(params))
            self.block(ctx.entry)
            self.epilogue(terminator(ctx.entry))
        return aug

    def prologue(self, tape_params: list[ir.Value]) -> None:
        self.stacks.create()

    def epilogue(self, ret: ir.Operation) -> None:
        values = [self.vmap[v] for v in ret.operands] if self.ctx.sig.with_primal else []
        values += [self.key_value(k) for k in self.ctx.plan.keys(self.ctx.entry)]
        func.ReturnOp(values + self.stacks.values)

    def save(self, block: ir.Block) -> None:
        """Saves the keys the plan gives `block`, at its end (top-level ones are returned)."""
        if block != self.ctx.entry:
            keys = self.ctx.plan.keys(block)
            if keys:
                self.stacks.push([self.key_value(k) for k in reversed(keys)],
                                 self.runs_left(block))

    def runs_left(self, block: ir.Block) -> Callable[[], ir.Value] | None:
        """What emits how many more times `block` ends, this time included, if it is the
        body of loops with trip counts (scf.for, and scf.parallel run sequentially) nested
        up to the function, so that it runs every iteration: with trip counts N_k and
        iteration numbers t_k, innermost first, (N_0 - t_0) + sum over outer m of
        (N_m - 1 - t_m) * N_0 * ... * N_(m-1). None where a branch or an scf.while is in
        between. A hint for the stacks' growth only (Stacks.push, which emits it only where
        a stack grows): the bounds of an inner loop are taken as they are in this
        iteration."""
        levels = []
        while block != self.ctx.entry:
            op = parent_op(block)
            if op not in self.counted:
                return None
            levels.append(self.counted[op])
            block = op.block
        return lambda: _runs_left(levels)

    def key_value(self, key: Key) -> ir.Value:
        if isinstance(key, ir.Value):
            return self.vmap[key]
        if key[0] == "site":
            return self._site(key[1])
        if key[0] == "dim":
            return memref.dim(self.vmap[key[1]], index(key[2]))
        return self.extra[key]

    def _site(self, v: ir.Value) -> ir.Value:
        """Which of its sites the joined array `v` is, by address."""
        address = memref.extract_aligned_pointer_as_index(self.vmap[v])
        which = index(0)
        for k, site in enumerate(self.ctx.sites(v)[1:], start=1):
            same = arith.cmpi(arith.CmpIPredicate.eq, address,
                              memref.extract_aligned_pointer_as_index(self.vmap[site]))
            which = arith.select(same, index(k), which)
        return which

    def block(self, block: ir.Block) -> None:
        for op in ops(block)[:-1]:
            with op.location:
                handler = op_rule(op.name, "augmented", self.OWN_RULES)
                if handler is not None:
                    handler(self, op)
                else:
                    clone_op(op, self.vmap)
        self.save(block)

    def threaded(self, op: ir.Operation) -> list[ir.Value]:
        """The stack state that `op`'s regions thread, if they push."""
        return list(self.stacks.values) if op in self._threads else []

    def aug_shadow(self, v: ir.Value, callee: str, position: int) -> ir.Value:
        """A shadow of `v` for parameter `position` of the augmented function @callee, which
        never writes it. Where @callee reads no more than its shape (generated augmented
        functions ignore shadows; a custom rule may read one), `v` itself stands in for it:
        a fresh zeroed array per call cost the G2b gradient two allocations and fills of a
        state per step."""
        if v in self.shadow_params:
            return self.shadow_params[v]
        if not reads_values(self.ctx.diff.symbols, callee, position, {}):
            return self.vmap[v]
        return zeroed_like(self.vmap[v])


def _runs_left(levels: list[tuple[ir.Value, ...]]) -> ir.Value:
    """AugGen.runs_left's count, from (iv, lb, ub, step) per loop, innermost first."""
    left, inner = None, None
    for level in levels:
        iv, lb, ub, step = (v if isinstance(v.type, ir.IndexType) else
                            arith.index_cast(ir.IndexType.get(), v) for v in level)
        n = trip_count(lb, ub, step)
        t = arith.divui(arith.subi(iv, lb), step)
        if left is None:
            left, inner = arith.subi(n, t), n
        else:
            later = arith.subi(arith.subi(n, index(1)), t)
            left = arith.addi(left, arith.muli(later, inner))
            inner = arith.muli(inner, n)
    return left
