"""`--adj-split-interior`: an innermost loop whose guards hold on an interior range of its
counter runs that range without them.

Kernels guard their borders (`if 0 < j < m - 1`), and the gather form of a stencil's reverse
(autodiff/generate/gather.py) evaluates such a guard once per neighbour it visits: five
guards of four comparisons an element, each a vector of 64-bit compares and masks, where the primal has one.
Yet over all but a few iterations of the innermost loop every one of them holds. So, on the
CPU after `async-parallel-for` (the loops are then plain scf.for over a thread's block), an
innermost `scf.for` of step 1 without results, whose body compares `iv + c` (through index
casts and constant additions; c a constant, the compare signed, on index or i64) with a value
invariant in the loop, becomes

    for iv in [lb, a):  body                      # the first border
    for iv in [a, b):   body, those compares true # the interior, branch-free after canonicalize
    for iv in [b, ub):  body                      # the last border

where a is the largest point from which each "iv + c > B"-like compare holds, b the smallest
point up to which each "iv + c < B"-like one holds, clamped so that lb <= a <= b <= ub. The
iterations run in the same order as before, so any body keeps its meaning; in [a, b) each
compare replaced is true by construction. A compare that holds only near a border (`j < 1`)
makes the interior empty, never wrong. Bounds beyond +-2^62 are clamped first (the counter
and its constant offsets stay far inside that range), so the arithmetic cannot wrap.

A loop whose nested loops are all innermost (the rows of a 2-D kernel) is split the same way
first, on the compares of its own counter anywhere in its body (_row_loops says why); then
each copy of the inner loop is split on its own.

Bodies over MAX_OPS ops are left alone: the split copies the body three times.
Effect on the 256^2 heat stencil's gradient (gather kernel, 5 neighbours): see
benchmarks/bench_grad_workloads.py and docs/architecture.md.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from .ir_util import constant_int
from .registry import AdjPass
from .walk import walk

MAX_OPS = 2000
_LIMIT = 1 << 62
_OFFSET_LIMIT = 1 << 31
# Pure ops through which a bound is recomputed before the loop.
_PURE = ("arith.constant", "arith.addi", "arith.subi", "arith.muli", "arith.index_cast",
         "arith.index_castui", "arith.extsi", "arith.minsi", "arith.maxsi", "memref.dim")
# arith.cmpi predicates: slt 2, sle 3, sgt 4, sge 5; with the counter on the right, mirrored.
_MIRROR = {2: 4, 3: 5, 4: 2, 5: 3}


def split_interior(module: ir.Operation) -> None:
    """Splits every innermost loop that qualifies (the module docstring), and before them
    every loop just around innermost ones: the rows of a 2-D kernel (below)."""
    module = getattr(module, "operation", module)
    with module.context, module.location:
        for loop in _row_loops(module):
            _split(loop)
        for loop in _innermost_loops(module):
            _split(loop)


def _innermost_loops(root: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "scf.for" and not _has_loop(op):
            found.append(op)
        return ir.WalkResult.ADVANCE

    walk(root, visit)
    return found


def _row_loops(root: ir.Operation) -> list[ir.Operation]:
    """The scf.for loops whose nested loops are all innermost scf.for loops: the rows of a
    2-D kernel, around the loop over a row. A guard on the row (`0 < i < n - 1`, five of them
    in a gather kernel, one per neighbour) is invariant in the inner loop, whose split leaves
    it; LLVM then unswitches few of them and runs the rest as masked vector code (G2b's gather
    kernel). Split on the row first, the interior rows hold no such guard, and each of the
    three copies of the inner loop is split after."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "scf.for" and _has_loop(op) and all(
                inner.name == "scf.for" and not _has_loop(inner) for inner in _loops_in(op)):
            found.append(op)
        return ir.WalkResult.ADVANCE

    walk(root, visit)
    return found


