"""`walk`: Operation.walk, except that what its callback raises propagates as itself.

The MLIR bindings turn an exception raised in a walk callback into
RuntimeError("Exception raised in callback: <its traceback as text>"): a Ctrl-C that lands in
one reaches the user as a RuntimeError, not a KeyboardInterrupt, and a pass's AdjError loses
its op. Passes walk IR through this function instead (`ops_named`: the ops of given names).
"""
from __future__ import annotations

from typing import Callable

from mlir import ir

from ..core.errors import is_wrapped_interrupt


def walk(root: ir.Operation, visit: Callable[[ir.Operation], ir.WalkResult],
         order: ir.WalkOrder = ir.WalkOrder.POST_ORDER) -> None:
    """`root.walk(visit, order)`; an exception `visit` raises stops the walk and is raised."""
    raised: list[BaseException] = []

    def guarded(op: ir.Operation) -> ir.WalkResult:
        try:
            return visit(op)
        except BaseException as e:          # KeyboardInterrupt included: raised below
            raised.append(e)
            return ir.WalkResult.INTERRUPT

    try:
        root.walk(guarded, order)
    except RuntimeError as e:
        # A Ctrl-C between the callback's instructions and its `try` (or after it returned)
        # still arrives wrapped.
        if not raised and is_wrapped_interrupt(e):
            raise KeyboardInterrupt from None
        raise
    if raised:
        raise raised[0]


def ops_named(root: ir.Operation, *names: str) -> list[ir.Operation]:
    """The ops under `root` (itself included) named one of `names`, in post-order."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in names:
            found.append(op)
        return ir.WalkResult.ADVANCE

    walk(root, visit)
    return found
