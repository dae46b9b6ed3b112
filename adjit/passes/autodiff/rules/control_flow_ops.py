"""Derivative rules of structured control flow: scf.for, scf.if, scf.while, scf.parallel.

forward:   the same op, carrying after the primal values one tangent (or the shadows) per
           position that any value joined there needs (`_positions`).
augmented: the same op, threading the tape's stacks through the regions that push onto them
           (AugGen.threaded) and, for an scf.while, counting its iterations; an scf.parallel
           whose body saves values runs sequentially, in the order the reverse pass undoes.
reverse:   control flow reversed structurally: an scf.if becomes an scf.if on the same
           condition, an scf.for an scf.for over the same iterations backwards, an scf.while
           an scf.for over its recorded iteration count, an scf.parallel an scf.parallel when
           its iterations can add into shared memory without racing (else a backward
           scf.for). Adjoints of values defined outside a region and used in it are threaded
           through the reversed region (loop-carried, or if results), as are the adjoints of
           loop-carried values and the shadows of arrays made inside the region. In a
           reversed loop, such an outer value's adjoint is split over one accumulator per
           site that adds to it, summed after the loop: see loop_slots.py.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import arith, memref, scf

from ....dialects.adj import AdjError, CHECKPOINT_ATTR, COVERS_ONCE_ATTR
from ...ir_util import terminator
from ...ir_util import (dims, for_each_index, index, is_float, is_memref, numel, or_zero, ops,
                        trip_count, unravel, walk)
from ...op_facts import facts
from ...summation import accumulator_type, pairwise_sum
from ..analysis.overwritten import shadow_fresh_before
from ..generate.adjoints import NeedsTape, Scope
from ..generate.gather import gather_rows, prepare_rows, row_sites
from ..generate.tape import key_block
from ..protocols import OpRules
from .checkpoint import augmented as checkpointed_augmented
from .checkpoint import reverse as checkpointed_reverse
from .loop_slots import LoopSlots, carry_in, sum_slots
from .memory_ops import add_into, zero_fill_of

if TYPE_CHECKING:
    from ..protocols import AugmentedGenerator, ForwardGenerator, ReverseGenerator


# == forward ====================================================================================
# Control flow carries, after the primal values, one derivative (tangent or shadow) per
# carried position; a position is carried when any value joined there needs one.
def _positions(gen: "ForwardGenerator", *groups: list[ir.Value]) -> list[int]:
    return [k for k, vs in enumerate(zip(*groups)) if any(gen.carried(v) for v in vs)]


def _extended(gen: "ForwardGenerator", values: list[ir.Value], ks: list[int]) -> list[ir.Value]:
    return [gen.vmap[v] for v in values] + [d for k in ks for d in gen.derivatives_of(values[k])]


def _types(gen: "ForwardGenerator", values: list[ir.Value], ks: list[int]) -> list[ir.Type]:
    return [v.type for v in values] + [t for k in ks for t in gen.derivative_types(values[k])]


def _bind(gen: "ForwardGenerator", olds: list[ir.Value], news: list[ir.Value],
          ks: list[int]) -> None:
    for v, n in zip(olds, news):
        gen.vmap[v] = n
    rest = iter(news[len(olds):])
    for k in ks:
        gen.bind(olds[k], rest)


def forward_for(gen: "ForwardGenerator", op: ir.Operation) -> None:
    body = op.regions[0].blocks[0]
    inits = list(op.operands)[3:]
    args = list(body.arguments)[1:]
    ks = _positions(gen, args, list(op.results))
    lb, ub, step = (gen.vmap[v] for v in list(op.operands)[:3])
    loop = scf.ForOp(lb, ub, step, _extended(gen, inits, ks))
    gen.vmap[body.arguments[0]] = loop.body.arguments[0]
    _bind(gen, args, list(loop.body.arguments)[1:], ks)
    with ir.InsertionPoint(loop.body):
        gen.block(body)
        scf.YieldOp(_extended(gen, list(terminator(body).operands), ks))
    _bind(gen, list(op.results), list(loop.results), ks)


def forward_if(gen: "ForwardGenerator", op: ir.Operation) -> None:
    results = list(op.results)
    ks = _positions(gen, results)
    has_else = len(op.regions[1].blocks) > 0
    new = scf.IfOp(gen.vmap[op.operands[0]], _types(gen, results, ks), has_else=has_else)
    branches = [(op.regions[0].blocks[0], new.then_block)]
    if has_else:
        branches.append((op.regions[1].blocks[0], new.else_block))
    for old, block in branches:
        with ir.InsertionPoint(block):
            gen.block(old)
            scf.YieldOp(_extended(gen, list(terminator(old).operands), ks))
    _bind(gen, results, list(new.results), ks)


def forward_while(gen: "ForwardGenerator", op: ir.Operation) -> None:
    before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
    b_args, a_args, results = list(before.arguments), list(after.arguments), list(op.results)
    kb = _positions(gen, b_args)
    ka = _positions(gen, a_args, results)
    loop = scf.WhileOp(_types(gen, results, ka), _extended(gen, list(op.operands), kb))
    new_before = loop.before.blocks.append(*_types(gen, b_args, kb))
    new_after = loop.after.blocks.append(*_types(gen, a_args, ka))
    _bind(gen, b_args, list(new_before.arguments), kb)
    with ir.InsertionPoint(new_before):
        gen.block(before)
        cond = terminator(before)
        scf.ConditionOp(gen.vmap[cond.operands[0]],
                        _extended(gen, list(cond.operands)[1:], ka))
    _bind(gen, a_args, list(new_after.arguments), ka)
    with ir.InsertionPoint(new_after):
        gen.block(after)
        scf.YieldOp(_extended(gen, list(terminator(after).operands), kb))
    _bind(gen, results, list(loop.results), ka)


def forward_parallel(gen: "ForwardGenerator", op: ir.Operation) -> None:
    if op.results:
        raise AdjError(op, "autodiff: scf.parallel with reductions is not supported")
    _parallel_copy(gen, op.regions[0].blocks[0], [gen.vmap[v] for v in op.operands])


def _parallel_copy(gen, body: ir.Block, bounds: list[ir.Value]) -> None:
    """An scf.parallel over `bounds` (lower, upper, step per dimension) whose body is the
    generator's code for `body`."""
    n = len(body.arguments)
    loop = scf.ParallelOp([], bounds[:n], bounds[n:2 * n], bounds[2 * n:], [])
    block = loop.regions[0].blocks.append(*[a.type for a in body.arguments])
    for a, b in zip(body.arguments, block.arguments):
        gen.vmap[a] = b
    with ir.InsertionPoint(block):
        gen.block(body)
        scf.ReduceOp([], 0)


