"""Which array arguments a function may write, through its calls and kernel launches.

The runtime refuses a read-only NumPy array for such an argument (NumPy refuses a read-only
`out=` the same way) rather than writing into memory its owner declared immutable, or, where
the array is copied to the GPU and back, silently dropping the writes. The autodiff pass
asks the same of a call's callee: what a call or a launch may write (`written_arrays`).
"""
from __future__ import annotations

from typing import Callable

from mlir import ir

from ..dialects.adj import launch_call
from .aliases import AliasClasses
from .ir_util import callee, func_type, is_memref, symbol_table, walk
from .op_facts import facts
from .registry import AdjPass


def written_arrays(op: ir.Operation, callee_writes: Callable[[str], set[int]]) -> list[ir.Value]:
    """The memref operands that `op` may write (or free): op_facts.py's, or for a call or a
    launch those its callee may write."""
    row = facts(op.name)
    if row.calls:
        call = launch_call(op) if op.name == "adj.launch" else op
        return [call.operands[k] for k in sorted(callee_writes(callee(call)))]
    return [op.operands[k] for k in row.writes]


class CallAliasClasses(AliasClasses):
    """AliasClasses where an array a call returns joins only the arguments the callee may
    return (`returned(name)[i]`: the argument indices result i may be, or be a view of).

    AliasClasses joins a call's results with every operand, which is sound but, for the
    written-argument analysis, transitive: in `r = f(x, y)` with f writing y and returning a
    fresh array, r would join x and y, and x would count as written."""

    def __init__(self, fn: ir.Operation, returned: Callable[[str], list[set[int]]]):
        self._returned = returned
        super().__init__(fn)

    def _join_op(self, op: ir.Operation) -> None:
        if op.name != "func.call":
            super()._join_op(op)
            return
        operands = list(op.operands)
        for r, sources in zip(op.results, self._returned(callee(op))):
            for k in sources:
                if k < len(operands):
                    self.union(r, operands[k])


def _memref_inputs(fn: ir.Operation | None) -> set[int]:
    inputs = list(func_type(fn).inputs) if fn is not None else []
    return {k for k, t in enumerate(inputs) if is_memref(t)}


def _declared_writes(fn: ir.Operation | None) -> set[int]:
    """A declaration's written memref arguments: those its `adj.writes` attribute lists (a
    runtime function that reads some of its arrays: compiler/matmul.py's products), else
    every one."""
    if fn is not None and "adj.writes" in fn.attributes:
        return {ir.IntegerAttr(k).value for k in ir.ArrayAttr(fn.attributes["adj.writes"])}
    return _memref_inputs(fn)


def _has_body(fn: ir.Operation | None) -> bool:
    return fn is not None and len(fn.regions[0].blocks) > 0


def function_writes(fn: ir.Operation, callee_writes: Callable[[str], set[int]],
                    classes: AliasClasses | None = None) -> set[int]:
    """Indices of `fn`'s memref arguments that it may write."""
    classes = classes or AliasClasses(fn)
    written = {classes.find(m) for op in walk(fn) for m in written_arrays(op, callee_writes)}
    entry = fn.regions[0].blocks[0]
    return {k for k, a in enumerate(entry.arguments)
            if is_memref(a.type) and classes.find(a) in written}


class WrittenArguments:
    """`written(name)`: the indices of @name's memref arguments it may write (every memref
    argument of a function without a body, unless it says which: _declared_writes), over the
    top-level functions `symbols`.

    A call's array results join only the arguments its callee may return (`returned`): an
    array the callee allocates is no alias of the caller's arguments, so writing it (or an
    argument the callee writes) marks no other argument written."""

    def __init__(self, symbols: dict[str, ir.Operation]):
        self.symbols = symbols
        self._writes: dict[str, set[int]] = {}
        self._returns: dict[str, list[set[int]]] = {}
        self._classes: dict[str, AliasClasses] = {}

    def __call__(self, name: str) -> set[int]:
        if name not in self._writes:
            fn = self.symbols.get(name)
            self._writes[name] = set()   # provisional, for recursion
            if not _has_body(fn):
                self._writes[name] = _declared_writes(fn)
            else:
                self._writes[name] = function_writes(fn, self, self._classes_of(name, fn))
        return self._writes[name]

    def returned(self, name: str) -> list[set[int]]:
        """Per result of @name: the indices of the memref arguments it may be (or view);
        empty for a scalar or an array the function allocates. Without a body (or while a
        recursive call is analysed) any result may be any array argument."""
        if name not in self._returns:
            fn = self.symbols.get(name)
            n = len(func_type(fn).results) if fn is not None else 0
            self._returns[name] = [_memref_inputs(fn)] * n   # provisional, sound
            if _has_body(fn):
                classes = self._classes_of(name, fn)
                entry = fn.regions[0].blocks[0]
                args = [(k, classes.find(a)) for k, a in enumerate(entry.arguments)
                        if is_memref(a.type)]
                out: list[set[int]] = [set() for _ in range(n)]
                for op in walk(fn):
                    if op.name == "func.return" and op.parent.operation == fn:
                        for i, v in enumerate(op.operands):
                            if is_memref(v.type):
                                c = classes.find(v)
                                out[i] |= {k for k, a in args if a == c}
                self._returns[name] = out
        return self._returns[name]

    def _classes_of(self, name: str, fn: ir.Operation) -> AliasClasses:
        if name not in self._classes:
            self._classes[name] = CallAliasClasses(fn, self.returned)
        return self._classes[name]


def written_arguments(module: ir.Operation, name: str) -> list[int]:
    """The indices of function @name's array arguments it may write, in order."""
    module = getattr(module, "operation", module)
    return sorted(WrittenArguments(symbol_table(module))(name))


WRITTEN_ATTR = "adj.written"


def annotate_written(module: ir.Module) -> None:
    """adjit-opt --adj-annotate-written: records on each function with a body its written
    argument indices (`adj.written`), so FileCheck tests can check the analysis."""
    op = getattr(module, "operation", module)
    symbols = symbol_table(op)
    analysis = WrittenArguments(symbols)
    for name, fn in symbols.items():
        if len(fn.regions[0].blocks):
            fn.attributes[WRITTEN_ATTR] = ir.DenseI64ArrayAttr.get(sorted(analysis(name)))


class AnnotateWritten(AdjPass):
    """--adj-annotate-written: the module docstring."""
    name = "adj-annotate-written"

    def apply(self, module: ir.Operation) -> None:
        annotate_written(module)
