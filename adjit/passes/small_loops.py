"""Loops too small to be worth waking the thread pool run on the calling thread.

Waking the pool's sleeping workers (runtime/native/parallel.cpp), then waiting for them,
costs far more than the work of a small launch on these machines (70-220 us, where a 256x256
heat-stencil step, about 30 ops an item, takes 10 us on one core); handing a loop to workers
that are awake, spinning since their last loop, costs ~0.25 us. So before
`--adj-parallel-for` (passes/pipeline.py, with more than one thread), every outermost
`scf.parallel` whose per-iteration cost is known statically becomes

    scf.if (iterations <= SERIAL_ITEMS and iterations * cost <= SERIAL_WORK)
        { its body in scf.for loops, on this thread }
    else { the scf.parallel as it was }

decided at run time, since trip counts are run-time values; the scf.if carries the cost
(SMALL_LOOP_ATTR). parallel_for.py then replaces the pair by one call of the pool whose size
class says SMALL where the twin would run: the pool takes such a loop only while its workers
are awake (in a loop of launches), and TINY below TINY_WORK (about 1 us), never. The cost of
an iteration counts its ops (transcendental math COSTLY, division and remainder 4, the rest
1; an scf.if the dearer branch), an scf.for of constant trip count its body that many times.
A loop whose trip count is known only at run time, an scf.while, a call that inlining left,
or a nested scf.parallel make the cost unknown, and the loop stays parallel as before:
per-item integration loops in kernels, the frontend's reduction chunks (a loop over
4096-element chunks), anything whose work the IR cannot bound.

The bounds were measured with MLIR's async runtime, whose workers were always asleep, on a
heat step (27 ops an item), one thread against two: 128^2 items 3.7 against 86 us, 256^2 13
against 81 us, 512^2 228 against 78 us (its two arrays leave the L2 cache: the cores' caches
and bandwidth win), 1024^2 829 against 239 us. So up to SERIAL_ITEMS (2^17) iterations, and
SERIAL_WORK (2^23) cost units, about 30 us of vectorised work. With the pool awake, 50 heat
steps in a `@jit` loop: 128^2 2.9 -> 2.2 us a step, 256^2 8.9 -> 5.7 us (two threads).
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf

from .ir_util import constant_int
from .registry import AdjPass
from .walk import walk

SMALL_LOOP_ATTR = "adj.small_loop"   # on the scf.if choosing between the twin and the loop
SERIAL_WORK = 1 << 23    # iterations x cost: ~30 us of vectorised work at most
TINY_WORK = 1 << 18      # ~1 us: below it even awake workers are not worth a hand-off
SERIAL_ITEMS = 1 << 17   # iterations: past a few L2-sized arrays, two cores' caches win
COSTLY = 10
_DIVISIONS = ("arith.divf", "arith.divsi", "arith.divui", "arith.remf", "arith.remsi",
              "arith.remui", "arith.ceildivsi", "arith.ceildivui", "arith.floordivsi")
_FREE = ("arith.constant", "scf.yield", "scf.reduce", "scf.reduce.return", "memref.dim",
         "arith.index_cast", "arith.index_castui")


def block_cost(block: ir.Block) -> int | None:
    """The static cost of running `block` once (None: unknown)."""
    total = 0
    for op in block.operations:
        c = op_cost(op.operation)
        if c is None:
            return None
        total += c
    return total


def op_cost(op: ir.Operation) -> int | None:
    name = op.name
    if name in _FREE:
        return 0
    if name == "scf.for":
        lb, ub, step = (constant_int(v) for v in list(op.operands)[:3])
        body = block_cost(op.regions[0].blocks[0])
        if None in (lb, ub, step, body) or step <= 0:
            return None
        return max(0, -(-(ub - lb) // step)) * body
    if name == "scf.if":
        branches = [block_cost(r.blocks[0]) for r in op.regions if len(r.blocks)]
        if None in branches:
            return None
        return 1 + max(branches, default=0)
    if op.regions or name in ("func.call", "func.call_indirect"):
        return None     # scf.while, scf.parallel, or any other op with regions: unknown
    if name.startswith("math."):
        return COSTLY
    if name in _DIVISIONS:
        return 4
    return 1


def outermost_parallel_loops(root: ir.Operation) -> list[ir.Operation]:
    """The scf.parallel ops in `root` that no other scf.parallel encloses."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "scf.parallel":
            found.append(op)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    walk(root, visit, ir.WalkOrder.PRE_ORDER)
    return found