# == augmented ==================================================================================
def augmented_for(gen: "AugmentedGenerator", op: ir.Operation) -> None:
    if CHECKPOINT_ATTR in op.attributes:
        checkpointed_augmented(gen, op)
        return
    body = op.regions[0].blocks[0]
    inits = list(op.operands)[3:]
    state = gen.threaded(op)
    lb, ub, step = (gen.vmap[v] for v in list(op.operands)[:3])
    loop = scf.ForOp(lb, ub, step, [gen.vmap[v] for v in inits] + state)
    new_args = list(loop.body.arguments)
    gen.vmap[body.arguments[0]] = new_args[0]
    gen.counted[op] = (new_args[0], lb, ub, step)
    for a, b in zip(list(body.arguments)[1:], new_args[1:]):
        gen.vmap[a] = b
    n = len(inits)
    if state:
        gen.stacks.values = new_args[1 + n:]
    with ir.InsertionPoint(loop.body):
        gen.block(body)
        scf.YieldOp([gen.vmap[v] for v in terminator(body).operands] +
                    (gen.stacks.values if state else []))
    for r, v in zip(op.results, loop.results):
        gen.vmap[r] = v
    if state:
        gen.stacks.values = list(loop.results)[n:]


def augmented_if(gen: "AugmentedGenerator", op: ir.Operation) -> None:
    state = gen.threaded(op)
    n = len(op.results)
    has_else = len(op.regions[1].blocks) > 0
    new = scf.IfOp(gen.vmap[op.operands[0]], [r.type for r in op.results] +
                   [v.type for v in state], has_else=has_else or bool(state))
    branches = [(op.regions[0], new.then_block)]
    if has_else or state:
        branches.append((op.regions[1], new.else_block))
    for region, block in branches:
        if state:
            gen.stacks.values = list(state)
        with ir.InsertionPoint(block):
            if len(region.blocks):
                gen.block(region.blocks[0])
                yields = [gen.vmap[v] for v in terminator(region.blocks[0]).operands]
            else:
                yields = []
            scf.YieldOp(yields + (gen.stacks.values if state else []))
    for r, v in zip(op.results, new.results):
        gen.vmap[r] = v
    if state:
        gen.stacks.values = list(new.results)[n:]


def augmented_parallel(gen: "AugmentedGenerator", op: ir.Operation) -> None:
    """Kept parallel unless its body saves values: then run sequentially, in the order
    the reverse pass undoes, so that the saves can go on the stacks."""
    body = op.regions[0].blocks[0]
    dims_ = len(body.arguments)
    bounds = [gen.vmap[v] for v in op.operands]
    state = gen.threaded(op)
    if not state:
        _parallel_copy(gen, body, bounds)
        return
    counts = [trip_count(bounds[d], bounds[dims_ + d], bounds[2 * dims_ + d])
              for d in range(dims_)]
    total = index(1)
    for c in counts:
        total = arith.muli(total, c)
    zero, one = index(0), index(1)
    loop = scf.ForOp(zero, total, one, state)
    gen.counted[op] = (loop.induction_variable, zero, total, one)
    gen.stacks.values = list(loop.inner_iter_args)
    with ir.InsertionPoint(loop.body):
        for d, iv in enumerate(unravel(loop.induction_variable, counts)):
            gen.vmap[body.arguments[d]] = arith.addi(
                bounds[d], arith.muli(iv, bounds[2 * dims_ + d]))
        gen.block(body)
        scf.YieldOp(gen.stacks.values)
    gen.stacks.values = list(loop.results)


