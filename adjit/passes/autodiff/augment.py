"""The augmented forward function of reverse mode: the primal body, performing all of its
effects, plus saving at the end of each block the values the tape plan gives that block (the
reverse function, generated first, asked for them). Stacks are threaded through the control
flow that pushes onto them; an scf.while also carries its iteration count.
"""
from __future__ import annotations

from typing import Callable

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from ...core.activity import SHADOWED
from .activity import AliasClasses, terminator
from .context import ReverseContext
from .ir_util import (clone_op, func_type, index, is_memref, ops, parent_op, trip_count,
                      unravel, walk, zeroed_like)
from .launch import augmented_launch
from .signature import TapeField, aug_inputs
from .tape import Key, Stacks


class AugGen:
    """The primal body, plus saving each block's planned keys at its end."""

    def __init__(self, ctx: ReverseContext):
        self.ctx = ctx
        self.vmap: dict[ir.Value, ir.Value] = {}
        self.extra: dict[Key, ir.Value] = {}
        self.shadow_params: dict[ir.Value, ir.Value] = {}
        self.stacks = Stacks(ctx.plan.stack_types())
        self._threads = set()
        # Primal loops that run their body a known number of times, mapped to the
        # augmented loop's (induction variable, lower bound, upper bound, step): runs_left.
        self._counted: dict[ir.Operation, tuple[ir.Value, ...]] = {}
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
            if op not in self._counted:
                return None
            levels.append(self._counted[op])
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
                handler = getattr(self, "aug_" + op.name.replace(".", "_"), None)
                if handler is not None:
                    handler(op)
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

    def aug_func_call(self, op: ir.Operation) -> None:
        if not self.ctx.act.relevant(op):
            clone_op(op, self.vmap)
            return
        sig, d = self.ctx.call_info(op)
        args: list[ir.Value] = []
        for v, a in zip(op.operands, sig.activity):
            args.append(self.vmap[v])
            if a in SHADOWED:
                args.append(self.aug_shadow(v, d.aug, len(args)))
        primal = [r.type for r in op.results] if sig.with_primal else []
        call = func.CallOp(primal + list(d.tape), ir.FlatSymbolRefAttr.get(d.aug), args)
        outs = list(call.results)
        for r, v in zip(op.results, outs[:len(primal)]):
            self.vmap[r] = v
        for k, v in enumerate(outs[len(primal):]):
            self.extra[("tape", op, k)] = v

    def aug_adj_launch(self, op: ir.Operation) -> None:
        augmented_launch(self, op)

    def aug_scf_for(self, op: ir.Operation) -> None:
        body = op.regions[0].blocks[0]
        inits = list(op.operands)[3:]
        state = self.threaded(op)
        lb, ub, step = (self.vmap[v] for v in list(op.operands)[:3])
        loop = scf.ForOp(lb, ub, step, [self.vmap[v] for v in inits] + state)
        new_args = list(loop.body.arguments)
        self.vmap[body.arguments[0]] = new_args[0]
        self._counted[op] = (new_args[0], lb, ub, step)
        for a, b in zip(list(body.arguments)[1:], new_args[1:]):
            self.vmap[a] = b
        n = len(inits)
        if state:
            self.stacks.values = new_args[1 + n:]
        with ir.InsertionPoint(loop.body):
            self.block(body)
            scf.YieldOp([self.vmap[v] for v in terminator(body).operands] +
                        (self.stacks.values if state else []))
        for r, v in zip(op.results, loop.results):
            self.vmap[r] = v
        if state:
            self.stacks.values = list(loop.results)[n:]

    def aug_scf_if(self, op: ir.Operation) -> None:
        state = self.threaded(op)
        n = len(op.results)
        has_else = len(op.regions[1].blocks) > 0
        new = scf.IfOp(self.vmap[op.operands[0]], [r.type for r in op.results] +
                       [v.type for v in state], has_else=has_else or bool(state))
        branches = [(op.regions[0], new.then_block)]
        if has_else or state:
            branches.append((op.regions[1], new.else_block))
        for region, block in branches:
            if state:
                self.stacks.values = list(state)
            with ir.InsertionPoint(block):
                if len(region.blocks):
                    self.block(region.blocks[0])
                    yields = [self.vmap[v] for v in terminator(region.blocks[0]).operands]
                else:
                    yields = []
                scf.YieldOp(yields + (self.stacks.values if state else []))
        for r, v in zip(op.results, new.results):
            self.vmap[r] = v
        if state:
            self.stacks.values = list(new.results)[n:]

    def aug_scf_parallel(self, op: ir.Operation) -> None:
        """Kept parallel unless its body saves values: then run sequentially, in the order
        the reverse pass undoes, so that the saves can go on the stacks."""
        body = op.regions[0].blocks[0]
        dims_ = len(body.arguments)
        bounds = [self.vmap[v] for v in op.operands]
        state = self.threaded(op)
        if not state:
            loop = scf.ParallelOp([], bounds[:dims_], bounds[dims_:2 * dims_],
                                  bounds[2 * dims_:], [])
            block = loop.regions[0].blocks.append(*[a.type for a in body.arguments])
            for a, b in zip(body.arguments, block.arguments):
                self.vmap[a] = b
            with ir.InsertionPoint(block):
                self.block(body)
                scf.ReduceOp([], 0)
            return
        counts = [trip_count(bounds[d], bounds[dims_ + d], bounds[2 * dims_ + d])
                  for d in range(dims_)]
        total = index(1)
        for c in counts:
            total = arith.muli(total, c)
        zero, one = index(0), index(1)
        loop = scf.ForOp(zero, total, one, state)
        self._counted[op] = (loop.induction_variable, zero, total, one)
        self.stacks.values = list(loop.inner_iter_args)
        with ir.InsertionPoint(loop.body):
            for d, iv in enumerate(unravel(loop.induction_variable, counts)):
                self.vmap[body.arguments[d]] = arith.addi(
                    bounds[d], arith.muli(iv, bounds[2 * dims_ + d]))
            self.block(body)
            scf.YieldOp(self.stacks.values)
        self.stacks.values = list(loop.results)

    def aug_scf_while(self, op: ir.Operation) -> None:
        before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
        counted = ("count", op) in self.ctx.plan.types
        state = self.threaded(op)
        extra_types = ([ir.IndexType.get()] if counted else []) + [v.type for v in state]
        inits = [self.vmap[v] for v in op.operands] + ([index(0)] if counted else []) + state
        n_b, n_a = len(before.arguments), len(after.arguments)
        loop = scf.WhileOp([r.type for r in op.results] + extra_types, inits)
        new_before = loop.before.blocks.append(*[a.type for a in before.arguments], *extra_types)
        new_after = loop.after.blocks.append(*[a.type for a in after.arguments], *extra_types)

        def bind(old: ir.Block, new: ir.Block, n: int) -> list[ir.Value]:
            for a, b in zip(old.arguments, new.arguments):
                self.vmap[a] = b
            rest = list(new.arguments)[n:]
            if state:
                self.stacks.values = rest[1:] if counted else rest
            return rest[:1] if counted else []

        count = bind(before, new_before, n_b)
        with ir.InsertionPoint(new_before):
            self.block(before)
            cond = terminator(before)
            scf.ConditionOp(self.vmap[cond.operands[0]],
                            [self.vmap[v] for v in list(cond.operands)[1:]] + count +
                            (self.stacks.values if state else []))
        count = bind(after, new_after, n_a)
        with ir.InsertionPoint(new_after):
            self.block(after)
            scf.YieldOp([self.vmap[v] for v in terminator(after).operands] +
                        [arith.addi(c, index(1)) for c in count] +
                        (self.stacks.values if state else []))
        res = list(loop.results)
        for r, v in zip(op.results, res):
            self.vmap[r] = v
        rest = res[len(op.results):]
        if counted:
            self.extra[("count", op)] = rest[0]
            rest = rest[1:]
        if state:
            self.stacks.values = rest


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


