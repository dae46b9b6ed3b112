"""How a reversed loop accumulates the adjoints of the values from outside it that its body
uses (an Active scalar such as `a` in `sum((a*x+b-y)**2)`): over several loop-carried
accumulators, "slots", summed after the loop (rules/control_flow_ops.py's reversed loops).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mlir import ir

from ...ir_util import add, or_zero, walk
from ..analysis.activity_analysis import ActivityAnalysis

if TYPE_CHECKING:
    from ..protocols import ReverseGenerator

# Most accumulators one outer value's adjoint gets in a reversed loop (LoopSlots): enough
# independent chains to hide the latency of float adds, and for LLVM to make vectors of them;
# few enough to stay in registers (8 measured slower where the body calls libm: every slot is
# spilled around each call).
MAX_SLOTS = 4


class LoopSlots:
    """How a reversed loop splits the adjoint of each outer value (from outside the loop, used
    in its body) over loop-carried accumulators, "slots": one per site that may add to it, up
    to MAX_SLOTS, dealt in program order (the k-th site gets slot k mod n), summed once after
    the loop. One accumulator would make a chain of dependent float adds of each iteration's
    contributions, which LLVM may not reassociate, and it leaves the body scalar. With a slot
    each, the lanes of an unrolled reduction (compiler/arrays.py `reduce`) stay independent
    in reverse as in the primal, and LLVM vectorises them as it does the primal's. The sum is
    the same up to reassociation across independent partial sums, as the primal's lanes.

    `sites`: in program order, (the op that RevGen.site names while the site is reversed,
    the ops reversed as that site)."""

    def __init__(self, act: ActivityAnalysis, outer: list[ir.Value],
                 sites: list[tuple[ir.Operation, list[ir.Operation]]]):
        used = [(key, {v for op in group if act.relevant(op) for inner in walk(op)
                       for v in inner.operands}) for key, group in sites]
        self.counts: list[int] = []
        self.slot_of: dict[ir.Value, dict[ir.Operation, int]] = {}
        for o in outer:
            keys = [key for key, values in used if o in values]
            n = min(max(len(keys), 1), MAX_SLOTS)
            self.counts.append(n)
            self.slot_of[o] = {key: k % n for k, key in enumerate(keys)}
        self.total = sum(self.counts)

    def split(self, values: list[ir.Value]) -> list[list[ir.Value]]:
        """`values`, one per slot in order, grouped by outer value."""
        it = iter(values)
        return [[next(it) for _ in range(n)] for n in self.counts]


def carry_in(gen: "ReverseGenerator", outer: list[ir.Value],
              slots: LoopSlots) -> list[ir.Value]:
    """The slots a reversed loop starts from. A single one starts from the adjoint so
    far; several start from zero, alike, so that LLVM sees them as one vector."""
    return [or_zero(gen.get_adj(o) if n == 1 else None, o.type)
            for o, n in zip(outer, slots.counts) for _ in range(n)]


def sum_slots(gen: "ReverseGenerator", outer: list[ir.Value], slots: LoopSlots,
               results: list[ir.Value]) -> None:
    """After a reversed loop: each outer value's adjoint, from its slots. Several are
    added to the adjoint so far one by one, that first: were the sum of the slots made
    first, LLVM would fold it into a constant for a loop that does not run (the slots'
    zeros), then pair the sums of different outer values, and their slots, in 2-wide
    vectors that leave the body's lanes scalar."""
    for o, values in zip(outer, slots.split(results)):
        total = gen.get_adj(o) if len(values) > 1 else None
        for v in values:
            total = add(total, v)
        gen.set_adj(o, total)