def augmented_while(gen: "AugmentedGenerator", op: ir.Operation) -> None:
    if CHECKPOINT_ATTR in op.attributes:
        checkpointed_augmented(gen, op)
        return
    before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
    counted = ("count", op) in gen.ctx.plan.types
    state = gen.threaded(op)
    extra_types = ([ir.IndexType.get()] if counted else []) + [v.type for v in state]
    inits = [gen.vmap[v] for v in op.operands] + ([index(0)] if counted else []) + state
    n_b, n_a = len(before.arguments), len(after.arguments)
    loop = scf.WhileOp([r.type for r in op.results] + extra_types, inits)
    new_before = loop.before.blocks.append(*[a.type for a in before.arguments], *extra_types)
    new_after = loop.after.blocks.append(*[a.type for a in after.arguments], *extra_types)

    def bind(old: ir.Block, new: ir.Block, n: int) -> list[ir.Value]:
        for a, b in zip(old.arguments, new.arguments):
            gen.vmap[a] = b
        rest = list(new.arguments)[n:]
        if state:
            gen.stacks.values = rest[1:] if counted else rest
        return rest[:1] if counted else []

    count = bind(before, new_before, n_b)
    with ir.InsertionPoint(new_before):
        gen.block(before)
        cond = terminator(before)
        scf.ConditionOp(gen.vmap[cond.operands[0]],
                        [gen.vmap[v] for v in list(cond.operands)[1:]] + count +
                        (gen.stacks.values if state else []))
    count = bind(after, new_after, n_a)
    with ir.InsertionPoint(new_after):
        gen.block(after)
        scf.YieldOp([gen.vmap[v] for v in terminator(after).operands] +
                    [arith.addi(c, index(1)) for c in count] +
                    (gen.stacks.values if state else []))
    res = list(loop.results)
    for r, v in zip(op.results, res):
        gen.vmap[r] = v
    rest = res[len(op.results):]
    if counted:
        gen.extra[("count", op)] = rest[0]
        rest = rest[1:]
    if state:
        gen.stacks.values = rest


# == reverse ====================================================================================
def _open(gen: "ReverseGenerator", outer: list[ir.Value],
          carried: list[list[ir.Value | None]], slots: LoopSlots | None = None) -> None:
    """A new adjoint frame for a reversed region; `carried[k]`: outer[k]'s adjoint coming
    in, as one value, or in a loop one per slot."""
    gen.open_frame(outer, carried, slots.slot_of if slots else None)


def _set_outer(gen: "ReverseGenerator", outer: list[ir.Value],
               values: list[ir.Value | None]) -> None:
    for o, v in zip(outer, values):
        gen.set_adj(o, v)


def _at(load: ir.Operation, iv: ir.Value) -> bool:
    """Whether `load` reads element [iv] (of a 1-D memref): the iteration's own element."""
    indices = list(load.operands)[1:]
    return len(indices) == 1 and indices[0] == iv


def reverse_if(gen: "ReverseGenerator", op: ir.Operation) -> None:
    outer = gen.outer(op)
    results = [r for r in op.results if gen.act.active(r)]
    seeds = {r: gen.get_adj(r) for r in results}
    ms = _threaded_positions(gen, list(op.results))
    shadows = [gen.shadow(op.results[k]) for k in ms]
    cond = gen.primal(op.operands[0])
    new = scf.IfOp(cond, [o.type for o in outer], has_else=True)
    for region, block in ((op.regions[0], new.then_block), (op.regions[1], new.else_block)):
        with ir.InsertionPoint(block):
            _open(gen, outer, [[gen.get_adj(o)] for o in outer])
            if len(region.blocks):
                old = region.blocks[0]
                scope = gen.enter(old)
                yields = list(terminator(old).operands)
                for r in results:
                    gen.add_adj(yields[r.result_number], seeds[r])
                _thread_shadows(gen, scope, [yields[k] for k in ms], shadows)
                gen.reverse_block(old)
                gen.leave()
            out = gen.close_frame(outer)
            scf.YieldOp([or_zero(v, o.type) for v, o in zip(out, outer)])
    _set_outer(gen, outer, list(new.results))


def reverse_for(gen: "ReverseGenerator", op: ir.Operation) -> None:
    if CHECKPOINT_ATTR in op.attributes:
        checkpointed_reverse(gen, op)
        return
    body = op.regions[0].blocks[0]
    args, inits = list(body.arguments)[1:], list(op.operands)[3:]
    yields = list(terminator(body).operands)
    ks = [k for k in range(len(args)) if gen.act.active(args[k])
          or gen.act.active(op.results[k])]
    ms = _threaded_positions(gen, args)
    outer = gen.outer(op)
    # The body's yield is reversed by this handler, before the body.
    slots = LoopSlots(gen.act, outer, [(inner, [inner]) for inner in ops(body)[:-1]] +
                      [(op, [terminator(body)])])
    m = slots.total
    lb, ub, step = (gen.primal(v) for v in list(op.operands)[:3])
    n = trip_count(lb, ub, step)
    carried = ([or_zero(gen.get_adj(op.results[k]), args[k].type) for k in ks] +
               carry_in(gen, outer, slots) + [gen.shadow(op.results[k]) for k in ms])
    zero_i, one_i = arith.constant(lb.type, 0), arith.constant(lb.type, 1)
    loop = scf.ForOp(zero_i, n, one_i, carried)
    with ir.InsertionPoint(loop.body):
        scope = gen.enter(body)
        with ir.InsertionPoint(scope.marker):
            j = loop.induction_variable
            scope.values[body.arguments[0]] = arith.addi(
                lb, arith.muli(arith.subi(arith.subi(n, one_i), j), step))
        c = list(loop.body.arguments)[1:]
        _open(gen, outer, slots.split(c[len(ks):len(ks) + m]), slots)
        for k, ck in zip(ks, c):
            gen.add_adj(yields[k], ck)
        _thread_shadows(gen, scope, [yields[k] for k in ms], c[len(ks) + m:])
        gen.reverse_block(body)
        out_shadows = [gen.shadow(args[k]) for k in ms]
        gen.leave()
        out_args = [or_zero(gen.get_adj(args[k]), args[k].type) for k in ks]
        out_outer = gen.close_frame(outer)
        scf.YieldOp(out_args + [or_zero(v, c.type) for v, c in
                                zip(out_outer, c[len(ks):len(ks) + m])] + out_shadows)
    res = list(loop.results)
    sum_slots(gen, outer, slots, res[len(ks):len(ks) + m])
    for k, r in zip(ks, res):
        gen.add_adj(inits[k], r)
    for k, r in zip(ms, res[len(ks) + m:]):
        add_into(gen.shadow(inits[k]), r)


