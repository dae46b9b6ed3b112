"""Pruning of the augmented function: what neither its results nor memory that outlives it
depend on is erased (the primal result's computation, in Reverse without the primal, and
what only fed it). What an op writes and whether it has effects the caller may see is
op_facts.py's.
"""
from __future__ import annotations

from mlir import ir

from ...aliases import AliasClasses
from ...ir_util import terminator
from ...ir_util import is_memref, walk
from ...op_facts import facts


def prune_unneeded(fn: ir.Operation) -> None:
    """Erases from the augmented function `fn` what neither its results nor memory that
    outlives it (its arguments', returned arrays) depend on: the primal result's
    computation, in Reverse without the primal, along with what only fed it (a reduction's
    partial sums, say)."""
    classes = AliasClasses(fn)
    entry = fn.regions[0].blocks[0]
    ret = terminator(entry)
    outside = {classes.find(v) for v in list(entry.arguments) + list(ret.operands)
               if is_memref(v.type)}
    all_ops = list(walk(fn))[1:]
    writers: dict[ir.Value, list[ir.Operation]] = {}
    for op in all_ops:
        for k in facts(op.name).writes:
            writers.setdefault(classes.find(op.operands[k]), []).append(op)
    live: set[ir.Operation] = set()
    work = [op for op in all_ops if facts(op.name).effects or op == ret or any(
        classes.find(op.operands[k]) in outside for k in facts(op.name).writes)]
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
