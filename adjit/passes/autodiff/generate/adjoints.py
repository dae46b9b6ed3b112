"""The reverse generator's bookkeeping: where a reversed block's primal values are
materialized (Scope), the adjoints collected while reversing one region (Frame), and the
active values from outside a region whose adjoints that region threads (outer_values).
"""
from __future__ import annotations

from mlir import ir

from ...ir_util import defining_block, is_ancestor, parent_op, walk
from ..analysis.activity_analysis import ActivityAnalysis
from .tape import Key


class Scope:
    """A reversed primal block: where its values are materialized (before `marker`)."""

    def __init__(self, block: ir.Block, parent: "Scope | None", marker: ir.Operation):
        self.block = block
        self.parent = parent
        self.marker = marker
        self.values: dict[Key, ir.Value] = {}
        # Reversed as a parallel loop's body (or nested in one): nothing can be popped here.
        self.parallel = parent is not None and parent.parallel


class NeedsTape(Exception):
    """A parallel reversal needed a saved value: it is redone sequentially
    (control_flow_ops.reverse_parallel)."""


class Frame:
    """The adjoints collected while reversing one region. Those of values from outside it
    (`outer`) collect the region's contributions from zero and are added to what came in
    (`carried`, one value per slot: see loop_slots.LoopSlots) only once, at
    RevGen.close_frame, so that in a loop one iteration's sum does not wait on the previous
    iteration's."""

    def __init__(self, outer: list[ir.Value], carried: list[list[ir.Value | None]],
                 slot_of: dict[ir.Value, dict[ir.Operation, int]] | None = None):
        self.adj: dict[ir.Value, ir.Value | None] = {}
        self.slots = {o: [None] * len(c) for o, c in zip(outer, carried)}
        self.carried = carried
        self.slot_of = slot_of or {}

    def __contains__(self, v: ir.Value) -> bool:
        return v in self.slots or v in self.adj

    def _slot(self, v: ir.Value, site: ir.Operation | None) -> int:
        return self.slot_of.get(v, {}).get(site, 0)

    def get(self, v: ir.Value, site: ir.Operation | None) -> ir.Value | None:
        if v in self.slots:
            return self.slots[v][self._slot(v, site)]
        return self.adj.get(v)

    def set(self, v: ir.Value, value: ir.Value | None, site: ir.Operation | None) -> None:
        if v in self.slots:
            self.slots[v][self._slot(v, site)] = value
        else:
            self.adj[v] = value


def marker() -> ir.Operation:
    """A placeholder op at the insertion point: materialized values go right before it."""
    return ir.Operation.create("arith.constant", results=[ir.IndexType.get()],
                               attributes={"value": ir.IntegerAttr.get(ir.IndexType.get(), 0)})


def placeholder(t: ir.Type) -> ir.Value:
    return ir.Operation.create("builtin.unrealized_conversion_cast", results=[t]).result


def outer_values(act: ActivityAnalysis, region_op: ir.Operation) -> list[ir.Value]:
    """Active values defined outside `region_op` and used inside it: their adjoints are
    threaded through the reversed region."""
    found: list[ir.Value] = []
    for inner in list(walk(region_op))[1:]:
        for v in inner.operands:
            if (act.active(v) and not is_ancestor(region_op, parent_op(defining_block(v)))
                    and v not in found):
                found.append(v)
    return found
