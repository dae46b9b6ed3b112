"""Which array arguments a function may write, through its calls and kernel launches.

The runtime refuses a read-only NumPy array for such an argument (NumPy refuses a read-only
`out=` the same way) rather than writing into memory its owner declared immutable, or, where
the array is copied to the GPU and back, silently dropping the writes.
"""
from __future__ import annotations

from mlir import ir

from .autodiff.memory import WrittenArguments
from .lower_cpu import _symbol_table
from .registry import AdjPass

__all__ = ["WrittenArguments", "written_arguments"]


def written_arguments(module: ir.Operation, name: str) -> list[int]:
    """The indices of function @name's array arguments it may write, in order."""
    module = getattr(module, "operation", module)
    return sorted(WrittenArguments(_symbol_table(module))(name))


WRITTEN_ATTR = "adj.written"


def annotate_written(module: ir.Module) -> None:
    """adjit-opt --adj-annotate-written: records on each function with a body its written
    argument indices (`adj.written`), so FileCheck tests can check the analysis."""
    op = getattr(module, "operation", module)
    symbols = _symbol_table(op)
    analysis = WrittenArguments(symbols)
    for name, fn in symbols.items():
        if len(fn.regions[0].blocks):
            fn.attributes[WRITTEN_ATTR] = ir.DenseI64ArrayAttr.get(sorted(analysis(name)))


class AnnotateWritten(AdjPass):
    """--adj-annotate-written: the module docstring."""
    name = "adj-annotate-written"

    def apply(self, module: ir.Operation) -> None:
        annotate_written(module)
