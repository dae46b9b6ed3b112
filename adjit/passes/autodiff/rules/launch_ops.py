"""Derivative rules of `adj.launch`, after the kernel-launch rules of the first seed.

forward:    launch the forward kernel (tangents and shadows next to the arguments).
augmented:  make room for the per-item tapes (prod(ndrange) * per_item slots each, per_item
            computed from the launch's operands where it depends on them), launch the
            augmented kernel; the tapes are this launch's tape values ("tape", launch, k),
            which the enclosing function's own tape keeps for the reverse pass. At the
            function's top level each fixed tape is a buffer of its own (a tape value);
            inside a loop or branch it is written in place into the function's in-place
            stack (tape.Stacks.place) and the tape value is its offset there, so that no
            step copies its tape onto the stack nor off it (`in_place`).
reverse:    launch the reverse kernel on the same ndrange with the tapes (in place: a view at
            the saved offset, tape.StackReader.region) and one per-item
            buffer per active scalar argument; the launch returns each buffer's sum over the
            items (adj.launch's results: in f64 for f32, pairwise over chunks, summation.py),
            which is added into that argument's adjoint; likewise for each element every
            item reads (uniform_loads.py), whose sum is added into its shadow element.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import arith, memref, scf

from ....core.activity import Activity, SHADOWED
from ....core.derivative_abi import DerivativeMode
from ....dialects import adj
from ....dialects.adj import launch_call
from ...ir_util import callee, clone_op, dims, func_type, index, memref_type, numel
from ..analysis.overwritten import shadow_dead_after, without_dead_zeroing
from ..analysis.uniform import emit
from ..generate.dynamic_tape import emit_offsets
from ..protocols import OpRules
from ..signature import Derivative, Signature, aug_inputs, forward_abi

if TYPE_CHECKING:
    from ..protocols import AugmentedGenerator, ForwardGenerator, ReverseGenerator, Shared


def _workgroupsize(op: ir.Operation) -> list[int] | None:
    if "workgroupsize" in op.attributes:
        return list(ir.DenseI64ArrayAttr(op.attributes["workgroupsize"]))
    return None


def forward_launch(gen: "ForwardGenerator", op: ir.Operation) -> None:
    call = launch_call(op)
    activity, args = [], []
    for v in call.operands:
        args.append(gen.vmap[v])
        if gen.carried(v):
            activity.append(Activity.DUP)
            args += gen.derivatives_of(v)
        else:
            activity.append(Activity.CONST)
    sig = Signature(fn=callee(call), mode=DerivativeMode.FORWARD, activity=tuple(activity),
                    ret_activity=Activity.CONST, with_primal=False,
                    overwritten=(False,) * len(activity), width=gen.width)
    name = gen.diff.derivative(sig, op).forward
    ktype = ir.FunctionType.get(forward_abi(func_type(gen.diff.symbols[sig.fn]), sig)[0], [])
    adj.launch(name, ktype, args, [gen.vmap[v] for v in op.operands], _workgroupsize(op))


def launch_signature(ctx: "Shared", op: ir.Operation) -> tuple[Signature, Derivative]:
    call = launch_call(op)
    activity, overwritten = ctx.operand_activity(op, call.operands)
    sig = Signature(fn=callee(call), mode=DerivativeMode.REVERSE, activity=activity,
                    ret_activity=Activity.CONST, with_primal=False, overwritten=overwritten)
    return sig, ctx.diff.derivative(sig, op)


def in_place(ctx: "Shared", op: ir.Operation, d: Derivative, k: int) -> bool:
    """Whether tape value k of launch `op` is kept in place: a fixed per-item field (the
    packed stacks of dynamic loops are sized by the launch's own counting pass) of a launch
    in a block the function may run several times or not at all (a loop's body, a branch),
    whose keys the function's stacks keep."""
    return d.per_item[k] is not None and op.block != ctx.entry


def tape_key_types(ctx: "Shared", op: ir.Operation) -> list[ir.Type]:
    """The types of the launch's tape values ("tape", op, k) in the function's tape: an
    offset (index) for a field kept in place, else a buffer of the field's elements."""
    d = launch_signature(ctx, op)[1]
    return [ir.IndexType.get() if in_place(ctx, op, d, k) else _buffer_type(t)
            for k, t in enumerate(d.tape)]


def _buffer_type(t: ir.Type) -> ir.MemRefType:
    """memref<?xT> for a tape field of type `t` (a view's type for fixed fields)."""
    return ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], memref_type(t).element_type)


def augmented_launch(gen: "AugmentedGenerator", op: ir.Operation) -> None:
    if not gen.ctx.act.relevant(op):
        clone_op(op, gen.vmap)
        return
    sig, d = launch_signature(gen.ctx, op)
    call = launch_call(op)
    args: list[ir.Value] = []
    for v, a in zip(call.operands, sig.activity):
        args.append(gen.vmap[v])
        if a in SHADOWED:
            args.append(gen.aug_shadow(v, d.aug, len(args)))
    ndrange = [gen.vmap[v] for v in op.operands]
    items = numel(ndrange)
    kernel_args = [gen.vmap[v] for v in call.operands]
    inputs = aug_inputs(func_type(gen.ctx.diff.symbols[sig.fn]), sig)
    packed = _packed_stacks(gen, d, inputs, args, ndrange, items, _workgroupsize(op))
    tapes = []
    for k, (t, per_item) in enumerate(zip(d.tape, d.per_item)):
        if per_item is None:      # a packed stack or its offsets (dynamic_tape.py)
            tapes.append(packed.pop(0))
            gen.extra[("tape", op, k)] = tapes[-1]
            continue
        # per_item may be computed from the kernel's arguments: from this launch's, here.
        n = arith.muli(items, emit(per_item, kernel_args))
        if in_place(gen.ctx, op, d, k):
            view, offset = gen.stacks.place(memref_type(t).element_type, n,
                                            gen.runs_left(op.block))
            tapes.append(view)
            gen.extra[("tape", op, k)] = offset
        else:
            buf = memref.alloc(_buffer_type(t), [n], [])
            tapes.append(memref.cast(t, buf))
            gen.extra[("tape", op, k)] = buf
    ktype = ir.FunctionType.get(inputs + list(d.tape), [])
    adj.launch(d.aug, ktype, args + tapes, ndrange, _workgroupsize(op))
    if d.count:
        adj.sync()


