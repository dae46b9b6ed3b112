"""Activity analysis: which values and memory get derivative code.

A float scalar is *active* when it is both varied (depends on an active input) and useful (can
reach an active output), as in Enzyme. Integers, indices and booleans are never active.

Memory is analysed per *alias class* (passes/aliases.py): memref values joined by control flow
(loop-carried arrays, `u, v = v, u`), selects and calls are one class, since any of them may
name the same buffer. Distinct argument arrays are assumed not to alias each other. A class
gets a shadow when it holds a duplicated argument (the caller gave a shadow, which must
receive derivatives even of constant stores) or when it is both varied and useful.

Calls and launches are treated conservatively, but for what the callee cannot write: anything
varied going in varies every float result, every array result and every array argument the
callee may write (written.WrittenArguments); an array it only reads keeps its activity. So a
Const array a kernel only reads (`x` in `out[i] = (a*x[i] + b)**2` with `a` Active) gets no
shadow, where it had a zero-filled one (and reverse kernels adding into it) before. Anything
useful coming out makes every input useful.
"""
from __future__ import annotations

from typing import Callable, Iterable

from mlir import ir

from ....core.activity import Activity, SHADOWED
from ....dialects.adj import launch_call
from ...aliases import AliasClasses, carried_groups
from ...ir_util import callee, is_float, is_float_memref, is_memref, walk
from ...op_facts import facts
from ..rules.scalar import CASTS, RULES, ZERO_DERIVATIVE


def differentiable_operands(op: ir.Operation) -> list[ir.Value]:
    """The float operands through which derivatives flow in a table op."""
    if op.name in CASTS:
        return [op.operands[0]]
    rules = RULES.get(op.name, ())
    return [v for v, r in zip(op.operands, rules) if r is not None and is_float(v.type)]