def _threaded_positions(gen: "ReverseGenerator", values: list[ir.Value]) -> list[int]:
    """Positions of shadowed arrays that control flow joins without known sites."""
    return [k for k, v in enumerate(values) if is_memref(v.type) and gen.act.shadowed(v)
            and gen.ctx.sites(v) is None]


def _thread_shadows(gen: "ReverseGenerator", scope: Scope, yielded: list[ir.Value],
                    shadows: list[ir.Value]) -> None:
    """In a reversed region, the shadows of the arrays it yields are the ones threaded in:
    bound to values of the region, added into those of values from outside it."""
    for v, s in zip(yielded, shadows):
        key = ("shadow", v)
        if key_block(key) != scope.block:
            add_into(gen.shadow(v), s)
        elif key in scope.values:
            add_into(scope.values[key], s)
        else:
            scope.values[key] = s


def reverse_parallel(gen: "ReverseGenerator", op: ir.Operation) -> None:
    if op.results:
        raise AdjError(op, "autodiff: scf.parallel with reductions is not supported")
    if _reverse_covering(gen, op):
        return
    private = _parallel_safe(gen, op)
    if private is not None:
        state = gen.checkpoint()
        attempt: list[ir.Operation] = []
        try:
            _reverse_parallel(gen, op, attempt, private)
            return
        except NeedsTape:
            gen.rollback(state)
            for emitted in reversed(attempt):
                emitted.erase()
            gen.ctx.plan.drop_inside(op)
    elif _reverse_gathered(gen, op):
        return
    _reverse_sequential(gen, op)


def _covered_array(gen: "ReverseGenerator", op: ir.Operation):
    """(the array, its loads) for a loop the frontend marked COVERS_ONCE_ATTR (a reduction
    over a whole C-contiguous array: each element loaded once, compiler/arrays.py `reduce`),
    where its loads are all of one array defined outside it and nothing else in the nest
    touches that array's memory; else None."""
    if COVERS_ONCE_ATTR not in op.attributes or gen.ctx.kernel:
        return None
    loads = [inner for inner in walk(op) if inner.name == "memref.load"]
    if not loads or any(load.operands[0] != loads[0].operands[0] for load in loads):
        return None
    m = loads[0].operands[0]
    if _defined_inside(m, op):
        return None
    c = gen.act.classes.find(m)
    for inner in walk(op):
        if inner != op and inner.name != "memref.load" and any(
                is_memref(v.type) and gen.act.classes.find(v) == c for v in inner.operands):
            return None
    return m, loads


def _reverse_covering(gen: "ReverseGenerator", op: ir.Operation) -> bool:
    """The reversal of a loop reading each element of one array once (_covered_array): its
    iterations add into distinct shadow elements, so it runs in parallel (its chunks do not
    overlap); and where the shadow is untouched so far (overwritten.shadow_fresh_before: only its
    zero-fill has run) it stores each element's adjoint instead of adding it, and zero-fills
    the shadow first only when the loop covers less than its whole allocation (a run-time
    check of the element counts). G3's `sum(out)`: one pass of stores over `out`'s 16 MB
    adjoint, in parallel, instead of a memset and a serial pass of adds. Whether it did."""
    found = _covered_array(gen, op)
    if found is None or _parallel_safe(gen, op, found[1]) != []:
        return False
    m, loads = found
    fresh = (STORE_FRESH and gen.act.shadowed(m)
             and shadow_fresh_before(gen.ctx.fn, gen.act.classes, op, m))
    if not fresh and not PARALLEL_ADDS:
        return False
    state = gen.checkpoint()
    attempt: list[ir.Operation] = []
    gen.covering_loads = {load.operation for load in loads} if fresh else set()
    gen.covering_done = set()
    try:
        _reverse_parallel(gen, op, attempt)
    except NeedsTape:
        gen.rollback(state)
        for emitted in reversed(attempt):
            emitted.erase()
        gen.ctx.plan.drop_inside(op)
        return False
    finally:
        gen.covering_loads = set()
    # Every load stored its element (an irrelevant one, not reversed, would leave garbage
    # where the zero-fill no longer runs): only then may the fill go.
    if fresh and gen.covering_done == {load.operation for load in loads}:
        _fill_unless_covered(gen, m, attempt[0], attempt[-1])
    return True


