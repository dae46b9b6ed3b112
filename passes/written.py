"""Which array arguments a function may write, through its calls and kernel launches.

The runtime refuses a read-only NumPy array for such an argument (NumPy refuses a read-only
`out=` the same way) rather than writing into memory its owner declared immutable, or, where
the array is copied to the GPU and back, silently dropping the writes.
"""
from __future__ import annotations

from mlir import ir

from .autodiff.memory import WrittenArguments
from .lower_cpu import _symbol_table

__all__ = ["WrittenArguments", "written_arguments"]


def written_arguments(module: ir.Operation, name: str) -> list[int]:
    """The indices of function @name's array arguments it may write, in order."""
    module = getattr(module, "operation", module)
    return sorted(WrittenArguments(_symbol_table(module))(name))