class ActivityAnalysis:
    """Varied/useful analysis of one function for one activity signature."""

    def __init__(self, fn: ir.Operation, activity: list[str], ret_activity: str,
                 has_rules: Callable[[ir.Operation], bool],
                 callee_writes: Callable[[str], set[int]] | None = None):
        """`callee_writes(name)`: the indices of @name's array arguments it may write (None:
        any)."""
        self.fn = fn
        self.callee_writes = callee_writes
        self.classes = AliasClasses(fn)
        self.has_rules = has_rules
        entry = fn.regions[0].blocks[0]
        self._varied: set[ir.Value] = set()
        self._useful: set[ir.Value] = set()
        self._varied_mem: set[ir.Value] = set()
        self._useful_mem: set[ir.Value] = set()
        self._dup_mem: set[ir.Value] = set()
        for arg, act in zip(entry.arguments, activity):
            if is_memref(arg.type):
                if act in SHADOWED:
                    self._dup_mem.add(self.classes.find(arg))
            elif is_float(arg.type) and act != Activity.CONST:
                self._varied.add(arg)
        self._varied_mem |= self._dup_mem
        self._useful_mem |= self._dup_mem
        self._ops = list(walk(fn))
        for op in self._ops:
            if op.name == "func.return" and op.parent.operation == fn and ret_activity != Activity.CONST:
                for v in op.operands:
                    if is_float(v.type):
                        self._useful.add(v)
                    elif is_memref(v.type):
                        self._dup_mem.add(self.classes.find(v))
                        self._useful_mem.add(self.classes.find(v))
                        self._varied_mem.add(self.classes.find(v))
        self._fixpoint(self._propagate_varied)
        self._fixpoint(self._propagate_useful)
        self._relevant: dict[ir.Operation, bool] = {}

    # -- queries ---------------------------------------------------------------------------
    def active(self, v: ir.Value) -> bool:
        return is_float(v.type) and v in self._varied and v in self._useful

    def shadowed(self, v: ir.Value) -> bool:
        """Whether memref `v` has a shadow buffer (never an integer or bool array: nothing in
        it has a derivative, so an atomic counter is simply run, issue 8.9)."""
        if not is_float_memref(v.type):
            return False
        c = self.classes.find(v)
        return c in self._dup_mem or (c in self._varied_mem and c in self._useful_mem)

    def relevant(self, op: ir.Operation) -> bool:
        """Whether `op` (or anything nested in it) needs derivative code."""
        if op not in self._relevant:
            self._relevant[op] = any(self._relevant_here(inner) for inner in walk(op))
        return self._relevant[op]

    def _relevant_here(self, op: ir.Operation) -> bool:
        if any(self.active(r) for r in op.results):
            return True
        if any(self.active(v) for v in op.operands if op.name != "func.return"):
            return True
        if facts(op.name).mirrors:
            if any(self.shadowed(v) for v in list(op.operands) + list(op.results)
                   if is_memref(v.type)):
                return True
        if op.regions and any(is_memref(r.type) and self.shadowed(r) for r in op.results):
            # Control flow that yields a shadowed array: its reversal carries the array's
            # shadow back to where it was made (rules/control_flow_ops.py's threaded shadows), even
            # where no float it computes is active (a loop that only passes a first
            # derivative's stack on, in a second derivative: skipped, the stack's adjoints
            # were dropped and reverse over reverse lost every path through it).
            return True
        if op.name == "func.call" and op.parent.name != "adj.launch":
            # A call of nothing active: only custom rules (which fire even then) need code.
            return self.has_rules(op)
        return False

    # -- propagation -------------------------------------------------------------------------
    @staticmethod
    def _fixpoint(step: Callable[[], bool]) -> None:
        while step():
            pass

    def _mark(self, target: set, values: Iterable[ir.Value]) -> bool:
        """Adds the float values among `values` to `target`; whether any was new."""
        changed = False
        for v in values:
            if is_float(v.type) and v not in target:
                target.add(v)
                changed = True
        return changed

    def _mark_mem(self, target: set, arrays: Iterable[ir.Value]) -> bool:
        changed = False
        for v in arrays:
            if is_float_memref(v.type):
                c = self.classes.find(v)
                if c not in target:
                    target.add(c)
                    changed = True
        return changed

    def _mem(self, v: ir.Value, target: set) -> bool:
        return self.classes.find(v) in target

    def _call_operands(self, op: ir.Operation) -> list[ir.Value]:
        if op.name == "adj.launch":
            return list(launch_call(op).operands)
        return list(op.operands)

    def _call_writes(self, op: ir.Operation) -> list[ir.Value]:
        """The arrays a call or launch may vary: the arguments its callee may write, and the
        arrays it returns."""
        call = launch_call(op) if op.name == "adj.launch" else op
        ins = list(call.operands)
        if self.callee_writes is None:
            written = [v for v in ins if is_memref(v.type)]
        else:
            written = [ins[k] for k in sorted(self.callee_writes(callee(call))) if k < len(ins)]
        return written + [r for r in op.results if is_memref(r.type)]

    def _ref(self, op: ir.Operation, ref: str) -> tuple[bool, ir.Value]:
        """An end of one of op_facts.py's flows: (whether it is memory, the value)."""
        k = int(ref[1:])
        return ref[0] == "m", op.results[k] if ref[0] == "r" else op.operands[k]

    def _holds(self, op: ir.Operation, ref: str, values: set, memory: set) -> bool:
        is_mem, v = self._ref(op, ref)
        return self._mem(v, memory) if is_mem else v in values

    def _put(self, op: ir.Operation, ref: str, values: set, memory: set) -> bool:
        is_mem, v = self._ref(op, ref)
        return self._mark_mem(memory, [v]) if is_mem else self._mark(values, [v])

    def _propagate_varied(self) -> bool:
        changed = False
        V = self._varied
        for op in self._ops:
            name = op.name
            row = facts(name)
            if name in RULES or name in CASTS:
                if any(v in V for v in differentiable_operands(op)):
                    changed |= self._mark(V, op.results)
            elif name in ZERO_DERIVATIVE:
                continue
            elif row.flows:
                for source, target in row.flows:
                    if self._holds(op, source, V, self._varied_mem):
                        changed |= self._put(op, target, V, self._varied_mem)
            elif row.calls:
                ins = self._call_operands(op)
                if any(v in V or (is_memref(v.type) and self._mem(v, self._varied_mem))
                       for v in ins):
                    changed |= self._mark(V, op.results)
                    changed |= self._mark_mem(self._varied_mem, self._call_writes(op))
            else:
                for sources, targets in carried_groups(op):
                    if any(v in V for v in sources):
                        changed |= self._mark(V, targets)
                if not carried_groups(op) and not op.regions and any(
                        v in V for v in op.operands):
                    # An op with no rule: varied, so that using it actively is reported.
                    changed |= self._mark(V, op.results)
        return changed

    def _propagate_useful(self) -> bool:
        changed = False
        U = self._useful
        for op in reversed(self._ops):
            name = op.name
            row = facts(name)
            if name in RULES or name in CASTS:
                if any(r in U for r in op.results):
                    changed |= self._mark(U, differentiable_operands(op))
            elif name in ZERO_DERIVATIVE:
                continue
            elif row.flows:
                for source, target in row.flows:
                    if self._holds(op, target, U, self._useful_mem):
                        changed |= self._put(op, source, U, self._useful_mem)
            elif row.calls:
                ins = self._call_operands(op)
                # (an array the call returns counts as much as a float: a callee of scalars
                # that makes and returns an array, `ones(n) * r`, has no array argument to
                # carry its result's usefulness back)
                if any(r in U or (is_memref(r.type) and self._mem(r, self._useful_mem))
                       for r in op.results) or any(
                        is_memref(v.type) and self._mem(v, self._useful_mem) for v in ins):
                    changed |= self._mark(U, ins)
                    changed |= self._mark_mem(self._useful_mem, ins)
            else:
                for sources, targets in carried_groups(op):
                    if any(v in U for v in targets):
                        changed |= self._mark(U, sources)
                if not carried_groups(op) and not op.regions and any(
                        r in U for r in op.results):
                    changed |= self._mark(U, op.operands)
        return changed
