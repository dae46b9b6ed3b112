"""Which array arguments a function may write, through its calls and kernel launches.

The runtime refuses a read-only NumPy array for such an argument (NumPy refuses a read-only
`out=` the same way) rather than writing into memory its owner declared immutable, or, where
the array is copied to the GPU and back, silently dropping the writes.
"""
from __future__ import annotations

from mlir import ir

from .autodiff.ir_util import func_type, is_memref
from .autodiff.memory import function_writes


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


def written_arguments(module: ir.Operation, name: str) -> list[int]:
    """The indices of function @name's array arguments it may write, in order."""
    module = getattr(module, "operation", module)
    symbols = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
               for op in module.regions[0].blocks[0].operations if "sym_name" in op.attributes}
    return sorted(WrittenArguments(symbols)(name))
