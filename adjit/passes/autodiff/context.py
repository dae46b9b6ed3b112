"""What the augmented and the reverse generator of one function share: its activity and
memory analyses, the tape plan, the signatures of its call sites, and which primal values the
reverse pass can recompute or find again instead of taping them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mlir import ir

from ...core.activity import Activity
from ...dialects.adj import KERNEL_ATTR
from .activity import ActivityAnalysis
from .ir_util import VIEW_OPS, callee, is_float, is_memref, parent_op, primal_used, walk
from .memory import Writes
from .custom_rules import call_primal
from .signature import Derivative, Signature
from .tape import TapePlan

if TYPE_CHECKING:
    from .driver import Differentiator

PURE_OPS = ("memref.dim", "adj.index", "adj.global_id", "adj.global_size") + VIEW_OPS
PURE_DIALECTS = ("arith", "math", "index")


class ReverseContext:
    """What the augmented and the reverse generators of one function share."""

    def __init__(self, diff: "Differentiator", fn: ir.Operation, sig: Signature):
        self.diff = diff
        self.fn = fn
        self.sig = sig
        self.kernel = KERNEL_ATTR in fn.attributes
        self.entry = fn.regions[0].blocks[0]
        self.act = ActivityAnalysis(fn, list(sig.activity), sig.ret_activity,
                            lambda call: diff.has_rules(self.call_signature(call), call),
                            diff.callee_writes)
        self.writes = Writes(fn, self.act.classes, list(sig.overwritten), diff.callee_writes,
                             self.kernel)
        self.plan = TapePlan(top=self.entry)
        self._calls: dict[ir.Operation, tuple[Signature, Derivative]] = {}
        self._recomputable: dict[ir.Operation, bool] = {}
        self._roots: dict[ir.Value, list[ir.Value]] | None = None

    def operand_activity(self, at: ir.Operation,
                         operands) -> tuple[tuple[str, ...], tuple[bool, ...]]:
        """Per operand of a call or launch `at`: its activity, and whether the array may be
        overwritten after `at` (the callee's `overwritten` flags)."""
        activity = []
        for v in operands:
            if is_float(v.type) and self.act.active(v):
                activity.append(Activity.ACTIVE)
            elif is_memref(v.type) and self.act.shadowed(v):
                activity.append(Activity.DUP)
            else:
                activity.append(Activity.CONST)
        overwritten = tuple(is_memref(v.type) and self.writes.written_after(at, v)
                            for v in operands)
        return tuple(activity), overwritten

    def call_signature(self, op: ir.Operation) -> Signature:
        """The reverse-mode signature of a call site."""
        activity, overwritten = self.operand_activity(op, op.operands)
        active_ret = any(self.act.active(r) for r in op.results)
        sig = Signature(fn=callee(op), mode="reverse", activity=activity,
                        ret_activity=Activity.ACTIVE if active_ret else Activity.CONST, with_primal=True,
                        overwritten=overwritten)
        return call_primal(self.diff, sig, primal_used(op, self.sig.with_primal), op)

    def call_info(self, op: ir.Operation) -> tuple[Signature, Derivative]:
        """A call site's signature and the callee's derivative for it."""
        if op not in self._calls:
            sig = self.call_signature(op)
            self._calls[op] = (sig, self.diff.derivative(sig, op))
        return self._calls[op]

    # -- arrays that control flow joins -----------------------------------------------------
    def joined(self, v: ir.Value) -> bool:
        """A loop-carried array, an array scf.if or arith.select gives: one of several."""
        if not is_memref(v.type):
            return False
        if isinstance(v, ir.BlockArgument):
            return parent_op(v.owner) != self.fn
        return v.owner.operation.name in ("scf.for", "scf.while", "scf.if", "arith.select")

    def sites(self, v: ir.Value) -> list[ir.Value] | None:
        """The arrays a joined array can be: the arguments and top-level allocations in its
        alias class defined before it; None if it may also be an array made in a loop or
        branch, or returned by a call (then its shadow is threaded through the reversed
        control flow instead, see _thread_shadows)."""
        if self._roots is None:
            self._roots = {}
            for op in walk(self.fn):
                values = list(op.results) + [a for r in op.regions for b in r.blocks
                                             for a in b.arguments]
                for m in values:
                    if is_memref(m.type) and not self.joined(m) and not (
                            isinstance(m, ir.OpResult) and op.name in VIEW_OPS):
                        self._roots.setdefault(self.act.classes.find(m), []).append(m)
        before = _top_level_ancestor(v, self.entry)
        found = []
        for m in self._roots.get(self.act.classes.find(v), []):
            if isinstance(m, ir.BlockArgument) and m.owner == self.entry:
                found.append(m)
                continue
            op = m.owner.operation
            if op.name != "memref.alloc" or op.block != self.entry:
                return None
            if _is_before(op, before):
                found.append(m)
        return found

    # -- what the reverse pass can recompute -------------------------------------------------
    def cheap(self, v: ir.Value) -> bool:
        """Whether the reverse pass has `v` without saving it per iteration."""
        if isinstance(v, ir.BlockArgument):
            owner = parent_op(v.owner)
            return owner == self.fn or (owner.name == "scf.for" and v.arg_number == 0) or \
                owner.name == "scf.parallel"
        op = v.owner.operation
        if op.name == "memref.alloc" and op.block == self.entry and not self.kernel:
            return True   # one pointer on the tape, whatever reads it
        return self.recomputable(op)

    def pure(self, op: ir.Operation) -> bool:
        """Whether running `op` again in the reverse pass gives the same value. An scf.if
        with one result whose branches hold only pure ops is pure too: the frontend's
        short-circuit `and`/`or` (`0 < i < n - 1 and 0 < j < m - 1`), whose i1 each work
        item would otherwise tape although it follows from the ids and sizes."""
        if len(op.results) != 1:
            return False
        if op.regions:
            return op.name == "scf.if" and all(
                inner.name == "scf.yield" or self.pure(inner)
                for region in op.regions for block in region.blocks
                for inner in (o.operation for o in block.operations))
        if op.name == "memref.load":
            return not self.writes.written_after(op, op.operands[0])
        return op.name in PURE_OPS or op.name.split(".")[0] in PURE_DIALECTS

    def recomputable(self, op: ir.Operation) -> bool:
        """Pure, from values the reverse pass has for free."""
        if op not in self._recomputable:
            self._recomputable[op] = self.pure(op) and all(self.cheap(v) for v in inputs(op))
        return self._recomputable[op]


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


def _top_level_ancestor(v: ir.Value, entry: ir.Block) -> ir.Operation:
    op = parent_op(v.owner) if isinstance(v, ir.BlockArgument) else v.owner.operation
    while op.block != entry:
        op = op.parent.operation
    return op


def _is_before(a: ir.Operation, b: ir.Operation) -> bool:
    """For two ops of one block: whether `a` comes first."""
    for op in a.block.operations:
        if op.operation == a:
            return True
        if op.operation == b:
            return False
    return False
