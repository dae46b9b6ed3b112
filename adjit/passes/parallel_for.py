"""`--adj-parallel-for`: parallel loops (kernel launches) onto adjit's own thread pool.

Each outermost `scf.parallel` without results becomes a call of the native runtime's
`adj_parallel_for(body, ctx, n, threads, size)` (runtime/native/parallel.cpp), which splits the
n iterations of the loop's first dimension into one block per thread, the caller taking
the first. In two steps, because only after lowering to the LLVM dialect does a memref
argument have a fixed list of scalar parts that a generic runtime can pass along:

1. Here, on scf: the loop's body moves into a new function `__adj_par_<func>_<k>(lo, hi, captures)`,
   which runs iterations [lo, hi) of the first dimension (and all of the others) as scf.for
   nests; `captures` are the values the body uses from outside (memrefs, scalars; constants
   are made again inside instead, so that they still fold). The loop becomes a call of a
   declared launcher `__adj_launch___adj_par_<func>_<k>(n, size, captures)`. Where small_loops.py
   gave the loop a serial twin (`scf.if small {twin} else {loop}`), the call replaces both,
   `size` saying at run time whether the loop is SMALL (the twin's condition) or TINY: the
   runtime then runs the body on the calling thread unless its workers are awake (SMALL),
   or always (TINY), and the module holds one copy of the body instead of two.
2. `define_launchers`, after the lowering to LLVM (where both signatures are the same
   flattened list of scalars): the launcher stores its arguments in a stack array and calls
   `adj_parallel_for` with the address of a thunk `(ctx, lo, hi)` that loads them again
   and calls the body, with the size class. Both are internal: LLVM
   inlines the launcher at the call site and the body into the thunk.

A loop that captures a value of another type (a vector, a tuple) is left to
`scf-parallel-for-to-nested-fors`, serial, as loops with reductions are.

Why not `async-parallel-for` and MLIR's async runtime, used before: every launch paid the
wake-up of the runtime's sleeping workers and its coroutines (70-90 us on these machines,
more than a 1024^2 stencil step takes), the coroutines made LLVM's work 1.3-2x longer, and
the runtime's pool could not run in a forked child. parallel.cpp says how its pool avoids
each.
"""
from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, func

from .small_loops import (SMALL_LOOP_ATTR, TINY_WORK, bounds, iterations_at_most, nest,
                          outermost_parallel_loops)
from .walk import walk
from ..core.threads import default_num_threads
from .registry import AdjPass

LAUNCHER_PREFIX = "__adj_launch_"
# An outlined loop body: `__adj_par_<func>_<k>`, in adjit's reserved prefix, so that it cannot
# clash with a function of the module (a user's `f_par0`).
BODY_PREFIX = "__adj_par_"
# A loop's size class, for adj_parallel_for (runtime/native/parallel.cpp spells them alike):
# PARALLEL always goes to the pool; SMALL (small_loops.py's serial bound) only when its
# workers are awake; TINY (below TINY_WORK, ~1 us) never.
PARALLEL, SMALL, TINY = 0, 1, 2


def outline_parallel_loops(module: ir.Operation) -> None:
    """Step 1 (the module docstring) for every outermost scf.parallel without results."""
    module = getattr(module, "operation", module)
    with module.context, module.location:
        functions = [op.operation for op in module.regions[0].blocks[0].operations
                     if op.operation.name == "func.func"
                     and len(op.operation.regions[0].blocks) > 0]
        for f in functions:
            name = ir.StringAttr(f.attributes["sym_name"]).value
            loops = [op for op in outermost_parallel_loops(f) if len(op.results) == 0]
            for k, loop in enumerate(loops):
                _outline(module, loop, f"{BODY_PREFIX}{name}_{k}")


def _op(o) -> ir.Operation:
    return getattr(o, "operation", o)


def _inside(op: ir.Operation, ancestor: ir.Operation) -> bool:
    while op is not None:
        if op == ancestor:
            return True
        op = op.parent
    return False


def _defining_op(value: ir.Value) -> ir.Operation:
    owner = value.owner
    return _op(owner.owner if isinstance(owner, ir.Block) else owner)   # a block argument's op


def _captures(loop: ir.Operation) -> list[ir.Value]:
    """The values the loop's body uses from outside it, in order of first use."""
    seen: dict[ir.Value, None] = {}

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op != loop:
            for v in op.operands:
                if v not in seen and not _inside(_defining_op(v), loop):
                    seen[v] = None
        return ir.WalkResult.ADVANCE

    walk(loop, visit)
    return list(seen)


