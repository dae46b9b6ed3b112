"""Which memory may be overwritten after a point: the basis of caching versus reloading.

The reverse pass needs some primal values read from memory. It may read them again (from the
primal array, in the reverse function) only if nothing writes that array between the original
read and the reverse pass: no later op of this function, no later iteration of an enclosing
loop, and not the caller between the augmented and the reverse call (the request's
`overwritten` flags). Otherwise the value goes on the tape. In a kernel every write counts, at
any position, since other work items run in any order.
"""
from __future__ import annotations

from typing import Callable

from mlir import ir

from ...dialects.adj import launch_call
from .activity import AliasClasses
from .ir_util import callee, func_type, is_memref, walk

LOOPS = ("scf.for", "scf.while", "scf.parallel")


def _ancestors(op: ir.Operation, root: ir.Operation) -> list[ir.Operation]:
    """`op` and its enclosing ops up to (not including) `root`, outermost first."""
    chain = []
    while op != root:
        chain.append(op)
        op = op.parent.operation
    return chain[::-1]


def may_run_after(later: ir.Operation, earlier: ir.Operation, root: ir.Operation,
                  position: Callable[[ir.Operation], int]) -> bool:
    """Whether some execution of `later` can follow some execution of `earlier`.
    `position(op)` is op's index in its block."""
    a, b = _ancestors(earlier, root), _ancestors(later, root)
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        if a[k].name in LOOPS:
            return True
        k += 1
    if k == len(a) or k == len(b):   # the same op (or one nested in the other)
        return False
    if a[k].block != b[k].block:     # different branches of an scf.if
        return False
    return position(b[k]) > position(a[k])


class Writes:
    """Writers of each alias class of one function."""

    def __init__(self, fn: ir.Operation, classes: AliasClasses, args_overwritten: list[bool],
                 callee_writes: Callable[[str], set[int]], kernel: bool):
        self.fn = fn
        self.classes = classes
        self.kernel = kernel
        self.writers: dict[ir.Value, list[ir.Operation]] = {}
        entry = fn.regions[0].blocks[0]
        self.external = {classes.find(a) for a, o in zip(entry.arguments, args_overwritten)
                         if o and is_memref(a.type)}
        self._positions: dict[ir.Operation, int] = {}   # index of each op in its block
        for op in walk(fn):
            for region in op.regions:
                for block in region.blocks:
                    for k, inner in enumerate(block.operations):
                        self._positions[inner.operation] = k
            for m in written_arrays(op, callee_writes):
                self.writers.setdefault(classes.find(m), []).append(op)

    def written_after(self, op: ir.Operation, array: ir.Value) -> bool:
        """Whether `array`'s memory may change after `op` reads it, before the reverse pass."""
        c = self.classes.find(array)
        if c in self.external:
            return True
        writers = self.writers.get(c, [])
        if self.kernel:
            return bool(writers)
        return any(may_run_after(w, op, self.fn, self._positions.__getitem__) for w in writers)


def written_arrays(op: ir.Operation, callee_writes: Callable[[str], set[int]]) -> list[ir.Value]:
    """The memref operands that `op` may write (or free)."""
    name = op.name
    if name in ("memref.store", "memref.atomic_rmw", "memref.copy"):
        return [op.operands[1]]
    if name == "memref.dealloc":
        return [op.operands[0]]
    if name == "func.call":
        return [op.operands[k] for k in sorted(callee_writes(callee(op)))]
    if name == "adj.launch":
        call = launch_call(op)
        return [call.operands[k] for k in sorted(callee_writes(callee(call)))]
    return []


def function_writes(fn: ir.Operation, callee_writes: Callable[[str], set[int]]) -> set[int]:
    """Indices of `fn`'s memref arguments that it may write."""
    classes = AliasClasses(fn)
    written = {classes.find(m) for op in walk(fn) for m in written_arrays(op, callee_writes)}
    entry = fn.regions[0].blocks[0]
    return {k for k, a in enumerate(entry.arguments)
            if is_memref(a.type) and classes.find(a) in written}


class WrittenArguments:
    """`written(name)`: the indices of @name's memref arguments it may write (every memref
    argument of a function without a body), over the top-level functions `symbols`."""

    def __init__(self, symbols: dict[str, ir.Operation]):
        self.symbols = symbols
        self._writes: dict[str, set[int]] = {}

    def __call__(self, name: str) -> set[int]:
        if name not in self._writes:
            fn = self.symbols.get(name)
            self._writes[name] = set()   # provisional, for recursion
            if fn is None or len(fn.regions[0].blocks) == 0:
                inputs = list(func_type(fn).inputs) if fn is not None else []
                self._writes[name] = {k for k, t in enumerate(inputs) if is_memref(t)}
            else:
                self._writes[name] = function_writes(fn, self)
        return self._writes[name]