# Switches for paired measurements (benchmarks/bench_sum_reverse.py: G3 before/after):
# the store form into fresh shadows, and the parallel reversal of covering loops that add.
STORE_FRESH = True
PARALLEL_ADDS = True


def _fill_unless_covered(gen: "ReverseGenerator", m: ir.Value, before: ir.Operation,
                         reversed_loop: ir.Operation) -> None:
    """Moves the zero-fill of `m`'s root allocation's shadow to just `before` the reversed
    loop, under `if numel(m) != numel(shadow)`: a loop storing every element of `m`, all of
    the allocation, leaves nothing for the fill to do; one over part of it (a view of fewer
    elements) still needs the rest zeroed. Nothing touched the shadow between its fill and
    here (shadow_fresh_before), so the move changes nothing else. Left where it is when
    the reversed loop is not in the fill's block."""
    root = _root(m)
    if not (isinstance(root, ir.OpResult) and root.owner.operation.name == "memref.alloc"):
        return
    shadow = gen.shadow(root)
    fill = zero_fill_of(shadow, reversed_loop)
    # Only within one block: moved into a branch (a sum under an `if`) or a loop, the fill
    # would not run, or run again, where the other paths still need it once.
    if fill is None or fill.block != before.block:
        return
    with ir.InsertionPoint(before):
        # (m's shadow has m's shape; m itself might have to come from the tape)
        covered = arith.cmpi(arith.CmpIPredicate.eq, numel(dims(gen.shadow(m))),
                             numel(dims(shadow)))
        partly = arith.xori(covered, arith.constant(ir.IntegerType.get_signless(1), 1))
        branch = scf.IfOp(partly)
        with ir.InsertionPoint(branch.then_block):
            end = scf.YieldOp([])
    fill.move_before(end)


def _reverse_gathered(gen: "ReverseGenerator", op: ir.Operation) -> bool:
    """The parallel reversal with the adds of shifted reads in gather form (gather.row_sites:
    a stencil written with slices), where it applies; whether it did."""
    plan = row_sites(gen, op)
    if plan is None:
        return False
    state = gen.checkpoint()
    attempt: list[ir.Operation] = []
    try:
        prepare_rows(gen, op, plan)
        _reverse_parallel(gen, op, attempt)
    except NeedsTape:
        gen.gather_row_sites = {}
        gen.rollback(state)
        for emitted in reversed(attempt):
            emitted.erase()
        gen.ctx.plan.drop_inside(op)
        return False
    gather_rows(gen, attempt[-1], plan)
    return True


def _parallel_safe(gen: "ReverseGenerator", op: ir.Operation,
                   covering: list[ir.Operation] = ()) -> list[ir.Value] | None:
    """Whether the reversed iterations may run in parallel: one-dimensional, and adding
    into no shadow that another iteration may also add into (loads, atomics, copies,
    calls and launches might; a store's element belongs to its iteration, and so does a
    load at the iteration's own index, as in the frontend's element-wise loops).
    (Marking the frontend's reduction chunks, which read disjoint ranges, parallel too
    made gradients slower: 1.3 -> 3 ms on sum((a*x+b-y)**2), 4M f32, whose sequential
    reversal LLVM vectorises; measured again once reversed loops vectorised with Active
    scalars: 2.7 -> 4.1 ms. The sequential reversal runs from the arrays' ends, which the
    augmented pass touched last and the cache still holds; the parallel one starts each
    thread's share from its beginning, evicted by then. That was a sum of an expression;
    a sum of a plain array, whose loop the frontend marks COVERS_ONCE_ATTR, is reversed in
    parallel by _reverse_covering: G3's gradient 7.3 -> 6.3 ms with its adds in parallel,
    5.4 ms storing them, paired, two threads.)
    Generalised to the frontend's loop nests (arrays.for_each): a load whose first index is
    the iteration's, where every access of that array in the loop is through the same
    memref at that first index, reads the iteration's own row. And a load at indices that
    do not depend on the iteration, from an array the loop only loads from (a broadcast
    operand, `x @ w + b`'s b), is allowed too: its adjoint goes to a private copy of the
    shadow per chunk of iterations, summed into the shadow after the loop (the returned
    list of such arrays; None: not safe). `covering`: loads that read each element of
    their array once in the whole nest (_covered_array), which no two iterations share."""
    args = list(op.regions[0].blocks[0].arguments)
    if len(args) != 1:
        return None
    iv = args[0]
    accesses = _accesses(op)
    varying = _depends_on(op, iv)
    private: list[ir.Value] = []
    for inner in walk(op):
        if inner.name == "memref.load" and _at(inner, iv):
            continue
        if inner in covering:
            continue     # (each element loaded once in the whole nest: no two iterations)
        if inner.name == "memref.load" and _own_row(inner, iv, accesses):
            continue
        if facts(inner.name).shared_adds and gen.act.relevant(inner):
            m = inner.operands[0]
            if inner.name == "memref.load" and _broadcast_load(inner, op, varying, accesses):
                if m not in private:
                    private.append(m)
                continue
            return None
    return private


def _root(m: ir.Value) -> ir.Value:
    """The array `m` views (itself if it is no view)."""
    while isinstance(m, ir.OpResult) and facts(m.owner.operation.name).view:
        m = m.owner.operation.operands[0]
    return m


