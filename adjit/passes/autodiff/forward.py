"""Forward mode: a function that computes the primal and, beside each active value, its tangent.

One pass over the primal body in order. Every op is cloned; an op that touches active values
also gets its tangent code right after it: table ops through rules.py, loads/stores mirrored on
the shadow arrays, control flow with tangents (and shadow arrays) carried next to the primal
values, calls to the forward derivative of the callee (or its custom forward rule).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from ...core.activity import Activity
from ...dialects.adj import AdjError
from .activity import ActivityAnalysis, terminator
from .ir_util import (ATOMIC_ADDF, VIEW_OPS, callee, clone_op, fill_zero, func_type, is_float,
                      is_float_memref, is_memref, memref_type, ops, or_zero, primal_used,
                      view_of,
                      zeroed_like)
from .launch import forward_launch
from .rules import CASTS, RULES, ZERO_DERIVATIVE
from .custom_rules import call_primal
from .signature import Signature, forward_abi

if TYPE_CHECKING:
    from .driver import Differentiator


def generate_forward(diff: "Differentiator", fn: ir.Operation, sig: Signature, name: str,
                     extra: dict[str, ir.Attribute]) -> ir.Operation:
    return ForwardGen(diff, fn, sig).emit(name, extra)


class ForwardGen:
    def __init__(self, diff: "Differentiator", fn: ir.Operation, sig: Signature):
        self.diff = diff
        self.fn = fn
        self.sig = sig
        self.act = ActivityAnalysis(fn, list(sig.activity), sig.ret_activity,
                            lambda call: diff.has_rules(self.call_signature(call), call),
                            diff.callee_writes)
        self.vmap: dict[ir.Value, ir.Value] = {}
        # Tangent of each active float value; shadow buffer of each shadowed array.
        self.tan: dict[ir.Value, ir.Value] = {}

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
                    self.tan[arg] = next(params)
            for arg in old_entry.arguments:
                if is_memref(arg.type) and self.act.shadowed(arg) and arg not in self.tan:
                    # A const array that shares an alias class with a shadowed one.
                    self.tan[arg] = zeroed_like(self.vmap[arg])
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
        handler = getattr(self, "op_" + op.name.replace(".", "_"), None)
        if op.name in VIEW_OPS:
            clone_op(op, self.vmap)
            shadow = self.shadow(op.operands[0])
            if shadow is not None:
                self.tan[op.results[0]] = view_of(op, shadow, self.vmap)
        elif not self.act.relevant(op):
            clone_op(op, self.vmap)
        elif handler is not None:
            handler(op)
        elif op.name in RULES or op.name in CASTS or op.name in ZERO_DERIVATIVE:
            self.arith(op)
        elif op.regions or any(self.act.active(r) for r in op.results):
            raise AdjError(op, f"autodiff: no derivative rule for {op.name}")
        else:
            clone_op(op, self.vmap)

    def tangent(self, v: ir.Value) -> ir.Value | None:
        return self.tan.get(v) if is_float(v.type) else None

    def tangent_or_zero(self, v: ir.Value) -> ir.Value:
        return or_zero(self.tangent(v), v.type)

    def shadow(self, v: ir.Value) -> ir.Value | None:
        return self.tan.get(v) if is_memref(v.type) else None

    def carried(self, v: ir.Value) -> bool:
        """Whether control flow carries a tangent (or shadow) next to `v`."""
        return self.act.active(v) if is_float(v.type) else (
            is_float_memref(v.type) and self.act.shadowed(v))

    def derivative_of(self, v: ir.Value) -> ir.Value:
        """Tangent (zero if inactive) of a float, shadow of an array, for control flow."""
        if is_float(v.type):
            return self.tangent_or_zero(v)
        s = self.shadow(v)
        if s is None:
            raise AdjError(v.owner.operation if isinstance(v, ir.OpResult) else self.fn,
                           "autodiff: an array without a shadow flows where one is needed")
        return s

    # -- table ops ---------------------------------------------------------------------------
    def arith(self, op: ir.Operation) -> None:
        new = clone_op(op, self.vmap)
        if not op.results or not self.act.active(op.results[0]):
            return
        result = op.results[0]
        if op.name in CASTS:
            t = self.tangent(op.operands[0])
            if t is not None:
                self.tan[result] = CASTS[op.name][0](t, result.type)
            return
        primals = [self.vmap[v] for v in op.operands]
        total = None
        for v, rule in zip(op.operands, RULES[op.name]):
            t = self.tangent(v) if rule is not None and is_float(v.type) else None
            if t is not None:
                term = rule(primals, lambda: new.results[0], t)
                total = term if total is None else arith.addf(total, term)
        if total is not None:
            self.tan[result] = total

    # -- memory ------------------------------------------------------------------------------
    def op_memref_load(self, op: ir.Operation) -> None:
        clone_op(op, self.vmap)
        if self.act.active(op.results[0]):
            shadow = self.shadow(op.operands[0])
            indices = [self.vmap[i] for i in list(op.operands)[1:]]
            self.tan[op.results[0]] = memref.load(shadow, indices)

    def op_memref_store(self, op: ir.Operation) -> None:
        clone_op(op, self.vmap)
        shadow = self.shadow(op.operands[1])
        if shadow is not None:
            indices = [self.vmap[i] for i in list(op.operands)[2:]]
            memref.store(self.tangent_or_zero(op.operands[0]), shadow, indices)

    def op_memref_atomic_rmw(self, op: ir.Operation) -> None:
        clone_op(op, self.vmap)
        shadow = self.shadow(op.operands[1])
        if shadow is None:
            return
        if ir.IntegerAttr(op.attributes["kind"]).value != ATOMIC_ADDF:
            raise AdjError(op, "autodiff: of the float atomics only addf is differentiable")
        indices = [self.vmap[i] for i in list(op.operands)[2:]]
        t = memref.AtomicRMWOp(op.attributes["kind"], self.tangent_or_zero(op.operands[0]),
                               shadow, indices).result
        if self.act.active(op.results[0]):
            self.tan[op.results[0]] = t

    def op_memref_copy(self, op: ir.Operation) -> None:
        clone_op(op, self.vmap)
        src, dst = self.shadow(op.operands[0]), self.shadow(op.operands[1])
        if dst is None:
            return
        if src is not None:
            memref.copy(src, dst)
        else:
            fill_zero(dst)

    def op_memref_alloc(self, op: ir.Operation) -> None:
        clone_op(op, self.vmap)
        if self.act.shadowed(op.results[0]):
            new = self.vmap[op.results[0]]
            self.tan[op.results[0]] = zeroed_like(new)

    def op_memref_alloca(self, op: ir.Operation) -> None:
        """A kernel's local array: its tangent is local too (an alloca beside it)."""
        clone_op(op, self.vmap)
        if self.act.shadowed(op.results[0]):
            new = self.vmap[op.results[0]]
            tangent = memref.alloca(memref_type(new.type), list(new.owner.operation.operands), [])
            fill_zero(tangent)
            self.tan[op.results[0]] = tangent

    # -- calls -------------------------------------------------------------------------------
    def call_signature(self, op: ir.Operation) -> Signature:
        activity = tuple(Activity.DUP if self.carried(v) else Activity.CONST for v in op.operands)
        active_ret = any(self.carried(r) for r in op.results)
        sig = Signature(fn=callee(op), mode="forward", activity=activity,
                        ret_activity=Activity.DUP if active_ret else Activity.CONST, with_primal=True,
                        overwritten=(False,) * len(activity))
        return call_primal(self.diff, sig, primal_used(op, self.sig.with_primal), op)

    def op_func_call(self, op: ir.Operation) -> None:
        sig = self.call_signature(op)
        args: list[ir.Value] = []
        for v, a in zip(op.operands, sig.activity):
            args.append(self.vmap[v])
            if a == Activity.DUP:
                args.append(self.derivative_of(v))
        name = self.diff.derivative(sig, op).forward
        results = forward_abi(func_type(self.diff.symbols[callee(op)]), sig)[1]
        call = func.CallOp(results, ir.FlatSymbolRefAttr.get(name), args)
        outs = list(call.results)
        if sig.with_primal:
            for r in op.results:
                self.vmap[r] = outs.pop(0)
        if sig.ret_activity != Activity.CONST:
            for r in op.results:
                if is_float(r.type) or is_float_memref(r.type):
                    d = outs.pop(0)
                    if self.carried(r):
                        self.tan[r] = d

    def op_adj_launch(self, op: ir.Operation) -> None:
        forward_launch(self, op)

    # -- control flow ------------------------------------------------------------------------
    # Control flow carries, after the primal values, one derivative (tangent or shadow) per
    # carried position; a position is carried when any value joined there needs one.
    def _positions(self, *groups: list[ir.Value]) -> list[int]:
        return [k for k, vs in enumerate(zip(*groups)) if any(self.carried(v) for v in vs)]

    def _extended(self, values: list[ir.Value], ks: list[int]) -> list[ir.Value]:
        return [self.vmap[v] for v in values] + [self.derivative_of(values[k]) for k in ks]

    def _types(self, values: list[ir.Value], ks: list[int]) -> list[ir.Type]:
        return [v.type for v in values] + [values[k].type for k in ks]

    def _bind(self, olds: list[ir.Value], news: list[ir.Value], ks: list[int]) -> None:
        for v, n in zip(olds, news):
            self.vmap[v] = n
        for k, d in zip(ks, news[len(olds):]):
            self.tan[olds[k]] = d

    def op_scf_for(self, op: ir.Operation) -> None:
        body = op.regions[0].blocks[0]
        inits = list(op.operands)[3:]
        args = list(body.arguments)[1:]
        ks = self._positions(args, list(op.results))
        lb, ub, step = (self.vmap[v] for v in list(op.operands)[:3])
        loop = scf.ForOp(lb, ub, step, self._extended(inits, ks))
        self.vmap[body.arguments[0]] = loop.body.arguments[0]
        self._bind(args, list(loop.body.arguments)[1:], ks)
        with ir.InsertionPoint(loop.body):
            self.block(body)
            scf.YieldOp(self._extended(list(terminator(body).operands), ks))
        self._bind(list(op.results), list(loop.results), ks)

    def op_scf_if(self, op: ir.Operation) -> None:
        results = list(op.results)
        ks = self._positions(results)
        has_else = len(op.regions[1].blocks) > 0
        new = scf.IfOp(self.vmap[op.operands[0]], self._types(results, ks), has_else=has_else)
        branches = [(op.regions[0].blocks[0], new.then_block)]
        if has_else:
            branches.append((op.regions[1].blocks[0], new.else_block))
        for old, block in branches:
            with ir.InsertionPoint(block):
                self.block(old)
                scf.YieldOp(self._extended(list(terminator(old).operands), ks))
        self._bind(results, list(new.results), ks)

    def op_scf_while(self, op: ir.Operation) -> None:
        before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
        b_args, a_args, results = list(before.arguments), list(after.arguments), list(op.results)
        kb = self._positions(b_args)
        ka = self._positions(a_args, results)
        loop = scf.WhileOp(self._types(results, ka), self._extended(list(op.operands), kb))
        new_before = loop.before.blocks.append(*self._types(b_args, kb))
        new_after = loop.after.blocks.append(*self._types(a_args, ka))
        self._bind(b_args, list(new_before.arguments), kb)
        with ir.InsertionPoint(new_before):
            self.block(before)
            cond = terminator(before)
            scf.ConditionOp(self.vmap[cond.operands[0]],
                            self._extended(list(cond.operands)[1:], ka))
        self._bind(a_args, list(new_after.arguments), ka)
        with ir.InsertionPoint(new_after):
            self.block(after)
            scf.YieldOp(self._extended(list(terminator(after).operands), kb))
        self._bind(results, list(loop.results), ka)

    def op_scf_parallel(self, op: ir.Operation) -> None:
        if op.results:
            raise AdjError(op, "autodiff: scf.parallel with reductions is not supported")
        body = op.regions[0].blocks[0]
        bounds = [self.vmap[v] for v in op.operands]
        n = len(body.arguments)
        loop = scf.ParallelOp([], bounds[:n], bounds[n:2 * n], bounds[2 * n:], [])
        block = loop.regions[0].blocks.append(*[a.type for a in body.arguments])
        for a, b in zip(body.arguments, block.arguments):
            self.vmap[a] = b
        with ir.InsertionPoint(block):
            self.block(body)
            scf.ReduceOp([], 0)

    def op_arith_select(self, op: ir.Operation) -> None:
        if is_memref(op.results[0].type):
            clone_op(op, self.vmap)
            if self.carried(op.results[0]):
                c = self.vmap[op.operands[0]]
                self.tan[op.results[0]] = arith.select(
                    c, self.derivative_of(op.operands[1]), self.derivative_of(op.operands[2]))
        else:
            self.arith(op)

    # -- return ------------------------------------------------------------------------------
    def ret(self, op: ir.Operation) -> None:
        values = [self.vmap[v] for v in op.operands] if self.sig.with_primal else []
        if self.sig.ret_activity != Activity.CONST:
            for v in op.operands:
                if is_float(v.type):
                    values.append(self.tangent_or_zero(v))
                elif is_float_memref(v.type):
                    values.append(self.derivative_of(v))
        func.ReturnOp(values)
