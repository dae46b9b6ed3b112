"""Loops too small to be worth the thread pool run on the calling thread.

Handing a loop to MLIR's async runtime (waking its workers, then waiting for them) costs far
more than the work of a small launch on these machines: a 256x256 heat-stencil step (about 30
ops an item) takes 10 us on one core and 80-90 us split over two threads, so 50 steps ran in
4.5 ms where one thread needs 0.5 ms, and a gradient, with three launches a step, paid the
hand-off 150 times. So before `async-parallel-for` (passes/pipeline.py, with more than one
thread), every outermost `scf.parallel` whose per-iteration cost is known statically becomes

    scf.if (iterations <= SERIAL_ITEMS and iterations * cost <= SERIAL_WORK)
        { its body in scf.for loops, on this thread }
    else { the scf.parallel as it was }

decided at run time, since trip counts are run-time values. The cost of an iteration counts
its ops (transcendental math COSTLY, division and remainder 4, the rest 1; an scf.if the
dearer branch), an scf.for of constant trip count its body that many times. A loop whose trip
count is known only at run time, an scf.while, a call that inlining left, or a nested
scf.parallel make the cost unknown, and the loop stays parallel as before: per-item
integration loops in kernels, the frontend's reduction chunks (a loop over 4096-element
chunks), anything whose work the IR cannot bound.

The bounds were measured on a heat step (27 ops an item), one thread against two: 128^2 items
3.7 against 86 us, 256^2 13 against 81 us, 512^2 228 against 78 us (its two arrays leave the
L2 cache: the cores' caches and bandwidth win), 1024^2 829 against 239 us. So up to SERIAL_ITEMS
(2^17) iterations, and SERIAL_WORK (2^23) cost units, about 30 us of vectorised work: the
stencil's gather kernel (116 units an item, 30 us serial at 256^2) stays serial, a kernel of
thousands of ops an item goes parallel from a few thousand items. Effect: G2's primal 4.5 ->
0.56 ms, its gradient 14 -> 2.6 ms (benchmarks/bench_grad_workloads.py).
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf

from .autodiff.ir_util import constant_int
from .walk import walk

SMALL_LOOP_ATTR = "adj.small_loop"   # on the scf.if choosing between the twin and the loop
SERIAL_WORK = 1 << 23    # iterations x cost: ~30 us of vectorised work at most
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


def _split(loop: ir.Operation, cost: int) -> None:
    n = len(loop.regions[0].blocks[0].arguments)
    operands = list(loop.operands)
    lbs, ubs, steps = operands[:n], operands[n:2 * n], operands[2 * n:3 * n]
    idx = ir.IndexType.get()
    with ir.InsertionPoint(loop), loop.location:
        iterations = arith.constant(idx, 1)
        for lb, ub, step in zip(lbs, ubs, steps):
            trips = arith.maxsi(arith.ceildivsi(arith.subi(ub, lb), step),
                                arith.constant(idx, 0))
            iterations = arith.muli(iterations, trips)
        # iterations * cost <= SERIAL_WORK, divided by cost: no overflow for any trip count.
        small = arith.cmpi(arith.CmpIPredicate.ule, iterations,
                           arith.constant(idx, min(SERIAL_ITEMS, SERIAL_WORK // cost)))
        branch = scf.IfOp(small, [], has_else=True)
        # parallel_for.py replaces the pair by one call, which runs on this thread when small.
        branch.operation.attributes[SMALL_LOOP_ATTR] = ir.UnitAttr.get()
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
