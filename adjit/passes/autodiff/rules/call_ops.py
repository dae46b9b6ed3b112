"""Derivative rules of `func.call`: a call of f becomes a call of f's derivative for the call
site's activities (its Signature), generated once per signature by the driver, or of the
custom rule that replaces it (rules/custom.py).

forward:   call f's forward derivative with each carried argument's tangent or shadow beside
           it; its results give the primal results (where the signature keeps them), then
           their tangents.
augmented: call f's augmented function; its results after the primal ones are its tape, kept
           on this function's tape as ("tape", call, k).
reverse:   call f's reverse function with the primals, the shadows, the results' adjoints and
           that tape; its results are the adjoints of the Active arguments.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import func

from ....core.activity import Activity, SHADOWED
from ....core.derivative_abi import DerivativeMode
from ...ir_util import callee, clone_op, func_type, is_float, is_float_memref, or_zero, primal_used
from ..protocols import OpRules
from ..signature import Signature, adjoint_types, forward_abi
from .custom import call_primal

if TYPE_CHECKING:
    from ..protocols import AugmentedGenerator, ForwardGenerator, ReverseGenerator


def forward_signature(gen: "ForwardGenerator", op: ir.Operation) -> Signature:
    """The forward-mode signature of a call site."""
    activity = tuple(Activity.DUP if gen.carried(v) else Activity.CONST for v in op.operands)
    active_ret = any(gen.carried(r) for r in op.results)
    sig = Signature(fn=callee(op), mode=DerivativeMode.FORWARD, activity=activity,
                    ret_activity=Activity.DUP if active_ret else Activity.CONST,
                    with_primal=True, overwritten=(False,) * len(activity), width=gen.width)
    return call_primal(gen.diff, sig, primal_used(op, gen.sig.with_primal), op)


def forward_call(gen: "ForwardGenerator", op: ir.Operation) -> None:
    sig = forward_signature(gen, op)
    args: list[ir.Value] = []
    for v, a in zip(op.operands, sig.activity):
        args.append(gen.vmap[v])
        if a == Activity.DUP:
            args += gen.derivatives_of(v)
    name = gen.diff.derivative(sig, op).forward
    results = forward_abi(func_type(gen.diff.symbols[callee(op)]), sig)[1]
    call = func.CallOp(results, ir.FlatSymbolRefAttr.get(name), args)
    outs = iter(call.results)
    if sig.with_primal:
        for r in op.results:
            gen.vmap[r] = next(outs)
    if sig.ret_activity != Activity.CONST:
        for r in op.results:
            if is_float(r.type) or is_float_memref(r.type):
                gen.bind(r, outs, keep=gen.carried(r))


def augmented_call(gen: "AugmentedGenerator", op: ir.Operation) -> None:
    if not gen.ctx.act.relevant(op):
        clone_op(op, gen.vmap)
        return
    sig, d = gen.ctx.call_info(op)
    args: list[ir.Value] = []
    for v, a in zip(op.operands, sig.activity):
        args.append(gen.vmap[v])
        if a in SHADOWED:
            args.append(gen.aug_shadow(v, d.aug, len(args)))
    primal = [r.type for r in op.results] if sig.with_primal else []
    call = func.CallOp(primal + list(d.tape), ir.FlatSymbolRefAttr.get(d.aug), args)
    outs = list(call.results)
    for r, v in zip(op.results, outs[:len(primal)]):
        gen.vmap[r] = v
    for k, v in enumerate(outs[len(primal):]):
        gen.extra[("tape", op, k)] = v


def reverse_call(gen: "ReverseGenerator", op: ir.Operation) -> None:
    sig, d = gen.ctx.call_info(op)
    args: list[ir.Value] = []
    for v, a in zip(op.operands, sig.activity):
        args.append(gen.primal(v))
        if a in SHADOWED:
            args.append(gen.shadow(v))
    if sig.ret_activity == Activity.ACTIVE:
        args += [or_zero(gen.get_adj(r) if gen.act.active(r) else None, r.type)
                 for r in op.results if is_float(r.type)]
    args += [gen.materialize(("tape", op, k)) for k in range(len(d.tape))]
    ftype = func_type(gen.ctx.diff.symbols[sig.fn])
    call = func.CallOp(adjoint_types(ftype, sig), ir.FlatSymbolRefAttr.get(d.rev), args)
    grads = iter(call.results)
    for v, a in zip(op.operands, sig.activity):
        if a == Activity.ACTIVE:
            gen.add_adj(v, next(grads))


def reads_values(symbols: dict[str, ir.Operation], callee_name: str, position: int,
                 seen: dict[tuple[str, int], bool]) -> bool:
    """Whether @callee_name may read the elements of its memref parameter `position` (or
    write them): true unless its only uses are memref.dim and arguments of calls (launches
    included) whose callees, in turn, do not read theirs. `seen`: answers so far (a cycle
    counts as not reading, as it adds no use of its own). AugGen.aug_shadow passes the
    array itself for a shadow that is never read."""
    key = (callee_name, position)
    if key in seen:
        return seen[key]
    fn = symbols.get(callee_name)
    if fn is None or fn.name != "func.func" or len(fn.regions[0].blocks) == 0:
        return True
    seen[key] = False
    reads = False
    for use in fn.regions[0].blocks[0].arguments[position].uses:
        op = use.owner
        if op.name == "memref.dim" and use.operand_number == 0:
            continue
        if op.name == "func.call" and reads_values(
                symbols, ir.FlatSymbolRefAttr(op.attributes["callee"]).value,
                use.operand_number, seen):
            reads = True
        elif op.name != "func.call":
            reads = True
        if reads:
            break
    seen[key] = reads
    return reads


RULES: dict[str, OpRules] = {
    "func.call": OpRules(forward=forward_call, augmented=augmented_call, reverse=reverse_call),
}