def _accesses(op: ir.Operation) -> dict:
    """Per root array, the ops inside `op` that touch its elements or pass it on."""
    out: dict = {}
    for inner in walk(op):
        if inner == op or inner.name == "memref.dim" or facts(inner.name).view:
            continue
        for v in inner.operands:
            if is_memref(v.type):
                out.setdefault(_root(v), []).append(inner)
    return out


def _depends_on(op: ir.Operation, iv: ir.Value) -> set:
    """The values inside `op` computed from `iv` (through operands and the block arguments
    of regions whose op takes one)."""
    deps = {iv}
    for inner in walk(op):
        if inner == op:
            continue
        if any(v in deps for v in inner.operands):
            deps.update(inner.results)
            for region in inner.regions:
                for block in region.blocks:
                    deps.update(block.arguments)
    return deps


def _own_row(load: ir.Operation, iv: ir.Value, accesses: dict) -> bool:
    """Whether `load` reads the iteration's own row: its first index is `iv`, and every
    access of its array in the loop is a load or store through the same memref at that
    first index (distinct iterations then touch distinct rows)."""
    m = load.operands[0]
    indices = list(load.operands)[1:]
    if not indices or indices[0] != iv:
        return False
    for other in accesses.get(_root(m), []):
        if other.name == "memref.load":
            at, where = other.operands[0], list(other.operands)[1:]
        elif other.name == "memref.store":
            at, where = other.operands[1], list(other.operands)[2:]
        else:
            return False
        if at != m or not where or where[0] != iv:
            return False
    return True


def _broadcast_load(load: ir.Operation, op: ir.Operation, varying: set,
                    accesses: dict) -> bool:
    """A load at indices independent of the iteration, from an array defined outside the
    loop (not a view) that the loop only loads from."""
    m = load.operands[0]
    if _root(m) != m or _defined_inside(m, op):
        return False
    if any(v in varying for v in list(load.operands)[1:]):
        return False
    return all(other.name == "memref.load" and other.operands[0] == m
               for other in accesses.get(m, []))


def _defined_inside(v: ir.Value, op: ir.Operation) -> bool:
    owner = v.owner.operation if isinstance(v, ir.OpResult) else v.owner.owner
    while owner is not None:
        if owner == op:
            return True
        owner = owner.parent if hasattr(owner, "parent") else None
    return False


# Chunks of a reversed parallel loop with private adjoint copies (_parallel_safe): as many
# as the machines here have threads, at most; each holds a copy of the broadcast arrays'
# shadows (a bias: 256 floats).
PRIVATE_CHUNKS = 16


def _reverse_parallel(gen: "ReverseGenerator", op: ir.Operation,
                      attempt: list[ir.Operation], private: list[ir.Value] = ()) -> None:
    """scf.parallel again; each iteration's adjoints of outer values go to a buffer slot,
    summed afterwards. Values the iterations need must be recomputable (NeedsTape); `attempt`
    receives the ops to erase if they are not. With `private` arrays, the iterations run
    in PRIVATE_CHUNKS parallel chunks, each adding those arrays' adjoints into a copy of
    their shadows of its own, summed into the shadows afterwards."""
    if private:
        _reverse_parallel_private(gen, op, attempt, private)
        return
    body = op.regions[0].blocks[0]
    lb, ub, step = (gen.primal(v) for v in op.operands)
    total = trip_count(lb, ub, step)
    outer = gen.outer(op)
    # Per-iteration adjoints of outer floats in their accumulator type (f64 for f32),
    # added pairwise afterwards as adjit.sum adds (a serial f32 sum over the iterations
    # lost precision as a naive running sum does).
    acc = [accumulator_type(o.type) if is_float(o.type) else o.type for o in outer]
    partials = [memref.alloc(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], t),
                             [total], []) for t in acc]
    loop = scf.ParallelOp([], [lb], [ub], [step], [])
    attempt += [p.owner.operation for p in partials] + [loop.operation]
    block = loop.regions[0].blocks.append(ir.IndexType.get())
    with ir.InsertionPoint(block):
        scope = gen.enter(body)
        scope.parallel = True
        scope.values[body.arguments[0]] = block.arguments[0]
        _open(gen, outer, [[None] for _ in outer])
        gen.reverse_block(body)
        gen.leave()
        out = gen.close_frame(outer)
        slot = arith.divui(arith.subi(block.arguments[0], lb), step)
        for v, o, buf, t in zip(out, outer, partials, acc):
            value = or_zero(v, o.type)
            memref.store(value if t == o.type else arith.extf(t, value), buf, [slot])
        scf.ReduceOp([], 0)
    for o, buf, t in zip(outer, partials, acc):
        value = pairwise_sum(buf, total, t)
        gen.add_adj(o, value if t == o.type else arith.truncf(o.type, value))