def _passable(t: ir.Type) -> bool:
    if isinstance(t, ir.MemRefType):
        return True
    return isinstance(t, (ir.IndexType, ir.IntegerType, ir.F16Type, ir.BF16Type, ir.F32Type,
                          ir.F64Type))


def _is_constant(v: ir.Value) -> bool:
    return not isinstance(v.owner, ir.Block) and _op(v.owner).name == "arith.constant"


def _outline(module: ir.Operation, op: ir.Operation, name: str) -> None:
    block = op.regions[0].blocks[0]
    rank = len(block.arguments)
    lbs, ubs, steps = bounds(op)
    used = _captures(op)
    loop_bounds = [*lbs, *steps, *lbs[1:], *ubs[1:], *steps[1:]]
    captures = [v for v in dict.fromkeys([*used, *loop_bounds]) if not _is_constant(v)]
    if not all(_passable(v.type) for v in captures):
        return
    index = ir.IndexType.get()
    # The body's uses of outside values, to point at the body function's own.
    uses = [(_op(use.owner), use.operand_number, v) for v in used for use in v.uses
            if _op(use.owner) != op and _inside(_op(use.owner), op)]

    with ir.InsertionPoint(module.regions[0].blocks[0]), op.location:
        body_fn = func.FuncOp(name, ([index, index, *(v.type for v in captures)], []))
        launcher = func.FuncOp(LAUNCHER_PREFIX + name,
                               ([index, ir.IntegerType.get_signless(64),
                                 *(v.type for v in captures)], []))
        launcher.attributes["sym_visibility"] = ir.StringAttr.get("private")
    entry = body_fn.add_entry_block()
    lo, hi, *cap_args = entry.arguments
    mapped = dict(zip(captures, cap_args))

    def inside(v: ir.Value) -> ir.Value:
        """`v` in the body function: its argument, or the constant made again there."""
        if v not in mapped:
            with ir.InsertionPoint.at_block_begin(entry), op.location:
                mapped[v] = arith.ConstantOp(v.type, _op(v.owner).attributes["value"]).result
        return mapped[v]

    # Iterations [lo, hi) of dimension 0, the other dimensions whole: scf.for nests.
    with ir.InsertionPoint(entry), op.location:
        lb0, s0 = inside(lbs[0]), inside(steps[0])
        loops = [(arith.addi(lb0, arith.muli(lo, s0)), arith.addi(lb0, arith.muli(hi, s0)), s0)]
        loops += [(inside(lbs[d]), inside(ubs[d]), inside(steps[d])) for d in range(1, rank)]
        ivs, innermost_end = nest(loops)
        func.ReturnOp([])

    for owner, number, v in uses:
        owner.operands[number] = inside(v)
    for arg, iv in zip(block.arguments, ivs):
        arg.replace_all_uses_with(iv)
    for moved in list(block.operations)[:-1]:    # all but scf.reduce
        moved.operation.move_before(innermost_end)

    # The loop (and its serial twin, if it has one) becomes the launcher's call with its
    # iteration count.
    parent = _op(op.parent) if op.parent is not None else None
    twin = parent if (parent is not None and parent.name == "scf.if"
                      and SMALL_LOOP_ATTR in parent.attributes) else None
    replaced = twin if twin is not None else op
    with ir.InsertionPoint(replaced), op.location:
        n = arith.maxsi(arith.ceildivsi(arith.subi(ubs[0], lbs[0]), steps[0]),
                        arith.constant(index, 0))
        i64 = ir.IntegerType.get_signless(64)
        size = arith.constant(i64, PARALLEL)
        if twin is not None:      # SMALL where the twin ran, TINY below ~1 us of work
            cost = ir.IntegerAttr(twin.attributes[SMALL_LOOP_ATTR]).value
            tiny = iterations_at_most(op, max(TINY_WORK // cost, 1))
            size = arith.select(tiny, arith.constant(i64, TINY),
                                arith.select(twin.operands[0], arith.constant(i64, SMALL), size))
        func.CallOp([], ir.FlatSymbolRefAttr.get(LAUNCHER_PREFIX + name), [n, size, *captures])
    replaced.erase()


# -- step 2, on the LLVM dialect -------------------------------------------------------------

_RUNTIME = "llvm.func @adj_parallel_for(!llvm.ptr, !llvm.ptr, i64, i64, i64)"


def _name(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def _param_types(declaration: ir.Operation) -> list[str]:
    """The parameter types of an llvm.func declaration, as text."""
    text = str(declaration)
    start = text.index("(", text.index("@")) + 1
    out, depth, item = [], 0, start
    for i in range(start, len(text)):
        ch = text[i]
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}" and depth:
            depth -= 1
        elif ch == ")" or (ch == "," and depth == 0):
            if text[item:i].strip():
                out.append(text[item:i].strip())
            item = i + 1
            if ch == ")":
                return out
    raise ValueError(f"no parameter list in {text!r}")


def define_launchers(module: ir.Operation, num_threads: int) -> None:
    """Step 2 (the module docstring): defines every launcher step 1 declared, and a thunk
    for it, once the module is in the LLVM dialect."""
    module = getattr(module, "operation", module)
    body = module.regions[0].blocks[0]
    functions = [op.operation for op in body.operations if op.operation.name == "llvm.func"]
    launchers = {_name(f)[len(LAUNCHER_PREFIX):]: f for f in functions
                 if _name(f).startswith(LAUNCHER_PREFIX) and not f.regions[0].blocks}
    if not launchers:
        return
    text = [] if any(_name(f) == "adj_parallel_for" for f in functions) else [_RUNTIME]
    # After the iteration count and the size class: the captures.
    types = {target: _param_types(declaration)[2:] for target, declaration in launchers.items()}
    for target, declaration in launchers.items():
        text.append(_launcher_text(target, types[target], num_threads))
        declaration.erase()
    # Parsed on their own, with declarations of the bodies they call (not moved over).
    text += [f"llvm.func @{target}({', '.join(['i64', 'i64', *types[target]])})"
             for target in launchers]
    parsed = ir.Module.parse("\n".join(text), module.context)
    for op in list(parsed.body.operations):
        op = op.operation
        if op.regions[0].blocks or _name(op) == "adj_parallel_for":
            body.append(op)
    # Each body is called from its thunk alone: internal, LLVM inlines it there.
    internal = ir.Attribute.parse("#llvm.linkage<internal>", module.context)
    for f in body.operations:
        if f.operation.name == "llvm.func" and _name(f.operation) in launchers:
            f.operation.attributes["linkage"] = internal


def _launcher_text(target: str, types: list[str], num_threads: int) -> str:
    slots = f"!llvm.array<{max(len(types), 1)} x i64>"
    stores, loads = [], []
    for i, t in enumerate(types):
        slot = f"  %p{i} = llvm.getelementptr %ctx[0, {i}] : (!llvm.ptr) -> !llvm.ptr, {slots}"
        stores += [slot, f"  llvm.store %a{i}, %p{i} : {t}, !llvm.ptr"]
        loads += [slot, f"  %v{i} = llvm.load %p{i} : !llvm.ptr -> {t}"]
    params = "".join(f", %a{i}: {t}" for i, t in enumerate(types))
    args = "".join(f", %v{i}" for i in range(len(types)))
    arg_types = "".join(f", {t}" for t in types)
    nl = "\n"
    return f"""
llvm.func internal @{LAUNCHER_PREFIX}{target}(%n: i64, %size: i64{params}) {{
  %one = llvm.mlir.constant(1 : i64) : i64
  %ctx = llvm.alloca %one x {slots} {{alignment = 8 : i64}} : (i64) -> !llvm.ptr
{nl.join(stores)}
  %f = llvm.mlir.addressof @__adj_thunk_{target} : !llvm.ptr
  %threads = llvm.mlir.constant({num_threads} : i64) : i64
  llvm.call @adj_parallel_for(%f, %ctx, %n, %threads, %size)
      : (!llvm.ptr, !llvm.ptr, i64, i64, i64) -> ()
  llvm.return
}}
llvm.func internal @__adj_thunk_{target}(%ctx: !llvm.ptr, %lo: i64, %hi: i64) {{
{nl.join(loads)}
  llvm.call @{target}(%lo, %hi{args}) : (i64, i64{arg_types}) -> ()
  llvm.return
}}
"""


class ParallelFor(AdjPass):
    """--adj-parallel-for: step 1 (the module docstring)."""
    name = "adj-parallel-for"

    def apply(self, module: ir.Operation) -> None:
        outline_parallel_loops(module)


@dataclasses.dataclass
class DefineLaunchers(AdjPass):
    """--adj-define-launchers{threads=N}: step 2 (the module docstring), on the LLVM dialect."""
    name = "adj-define-launchers"
    threads: int = dataclasses.field(default_factory=default_num_threads)

    def apply(self, module: ir.Operation) -> None:
        define_launchers(module, self.threads)