# Ops whose effects the caller may see even when no result of theirs is used.
EFFECTS = ("func.call", "adj.launch", "adj.sync", "adj.check", "memref.dealloc")
WRITES = ("memref.store", "memref.atomic_rmw", "memref.copy")


def prune_unneeded(fn: ir.Operation) -> None:
    """Erases from the augmented function what neither its results nor memory that outlives it
    (its arguments', returned arrays) depend on: the primal result's computation, in Reverse
    without the primal, along with what only fed it (a reduction's partial sums, say)."""
    classes = AliasClasses(fn)
    entry = fn.regions[0].blocks[0]
    ret = terminator(entry)
    outside = {classes.find(v) for v in list(entry.arguments) + list(ret.operands)
               if is_memref(v.type)}
    all_ops = list(walk(fn))[1:]
    writers: dict[ir.Value, list[ir.Operation]] = {}
    for op in all_ops:
        if op.name in WRITES:
            writers.setdefault(classes.find(op.operands[1]), []).append(op)
    live: set[ir.Operation] = set()
    work = [op for op in all_ops if op.name in EFFECTS or op == ret or (
        op.name in WRITES and classes.find(op.operands[1]) in outside)]
    read: set[ir.Value] = set()
    while work:
        op = work.pop()
        if op in live:
            continue
        live.add(op)
        parent = op.parent.operation
        if parent != fn:
            work.append(parent)
        for region in op.regions:
            for block in region.blocks:
                work.append(terminator(block))
        for v in op.operands:
            if isinstance(v, ir.OpResult):
                work.append(v.owner.operation)
            if is_memref(v.type) and classes.find(v) not in read:
                # What reads an array needs every write into it.
                read.add(classes.find(v))
                work.extend(writers.get(classes.find(v), []))
    for op in reversed(all_ops):
        if op not in live:
            op.erase()


def reads_values(symbols: dict[str, ir.Operation], callee: str, position: int,
                 seen: dict[tuple[str, int], bool]) -> bool:
    """Whether @callee may read the elements of its memref parameter `position` (or write
    them): true unless its only uses are memref.dim and arguments of calls (launches
    included) whose callees, in turn, do not read theirs. `seen`: answers so far (a cycle
    counts as not reading, as it adds no use of its own)."""
    key = (callee, position)
    if key in seen:
        return seen[key]
    fn = symbols.get(callee)
    if fn is None or fn.name != "func.func" or len(fn.regions[0].blocks) == 0:
        return True
    seen[key] = False
    reads = False
    for use in fn.regions[0].blocks[0].arguments[position].uses:
        op = use.owner
        if op.name == "memref.dim" and use.operand_number == 0:
            continue
        if op.name == "func.call" and reads_values(
                symbols, ir.FlatSymbolRefAttr(op.attributes["callee"]).value,
                use.operand_number, seen):
            reads = True
        elif op.name != "func.call":
            reads = True
        if reads:
            break
    seen[key] = reads
    return reads