def _loops_in(loop: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op != loop and op.name in ("scf.for", "scf.while", "scf.parallel", "scf.forall"):
            found.append(op)
        return ir.WalkResult.ADVANCE

    walk(loop, visit)
    return found


def _has_loop(loop: ir.Operation) -> bool:
    inner = False

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal inner
        if op != loop and op.name in ("scf.for", "scf.while", "scf.parallel", "scf.forall"):
            inner = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    walk(loop, visit)
    return inner


def _body_ops(loop: ir.Operation) -> list[ir.Operation]:
    """The ops inside `loop`, in pre-order (the same order in a clone)."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op != loop:
            found.append(op)
        return ir.WalkResult.ADVANCE

    walk(loop, visit, ir.WalkOrder.PRE_ORDER)
    return found


def _offset(v: ir.Value, iv: ir.Value) -> int | None:
    """c when `v` is iv + c (in mathematical integers), else None."""
    if v == iv:
        return 0
    if not isinstance(v, ir.OpResult):
        return None
    op = v.owner.operation
    if op.name == "arith.index_cast" and _wide(op.operands[0].type) and _wide(v.type):
        return _offset(op.operands[0], iv)
    if op.name in ("arith.addi", "arith.subi"):
        a, b = op.operands
        c = constant_int(b)
        if c is not None and abs(c) < _OFFSET_LIMIT:
            base = _offset(a, iv)
            if base is not None:
                return base + (c if op.name == "arith.addi" else -c)
        c = constant_int(a)
        if op.name == "arith.addi" and c is not None and abs(c) < _OFFSET_LIMIT:
            base = _offset(b, iv)
            if base is not None:
                return base + c
    return None


def _wide(t: ir.Type) -> bool:
    return isinstance(t, ir.IndexType) or (isinstance(t, ir.IntegerType) and t.width == 64)


def _invariant(v: ir.Value, loop: ir.Operation, depth: int = 0) -> bool:
    """Whether `v` is defined outside `loop`, or computed inside it by pure ops from such."""
    if isinstance(v, ir.BlockArgument):
        return not _inside(v.owner.owner, loop)
    op = v.owner.operation
    if not _inside(op, loop):
        return True
    if op.name not in _PURE or depth > 16 or op.regions:
        return False
    return all(_invariant(x, loop, depth + 1) for x in op.operands)


def _inside(op: ir.Operation, loop: ir.Operation) -> bool:
    while op is not None:
        if op == loop:
            return True
        parent = op.parent
        op = parent.operation if parent is not None else None
    return False


def _materialise(v: ir.Value, loop: ir.Operation, done: dict) -> ir.Value:
    """`v` at the insertion point before `loop` (its pure computation cloned there)."""
    if isinstance(v, ir.BlockArgument) or not _inside(v.owner.operation, loop):
        return v
    if v in done:
        return done[v]
    op = v.owner.operation
    operands = [_materialise(x, loop, done) for x in op.operands]
    new = ir.Operation.create(op.name, results=[r.type for r in op.results], operands=operands,
                              attributes={k: op.attributes[k] for k in op.attributes},
                              loc=op.location)
    for a, b in zip(op.results, new.results):
        done[a] = b
    return done[v]


def _guards(loop: ir.Operation) -> list[tuple[int, ir.Value, int, bool]] | None:
    """(position among the body's ops, bound, offset, lower) for each compare of iv + offset
    with an invariant bound; `lower`: it holds from a point on (else up to a point)."""
    body_ops = _body_ops(loop)
    if len(body_ops) > MAX_OPS:
        return None
    iv = loop.regions[0].blocks[0].arguments[0]
    found = []
    for k, op in enumerate(body_ops):
        if op.name != "arith.cmpi":
            continue
        pred = ir.IntegerAttr(op.attributes["predicate"]).value
        if pred not in _MIRROR or not _wide(op.operands[0].type):
            continue
        lhs, rhs = op.operands
        c = _offset(lhs, iv)
        bound = rhs
        if c is None:
            c, bound, pred = _offset(rhs, iv), lhs, _MIRROR[pred]
        if c is None or not _invariant(bound, loop):
            continue
        # iv + c < B: iv < B - c;  <=: iv < B - c + 1;  >: iv >= B - c + 1;  >=: iv >= B - c.
        found.append((k, bound, c - (1 if pred in (3, 4) else 0), pred in (4, 5)))
    return found


def _split(loop: ir.Operation) -> None:
    if len(loop.results) or constant_int(loop.operands[2]) != 1:
        return
    guards = _guards(loop)
    if not guards:
        return
    idx = ir.IndexType.get()
    lb, ub = loop.operands[0], loop.operands[1]
    with ir.InsertionPoint(loop), loop.location:
        done: dict = {}
        lo, hi = lb, ub
        for _, bound, c, lower in guards:
            b = _materialise(bound, loop, done)
            if not isinstance(b.type, ir.IndexType):
                b = arith.index_cast(idx, b)
            b = arith.maxsi(arith.minsi(b, arith.constant(idx, _LIMIT)),
                            arith.constant(idx, -_LIMIT))
            point = arith.subi(b, arith.constant(idx, c))
            if lower:
                lo = arith.maxsi(lo, point)
            else:
                hi = arith.minsi(hi, point)
        a = arith.minsi(arith.maxsi(lo, lb), ub)          # lb <= a <= ub
        b = arith.maxsi(arith.minsi(hi, ub), a)           # a <= b <= ub
        interior = loop.clone()
        interior.operands[0], interior.operands[1] = a, b
        last = loop.clone()
        last.operands[0] = b
    loop.operands[1] = a
    positions = {k for k, *_ in guards}
    true = None
    for k, op in enumerate(_body_ops(interior)):
        if k in positions:
            if true is None:
                with ir.InsertionPoint(interior), interior.location:
                    true = arith.constant(ir.IntegerType.get_signless(1), 1)
            op.results[0].replace_all_uses_with(true)
    for k, op in reversed(list(enumerate(_body_ops(interior)))):
        if k in positions:
            op.erase()
    # Clones go after the loop, in order: the interior, then the last border.
    interior.move_after(loop)
    last.move_after(interior)


class SplitInterior(AdjPass):
    """--adj-split-interior: the module docstring."""
    name = "adj-split-interior"

    def apply(self, module: ir.Operation) -> None:
        split_interior(module)
