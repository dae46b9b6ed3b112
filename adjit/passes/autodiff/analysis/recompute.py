"""The recompute-or-tape policy: when the reverse pass needs a primal value, whether it
computes the value again (from values it has) or takes it from the tape (tape.py).

RevGen.materialize asks `Policy.recompute` for each value a rule needs; the answer depends
on what is free in the reverse function (`free`: arguments, loop counters, constants and
pure ops of those, memory nothing overwrites later: overwritten.py), on what is pure (op_facts.py)
and on what the reverse function has at hand already (taped anyway, or materialized in an
enclosing scope). docs/architecture.md gives the rule and the measurements behind it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from mlir import ir

from ...ir_util import parent_op
from ...op_facts import facts
from ..generate.tape import key_block

if TYPE_CHECKING:
    from ..protocols import Shared


def inputs(op: ir.Operation) -> list[ir.Value]:
    """The values `op` reads: its operands, and for an op with regions also the values
    defined outside it that its nested ops read (what recomputing it needs)."""
    found = list(op.operands)
    if not op.regions:
        return found
    inside: set = set()

    def visit(o: ir.Operation) -> None:
        for region in o.regions:
            for block in region.blocks:
                inside.update(block.arguments)
                for inner in block.operations:
                    inner = inner.operation
                    for v in inner.operands:
                        if v not in inside and v not in found:
                            found.append(v)
                    visit(inner)
                    inside.update(inner.results)
    visit(op)
    return found


def cheap(op: ir.Operation) -> bool:
    """An arith op (a few cycles, less than a store and a load of a tape slot per item);
    math ops (exp, tanh, pow...) cost more and are taped instead."""
    return op.name.startswith("arith.") and not op.regions


def _bits(t: ir.Type) -> int:
    """Bits a value of type `t` takes on a tape (index: 64)."""
    if isinstance(t, ir.IndexType):
        return 64
    if isinstance(t, (ir.IntegerType, ir.FloatType)):
        return t.width
    return 1 << 30   # memrefs and the rest: never traded for a narrower result


class Policy:
    """The policy of one generation of a reverse function. `taped`: what an earlier
    generation took from the tape (reverse.rev_twice); `materialized(v)`: whether the
    reverse function has `v` already, in the scope of its block."""

    def __init__(self, ctx: "Shared", taped: frozenset,
                 materialized: Callable[[ir.Value], bool]):
        self.ctx = ctx
        self.taped = taped
        self.materialized = materialized
        self._recomputable: dict[ir.Operation, bool] = {}
        self._hand: dict[ir.Value, bool] = {}

    # -- what the reverse pass has for free -------------------------------------------------
    def free(self, v: ir.Value) -> bool:
        """Whether the reverse pass has `v` without saving it per iteration."""
        ctx = self.ctx
        if isinstance(v, ir.BlockArgument):
            owner = parent_op(v.owner)
            return (owner == ctx.fn or (owner.name == "scf.for" and v.arg_number == 0) or
                    owner.name == "scf.parallel")
        op = v.owner.operation
        if op.name == "memref.alloc" and op.block == ctx.entry and not ctx.kernel:
            return True   # one pointer on the tape, whatever reads it
        return self.recomputable(op)

    def pure(self, op: ir.Operation) -> bool:
        """Whether running `op` again in the reverse pass gives the same value: a pure op
        (op_facts.py) whose arrays nothing writes after it. An scf.if with one result whose
        branches hold only pure ops is pure too: the frontend's short-circuit `and`/`or`
        (`0 < i < n - 1 and 0 < j < m - 1`), whose i1 each work item would otherwise tape
        although it follows from the ids and sizes."""
        if len(op.results) != 1:
            return False
        if op.regions:
            return op.name == "scf.if" and all(
                inner.name == "scf.yield" or self.pure(inner)
                for region in op.regions for block in region.blocks
                for inner in (o.operation for o in block.operations))
        row = facts(op.name)
        return row.pure and not any(self.ctx.writes.written_after(op, op.operands[k])
                                    for k in row.reads)

    def recomputable(self, op: ir.Operation) -> bool:
        """Pure, from values the reverse pass has for free."""
        if op not in self._recomputable:
            self._recomputable[op] = self.pure(op) and all(self.free(v) for v in inputs(op))
        return self._recomputable[op]

    # -- the choice -------------------------------------------------------------------------
    def recompute(self, op: ir.Operation) -> bool:
        """Recompute `op` rather than save it: it is pure, and what it reads is free, or
        already at hand, or taped anyway (so saving it too would cost a slot for nothing).

        Or it is one arith op of a single value not at hand (the root), no wider than its
        result, and of free values (constants, arguments, ids): the tape then keeps the root
        instead, never more slots nor bytes, and fewer where several values derive from one
        root (`0.05 * c` and `1 - c` of reaction-diffusion: c once instead of both).
        Recomputing costs that one op (no chain of other recomputations: `q - dt * sin(p)`
        stays taped). docs/architecture.md gives the rule."""
        if self.recomputable(op):
            return True
        if not self.pure(op):
            return False
        if facts(op.name).view:
            # A view (a subview, cast, reshape) is remade from its source, which the tape
            # keeps instead if it must: a view's layout (strided<...>) is no type a tape
            # field of an entry can carry, and the source costs one slot as the view does.
            return True
        ins = inputs(op)
        missing = list(dict.fromkeys(v for v in ins if not self.at_hand(v)))   # c * c: c
        if not missing:
            return True
        return (len(missing) == 1 and cheap(op) and
                _bits(missing[0].type) <= _bits(op.results[0].type) and
                all(v == missing[0] or self.free(v) for v in ins))

    def at_hand(self, v: ir.Value) -> bool:
        """Whether the reverse pass has `v` without a tape slot of its own: free, taped
        anyway, already materialized, pure of such values, or a function's top-level joined
        array with sites (the loop's result `u` of `u, v = v, u`: one index on the tape says
        which array it is, so `sum(u * u)` after the loop reloads u instead of taping its
        elements; not in a kernel, where that index would be a slot per item)."""
        ctx = self.ctx
        if v not in self._hand:
            self._hand[v] = (
                self.free(v) or v in self.taped or self.materialized(v)
                or (not ctx.kernel and key_block(v) == ctx.entry
                    and ctx.joined(v) and ctx.sites(v) is not None)
                or (isinstance(v, ir.OpResult) and self.pure(v.owner.operation) and all(
                    self.at_hand(u) for u in inputs(v.owner.operation))))
        return self._hand[v]
