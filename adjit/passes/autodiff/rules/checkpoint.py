"""Checkpointed loops (`adjit.checkpointed`, an scf.for or scf.while marked `adj.checkpoint`):
reverse mode keeps a few states of the loop instead of every step's tape, and runs steps
again from them.

Outlining (`outline_checkpointed_loops`, before a function's reverse derivative is built):
the loop's body becomes a function, the step, `@__adj_step_*(t, carried..., free...) ->
(carried scalars..., [which array]...)`, and the body a call of it; the arrays the loop
carries must be ones it carries or ones made before it (`u, v = v, u`), so that which array
each carried position holds after a step is a fixed mapping or one the step returns
(`_Loop.moves`). The state, found here and not listed by the user, is what a step reads
that may have changed by the time the reverse pass runs it again: the carried scalars,
which array each carried position holds, and the contents of every array the step writes
(the carried ones and free ones) or that is written after the loop (`_Loop.buffers`). A
while loop's condition block only decides how many steps run.

Augmented: the state's initial arrays copied onto the tape; then a for loop runs as its
schedule's forward sweep (`_Machine.sweep`: its snapshots, and the state before the last
step, on the tape, `_Tape`), then the last step; a while loop runs as it is, counting its
steps.

Reverse: the rest of the schedule (runtime/native/checkpoint.cpp, called by name:
`adj_ckpt_*`): advance (primal steps), take a snapshot (into the working slots; with
`spill=True`, marked HOST_MEMORY_ATTR: host memory in a GPU host program), restore (from a
slot or the tape's initial state) and turn (the step's augmented function, then its reverse
one, on the current state: the adjoints of the carried scalars and of the free Active
scalars flow through it, the arrays' adjoints go into their shadows). A tape may be
reversed again: its `fresh` flag tells the reverse pass to run the sweep again itself. The
reverse pass ends by putting the final state back into the arrays (_leave_final_state).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from ....core.activity import Activity, SHADOWED
from ....core.symbols import HOST_MEMORY_ATTR
from ....dialects.adj import AdjError, CHECKPOINT_ATTR, KERNEL_ATTR
from ...ir_util import terminator
from ...ir_util import (alloc_like, callee, clone_op, dims, flat_view, func_type, index,
                        is_ancestor, is_float, is_memref, memref_type, numel, ops, or_zero,
                        symbol_name, trip_count, walk, zero)
from ...written import written_arrays
from ..signature import abi, adjoint_types

if TYPE_CHECKING:
    from ..protocols import AugmentedGenerator, Host, ReverseGenerator, Shared

STEP_ATTR = "adj.checkpoint_step"     # on the outlined step functions
# runtime/native/checkpoint.cpp
DONE, ADVANCE, TAKESHOT, RESTORE, TURN = range(5)
REVOLVE, PERIODIC = 0, 1


# == outlining ==================================================================================
def _parts(loop: ir.Operation) -> tuple[ir.Block, ir.Value | None, list[ir.Value],
                                        list[ir.Value]]:
    """(body, induction variable or None, carried block arguments, initial values) of a
    checkpointed scf.for, or of an scf.while (its body the `after` block: the `before` one
    only tests the condition on the values it is given, _check_before)."""
    if loop.name == "scf.for":
        body = loop.regions[0].blocks[0]
        return body, body.arguments[0], list(body.arguments)[1:], list(loop.operands)[3:]
    body = loop.regions[1].blocks[0]
    return body, None, list(body.arguments), list(loop.operands)


def _check_before(diff: "Host", loop: ir.Operation) -> None:
    """A checkpointed while loop's condition block forwards its arguments as they are (what
    the frontend makes of `while adjit.checkpointed(cond, ...)`) and writes no array but its
    own: then a step is its body, and its condition only tells how many steps run (the
    reverse pass does not run it again)."""
    before = loop.regions[0].blocks[0]
    cond = terminator(before)
    own = loop.regions[0]
    writes = [w for o in ops(before)[:-1] for inner in walk(o)
              for w in written_arrays(inner, diff.callee_writes)]
    if list(cond.operands)[1:] != list(before.arguments) or any(
            not _inside_region(w, own) for w in writes):
        raise AdjError(loop, "a checkpointed while loop's condition reads the values the "
                             "loop carries and writes none (the reverse pass reruns only "
                             "the body)")


def _inside_region(v: ir.Value, region: ir.Region) -> bool:
    block = v.owner if isinstance(v, ir.BlockArgument) else v.owner.operation.block
    while block is not None:
        if block.region == region:
            return True
        op = block.owner.operation if hasattr(block.owner, "operation") else block.owner
        if op is None or op.parent is None:
            return False
        block = op.block
    return False


def outline_checkpointed_loops(diff: "Host", fn: ir.Operation) -> None:
    """Outlines the body of every checkpointed loop of `fn` not nested in another one (whose
    step, differentiated in turn, outlines it)."""
    marked = [op for op in walk(fn) if op.name in ("scf.for", "scf.while")
              and CHECKPOINT_ATTR in op.attributes]
    for loop in marked:
        if any(o != loop and is_ancestor(o, loop) for o in marked):
            continue
        if KERNEL_ATTR in fn.attributes:
            raise AdjError(loop, "a checkpointed loop is a time loop of an @adjit.jit function; "
                                 "a kernel's loops run per work item")
        if not _outlined(diff, loop):
            _outline(diff, fn, loop)


def _outlined(diff: "Host", loop: ir.Operation) -> bool:
    return any(o.name == "func.call" and STEP_ATTR in diff.symbols[callee(o)].attributes
               for o in ops(_parts(loop)[0]))


def _inside(v: ir.Value, loop: ir.Operation) -> bool:
    owner = v.owner.owner if isinstance(v, ir.BlockArgument) else v.owner
    return is_ancestor(loop, owner.operation if hasattr(owner, "operation") else owner)


def _may_be_new(diff: "Host", v: ir.Value, loop: ir.Operation, seen: set) -> bool:
    """Whether the array `v` of the loop's body may be one the body makes (not one it
    carries or one from outside): through the control flow, selects and views it comes out
    of."""
    if not _inside(v, loop) or v in seen:
        return False
    seen.add(v)
    if isinstance(v, ir.BlockArgument):
        owner = (v.owner.owner.operation if hasattr(v.owner.owner, "operation")
                 else v.owner.owner)
        if owner == loop:
            return False
        if owner.name == "scf.for":
            k = v.arg_number - 1
            body = owner.regions[0].blocks[0]
            return any(_may_be_new(diff, x, loop, seen) for x in (
                list(owner.operands)[3 + k], terminator(body).operands[k]))
        return True
    op = v.owner.operation if hasattr(v.owner, "operation") else v.owner
    k = v.result_number
    if op.name == "scf.for":
        body = op.regions[0].blocks[0]
        return any(_may_be_new(diff, x, loop, seen) for x in (
            list(op.operands)[3 + k], terminator(body).operands[k]))
    if op.name == "scf.if":
        return any(_may_be_new(diff, terminator(r.blocks[0]).operands[k], loop, seen)
                   for r in op.regions if len(r.blocks))
    if op.name == "arith.select":
        return any(_may_be_new(diff, x, loop, seen) for x in list(op.operands)[1:])
    if op.name in ("memref.subview", "memref.cast", "memref.collapse_shape",
                   "memref.expand_shape", "memref.reinterpret_cast"):
        return _may_be_new(diff, op.operands[0], loop, seen)
    if op.name == "func.call":
        sources = diff.callee_writes.returned(callee(op))[k]
        return not sources or any(_may_be_new(diff, op.operands[j], loop, seen)
                                  for j in sources)
    return True


def _outline(diff: "Host", fn: ir.Operation, loop: ir.Operation) -> None:
    if loop.name == "scf.while":
        _check_before(diff, loop)
    body, iv, args, _ = _parts(loop)
    yields = list(terminator(body).operands)
    # The values from outside the loop that the body uses: parameters of the step, but
    # constants, which it makes itself.
    free: list[ir.Value] = []
    constants: list[ir.Value] = []
    for op in ops(body)[:-1]:
        for inner in walk(op):
            for v in inner.operands:
                if _inside(v, loop) or v in free or v in constants:
                    continue
                if isinstance(v, ir.OpResult) and v.owner.operation.name == "arith.constant":
                    constants.append(v)
                else:
                    free.append(v)
    # The arrays a carried position can hold next: one the loop carries, or one from outside.
    # Where the body yields one of them directly the mapping is fixed; otherwise (the
    # result of an inner loop that swaps them, say) the step returns which one, an index
    # into `pool`, found by address.
    pool = [a for a in args if is_memref(a.type)] + [v for v in free if is_memref(v.type)]
    dynamic = [k for k, y in enumerate(yields)
               if is_memref(y.type) and _inside(y, loop) and y not in args]
    for k in dynamic:
        if (_may_be_new(diff, yields[k], loop, set()) or
                not any(p.type == yields[k].type for p in pool)):
            raise AdjError(loop, f"a checkpointed loop carries an array (position {k}) that "
                                 "a branch or an inner loop of its step makes; the loop copies "
                                 "a new state into the array it carries only where its step "
                                 "binds it outside branches and inner loops (`u = step(u)`): "
                                 "bind it there, or write into arrays made before the loop "
                                 "(swapped with `u, v = v, u`)")
    scalars = [y for y in yields if not is_memref(y.type)]
    name = f"__adj_step_{symbol_name(fn)}"
    while diff.lookup(name) is not None:
        name += "_"
    results = [y.type for y in scalars] + [ir.IndexType.get()] * len(dynamic)
    # (a while loop's step takes the step number too, which it does not read)
    step = diff.new_function(name, [ir.IndexType.get()] + [a.type for a in args] +
                             [v.type for v in free], results, fn,
                             {STEP_ATTR: ir.UnitAttr.get()}, private=True)
    entry = step.regions[0].blocks[0]
    params = list(entry.arguments)
    vmap = dict(zip(args + free, params[1:]))
    if iv is not None:
        vmap[iv] = params[0]
    with ir.InsertionPoint(entry), loop.location:
        for v in constants:
            clone_op(v.owner.operation, vmap)
        for op in ops(body)[:-1]:
            clone_op(op, vmap)
        which = []
        for k in dynamic:
            address = memref.extract_aligned_pointer_as_index(vmap[yields[k]])
            at = index(0)
            for j, p in enumerate(pool):
                if p.type == yields[k].type:
                    same = arith.cmpi(arith.CmpIPredicate.eq, address,
                                      memref.extract_aligned_pointer_as_index(vmap[p]))
                    at = arith.select(same, index(j), at)
            which.append(at)
        func.ReturnOp([vmap.get(y, y) for y in scalars] + which)
    # (the yielded arrays kept are block arguments or values from outside: they outlive
    # the body)
    kept = [y if is_memref(y.type) and k not in dynamic else None
            for k, y in enumerate(yields)]
    n_scalars = len(scalars)
    for op in reversed(ops(body)):
        op.erase()
    with ir.InsertionPoint(body), loop.location:
        t = iv if iv is not None else index(0)
        call = func.CallOp(results, ir.FlatSymbolRefAttr.get(name), [t] + args + free)
        outs = list(call.results)
        scalar_out, which_out = iter(outs[:n_scalars]), iter(outs[n_scalars:])
        new_yields = []
        for k, y in enumerate(kept):
            if k in dynamic:
                new_yields.append(_pick_typed(next(which_out), pool, args[k].type))
            else:
                new_yields.append(y if y is not None else next(scalar_out))
        scf.YieldOp(new_yields)


# == what a checkpointed loop keeps ================================================================
@dataclass
class _Loop:
    """A checkpointed (outlined) loop, as its rules see it."""
    op: ir.Operation
    call: ir.Operation                 # the step's call in the body
    args: list[ir.Value]               # the body's carried values (block arguments)
    inits: list[ir.Value]
    free: list[ir.Value]               # the call's operands from outside the loop
    scalars: list[int]                 # positions of carried scalars
    slots: list[int]                   # positions of carried arrays
    candidates: list[ir.Value]         # the arrays (made before the loop) a slot can hold
    moves: list[tuple]                 # per array slot: what it holds next (loop_state)
    buffers: list[ir.Value]            # the arrays whose contents a state holds
    schedule: tuple[str, int]
    spill: bool = False                # working slots in host memory (HOST_MEMORY_ATTR)


def loop_state(ctx: "Shared", op: ir.Operation) -> _Loop:
    """What the rules of the checkpointed loop `op` (outlined) work with."""
    cache = ctx.__dict__.setdefault("_checkpointed", {})
    if op in cache:
        return cache[op]
    body, _, args, inits = _parts(op)
    call = [o for o in ops(body) if o.name == "func.call"][0]
    yields = list(terminator(body).operands)
    free = list(call.operands)[1 + len(args):]
    scalars = [k for k, a in enumerate(args) if not is_memref(a.type)]
    slots = [k for k, a in enumerate(args) if is_memref(a.type)]
    # Which array each array position holds next (see _outline): ("slot", i) the one slot i
    # held, ("array", c) candidate c, or ("pool", r, sources) the one the step's result r
    # names among `pool` (each entry's id source: ("slot", i) or ("array", c)).
    pool = [args[k] for k in slots] + [v for v in free if is_memref(v.type)]
    dynamic = [k for k in slots if yields[k] not in args and _inside(yields[k], op)]
    candidates: list[ir.Value] = []
    outside = [y for k in slots for y in [yields[k]] if y not in args and k not in dynamic]
    for v in [inits[k] for k in slots] + outside + (pool[len(slots):] if dynamic else []):
        if v not in candidates:
            candidates.append(v)

    def source(v):
        return (("slot", slots.index(args.index(v))) if v in args else
                ("array", candidates.index(v)))

    n_results = len(func_type(ctx.diff.symbols[callee(call)]).results)
    moves = []
    for k in slots:
        if k in dynamic:
            r = n_results - len(dynamic) + dynamic.index(k)
            moves.append(("pool", r, [source(p) if p.type == args[k].type else None
                                      for p in pool]))
        else:
            moves.append(source(yields[k]))
    written = ctx.diff.callee_writes(callee(call))
    slot_written = any(1 + k in written for k in slots)
    buffers = [c for c in candidates if slot_written or ctx.writes.written_after(op, c)]
    for j, v in enumerate(free):
        if is_memref(v.type) and v not in buffers and (
                1 + len(args) + j in written or ctx.writes.written_after(op, v)):
            buffers.append(v)
    # {snapshots | every | max_bytes = n} and, where snapshots are spilled, spill = true
    attr = ir.DictAttr(op.attributes[CHECKPOINT_ATTR])
    key = next(k for k in ("snapshots", "every", "max_bytes") if k in attr)
    spill = "spill" in attr and ir.BoolAttr(attr["spill"]).value
    state = _Loop(op, call, args, inits, free, scalars, slots, candidates, moves, buffers,
                  (key, ir.IntegerAttr(attr[key]).value), spill)
    cache[op] = state
    return state


def tape_types(ctx: "Shared", op: ir.Operation) -> list[ir.Type]:
    """The tape values of a checkpointed loop (see _Tape)."""
    loop = loop_state(ctx, op)
    initial = [b.type for b in loop.buffers]
    if op.name == "scf.while":       # and the number of steps it ran, and the final state
        return initial + [ir.IndexType.get()] + initial
    dyn = ir.ShapedType.get_dynamic_size()
    flat = [ir.MemRefType.get([dyn], memref_type(b.type).element_type) for b in loop.buffers]
    scalars = [loop.args[k].type for k in loop.scalars]
    return (initial + flat + [ir.MemRefType.get([dyn], t) for t in scalars] +
            [ir.MemRefType.get([dyn], ir.IndexType.get())] * len(loop.slots) + initial +
            scalars + [ir.IndexType.get()] * len(loop.slots) +
            [ir.MemRefType.get([dyn], ir.IntegerType.get_signless(64))])   # (the fresh flag)


@dataclass
class _Tape:
    """A checkpointed loop's tape, in tape_types' order. Both loops: the initial state's
    arrays. A while loop: its step count and final state (which the reverse pass puts back,
    _leave_final_state). A for loop: the forward sweep of its schedule,
    which the augmented pass runs (the snapshots' slots, their scalars and ids, the state
    before the last step) and a `fresh` flag, which the reverse pass clears: a first reverse
    call takes the sweep as it is and reverses from the last state; a later one (split mode
    may reverse a tape again) runs the sweep again from the initial state into the same
    slots."""
    initial: list
    count: object = None
    slots: list = None
    scalar_slots: list = None
    id_slots: list = None
    last: list = None
    last_scalars: list = None
    last_ids: list = None
    fresh: object = None
    final: list = None

    @staticmethod
    def of(values: list, loop: "_Loop", is_while: bool) -> "_Tape":
        it = iter(values)
        take = lambda n: [next(it) for _ in range(n)]   # noqa: E731
        nb, ns, na = len(loop.buffers), len(loop.scalars), len(loop.slots)
        if is_while:
            return _Tape(take(nb), count=next(it), final=take(nb))
        return _Tape(take(nb), None, take(nb), take(ns), take(na), take(nb), take(ns),
                     take(na), next(it))

    def values(self) -> list:
        if self.count is not None:
            return self.initial + [self.count] + self.final
        return (self.initial + self.slots + self.scalar_slots + self.id_slots + self.last +
                self.last_scalars + self.last_ids + [self.fresh])


class _Machine:
    """The code both passes run for a checkpointed loop's schedule: its context and working
    slots, the state (carried scalars, which candidate each array slot holds, the arrays'
    contents in `buffers`), and the actions that move it (advance, take a snapshot,
    restore). Built from values of the function being generated."""

    def __init__(self, gen, loop: "_Loop", step: str, step_results: list[ir.Type],
                 n: ir.Value, lb: ir.Value, st: ir.Value, free: list, candidates: list,
                 buffers: list, inits: list):
        self.gen, self.loop, self.step, self.step_results = gen, loop, step, step_results
        self.n, self.lb, self.st, self.free = n, lb, st, free
        self.candidates, self.buffers, self.inits = candidates, buffers, inits
        self.ids0 = [index(loop.candidates.index(loop.inits[k])) for k in loop.slots]
        self.ns = len(inits)
        self.sizes = [numel(dims(b)) for b in buffers]
        self.flat = [flat_view(b) for b in buffers]

    # -- the schedule -------------------------------------------------------------------------
    def start(self) -> tuple[ir.Value, ir.Value]:
        """(the schedule's context, how many working slots it needs: an index)."""
        loop, n = self.loop, self.n
        key, value = loop.schedule
        c = _c64
        # A schedule past the step count means the same as the step count (every step's
        # state kept, one segment), and the working slots are allocated by it: clamped, so
        # that snapshots=10**9 on a short loop allocates for its steps, not 10**9 states.
        steps = arith.maxsi(_i64(n), c(1))
        if key == "every":
            kind, snaps, every = PERIODIC, c(1), arith.minsi(c(value), steps)
            segments = arith.ceildivsi(_i64(n), every)
            work = arith.addi(arith.maxsi(arith.subi(segments, c(1)), c(0)),
                              arith.subi(every, c(1)))
        else:
            if key == "snapshots":
                snaps = c(value)
            else:   # as many states as max_bytes holds, one at least
                state_bytes = c(8 * (len(loop.scalars) + len(loop.slots)) + 1)
                for b, size in zip(self.buffers, self.sizes):
                    state_bytes = arith.addi(state_bytes,
                                             arith.muli(_i64(size), c(_bytes(b.type))))
                snaps = arith.maxsi(arith.divsi(c(value), state_bytes), c(1))
            snaps = arith.minsi(snaps, steps)
            kind, every = REVOLVE, c(0)
            work = arith.subi(snaps, c(1))
        context = _runtime(self.gen, "adj_ckpt_new", [_i64(n), snaps, c(kind), every])
        return context, _idx(work)

    def slots(self, work: ir.Value) -> tuple[list, list, list]:
        """Working slots for `work` snapshots: arrays, scalars, ids. A spilling loop's are
        marked HOST_MEMORY_ATTR: a GPU host program allocates them in host memory
        (lower_cuda_host.py), so that its snapshots and restores copy device<->host; the CPU
        ignores the mark."""
        dyn = ir.ShapedType.get_dynamic_size()

        def alloc(t: ir.Type, n: ir.Value) -> ir.Value:
            m = memref.alloc(ir.MemRefType.get([dyn], t), [n], [])
            if self.loop.spill:
                m.owner.attributes[HOST_MEMORY_ATTR] = ir.UnitAttr.get()
            return m

        arrays = [alloc(memref_type(b.type).element_type, arith.muli(work, size))
                  for b, size in zip(self.buffers, self.sizes)]
        scalars = [alloc(self.loop.args[k].type, work) for k in self.loop.scalars]
        ids = [alloc(ir.IndexType.get(), work) for _ in self.loop.slots]
        return arrays, scalars, ids

    def action(self, context: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        """(from, to, slot) of the action just taken."""
        return (_idx(_runtime(self.gen, "adj_ckpt_from", [context])),
                _idx(_runtime(self.gen, "adj_ckpt_to", [context])),
                _runtime(self.gen, "adj_ckpt_slot", [context]))

    # -- the state ----------------------------------------------------------------------------
    def arrays(self, ids: list) -> list:
        return [_pick(i, self.candidates) for i in ids]

    def operands(self, t: ir.Value, scalars: list, ids: list) -> list:
        """The step's operands for step t from this state."""
        vals = [None] * len(self.loop.args)
        for k, v in zip(self.loop.scalars, scalars):
            vals[k] = v
        for k, v in zip(self.loop.slots, self.arrays(ids)):
            vals[k] = v
        return [arith.addi(self.lb, arith.muli(t, self.st))] + vals + self.free

    def moved(self, ids: list, out: list) -> list:
        """The ids after a step whose results are `out`."""
        def source(m):
            return ids[m[1]] if m[0] == "slot" else index(m[1])
        new = []
        for m in self.loop.moves:
            if m[0] == "pool":
                entries = [(j, source(src)) for j, src in enumerate(m[2]) if src is not None]
                v = entries[0][1]
                for j, e in entries[1:]:
                    v = arith.select(arith.cmpi(arith.CmpIPredicate.eq, out[m[1]], index(j)),
                                     e, v)
                new.append(v)
            else:
                new.append(source(m))
        return new

    def advance(self, lo: ir.Value, hi: ir.Value, scalars: list, ids: list,
                again: bool = True) -> list:
        """The state after primal steps lo .. hi - 1: scalars + ids. `again`: they run a
        second time (counted: memory_stats' checkpoint_steps_recomputed)."""
        if again:
            _runtime(self.gen, "adj_ckpt_count", [_i64(arith.subi(hi, lo))])
        run = scf.ForOp(lo, hi, index(1), scalars + ids)
        with ir.InsertionPoint(run.body):
            got = list(run.inner_iter_args)
            out = list(func.CallOp(self.step_results, ir.FlatSymbolRefAttr.get(self.step),
                                   self.operands(run.induction_variable, got[:self.ns],
                                                 got[self.ns:])).results)
            scf.YieldOp(out[:self.ns] + self.moved(got[self.ns:], out))
        return list(run.results)

    def save(self, slots: tuple, at: ir.Value, scalars: list, ids: list) -> None:
        arrays, scalar_slots, id_slots = slots
        for f, w, size in zip(self.flat, arrays, self.sizes):
            _copy(f, index(0), w, arith.muli(at, size), size)
        for v, m in zip(scalars + ids, scalar_slots + id_slots):
            memref.store(v, m, [at])

    def load(self, slots: tuple, at: ir.Value) -> list:
        arrays, scalar_slots, id_slots = slots
        for f, w, size in zip(self.flat, arrays, self.sizes):
            _copy(w, arith.muli(at, size), f, index(0), size)
        return [memref.load(m, [at]) for m in scalar_slots + id_slots]

    def restore(self, slots: tuple, slot: ir.Value, initial: list) -> list:
        """The state of snapshot `slot` (-1: the initial one, from `initial`'s arrays)."""
        types = [v.type for v in self.inits + self.ids0]
        branch = scf.IfOp(arith.cmpi(arith.CmpIPredicate.slt, slot, _c64(0)), types,
                          has_else=True)
        with ir.InsertionPoint(branch.then_block):
            for src, f, size in zip(initial, self.flat, self.sizes):
                _copy(flat_view(src), index(0), f, index(0), size)
            scf.YieldOp(self.inits + self.ids0)
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp(self.load(slots, _idx(slot)))
        return list(branch.results)

    def put(self, dst: list, scalars: list, ids: list) -> None:
        """Copies the state's arrays into `dst` (the state before the last step)."""
        for f, b, size in zip(self.flat, dst, self.sizes):
            _copy(f, index(0), flat_view(b), index(0), size)

    def take(self, src: list) -> None:
        for f, b, size in zip(self.flat, src, self.sizes):
            _copy(flat_view(b), index(0), f, index(0), size)

    def sweep(self, context: ir.Value, slots: tuple, run: ir.Value | None) -> list:
        """The schedule's actions up to its first turn, run (if `run` is None, the loop's own
        forward run: not counted, or true: run again) or only stepped through; returns [the
        pending action] + the state (scalars + ids)."""
        i64 = ir.IntegerType.get_signless(64)
        state0 = self.inits + self.ids0
        types = [v.type for v in state0]
        loop = scf.WhileOp([i64] + types, state0)
        before = loop.before.blocks.append(*types)
        after = loop.after.blocks.append(i64, *types)
        with ir.InsertionPoint(before):
            act = _runtime(self.gen, "adj_ckpt_next", [context])
            going = arith.andi(arith.cmpi(arith.CmpIPredicate.ne, act, _c64(TURN)),
                               arith.cmpi(arith.CmpIPredicate.ne, act, _c64(DONE)))
            scf.ConditionOp(going, [act] + list(before.arguments))
        with ir.InsertionPoint(after):
            act, state = after.arguments[0], list(after.arguments)[1:]
            scalars, ids = state[:self.ns], state[self.ns:]

            def execute():
                lo, hi, slot = self.action(context)

                def on_advance():
                    return self.advance(lo, hi, scalars, ids, again=run is not None)

                def on_takeshot():
                    self.save(slots, _idx(slot), scalars, ids)
                    return state
                # (the sweep's only restore is of the initial state, which it starts from)
                return _switch(act, [(ADVANCE, on_advance), (TAKESHOT, on_takeshot)], types,
                               state)

            if run is None:
                scf.YieldOp(execute())
            else:
                branch = scf.IfOp(run, types, has_else=True)
                with ir.InsertionPoint(branch.then_block):
                    scf.YieldOp(execute())
                with ir.InsertionPoint(branch.else_block):
                    scf.YieldOp(state)
                scf.YieldOp(list(branch.results))
        return list(loop.results)


def _c64(v: int) -> ir.Value:
    return arith.constant(ir.IntegerType.get_signless(64), v)


# == augmented ===================================================================================
def augmented(gen: "AugmentedGenerator", op: ir.Operation) -> None:
    """The initial state's arrays copied onto the tape; then a while loop as it is, counting
    its steps, or a for loop's schedule's forward sweep (its snapshots kept on the tape,
    with the state before the last step), then the last step."""
    loop = loop_state(gen.ctx, op)
    initial = [_copied(gen.vmap[b]) for b in loop.buffers]
    if op.name == "scf.while":
        count = _counted_while(gen.vmap, op)
        tape = _Tape(initial, count=count, final=[_copied(gen.vmap[b]) for b in loop.buffers])
    else:
        tape = _sweep(gen, op, loop, initial)
    for k, v in enumerate(tape.values()):
        gen.extra[("tape", op, k)] = v


def _copied(array: ir.Value) -> ir.Value:
    copy = alloc_like(array)
    memref.copy(array, copy)
    return copy


def _sweep(gen: "AugmentedGenerator", op: ir.Operation, loop: "_Loop",
           initial: list) -> _Tape:
    step = callee(loop.call)
    step_results = list(func_type(gen.ctx.diff.symbols[step]).results)
    lb, ub, st = (gen.vmap[v] for v in list(op.operands)[:3])
    m = _Machine(gen, loop, step, step_results, trip_count(lb, ub, st), lb, st,
                 [gen.vmap[v] for v in loop.free], [gen.vmap[c] for c in loop.candidates],
                 [gen.vmap[b] for b in loop.buffers],
                 [gen.vmap[loop.inits[k]] for k in loop.scalars])
    context, work = m.start()
    slots = m.slots(work)
    act, *state = m.sweep(context, slots, None)
    scalars, ids = state[:m.ns], state[m.ns:]
    last = [alloc_like(b) for b in m.buffers]
    # The state before the last step is kept, then the last step runs (no turn here).
    turn = arith.cmpi(arith.CmpIPredicate.eq, act, _c64(TURN))
    branch = scf.IfOp(turn, [v.type for v in state], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        m.put(last, scalars, ids)
        _, hi, _ = m.action(context)
        scf.YieldOp(m.advance(hi, arith.addi(hi, index(1)), scalars, ids, again=False))
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp(state)
    final = list(branch.results)
    _runtime(gen, "adj_ckpt_free", [context])
    # (of dynamic size, as every tape array: entries take adjit arrays)
    fresh = memref.alloc(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()],
                                           ir.IntegerType.get_signless(64)), [index(1)], [])
    memref.store(_c64(1), fresh, [index(0)])
    for k, r in zip(loop.scalars, final[:m.ns]):
        gen.vmap[op.results[k]] = r
    for k, i in zip(loop.slots, final[m.ns:]):
        gen.vmap[op.results[k]] = _pick(i, m.candidates)
    return _Tape(initial, None, *slots, last, scalars, ids, fresh)


def _counted_while(vmap: dict, op: ir.Operation) -> ir.Value:
    """A clone of the scf.while `op` that also counts its steps; returns the count."""
    idx = ir.IndexType.get()
    types = [r.type for r in op.results]
    before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
    loop = scf.WhileOp(types + [idx], [vmap.get(v, v) for v in op.operands] + [index(0)])
    new_before = loop.before.blocks.append(*types, idx)
    new_after = loop.after.blocks.append(*types, idx)
    for a, b in zip(before.arguments, new_before.arguments):
        vmap[a] = b
    with ir.InsertionPoint(new_before):
        for o in ops(before)[:-1]:
            clone_op(o, vmap)
        cond = terminator(before)
        scf.ConditionOp(vmap[cond.operands[0]], [vmap[v] for v in list(cond.operands)[1:]] +
                        [new_before.arguments[len(types)]])
    for a, b in zip(after.arguments, new_after.arguments):
        vmap[a] = b
    with ir.InsertionPoint(new_after):
        for o in ops(after)[:-1]:
            clone_op(o, vmap)
        scf.YieldOp([vmap[v] for v in terminator(after).operands] +
                    [arith.addi(new_after.arguments[len(types)], index(1))])
    for r, v in zip(op.results, loop.results):
        vmap[r] = v
    return loop.results[len(types)]


# == reverse =====================================================================================
def _runtime(gen: "ReverseGenerator", name: str, args: list[ir.Value]) -> ir.Value | None:
    """A call of the schedule's runtime function `name` (declared once per module)."""
    diff = gen.ctx.diff
    i64 = ir.IntegerType.get_signless(64)
    results = [] if name in ("adj_ckpt_free", "adj_ckpt_count") else [i64]
    if diff.lookup(name) is None:
        with ir.InsertionPoint(diff.body):
            decl = func.FuncOp(name, ir.FunctionType.get([i64] * len(args), results),
                               visibility="private")
        diff.symbols[name] = decl.operation
    call = func.CallOp(results, ir.FlatSymbolRefAttr.get(name), args)
    return call.result if results else None


def _i64(v: ir.Value) -> ir.Value:
    return arith.index_cast(ir.IntegerType.get_signless(64), v)


def _idx(v: ir.Value) -> ir.Value:
    return arith.index_cast(ir.IndexType.get(), v)


def _copy(src: ir.Value, src_at: ir.Value, dst: ir.Value, dst_at: ir.Value,
          n: ir.Value) -> None:
    """dst[dst_at : dst_at + n] = src[src_at : src_at + n] (1-D memrefs), as one memref.copy
    of views: a memcpy on the CPU, a device-to-device copy in a GPU host program
    (lower_cuda_host.py), where a loop would migrate the managed pages to the host."""
    memref.copy(_window(src, src_at, n), _window(dst, dst_at, n))


def _window(m: ir.Value, at: ir.Value, n: ir.Value) -> ir.Value:
    """m[at : at + n] of a 1-D memref, as a view."""
    dyn = ir.ShapedType.get_dynamic_size()
    elem = memref_type(m.type).element_type
    layout = ir.StridedLayoutAttr.get(dyn, [1])
    return memref.subview(m, [at], [n], [1], result_type=ir.MemRefType.get([dyn], elem,
                                                                          layout))


def _pick_typed(which: ir.Value, pool: list, t: ir.Type):
    """pool[which], among the entries of type `t` (`which` is one of theirs); the entries
    may be ir.Values or, for ids, index values."""
    matches = [(j, p) for j, p in enumerate(pool) if p.type == t]
    out = matches[0][1]
    for j, p in matches[1:]:
        out = arith.select(arith.cmpi(arith.CmpIPredicate.eq, which, index(j)), p, out)
    return out


def _pick(which: ir.Value, values: list[ir.Value]) -> ir.Value:
    out = values[0]
    for k, v in enumerate(values[1:], start=1):
        out = arith.select(arith.cmpi(arith.CmpIPredicate.eq, which, index(k)), v, out)
    return out


def _bytes(t: ir.Type) -> int:
    elem = memref_type(t).element_type
    width = getattr(elem, "width", 64)
    return max(1, width // 8)


def reverse(gen: "ReverseGenerator", op: ir.Operation) -> None:
    loop = loop_state(gen.ctx, op)
    # The turn runs the step's augmented and reverse functions back to back: nothing can
    # overwrite an array between them.
    sig = dataclasses.replace(gen.ctx.call_signature(loop.call),
                              overwritten=(False,) * len(loop.call.operands))
    d = gen.ctx.diff.derivative(sig, loop.call)
    layout = abi(sig)
    step_fn = gen.ctx.diff.symbols[sig.fn]
    step_results = list(func_type(step_fn).results)
    n_args = len(loop.args)
    is_while = op.name == "scf.while"
    tape = _Tape.of([gen.materialize(("tape", op, k))
                     for k in range(len(tape_types(gen.ctx, op)))], loop, is_while)
    if is_while:     # steps 0, 1, ... of the count the augmented pass kept
        lb, st, n = index(0), index(1), tape.count
    else:
        lb, ub, st = (gen.primal(v) for v in list(op.operands)[:3])
        n = trip_count(lb, ub, st)
    free_shadows = [gen.shadow(v) if a in SHADOWED else None
                    for v, a in zip(loop.free, sig.activity[1 + n_args:])]
    slot_dup = [sig.activity[1 + k] in SHADOWED for k in loop.slots]
    cand_shadows = [gen.shadow(c) for c in loop.candidates] if any(slot_dup) else []
    m = _Machine(gen, loop, sig.fn, step_results, n, lb, st,
                 [gen.primal(v) for v in loop.free], [gen.primal(c) for c in loop.candidates],
                 [gen.primal(b) for b in loop.buffers],
                 [gen.primal(loop.inits[k]) for k in loop.scalars])
    active_free = [j for j, a in enumerate(sig.activity[1 + n_args:]) if a == Activity.ACTIVE]
    float_scalars = [k for k in loop.scalars if is_float(loop.args[k].type)]
    d0 = [or_zero(gen.get_adj(op.results[k]), loop.args[k].type) for k in float_scalars]
    free_d0 = [zero(loop.free[j].type) for j in active_free]
    ns, na, nd = m.ns, len(loop.slots), len(d0)

    context, work = m.start()
    if is_while:
        slots = m.slots(work)
        fresh = arith.constant(ir.IntegerType.get_signless(1), 0)
    else:           # the augmented pass's sweep, taken once (see _Tape)
        slots = (tape.slots, tape.scalar_slots, tape.id_slots)
        fresh = arith.cmpi(arith.CmpIPredicate.ne, memref.load(tape.fresh, [index(0)]),
                           _c64(0))
        memref.store(_c64(0), tape.fresh, [index(0)])
    # The sweep to the first turn: stepped through where the augmented pass ran it, run
    # (from the initial state) otherwise.
    again = arith.xori(fresh, arith.constant(fresh.type, 1))
    start_over = scf.IfOp(again, [], has_else=False)
    with ir.InsertionPoint(start_over.then_block):
        m.take(tape.initial)
        scf.YieldOp([])
    act, *state = m.sweep(context, slots, again)
    if not is_while:
        branch = scf.IfOp(fresh, [v.type for v in state], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            m.take(tape.last)
            scf.YieldOp(tape.last_scalars + tape.last_ids)
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp(state)
        state = list(branch.results)

    # Then the actions from that turn on: the state is (carried scalars, ids, the carried
    # floats' adjoints, the free Active scalars' adjoints), and the action taken next.
    i64 = ir.IntegerType.get_signless(64)
    state0 = state + d0 + free_d0
    types = [v.type for v in state0]

    def split(values):
        return (values[:ns], values[ns:ns + na], values[ns + na:ns + na + nd],
                values[ns + na + nd:])

    loop_op = scf.WhileOp([i64] + types, [act] + state0)
    before = loop_op.before.blocks.append(i64, *types)
    after = loop_op.after.blocks.append(i64, *types)
    with ir.InsertionPoint(before):
        pending = before.arguments[0]
        scf.ConditionOp(arith.cmpi(arith.CmpIPredicate.ne, pending, _c64(DONE)),
                        list(before.arguments))
    with ir.InsertionPoint(after):
        action, values = after.arguments[0], list(after.arguments)[1:]
        scalars, ids, dscal, dfree = split(values)
        lo, hi, slot = m.action(context)

        def on_advance():
            return m.advance(lo, hi, scalars, ids) + dscal + dfree

        def on_takeshot():
            m.save(slots, _idx(slot), scalars, ids)
            return values

        def on_restore():
            return m.restore(slots, slot, tape.initial) + dscal + dfree

        def on_turn():
            vals = m.operands(hi, scalars, ids)
            shadows = [None] * len(vals)
            for k, dup in zip(loop.slots, slot_dup):
                if dup:
                    shadows[1 + k] = _pick(ids[loop.slots.index(k)], cand_shadows)
            for j, s in enumerate(free_shadows):
                shadows[1 + n_args + j] = s
            flat_args = layout.flatten(vals, shadows)
            aug = func.CallOp(list(func_type(gen.ctx.diff.symbols[d.aug]).results),
                              ir.FlatSymbolRefAttr.get(d.aug), flat_args)
            step_tape = layout.split_results(list(aug.results), len(step_results))[1]
            by_result = {}
            for pos, k in enumerate(loop.scalars):
                if k in float_scalars:
                    by_result[pos] = dscal[float_scalars.index(k)]
            dret = [or_zero(by_result.get(pos), t) for pos, t in enumerate(step_results)
                    if is_float(t)] if sig.ret_activity == Activity.ACTIVE else []
            grads = iter(func.CallOp(adjoint_types(func_type(step_fn), sig),
                                     ir.FlatSymbolRefAttr.get(d.rev),
                                     flat_args + dret + step_tape).results)
            new_d = [zero(loop.args[k].type) for k in float_scalars]
            new_free = list(dfree)
            for pos, a in enumerate(sig.activity):
                if a != Activity.ACTIVE:
                    continue
                g = next(grads)
                k = pos - 1
                if 0 <= k < n_args and k in float_scalars:
                    new_d[float_scalars.index(k)] = g
                elif k >= n_args:
                    j = active_free.index(k - n_args)
                    new_free[j] = arith.addf(new_free[j], g)
            return scalars + ids + new_d + new_free

        cases = [(ADVANCE, on_advance), (TAKESHOT, on_takeshot), (RESTORE, on_restore),
                 (TURN, on_turn)]
        done = _switch(action, cases, types, values)
        scf.YieldOp([_runtime(gen, "adj_ckpt_next", [context])] + done)
    result = list(loop_op.results)[1:]
    _, _, dscal, dfree = split(result)
    _runtime(gen, "adj_ckpt_free", [context])
    _leave_final_state(m, tape, n, is_while)
    for k, dk in zip(float_scalars, dscal):
        gen.add_adj(loop.inits[k], dk)
    for j, dj in zip(active_free, dfree):
        gen.add_adj(loop.free[j], dj)


def _leave_final_state(m: "_Machine", tape: "_Tape", n: ir.Value, is_while: bool) -> None:
    """Puts the arrays back as the forward pass left them: the schedule's restores and turns
    leave an early step's state in them, and what runs after this reverse may read them: a
    later reverse call of a split-mode tape (the reverse of the code after the loop, which
    reads the loop's final state where the augmented pass did not copy it) and the caller,
    when a state array is an argument. A for loop runs its last step again from the state
    before it (on the tape); a while loop copies the final state the tape keeps."""
    if is_while:
        m.take(tape.final)
        return
    ran = scf.IfOp(arith.cmpi(arith.CmpIPredicate.sgt, n, index(0)), [], has_else=False)
    with ir.InsertionPoint(ran.then_block):
        m.take(tape.last)
        last = arith.subi(n, index(1))
        m.advance(last, n, tape.last_scalars, tape.last_ids)
        scf.YieldOp([])


def _switch(action: ir.Value, cases: list[tuple[int, Callable[[], list]]],
            types: list[ir.Type], default: list[ir.Value]) -> list[ir.Value]:
    """The state after the case whose code `action` is (scf.if on each in turn)."""
    if not cases:
        return default
    (code, emit), rest = cases[0], cases[1:]
    is_it = arith.cmpi(arith.CmpIPredicate.eq, action,
                       arith.constant(ir.IntegerType.get_signless(64), code))
    branch = scf.IfOp(is_it, types, has_else=True)
    with ir.InsertionPoint(branch.then_block):
        scf.YieldOp(emit())
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp(_switch(action, rest, types, default))
    return list(branch.results)
