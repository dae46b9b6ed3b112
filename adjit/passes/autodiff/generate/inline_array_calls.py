"""Inlines, before reverse mode differentiates a function, the calls in it that return arrays,
and, in kernels, the calls of functions with loops or branches.

Reverse mode has no ABI for the shadow of an array a callee returns (the adjoint would have to
flow back into memory the callee allocated, which its caller only sees after the call), while
a helper returning an array is common in user code (`y = doubled(x)`). Inlined, the callee's
allocation becomes the caller's own, whose shadow reverse mode makes like any other.

A call stays a call (and reverse mode refuses a shadow for its array, naming the call) when
its callee
- has custom rules for the call's signature: rules attach to calls and must keep firing;
- is on a cycle of the call graph: inlining recursion would not end;
- has no body, or a body of several blocks, which cannot go into a structured region.

Why not the upstream `inline` pass: it inlines every call of the module it may (calls to
keep would all need `no_inline`), erases private callees it emptied of uses (which the
Differentiator's symbol table still names) and rewrites the inlined ops' locations into
call-site locations, which errors at the user's line do not expect. Cloning the one-block
body at the call is all that is needed here.

Forward mode returns an array's tangent as a result, so it differentiates such calls as calls.

In a kernel, a call of a function that runs a loop (a Horner polynomial, a fixed-count Newton
solve, nested calls with loops) is inlined too: the callee's reverse pass would keep the
loop's values on a tape of its own, an array, which a kernel's per-item tape cannot hold (it
has fixed slots per work item, kernel_tape.py); inlined, the loop is the kernel's own, whose
values get per-item slots (a trip count of the kernel's arguments and sizes included) or are
recomputed, exactly as if the user had written the loop in the kernel. Branches likewise: a
callee's values saved inside a branch go on its stacks (tape.py: a block nested in control
flow may run or not), arrays again; `if a: return ...` twice in a row nests the second `if`
(and the value it yields) in the first's else branch, so two early returns were refused with
a message about an array the user never made. Inlined, the branch's values get the kernel's
fixed slots.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from mlir import ir

from ....dialects.adj import KERNEL_ATTR
from ...ir_util import callee, clone_op, is_memref, walk
from ...op_facts import LOOPS
from ..signature import Signature
from .context import ReverseContext

if TYPE_CHECKING:
    from ..protocols import Host


def inline_array_calls(diff: "Host", fn: ir.Operation, sig: Signature) -> None:
    """Inlines into `fn` (in place) the calls that return arrays (in a kernel, also those of
    functions with loops) and that may be inlined, until none is left: an inlined body may
    hold such calls itself."""
    kernel = KERNEL_ATTR in fn.attributes
    while True:
        calls = [op for op in walk(fn) if _returns_array(op)
                 or (kernel and op.name == "func.call" and _has_control_flow(diff, callee(op)))]
        if not calls:
            return
        # The call sites' signatures, as reverse mode will see them, tell whether rules apply.
        ctx = ReverseContext(diff, fn, sig)
        calls = [op for op in calls if _inlinable(diff, op)
                 and not diff.has_rules(ctx.call_signature(op), op)]
        if not calls:
            return
        for op in calls:
            _inline(op, diff.lookup(callee(op)))


def _has_control_flow(diff: "Host", name: str) -> bool:
    """Whether @name, or a function it calls, has a loop or a branch."""
    return any(op.name in LOOPS or op.name == "scf.if" for op in _reachable_ops(diff, name))


def _reachable_ops(diff: "Host", name: str) -> Iterator[ir.Operation]:
    """The ops of @name and of every function it calls, directly or not, each once."""
    seen = {name}
    todo = [name]
    while todo:
        fn = diff.lookup(todo.pop())
        if fn is None or fn.name != "func.func":
            continue
        for op in walk(fn):
            yield op
            if op.name == "func.call" and callee(op) not in seen:
                seen.add(callee(op))
                todo.append(callee(op))


def _returns_array(op: ir.Operation) -> bool:
    return op.name == "func.call" and any(is_memref(r.type) for r in op.results)


def _inlinable(diff: "Host", call: ir.Operation) -> bool:
    target = diff.lookup(callee(call))
    return (target is not None and target.name == "func.func"
            and len(target.regions[0].blocks) == 1 and not _recursive(diff, callee(call)))


def _recursive(diff: "Host", name: str) -> bool:
    """Whether @name can reach itself through calls."""
    return any(op.name == "func.call" and callee(op) == name
               for op in _reachable_ops(diff, name))


def _inline(call: ir.Operation, target: ir.Operation) -> None:
    """Replaces `call` by a copy of `target`'s one-block body, its results by what that
    body returns. The copied ops keep their own locations, so an error in them still names
    the line of the callee that made them."""
    body = target.regions[0].blocks[0]
    vmap: dict[ir.Value, ir.Value] = dict(zip(body.arguments, call.operands))
    ops = [op.operation for op in body.operations]
    with ir.InsertionPoint(call):
        for op in ops[:-1]:
            clone_op(op, vmap)
    returned = ops[-1].operands
    for r, v in zip(call.results, returned):
        r.replace_all_uses_with(vmap.get(v, v))
    call.erase()
