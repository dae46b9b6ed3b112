"""Alias classes: which memref values of one function may name the same buffer.

Memref values joined by control flow (loop-carried arrays, `u, v = v, u`), selects, views
and calls are one class, since any of them may name the same buffer; distinct argument arrays
are assumed not to alias each other. How each op's arrays alias is op_facts.py's. Used by
the written-argument analysis (written.py) and by the autodiff pass's analyses.
"""
from __future__ import annotations

from mlir import ir

from .ir_util import is_memref, terminator, walk
from .op_facts import facts


class AliasClasses:
    """Union-find over the memref values of one function."""

    def __init__(self, fn: ir.Operation):
        self._parent: dict[ir.Value, ir.Value] = {}
        for op in walk(fn):
            self._join_op(op)

    def find(self, v: ir.Value) -> ir.Value:
        self._parent.setdefault(v, v)
        root = v
        while self._parent[root] != root:
            root = self._parent[root]
        while self._parent[v] != root:
            self._parent[v], v = root, self._parent[v]
        return root

    def union(self, a: ir.Value, b: ir.Value) -> None:
        if is_memref(a.type) and is_memref(b.type):
            ra, rb = self.find(a), self.find(b)
            if ra != rb:
                self._parent[ra] = rb

    def _join_op(self, op: ir.Operation) -> None:
        for sources, targets in carried_groups(op):
            group = sources + targets
            for a, b in zip(group, group[1:]):
                self.union(a, b)
        aliases = facts(op.name).aliases
        if aliases == "results":
            # A returned array may be any array argument; arguments stay distinct.
            for r in op.results:
                for v in op.operands:
                    self.union(r, v)
        elif aliases == "all" and op.results:
            # Views and casts (subview, cast, select of arrays) alias their array operands.
            arrays = [v for v in list(op.operands) + list(op.results) if is_memref(v.type)]
            for a, b in zip(arrays, arrays[1:]):
                self.union(a, b)


def carried_groups(op: ir.Operation) -> list[tuple[list[ir.Value], list[ir.Value]]]:
    """Control-flow joins of `op`: (values flowing in, values receiving them) per position.

    scf.for: (init, yielded) -> (block argument, result); scf.while: (init, yielded by the
    body) -> before-argument and forwarded -> (body argument, result); scf.if: yields -> result.
    """
    name = op.name
    if name == "scf.for":
        body = op.regions[0].blocks[0]
        inits = list(op.operands)[3:]
        yields = list(terminator(body).operands)
        return [([inits[k], yields[k]], [body.arguments[k + 1], op.results[k]])
                for k in range(len(inits))]
    if name == "scf.while":
        before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
        inits = list(op.operands)
        again = list(terminator(after).operands)
        forwarded = list(terminator(before).operands)[1:]
        groups = [([inits[k], again[k]], [before.arguments[k]]) for k in range(len(inits))]
        groups += [([forwarded[j]], [after.arguments[j], op.results[j]])
                   for j in range(len(forwarded))]
        return groups
    if name == "scf.if":
        return [([terminator(region.blocks[0]).operands[k] for region in op.regions
                  if len(region.blocks)], [r]) for k, r in enumerate(op.results)]
    return []
