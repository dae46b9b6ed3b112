"""Checkpointed loops (`adjit.checkpointed`, an scf.for marked `adj.checkpoint`): reverse mode
keeps a few states of the loop instead of every step's tape, and runs steps again from them.

Outlining (`outline_checkpointed_loops`, before a function's reverse derivative is built):
the loop's body becomes a function, the step, `@__adj_step_*(t, carried..., free...) ->
(carried scalars...)`, and the body a call of it; the arrays the loop carries must be ones
it carries or ones made before it (`u, v = v, u`), so that which array each carried position
holds after a step is a fixed mapping (`_Loop.moves`). The state, found here and not listed
by the user, is what a step reads that may have changed by the time the reverse pass runs
it again: the carried scalars, which array each carried position holds, and the contents of
every array the step writes (the carried ones and free ones) or that is written after the
loop (`_Loop.buffers`).

Augmented: the loop as it is (the primal step, no tape), after copying the state's arrays
(the initial state) onto the tape: `("tape", loop, k)`, one array per state buffer.

Reverse: a loop over the actions of a schedule (runtime/native/checkpoint.cpp, called by
name: `adj_ckpt_*`): advance (primal steps), take a snapshot (into working slots, allocated
here, freed by buffer deallocation after the loop), restore (from a slot or the tape's initial state) and turn (the
step's augmented function, then its reverse one, on the current state: the adjoints of the
carried scalars and of the free Active scalars flow through it, the arrays' adjoints go into
their shadows). The tape is only read, so a tape serves several reverse calls.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from ...core.activity import Activity, SHADOWED
from ...dialects.adj import AdjError, CHECKPOINT_ATTR, KERNEL_ATTR
from .activity import terminator
from .memory import written_arrays
from .ir_util import (alloc_like, callee, clone_op, dims, func_type, index, is_ancestor,
                      is_float, is_memref, memref_type, numel, ops, or_zero, symbol_name,
                      trip_count, walk, zero)
from .signature import abi, adjoint_types

if TYPE_CHECKING:
    from .protocols import AugmentedGenerator, Host, ReverseGenerator, Shared

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
        owner = v.owner.owner.operation if hasattr(v.owner.owner, "operation") \
            else v.owner.owner
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
        if _may_be_new(diff, yields[k], loop, set()) or \
                not any(p.type == yields[k].type for p in pool):
            raise AdjError(loop, f"a checkpointed loop carries an array (position {k}) that "
                                 "its step makes; its state is kept in the arrays it is "
                                 "given: carry arrays made before the loop (swap them with "
                                 "`u, v = v, u`) and write into them")
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
        return ("slot", slots.index(args.index(v))) if v in args else \
            ("array", candidates.index(v))

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
    attr = ir.DictAttr(op.attributes[CHECKPOINT_ATTR])
    key = next(k for k in ("snapshots", "every", "max_bytes") if k in attr)
    state = _Loop(op, call, args, inits, free, scalars, slots, candidates, moves, buffers,
                  (key, ir.IntegerAttr(attr[key]).value))
    cache[op] = state
    return state


def tape_types(ctx: "Shared", op: ir.Operation) -> list[ir.Type]:
    """The tape values of a checkpointed loop: the initial contents of its state's arrays
    (and for a while loop, the number of steps it ran)."""
    count = [ir.IndexType.get()] if op.name == "scf.while" else []
    return [b.type for b in loop_state(ctx, op).buffers] + count


# == augmented ===================================================================================
def augmented(gen: "AugmentedGenerator", op: ir.Operation) -> None:
    """The initial state's arrays copied onto the tape, then the loop as it is."""
    loop = loop_state(gen.ctx, op)
    for k, b in enumerate(loop.buffers):
        copy = alloc_like(gen.vmap[b])
        memref.copy(gen.vmap[b], copy)
        gen.extra[("tape", op, k)] = copy
    if op.name == "scf.for":
        clone_op(op, gen.vmap)
    else:
        gen.extra[("tape", op, len(loop.buffers))] = _counted_while(gen.vmap, op)


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
    results = [] if name == "adj_ckpt_free" else [i64]
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


