"""Forward mode: a function that computes the primal and, beside each active value, its tangent.

One pass over the primal body in order. Every op is cloned; an op that touches active values
also gets its tangent code right after it: table ops through rules/scalar.py, the others
through their family's forward rule (rules/lookup.py: loads/stores mirrored on the shadow
arrays in rules/memory_ops.py, control flow with tangents and shadows carried next to the
primal values in rules/control_flow_ops.py, calls of the callee's forward derivative or its
custom rule in rules/call_ops.py, launches in rules/launch_ops.py).

Batched tangents (the signature's `width` N > 1, Enzyme's BatchDuplicated): one pass over the
primal carries N tangents, the lanes. A float's tangent is a tuple of N scalars and each
table op's tangent is the width-1 rule once per lane (the partials the lanes share, cos x for
sin x, are one op after CSE); an array has N shadow arrays, which the caller passes one after
the other (core/derivative_abi.py), so views, copies and allocations are the width-1 rule per
lane. Scalars rather than vector<N> values: LLVM's loop vectoriser then vectorises a kernel's
item loop as at width 1 (it refuses loops of vector-typed instructions: a 100k-item kernel at
width 2 took 3.4 ms with vector tangents, 0.64 ms scalarised).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import arith, func

from ....core.activity import Activity
from ....dialects.adj import AdjError
from ...ir_util import (clone_op, func_type, is_float, is_float_memref, is_memref, ops, zero,
                        zeroed_like)
from ...op_facts import facts
from ..analysis.activity_analysis import ActivityAnalysis
from ..rules.call_ops import forward_signature
from ..rules.lookup import rule as op_rule
from ..rules.scalar import CASTS, RULES, ZERO_DERIVATIVE
from ..signature import Signature, forward_abi

if TYPE_CHECKING:
    from ..protocols import Host


def generate_forward(diff: "Host", fn: ir.Operation, sig: Signature, name: str,
                     extra: dict[str, ir.Attribute]) -> ir.Operation:
    return ForwardGen(diff, fn, sig).emit(name, extra)


class ForwardGen:
    """The forward generator (protocols.ForwardGenerator): the traversal, the value map and
    the tangents; the rules of the ops are rules/lookup.py's and rules/scalar.py's."""

    def __init__(self, diff: "Host", fn: ir.Operation, sig: Signature):
        self.diff = diff
        self.fn = fn
        self.sig = sig
        self.act = ActivityAnalysis(fn, list(sig.activity), sig.ret_activity,
                                    lambda call: diff.has_rules(forward_signature(self, call),
                                                                call),
                                    diff.callee_writes)
        self.vmap: dict[ir.Value, ir.Value] = {}
        self.width = sig.width
        # Tangent of each active float value (a tuple of `width` lanes when width > 1);
        # the shadow arrays (one per lane, a list) of each shadowed array.
        self.tan: dict[ir.Value, ir.Value | tuple | list[ir.Value]] = {}

    def emit(self, name: str, extra: dict[str, ir.Attribute]) -> ir.Operation:
        inputs, results = forward_abi(func_type(self.fn), self.sig)
        new = self.diff.new_function(name, inputs, results, self.fn, extra,
                                     private=name == self.sig.mangled())
        entry = new.regions[0].blocks[0]
        params = iter(entry.arguments)
        old_entry = self.fn.regions[0].blocks[0]
        with ir.InsertionPoint(entry):
            for arg, act in zip(old_entry.arguments, self.sig.activity):
                self.vmap[arg] = next(params)
                if act != Activity.CONST:
                    lanes = [next(params) for _ in range(self.width)]
                    self.tan[arg] = lanes if is_memref(arg.type) else self.pack(lanes)
            for arg in old_entry.arguments:
                if is_memref(arg.type) and self.act.shadowed(arg) and arg not in self.tan:
                    # A const array that shares an alias class with a shadowed one.
                    self.tan[arg] = [zeroed_like(self.vmap[arg]) for _ in range(self.width)]
            self.block(old_entry)
        return new

    # -- traversal ---------------------------------------------------------------------------
    def block(self, block: ir.Block) -> None:
        """Emits the ops of `block` except its terminator, at the insertion point."""
        for op in ops(block)[:-1]:
            with op.location:
                self.op(op)
        last = ops(block)[-1]
        if last.name == "func.return":
            with last.location:
                self.ret(last)

    def op(self, op: ir.Operation) -> None:
        handler = op_rule(op.name, "forward")
        if facts(op.name).view or (handler is not None and any(
                is_memref(r.type) and self.act.shadowed(r) for r in op.results)):
            # A view, or a select between arrays (`u, v = v, u` in a loop), is never
            # `relevant` itself, yet its shadow may be needed: the select of the shadows.
            handler(self, op)
        elif not self.act.relevant(op):
            clone_op(op, self.vmap)
        elif handler is not None:
            handler(self, op)
        elif op.name in RULES or op.name in CASTS or op.name in ZERO_DERIVATIVE:
            self.arith(op)
        elif op.regions or any(self.act.active(r) for r in op.results):
            raise AdjError(op, f"autodiff: no derivative rule for {op.name}")
        else:
            clone_op(op, self.vmap)

    def tangent(self, v: ir.Value) -> ir.Value | None:
        return self.tan.get(v) if is_float(v.type) else None

    def tangent_or_zero(self, v: ir.Value):
        t = self.tangent(v)
        return t if t is not None else self.pack([zero(v.type) for _ in range(self.width)])

    def pack(self, lanes: list[ir.Value]):
        """A float's tangent from its lanes: the one value, or a tuple of `width`."""
        return lanes[0] if self.width == 1 else tuple(lanes)

    def lanes(self, t) -> list[ir.Value]:
        """A float's tangent as its lanes."""
        return [t] if self.width == 1 else list(t)

    def shadows(self, v: ir.Value) -> list[ir.Value] | None:
        """The shadow arrays of an array, one per lane; None if it has none."""
        return self.tan.get(v) if is_memref(v.type) else None

    def carried(self, v: ir.Value) -> bool:
        """Whether control flow carries a tangent (or shadow) next to `v`."""
        return self.act.active(v) if is_float(v.type) else (
            is_float_memref(v.type) and self.act.shadowed(v))

    def derivatives_of(self, v: ir.Value) -> list[ir.Value]:
        """What control flow and calls carry next to `v`: its tangent's lanes (zero if
        inactive) for a float, its shadows for an array."""
        if is_float(v.type):
            return self.lanes(self.tangent_or_zero(v))
        s = self.shadows(v)
        if s is None:
            raise AdjError(v.owner.operation if isinstance(v, ir.OpResult) else self.fn,
                           "autodiff: an array without a shadow flows where one is needed")
        return list(s)

    def derivative_types(self, v: ir.Value) -> list[ir.Type]:
        """The types of `derivatives_of(v)`."""
        return [v.type] * self.width

    def bind(self, v: ir.Value, values, keep: bool = True) -> None:
        """Takes `v`'s derivatives (as derivatives_of gives them) from the iterator `values`
        (and drops them unless `keep`)."""
        lanes = [next(values) for _ in range(self.width)]
        if keep:
            self.tan[v] = self.pack(lanes) if is_float(v.type) else lanes

    # -- table ops ---------------------------------------------------------------------------
    def arith(self, op: ir.Operation) -> None:
        new = clone_op(op, self.vmap)
        if not op.results or not self.act.active(op.results[0]):
            return
        result = op.results[0]
        if op.name in CASTS:
            t = self.tangent(op.operands[0])
            if t is not None:
                self.tan[result] = self.pack([CASTS[op.name][0](lane, result.type)
                                              for lane in self.lanes(t)])
            return
        primals = [self.vmap[v] for v in op.operands]
        totals: list[ir.Value | None] = [None] * self.width
        for v, rule in zip(op.operands, RULES[op.name]):
            t = self.tangent(v) if rule is not None and is_float(v.type) else None
            if t is None:
                continue
            for k, lane in enumerate(self.lanes(t)):
                term = rule(primals, lambda: new.results[0], lane)
                totals[k] = term if totals[k] is None else arith.addf(totals[k], term)
        if totals[0] is not None:
            self.tan[result] = self.pack(totals)

    # -- return ------------------------------------------------------------------------------
    def ret(self, op: ir.Operation) -> None:
        values = [self.vmap[v] for v in op.operands] if self.sig.with_primal else []
        if self.sig.ret_activity != Activity.CONST:
            for v in op.operands:
                if is_float(v.type) or is_float_memref(v.type):
                    values += self.derivatives_of(v)
        func.ReturnOp(values)
