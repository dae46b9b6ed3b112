"""What the augmented and the reverse generator of one function share: its activity and
memory analyses, the tape plan, the signatures of its call sites, and which arrays a joined
array can be. (Which primal values the reverse pass recomputes instead of taping them is
recompute.py's.)
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mlir import ir

from ....core.activity import Activity
from ....core.derivative_abi import DerivativeMode
from ....dialects.adj import KERNEL_ATTR
from ...ir_util import callee, is_float, is_memref, parent_op, primal_used, walk
from ...op_facts import facts
from ..analysis.activity_analysis import ActivityAnalysis
from ..analysis.overwritten import Writes
from ..rules.custom import call_primal
from ..signature import Derivative, Signature
from .tape import TapePlan

if TYPE_CHECKING:
    from ..protocols import Host


class ReverseContext:
    """What the augmented and the reverse generators of one function share
    (protocols.Shared)."""

    def __init__(self, diff: "Host", fn: ir.Operation, sig: Signature):
        self.diff = diff
        self.fn = fn
        self.sig = sig
        self.kernel = KERNEL_ATTR in fn.attributes
        self.entry = fn.regions[0].blocks[0]
        self.act = ActivityAnalysis(
            fn, list(sig.activity), sig.ret_activity,
            lambda call: diff.has_rules(self.call_signature(call), call), diff.callee_writes)
        self.writes = Writes(fn, self.act.classes, list(sig.overwritten), diff.callee_writes,
                             self.kernel)
        self.plan = TapePlan(top=self.entry)
        self._calls: dict[ir.Operation, tuple[Signature, Derivative]] = {}
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
        sig = Signature(fn=callee(op), mode=DerivativeMode.REVERSE, activity=activity,
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
        control flow instead, see control_flow_ops._thread_shadows)."""
        if self._roots is None:
            self._roots = {}
            for op in walk(self.fn):
                values = list(op.results) + [a for r in op.regions for b in r.blocks
                                             for a in b.arguments]
                for m in values:
                    if is_memref(m.type) and not self.joined(m) and not (
                            isinstance(m, ir.OpResult) and facts(op.name).view):
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
