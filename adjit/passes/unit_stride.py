"""Launches on views whose innermost stride is 1 run a twin of the kernel compiled for that
(part of `--adj-lower-cpu`, before launches become loops).

A kernel launched on a view made in compiled code (`u_all[t]`, `x[1:-1]`) or on a strided
NumPy view takes it as `memref<?x?xT, strided<[?, ?], offset: ?>>` (one type per rank to
the compiler: core/types.py), so its innermost stride is a run-time value. LLVM vectorises
such a loop only by versioning it on the strides, which it gives up on past a few arrays:
the stacked-state form of G2b (`step(u_all[t], u_all[t + 1])`) had a vectorised primal
kernel but scalar augmented and gather kernels, its gradient 9x its primal against 5x for
the same steps on two swapped arrays. So each launch with such arguments becomes

    scf.if (each such argument's last stride == 1) { launch k__unit } else { launch k }

where `k__unit` is `k` with those parameters typed `strided<[?, ..., ?, 1], offset: ?>` and
cast back to their old type at its entry: canonicalisation folds the casts into the loads
and stores, which then address the last dimension with unit stride, as for contiguous
arrays. One twin per kernel; the check is a compare per argument per launch. The GPU's
lowering keeps one kernel (its loads are not vectorised this way).
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref, scf

from ..dialects.adj import launch_call
from .walk import walk

SUFFIX = "__unit"


def _loose(t: ir.Type) -> bool:
    """A memref whose innermost stride is not known."""
    try:
        m = ir.MemRefType(t)
    except ValueError:     # not a memref
        return False
    if m.rank == 0 or not isinstance(m.layout, ir.StridedLayoutAttr):
        return False
    return ir.StridedLayoutAttr(m.layout).strides[-1] == ir.ShapedType.get_dynamic_stride_or_offset()


def _unit(t: ir.Type) -> ir.MemRefType:
    """`t` with its innermost stride 1."""
    m = ir.MemRefType(t)
    layout = ir.StridedLayoutAttr(m.layout)
    strides = list(layout.strides)[:-1] + [1]
    return ir.MemRefType.get(m.shape, m.element_type,
                             ir.StridedLayoutAttr.get(layout.offset, strides), m.memory_space)


def _twin(module: ir.Operation, kernel: ir.Operation, positions: list[int], name: str) -> None:
    """Adds @name after the module's functions: `kernel` with parameters `positions` of
    unit innermost stride, cast back to their old type at entry."""
    twin = kernel.clone(ip=ir.InsertionPoint(module.regions[0].blocks[0]))
    twin.attributes["sym_name"] = ir.StringAttr.get(name)
    entry = twin.regions[0].blocks[0]
    for k in positions:
        arg = entry.arguments[k]
        old = arg.type
        arg.set_type(_unit(old))
        with ir.InsertionPoint.at_block_begin(entry), twin.location:
            back = memref.cast(old, arg)
        arg.replace_all_uses_except(back, back.owner.operation)
    ftype = ir.FunctionType(ir.TypeAttr(twin.attributes["function_type"]).value)
    twin.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
        [a.type for a in entry.arguments], list(ftype.results)))


def version_unit_stride_launches(module: ir.Operation) -> None:
    """Each launch with arguments of unknown innermost stride: the unit-stride twin when
    every such stride is 1 at run time, the kernel as it is otherwise."""
    launches: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "adj.launch":
            launches.append(op)
        return ir.WalkResult.ADVANCE

    walk(module, visit)
    symbols = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
               for op in module.regions[0].blocks[0].operations if "sym_name" in op.attributes}
    made: set[str] = set()
    for launch in launches:
        call = launch_call(launch)
        name = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
        positions = [k for k, v in enumerate(call.operands) if _loose(v.type)]
        if not positions or name not in symbols:
            continue
        twin = name + SUFFIX
        if twin not in made and twin not in symbols:
            _twin(module, symbols[name], positions, twin)
            made.add(twin)
        _branch(launch, call, positions, twin)


def _branch(launch: ir.Operation, call: ir.Operation, positions: list[int],
            twin: str) -> None:
    """Puts `launch` in the else branch of an scf.if whose then branch launches `twin`."""
    with ir.InsertionPoint(launch), launch.location:
        index = ir.IndexType.get()
        one = arith.constant(index, 1)
        ok = None
        for k in positions:
            v = call.operands[k]
            meta = memref.extract_strided_metadata(v)
            rank = ir.MemRefType(v.type).rank
            unit = arith.cmpi(arith.CmpIPredicate.eq, meta[2 + 2 * rank - 1], one)
            ok = unit if ok is None else arith.andi(ok, unit)
        branch = scf.IfOp(ok, [r.type for r in launch.results], has_else=True)
    with ir.InsertionPoint(branch.then_block), launch.location:
        casts = {k: memref.cast(_unit(call.operands[k].type), call.operands[k])
                 for k in positions}
        fast = launch.clone(ip=ir.InsertionPoint(branch.then_block))
        inner = launch_call(fast)
        fast.attributes["kernel"] = ir.FlatSymbolRefAttr.get(twin)
        inner.attributes["callee"] = ir.FlatSymbolRefAttr.get(twin)
        for k, c in casts.items():
            inner.operands[k] = c
        scf.YieldOp(list(fast.results))
    for old, new in zip(launch.results, branch.results):
        old.replace_all_uses_with(new)
    branch.else_block.append(launch)
    with ir.InsertionPoint(branch.else_block), launch.location:
        scf.YieldOp(list(launch.results))