def serialise_small_loops(module: ir.Operation) -> None:
    """Gives each outermost scf.parallel of known per-iteration cost a serial twin, taken at
    run time when the loop's total cost is at most SERIAL_WORK (the module docstring)."""
    module = getattr(module, "operation", module)
    with module.context, module.location:
        for loop in outermost_parallel_loops(module):
            _serialise_if_known(loop)


def _serialise_if_known(loop: ir.Operation) -> None:
    if loop.results:     # reductions: not made by adjit, left to scf-parallel-for-to-nested-fors
        return
    cost = block_cost(loop.regions[0].blocks[0])
    if cost is not None:
        _split(loop, max(cost, 1))


def bounds(loop: ir.Operation) -> tuple[list[ir.Value], list[ir.Value], list[ir.Value]]:
    """An scf.parallel's lower bounds, upper bounds and steps."""
    n = len(loop.regions[0].blocks[0].arguments)
    operands = list(loop.operands)
    return operands[:n], operands[n:2 * n], operands[2 * n:3 * n]


def iterations_at_most(loop: ir.Operation, limit: int) -> ir.Value:
    """An i1, at the insertion point: whether scf.parallel `loop` runs at most `limit`
    iterations in all."""
    idx = ir.IndexType.get()
    iterations = arith.constant(idx, 1)
    for lb, ub, step in zip(*bounds(loop)):
        trips = arith.maxsi(arith.ceildivsi(arith.subi(ub, lb), step), arith.constant(idx, 0))
        iterations = arith.muli(iterations, trips)
    return arith.cmpi(arith.CmpIPredicate.ule, iterations, arith.constant(idx, limit))


def _split(loop: ir.Operation, cost: int) -> None:
    lbs, ubs, steps = bounds(loop)
    with ir.InsertionPoint(loop), loop.location:
        # iterations * cost <= SERIAL_WORK, divided by cost: no overflow for any trip count.
        small = iterations_at_most(loop, min(SERIAL_ITEMS, SERIAL_WORK // cost))
        branch = scf.IfOp(small, [], has_else=True)
        # parallel_for.py replaces the pair by one call, which runs on this thread when
        # small (unless the pool is awake): it reads the cost here.
        branch.operation.attributes[SMALL_LOOP_ATTR] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(64), cost)
        with ir.InsertionPoint(branch.else_block):
            loop.clone()                       # the loop as it was, for large trip counts
            scf.YieldOp([])
        with ir.InsertionPoint(branch.then_block):
            ivs, innermost = nest(list(zip(lbs, ubs, steps)))
            scf.YieldOp([])
    # The original body moves into the innermost scf.for (its terminator, scf.reduce, stays).
    body = loop.regions[0].blocks[0]
    for arg, iv in zip(body.arguments, ivs):
        arg.replace_all_uses_with(iv)
    for op in list(body.operations)[:-1]:
        op.move_before(innermost)
    loop.erase()


def nest(bounds: list[tuple[ir.Value, ir.Value, ir.Value]]) -> tuple[list[ir.Value],
                                                                   ir.Operation]:
    """scf.for loops nested in the order of `bounds` (lb, ub, step), at the insertion point;
    (their induction variables, the innermost body's terminator)."""
    lb, ub, step = bounds[0]
    loop = scf.ForOp(lb, ub, step)
    with ir.InsertionPoint(loop.body):
        if len(bounds) == 1:
            return [loop.induction_variable], scf.YieldOp([]).operation
        ivs, innermost = nest(bounds[1:])
        scf.YieldOp([])
    return [loop.induction_variable] + ivs, innermost


class SerialiseSmallLoops(AdjPass):
    """--adj-serialise-small-loops: the module docstring."""
    name = "adj-serialise-small-loops"

    def apply(self, module: ir.Operation) -> None:
        serialise_small_loops(module)