def _flat(m: ir.Value) -> ir.Value:
    t = memref_type(m.type)
    if t.rank == 1:
        return m
    return memref.collapse_shape(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()],
                                                   t.element_type), m, [list(range(t.rank))])


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
    if op.name == "scf.for":
        lb, ub, st = (gen.primal(v) for v in list(op.operands)[:3])
        n = trip_count(lb, ub, st)
    else:           # a while loop: steps 0, 1, ... of the count the augmented pass kept
        lb, st = index(0), index(1)
        n = gen.materialize(("tape", op, len(loop.buffers)))
    free = [gen.primal(v) for v in loop.free]
    free_shadows = [gen.shadow(v) if a in SHADOWED else None
                    for v, a in zip(loop.free, sig.activity[1 + n_args:])]
    candidates = [gen.primal(c) for c in loop.candidates]
    slot_dup = [sig.activity[1 + k] in SHADOWED for k in loop.slots]
    cand_shadows = [gen.shadow(c) for c in loop.candidates] if any(slot_dup) else []
    buffers = [gen.primal(b) for b in loop.buffers]
    initial = [gen.materialize(("tape", op, k)) for k in range(len(loop.buffers))]
    inits = [gen.primal(loop.inits[k]) for k in loop.scalars]
    ids0 = [index(loop.candidates.index(loop.inits[k])) for k in loop.slots]
    active_free = [j for j, a in enumerate(sig.activity[1 + n_args:]) if a == Activity.ACTIVE]
    float_scalars = [k for k in loop.scalars if is_float(loop.args[k].type)]
    d0 = [or_zero(gen.get_adj(op.results[k]), loop.args[k].type) for k in float_scalars]
    free_d0 = [zero(loop.free[j].type) for j in active_free]

    # The schedule, and the working slots its snapshots go into.
    sizes = [numel(dims(b)) for b in buffers]
    key, value = loop.schedule
    i64 = ir.IntegerType.get_signless(64)
    c = lambda v: arith.constant(i64, v)   # noqa: E731
    if key == "every":
        kind, snaps, every = PERIODIC, c(1), c(value)
        segments = arith.ceildivsi(_i64(n), every)
        work = arith.addi(arith.maxsi(arith.subi(segments, c(1)), c(0)),
                          arith.subi(every, c(1)))
    else:
        if key == "snapshots":
            snaps = c(value)
        else:   # as many states as max_bytes holds, one at least
            state_bytes = c(8 * (len(loop.scalars) + len(loop.slots)) + 1)
            for b, size in zip(buffers, sizes):
                state_bytes = arith.addi(state_bytes, arith.muli(_i64(size), c(_bytes(b.type))))
            snaps = arith.maxsi(arith.divsi(c(value), state_bytes), c(1))
        kind, every = REVOLVE, c(0)
        work = arith.subi(snaps, c(1))
    schedule = _runtime(gen, "adj_ckpt_new", [_i64(n), snaps, c(kind), every])
    work = _idx(work)
    slots_of = [memref.alloc(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()],
                                               memref_type(b.type).element_type),
                             [arith.muli(work, size)], []) for b, size in zip(buffers, sizes)]
    flat = [_flat(b) for b in buffers]
    dyn = ir.ShapedType.get_dynamic_size()
    scalar_slots = [memref.alloc(ir.MemRefType.get([dyn], loop.args[k].type), [work], [])
                    for k in loop.scalars]
    id_slots = [memref.alloc(ir.MemRefType.get([dyn], ir.IndexType.get()), [work], [])
                for _ in loop.slots]

    # The loop over actions: the state is (carried scalars, which candidate each array slot
    # holds, the carried floats' adjoints, the free Active scalars' adjoints).
    state0 = inits + ids0 + d0 + free_d0
    types = [v.type for v in state0]
    ns, na, nd = len(inits), len(ids0), len(d0)

    def split(state):
        return (state[:ns], state[ns:ns + na], state[ns + na:ns + na + nd],
                state[ns + na + nd:])

    def arrays(ids):
        return [_pick(i, candidates) for i in ids]

    def operands(t, scalars, ids):
        vals = [None] * n_args
        for k, v in zip(loop.scalars, scalars):
            vals[k] = v
        for k, v in zip(loop.slots, arrays(ids)):
            vals[k] = v
        iv = arith.addi(lb, arith.muli(t, st))
        return [iv] + vals + free

    def moved(ids, out):
        """The ids after a step whose results are `out`."""
        def source(m):
            return ids[m[1]] if m[0] == "slot" else index(m[1])
        new = []
        for m in loop.moves:
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

    def advanced(t, scalars, ids):
        """One primal step from (scalars, ids): the next ones."""
        out = list(func.CallOp(step_results, ir.FlatSymbolRefAttr.get(sig.fn),
                               operands(t, scalars, ids)).results)
        return out[:ns], moved(ids, out)

    loop_op = scf.WhileOp([i64] + types, state0)   # (the last action, the state)
    before = loop_op.before.blocks.append(*types)
    after = loop_op.after.blocks.append(i64, *types)
    with ir.InsertionPoint(before):
        action = _runtime(gen, "adj_ckpt_next", [schedule])
        scf.ConditionOp(arith.cmpi(arith.CmpIPredicate.ne, action, c(DONE)),
                        [action] + list(before.arguments))
    with ir.InsertionPoint(after):
        action, state = after.arguments[0], list(after.arguments)[1:]
        scalars, ids, dscal, dfree = split(state)
        lo = _idx(_runtime(gen, "adj_ckpt_from", [schedule]))
        hi = _idx(_runtime(gen, "adj_ckpt_to", [schedule]))
        slot = _runtime(gen, "adj_ckpt_slot", [schedule])

        def on_advance():
            run = scf.ForOp(lo, hi, index(1), scalars + ids)
            with ir.InsertionPoint(run.body):
                got = list(run.inner_iter_args)
                s2, i2 = advanced(run.induction_variable, got[:ns], got[ns:])
                scf.YieldOp(s2 + i2)
            return list(run.results) + dscal + dfree

        def on_takeshot():
            at = _idx(slot)
            for f, w, size in zip(flat, slots_of, sizes):
                _copy(f, index(0), w, arith.muli(at, size), size)
            for v, m in zip(scalars + ids, scalar_slots + id_slots):
                memref.store(v, m, [at])
            return state

        def on_restore():
            at = _idx(slot)
            initial_case = arith.cmpi(arith.CmpIPredicate.slt, slot, c(0))
            branch = scf.IfOp(initial_case, types[:ns + na], has_else=True)
            with ir.InsertionPoint(branch.then_block):
                for src, f, size in zip(initial, flat, sizes):
                    _copy(_flat(src), index(0), f, index(0), size)
                scf.YieldOp(inits + ids0)
            with ir.InsertionPoint(branch.else_block):
                for f, w, size in zip(flat, slots_of, sizes):
                    _copy(w, arith.muli(at, size), f, index(0), size)
                scf.YieldOp([memref.load(m, [at]) for m in scalar_slots + id_slots])
            return list(branch.results) + dscal + dfree

        def on_turn():
            vals = operands(hi, scalars, ids)
            shadows = [None] * len(vals)
            for k, dup in zip(loop.slots, slot_dup):
                if dup:
                    shadows[1 + k] = _pick(ids[loop.slots.index(k)], cand_shadows)
            for j, s in enumerate(free_shadows):
                shadows[1 + n_args + j] = s
            flat_args = layout.flatten(vals, shadows)
            aug = func.CallOp(list(func_type(gen.ctx.diff.symbols[d.aug]).results),
                              ir.FlatSymbolRefAttr.get(d.aug), flat_args)
            n_primal = len(step_results) if sig.with_primal else 0
            tape = list(aug.results)[n_primal:]
            by_result = {}
            for pos, k in enumerate(loop.scalars):
                if k in float_scalars:
                    by_result[pos] = dscal[float_scalars.index(k)]
            dret = [or_zero(by_result.get(pos), t) for pos, t in enumerate(step_results)
                    if is_float(t)] if sig.ret_activity == Activity.ACTIVE else []
            grads = iter(func.CallOp(adjoint_types(func_type(step_fn), sig),
                                     ir.FlatSymbolRefAttr.get(d.rev),
                                     flat_args + dret + tape).results)
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
        scf.YieldOp(_switch(action, cases, types, state))
    result = list(loop_op.results)[1:]
    _, _, dscal, dfree = split(result)
    _runtime(gen, "adj_ckpt_free", [schedule])
    for k, dk in zip(float_scalars, dscal):
        gen.add_adj(loop.inits[k], dk)
    for j, dj in zip(active_free, dfree):
        gen.add_adj(loop.free[j], dj)


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