def _reverse_parallel_private(gen: "ReverseGenerator", op: ir.Operation,
                              attempt: list[ir.Operation], private: list[ir.Value]) -> None:
    lb, ub, step = (gen.primal(v) for v in op.operands)
    total = trip_count(lb, ub, step)
    outer = gen.outer(op)
    acc = [accumulator_type(o.type) if is_float(o.type) else o.type for o in outer]
    dyn = ir.ShapedType.get_dynamic_size()
    partials = [memref.alloc(ir.MemRefType.get([dyn], t), [total], []) for t in acc]
    chunks = index(PRIVATE_CHUNKS)
    per = arith.ceildivui(total, chunks)
    copies = []       # (array, its shadow, sizes, elements, the chunks' copies: 1-D)
    for m in private:
        shadow = gen.shadow(m)
        mt = ir.MemRefType(m.type)
        sizes = [memref.dim(gen.primal(m), index(d)) for d in range(mt.rank)]
        n = index(1)
        for d in sizes:
            n = arith.muli(n, d)
        buf = memref.alloc(ir.MemRefType.get([dyn], mt.element_type), [arith.muli(n, chunks)],
                           [])
        zero = arith.constant(mt.element_type, 0.0)
        fill = scf.ForOp(index(0), arith.muli(n, chunks), index(1))
        with ir.InsertionPoint(fill.body):
            memref.store(zero, buf, [fill.induction_variable])
            scf.YieldOp([])
        copies.append((m, shadow, sizes, n, buf))
        attempt += [buf.owner.operation, fill.operation]
    loop = scf.ParallelOp([], [index(0)], [chunks], [index(1)], [])
    attempt += [p.owner.operation for p in partials] + [loop.operation]
    block = loop.regions[0].blocks.append(ir.IndexType.get())
    saved = {m: gen.shadow_params.get(m) for m, *_ in copies}
    try:
        _private_chunks(gen, op, block, copies, outer, partials, acc, lb, step, per, total)
    finally:        # (also when the body needs a tape: the sequential reversal follows)
        for m, old in saved.items():
            if old is None:
                gen.shadow_params.pop(m, None)
            else:
                gen.shadow_params[m] = old
    for o, buf, t in zip(outer, partials, acc):
        value = pairwise_sum(buf, total, t)
        gen.add_adj(o, value if t == o.type else arith.truncf(o.type, value))
    for m, shadow, sizes, n, buf in copies:
        # shadow[e] += sum over the chunks of their copies' element e
        def add(ids, shadow=shadow, sizes=sizes, n=n, buf=buf):
            linear = index(0)
            for i, d in zip(ids, sizes):
                linear = arith.addi(arith.muli(linear, d), i)
            total_c = memref.load(shadow, ids)
            for k in range(PRIVATE_CHUNKS):
                at = arith.addi(linear, arith.muli(index(k), n))
                total_c = arith.addf(total_c, memref.load(buf, [at]))
            memref.store(total_c, shadow, ids)
        for_each_index(sizes, add)


def _private_chunks(gen, op, block, copies, outer, partials, acc, lb, step, per, total):
    """The body of _reverse_parallel_private's loop over chunks: chunk c's copies of the
    private shadows stand for them while it reverses its iterations, in order."""
    body = op.regions[0].blocks[0]
    dyn = ir.ShapedType.get_dynamic_size()
    with ir.InsertionPoint(block):
        c = block.arguments[0]
        first = arith.muli(c, per)
        last = arith.minui(arith.addi(first, per), total)
        for m, _, sizes, n, buf in copies:
            strides, stride = [], index(1)
            for d in reversed(sizes):
                strides.append(stride)
                stride = arith.muli(stride, d)
            strides.reverse()
            rank = len(sizes)
            t = ir.MemRefType.get([dyn] * rank, ir.MemRefType(m.type).element_type,
                                  ir.StridedLayoutAttr.get(dyn, [dyn] * rank))
            gen.shadow_params[m] = memref.reinterpret_cast(
                t, buf, [arith.muli(c, n)], sizes, strides, [dyn], [dyn] * rank,
                [dyn] * rank)
        run = scf.ForOp(first, last, index(1))
        with ir.InsertionPoint(run.body):
            k = run.induction_variable
            scope = gen.enter(body)
            scope.parallel = True
            with ir.InsertionPoint(scope.marker):   # (before what the scope emits first)
                scope.values[body.arguments[0]] = arith.addi(lb, arith.muli(k, step))
            _open(gen, outer, [[None] for _ in outer])
            gen.reverse_block(body)
            gen.leave()
            out = gen.close_frame(outer)
            for v, o, buf, t in zip(out, outer, partials, acc):
                value = or_zero(v, o.type)
                memref.store(value if t == o.type else arith.extf(t, value), buf, [k])
            scf.YieldOp([])
        scf.ReduceOp([], 0)


def _reverse_sequential(gen: "ReverseGenerator", op: ir.Operation) -> None:
    """Independent iterations: reversed as one sequential loop over the linearized
    iteration space, backwards, since the augmented pass may have run it forwards."""
    body = op.regions[0].blocks[0]
    dims_ = len(body.arguments)
    bounds = [gen.primal(v) for v in op.operands]
    counts = [trip_count(bounds[d], bounds[dims_ + d], bounds[2 * dims_ + d])
              for d in range(dims_)]
    total = index(1)
    for c in counts:
        total = arith.muli(total, c)
    outer = gen.outer(op)
    slots = LoopSlots(gen.act, outer, [(inner, [inner]) for inner in ops(body)[:-1]])
    loop = scf.ForOp(index(0), total, index(1), carry_in(gen, outer, slots))
    with ir.InsertionPoint(loop.body):
        scope = gen.enter(body)
        with ir.InsertionPoint(scope.marker):
            last = arith.subi(arith.subi(total, index(1)), loop.induction_variable)
            for d, iv in zip(range(dims_), unravel(last, counts)):
                scope.values[body.arguments[d]] = arith.addi(
                    bounds[d], arith.muli(iv, bounds[2 * dims_ + d]))
        _open(gen, outer, slots.split(list(loop.inner_iter_args)), slots)
        gen.reverse_block(body)
        gen.leave()
        out = gen.close_frame(outer)
        scf.YieldOp([or_zero(v, c.type) for v, c in zip(out, loop.inner_iter_args)])
    sum_slots(gen, outer, slots, list(loop.results))


