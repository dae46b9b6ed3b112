"""Integer expressions of a kernel's arguments that are the same for every work item
("uniform"), built from IR and emitted as IR.

A kernel's per-item tape size must be known before the augmented kernel runs, by whoever
allocates the tapes (the launch rule in IR, or Python for a GPU launch), and be the same for
every work item. When a loop around taped values has bounds computed only from the kernel's
scalar arguments, constants and the sizes of its array arguments, its trip count is such an
expression, and so is the tape size built from trip counts. The expressions themselves, their
folding, evaluation and text form are in core/tape_size.py (pure Python, for GPU launches
from the cache).
"""
from __future__ import annotations

from typing import Sequence

from mlir import ir
from mlir.dialects import arith, memref, scf

from ....core.tape_size import BINARY, Expr, node
from ...ir_util import index

# arith.cmpi's predicate attribute values (arith::CmpIPredicate) of the PREDICATES.
_PREDICATE_CODES = {0: "eq", 1: "ne", 2: "slt", 3: "sle", 4: "sgt", 5: "sge"}
# Casts that keep a signed integer's value: an expression computes in mathematical integers.
_SAME_VALUE = ("arith.index_cast", "arith.extsi")


# -- from IR ---------------------------------------------------------------------------------
def uniform(v: ir.Value, fn: ir.Operation,
            ivs: dict[ir.Value, int] | None = None) -> Expr | None:
    """`v` as an expression of `fn`'s arguments (and of the iteration variables `ivs` of
    enclosing loops, which become ("iv", d)), or None where it may differ between work items
    (it depends on adj.index, a loaded value, another loop counter...)."""
    entry = fn.regions[0].blocks[0]
    if isinstance(v, ir.BlockArgument):
        if v.owner == entry and isinstance(v.type, (ir.IntegerType, ir.IndexType)):
            return ("arg", v.arg_number)
        if ivs and v in ivs:
            return ("iv", ivs[v])
        return None
    op = v.owner.operation
    name = op.name
    if name == "arith.constant" and isinstance(v.type, (ir.IntegerType, ir.IndexType)):
        return ir.IntegerAttr(op.attributes["value"]).value
    if name == "memref.dim":
        source, d = op.operands
        if isinstance(source, ir.BlockArgument) and source.owner == entry:
            d_expr = uniform(d, fn, ivs)
            return ("dim", source.arg_number, d_expr) if isinstance(d_expr, int) else None
        return None
    operands = [uniform(o, fn, ivs) for o in op.operands]
    if any(o is None for o in operands):
        return None
    if name in _SAME_VALUE:
        return operands[0]
    short = name.removeprefix("arith.")
    if short in BINARY:
        return node(short, *operands)
    if name == "arith.select":
        return node("select", *operands)
    if name == "arith.cmpi":
        pred = _PREDICATE_CODES.get(ir.IntegerAttr(op.attributes["predicate"]).value)
        return node("cmpi", pred, *operands) if pred else None
    return None


# -- to IR -----------------------------------------------------------------------------------
def emit(e: Expr, args: Sequence[ir.Value], ivs: dict[int, ir.Value] | None = None) -> ir.Value:
    """Builds `e` as an index value at the insertion point; `args` are the kernel's
    arguments there (the augmented or reverse kernel's, or a launch's operands), `ivs` the
    index values of the loop variables it reads."""
    if isinstance(e, int):
        return index(e)
    op, *operands = e
    if op == "arg":
        v = args[operands[0]]
        return v if isinstance(v.type, ir.IndexType) else arith.index_cast(ir.IndexType.get(), v)
    if op == "dim":
        return memref.dim(args[operands[0]], index(operands[1]))
    if op == "iv":
        return ivs[operands[0]]
    if op == "sum":
        d, lb, ub, step, body = operands
        loop = scf.ForOp(emit(lb, args, ivs), emit(ub, args, ivs), emit(step, args, ivs),
                         [index(0)])
        with ir.InsertionPoint(loop.body):
            term = emit(body, args, {**(ivs or {}), d: loop.induction_variable})
            scf.YieldOp([arith.addi(loop.inner_iter_args[0], term)])
        return loop.results[0]
    emit_ = lambda o: emit(o, args, ivs)   # noqa: E731
    if op == "trip":
        lb, ub, step = (emit_(o) for o in operands)
        return arith.maxsi(arith.ceildivsi(arith.subi(ub, lb), step), index(0))
    if op == "cmpi":
        pred, a, b = operands
        return arith.index_cast(ir.IndexType.get(), arith.extui(
            ir.IntegerType.get_signless(64), arith.cmpi(getattr(arith.CmpIPredicate, pred),
                                                        emit_(a), emit_(b))))
    if op == "select":
        c, a, b = (emit_(o) for o in operands)
        return arith.select(arith.cmpi(arith.CmpIPredicate.ne, c, index(0)), a, b)
    a, b = (emit_(o) for o in operands)
    return getattr(arith, op)(a, b)