def _packed_stacks(gen: "AugmentedGenerator", d: Derivative, inputs: list[ir.Type],
                   args: list[ir.Value], ndrange: list[ir.Value], items: ir.Value,
                   wgs) -> list[ir.Value]:
    """For a kernel with dynamic loops: the counting launch, the offsets (an exclusive scan
    of the counts: dynamic_tape.emit_offsets), and the packed stacks sized by the last offsets;
    (stack, offsets) per element type, in the tape's order. [] for other kernels."""
    if not d.count:
        return []
    stacks = [t for t, dyn in zip(d.tape, d.dynamic) if dyn == "stack"]
    vec = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], ir.IndexType.get())
    counts = [memref.alloc(vec, [items], []) for _ in stacks]
    adj.launch(d.count, ir.FunctionType.get(inputs + [vec] * len(counts), []),
               args + counts, ndrange, wgs)
    adj.sync()
    out = []
    for t, c in zip(stacks, counts):
        offsets = emit_offsets(gen.ctx.diff, c, items)
        out += [memref.alloc(t, [memref.load(offsets, [items])], []), offsets]
    return out


def reverse_launch(gen: "ReverseGenerator", op: ir.Operation) -> None:
    sig, d = launch_signature(gen.ctx, op)
    call = launch_call(op)
    args: list[ir.Value] = []
    dead: list[int] = []   # parameters given shadows that nothing reads afterwards
    for v, a in zip(call.operands, sig.activity):
        args.append(gen.primal(v))
        if a in SHADOWED:
            if shadow_dead_after(gen.ctx.fn, gen.ctx.act.classes, op, v):
                dead.append(len(args))
            args.append(gen.shadow(v))
    ndrange = [gen.primal(v) for v in op.operands]
    items = numel(ndrange)
    kernel_args = [gen.primal(v) for v in call.operands]
    for k, (t, per_item) in enumerate(zip(d.tape, d.per_item)):
        value = gen.materialize(("tape", op, k))
        if per_item is None:
            args.append(value)
        elif in_place(gen.ctx, op, d, k):
            elem = memref_type(t).element_type
            gen.ctx.plan.add_region(elem)
            args.append(gen.stacks.region(elem, value, arith.muli(items, emit(per_item,
                                                                               kernel_args))))
        else:
            args.append(memref.cast(t, value))
    active = [v for v, a in zip(call.operands, sig.activity) if a == Activity.ACTIVE]
    per_item = [v.type for v in active] + [e.type for e in d.uniform_loads]
    outs = [memref.alloc(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], t), [items], [])
            for t in per_item]
    inputs = (aug_inputs(func_type(gen.ctx.diff.symbols[sig.fn]), sig) + list(d.tape) +
              [o.type for o in outs])
    # The gather kernels first: the reverse kernel then zeroes the output shadows they read.
    for kernel, k in d.gathers:
        gtype = ir.FunctionType.get(inputs + [ir.IndexType.get()] * len(ndrange), [])
        adj.launch(kernel, gtype, args + outs + ndrange, dims(gen.primal(call.operands[k])),
                   None)
        adj.sync()
    # The launch returns the f64 sums of the per-item buffers (accurately: in f64 for f32,
    # pairwise over chunks; summation.py says why). Each lowering decides how: the CPU's
    # sums per chunk of items as they run and never fills the buffers (lower_cpu.py).
    rev = without_dead_zeroing(gen.ctx.diff, d.rev, dead) if dead else d.rev
    launch = adj.launch(rev, ir.FunctionType.get(inputs, []), args + outs, ndrange,
                        _workgroupsize(op), sums=len(outs))
    adj.sync()
    sums = [r if t == r.type else arith.truncf(t, r) for r, t in zip(launch.results, per_item)]
    for v, total in zip(active, sums):
        gen.add_adj(v, total)
    for e, total in zip(d.uniform_loads, sums[len(active):]):
        _add_to_element(gen.shadow(call.operands[e.arg]), [emit(x, kernel_args) for x in e.at],
                        total)


def _add_to_element(shadow: ir.Value, at: list[ir.Value], total: ir.Value) -> None:
    """shadow[at] += total where `at` is inside the array (outside it, no item read the
    element, and total is 0: uniform_loads.py)."""
    inside = None
    for dim, i in enumerate(at):
        ok = arith.andi(arith.cmpi(arith.CmpIPredicate.sge, i, index(0)),
                        arith.cmpi(arith.CmpIPredicate.slt, i, memref.dim(shadow, index(dim))))
        inside = ok if inside is None else arith.andi(inside, ok)
    if inside is None:   # a 0-d array: its one element, always inside
        memref.store(arith.addf(memref.load(shadow, at), total), shadow, at)
        return
    guard = scf.IfOp(inside, [], has_else=False)
    with ir.InsertionPoint(guard.then_block):
        memref.store(arith.addf(memref.load(shadow, at), total), shadow, at)
        scf.YieldOp([])


RULES: dict[str, OpRules] = {
    "adj.launch": OpRules(forward=forward_launch, augmented=augmented_launch,
                          reverse=reverse_launch),
}