def reverse_while(gen: "ReverseGenerator", op: ir.Operation) -> None:
    if CHECKPOINT_ATTR in op.attributes:
        checkpointed_reverse(gen, op)
        return
    before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
    b_args, a_args = list(before.arguments), list(after.arguments)
    again = list(terminator(after).operands)
    kb = [k for k, a in enumerate(b_args) if gen.act.active(a)]
    ka = [j for j, a in enumerate(a_args) if gen.act.active(a)
          or gen.act.active(op.results[j])]
    # Arrays the loop carries without known sites (made inside it: a stack the augmented
    # pass of a first derivative grows in its loop, which a second derivative reverses):
    # their shadows are threaded through the reversed loop as reverse_for does, those of
    # the condition region's arguments carried, those of the body's taken from it.
    mb = _threaded_positions(gen, b_args)
    ma = sorted(set(_threaded_positions(gen, a_args)) |
                set(_threaded_positions(gen, list(op.results))))
    outer = gen.outer(op)
    # This handler reverses the before region and the after region's yield, as one site.
    slots = LoopSlots(gen.act, outer, [(op, ops(before) + [terminator(after)])] +
                      [(inner, [inner]) for inner in ops(after)[:-1]])
    m = slots.total
    count = gen.materialize(("count", op))
    # The last run of the condition region, the one that exits.
    adj_b, shadows_b = _reverse_before(gen, op, outer, ka, [gen.get_adj(op.results[j])
                                                            for j in ka],
                                       ma, [gen.shadow(op.results[j]) for j in ma], mb)
    carried = ([or_zero(d, b_args[k].type) for k, d in zip(kb, adj_b)] +
               carry_in(gen, outer, slots) + shadows_b)
    loop = scf.ForOp(index(0), count, index(1), carried)
    with ir.InsertionPoint(loop.body):
        c = list(loop.body.arguments)[1:]
        _open(gen, outer, slots.split(c[len(kb):len(kb) + m]), slots)
        scope = gen.enter(after)
        for k, ck in zip(kb, c):
            gen.add_adj(again[k], ck)
        _thread_shadows(gen, scope, [again[k] for k in mb], c[len(kb) + m:])
        gen.reverse_block(after)
        shadows_a = [gen.shadow(a_args[j]) for j in ma]
        gen.leave()
        adj_a = [gen.get_adj(a_args[j]) for j in ka]
        adj_b, shadows_b = _reverse_before(gen, op, outer, ka, adj_a, ma, shadows_a, mb)
        out_outer = gen.close_frame(outer)
        scf.YieldOp([or_zero(d, b_args[k].type) for k, d in zip(kb, adj_b)] +
                    [or_zero(v, s.type) for v, s in zip(out_outer, c[len(kb):len(kb) + m])] +
                    shadows_b)
    res = list(loop.results)
    sum_slots(gen, outer, slots, res[len(kb):len(kb) + m])
    inits = list(op.operands)
    for k, r in zip(kb, res):
        gen.add_adj(inits[k], r)
    for k, r in zip(mb, res[len(kb) + m:]):
        add_into(gen.shadow(inits[k]), r)


def _reverse_before(gen: "ReverseGenerator", op: ir.Operation, outer: list[ir.Value],
                    ka: list[int], seeds: list[ir.Value | None], ma: list[int],
                    shadows: list[ir.Value], mb: list[int]
                    ) -> tuple[list[ir.Value | None], list[ir.Value]]:
    """Reverses one run of a while's condition region, inline; returns the adjoints of
    its arguments (the active ones), and the shadows of its arguments at positions `mb`
    (threaded arrays; `shadows`: those of the values it forwards at positions `ma`)."""
    before = op.regions[0].blocks[0]
    forwarded = list(terminator(before).operands)[1:]
    _open(gen, outer, [[gen.get_adj(o)] for o in outer])
    scope = gen.enter(before)
    for j, d in zip(ka, seeds):
        gen.add_adj(forwarded[j], d)
    _thread_shadows(gen, scope, [forwarded[j] for j in ma], shadows)
    gen.reverse_block(before)
    out_shadows = [gen.shadow(before.arguments[k]) for k in mb]
    gen.leave()
    adj_b = [gen.get_adj(a) for a in before.arguments if gen.act.active(a)]
    _set_outer(gen, outer, gen.close_frame(outer))
    return adj_b, out_shadows


RULES: dict[str, OpRules] = {
    "scf.for": OpRules(forward=forward_for, augmented=augmented_for, reverse=reverse_for),
    "scf.if": OpRules(forward=forward_if, augmented=augmented_if, reverse=reverse_if),
    "scf.while": OpRules(forward=forward_while, augmented=augmented_while,
                         reverse=reverse_while),
    "scf.parallel": OpRules(forward=forward_parallel, augmented=augmented_parallel,
                            reverse=reverse_parallel),
}
