"""Per-item tapes of run-time size: a kernel's values saved inside loops whose iteration count
differs between work items (`for k in range(n[i])`, a `while`, a `for` with `break`).

A fixed slot per saved value (kernel_tape.py) needs every item to run its loops the same
number of times. Values saved inside a *dynamic* loop (an scf.while, or an scf.for whose
bounds are not the same for every item: uniform.py) go instead to one packed stack per
element type, in which item i owns [offsets[i], offsets[i + 1]):
- a counting kernel (`<name>_count`: the augmented kernel without its stores to the arrays
  it is given and without its saves; its local arrays it writes as the kernel does) runs
  first and records how many values of each type each item pushes;
- three small kernels turn the counts into offsets (an exclusive scan, offsets[i + 1] =
  offsets[i] + counts[i], per chunk of counts in parallel: emit_offsets), on the device where
  the launch runs;
- the augmented kernel then pushes each dynamic block's values at its item's cursor,
  threaded through the loops like a function's stacks (augment.py), and the reverse kernel
  pops them from offsets[i + 1] down (tape.StackReader).
The tape values of such a launch are, per element type, the packed stack and its offsets.

Running the primal twice is sound only if the counting pass sees the loops the saving pass
runs: no dynamic loop's count may depend on an array the kernel writes (another item's
write, or its own, could change it between the passes) or on an atomic's returned value;
such kernels are refused with the line of the load.
A push beyond the item's range is dropped, and an item whose pushes do not end exactly at
its range's end raises RuntimeError after the launch: never a silent wrong gradient.
Values kept from blocks outside dynamic loops keep their fixed slots.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import arith, memref, scf

from ....dialects import adj
from ....dialects.adj import AdjError
from ...ir_util import index, is_memref, one_dimensional_kernel, parent_op, walk
from ..analysis.uniform import uniform
from .tape import StackReader, TapePlan

if TYPE_CHECKING:
    from ..protocols import Host


def is_dynamic(block: ir.Block, fn: ir.Operation) -> bool:
    """Whether `block` is inside a loop of `fn` that may run a different number of times
    for different work items: an scf.while, or an scf.for whose bounds are not uniform."""
    op = parent_op(block)
    ivs: dict[ir.Value, int] = {}
    chain = []
    while op != fn:
        chain.append(op)
        op = op.parent.operation
    for d, op in enumerate(reversed(chain)):
        if op.name == "scf.while":
            return True
        if op.name == "scf.for":
            if any(uniform(v, fn, ivs) is None for v in list(op.operands)[:3]):
                return True
            ivs[op.regions[0].blocks[0].arguments[0]] = d
    return False


def dynamic_blocks(plan: TapePlan, fn: ir.Operation) -> list[ir.Block]:
    return [b for b in plan.nested_blocks() if is_dynamic(b, fn)]


def dynamic_types(plan: TapePlan, fn: ir.Operation) -> list[ir.Type]:
    """Element types of the packed stacks, in first-use order; refuses arrays."""
    seen: dict[str, ir.Type] = {}
    for block in dynamic_blocks(plan, fn):
        for key in plan.blocks[block]:
            t = plan.types[key]
            if is_memref(t):
                refuse_array(key, "for each run of a loop whose number of runs differs "
                                  "between work items")
            seen.setdefault(str(t), t)
    return list(seen.values())


def refuse_array(key, where: str) -> None:
    """A kernel's tapes hold numbers: an array the reverse pass would need (`key`) is refused
    at the op that makes it."""
    owner = key.owner.operation if isinstance(key, ir.OpResult) else key[1]
    raise AdjError(owner, f"autodiff: a kernel's reverse pass would need to keep this array "
                          f"{where}: pass the arrays as separate arguments, or differentiate "
                          "in forward mode")


def check_countable(fn: ir.Operation) -> None:
    """Refuses a kernel whose loops the counting pass might see run differently from the
    saving pass: where the number of runs of a dynamic loop depends on an array that the
    kernel writes (another item's write, or the item's own, could change it in between),
    or on the value an atomic_add returns."""
    entry = fn.regions[0].blocks[0]
    # The kernel's arrays (its arguments): its local arrays are the item's own, which the
    # counting pass writes as the saving pass does.
    written = {op.operands[1] for op in walk(fn)
               if op.name in ("memref.store", "memref.atomic_rmw")
               and isinstance(op.operands[1], ir.BlockArgument)
               and op.operands[1].owner == entry}
    for op in walk(fn):
        if op.name == "scf.while":
            before = op.regions[0].blocks[0]
            roots = [list(before.operations)[-1].operands[0]]
        elif op.name == "scf.for" and is_dynamic(op.regions[0].blocks[0], fn):
            roots = list(op.operands)[:3]
        else:
            continue
        for source in _sources(roots, entry):
            if source.name == "memref.atomic_rmw" or source.operands[0] in written:
                raise AdjError(source, "autodiff: how many times a loop of this kernel runs "
                                       "depends on this value, which the kernel itself "
                                       "changes, and a kernel whose loops run a different "
                                       "number of times per work item is run twice (to size "
                                       "each item's tape, then to fill it): read the loop's "
                                       "bounds from an array the kernel does not write, or "
                                       "differentiate in forward mode")


def _sources(roots: list[ir.Value], entry: ir.Block) -> list[ir.Operation]:
    """The loads and atomics that `roots` depend on, through the kernel's data, loop-carried
    values and the conditions that select an scf.if's or scf.while's results (a `break`
    under `if x[i] > 3` sets a flag that the loop's condition reads)."""
    seen: set = set()
    found: list[ir.Operation] = []
    work = list(roots)
    while work:
        v = work.pop()
        if v in seen:
            continue
        seen.add(v)
        if isinstance(v, ir.BlockArgument):
            block = v.owner
            if block == entry:
                continue
            op = parent_op(block)
            k = v.arg_number
            if op.name == "scf.for" and k > 0:
                work += [list(op.operands)[3 + k - 1],
                         list(block.operations)[-1].operands[k - 1]]
            elif op.name == "scf.while":
                before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
                cond = list(before.operations)[-1]
                if block == before:
                    work += [op.operands[k], list(after.operations)[-1].operands[k]]
                else:
                    work.append(list(cond.operands)[1 + k])
            continue
        op = v.owner.operation
        if op.name in ("memref.load", "memref.atomic_rmw"):
            found.append(op)
            work += list(op.operands)[1:] if op.name == "memref.load" else []
            continue
        if op.name in ("scf.for", "scf.while", "scf.if"):
            r = v.result_number
            for region in op.regions:
                for block in region.blocks:
                    term = list(block.operations)[-1]
                    if term.name == "scf.yield" and r < len(term.operands):
                        work.append(term.operands[r])
                    elif term.name == "scf.condition":
                        work.append(term.operands[1 + r])
            if op.name == "scf.for":
                work.append(list(op.operands)[3 + r])
            elif op.name == "scf.while":
                work.append(op.operands[r])
                work.append(list(op.regions[0].blocks[0].operations)[-1].operands[0])
            else:
                work.append(op.operands[0])      # the if's condition
            continue
        work += list(op.operands)
    return found


class ItemStacks:
    """The augmented (or counting) kernel's packed stacks: per element type, (buffer,
    cursor) threaded through control flow like Stacks' (buffer, size). A push stores at the
    cursor (the counting kernel only moves it), dropping values beyond `end`."""

    def __init__(self, types: list[ir.Type], counting: bool):
        self.types = types
        self.counting = counting
        self.values: list[ir.Value] = []
        self.ends: list[ir.Value] = []

    def start(self, buffers: list[ir.Value], cursors: list[ir.Value],
              ends: list[ir.Value]) -> None:
        self.values = [v for pair in zip(buffers, cursors) for v in pair]
        self.ends = ends

    def push(self, values: list[ir.Value], runs=None) -> None:
        for k, t in enumerate(self.types):
            group = [v for v in values if str(v.type) == str(t)]
            if not group:
                continue
            buf, at = self.values[2 * k], self.values[2 * k + 1]
            for v in group:
                if not self.counting:
                    inside = arith.cmpi(arith.CmpIPredicate.ult, at, self.ends[k])
                    branch = scf.IfOp(inside, [], has_else=False)
                    with ir.InsertionPoint(branch.then_block):
                        memref.store(v, buf, [at])
                        scf.YieldOp([])
                at = arith.addi(at, index(1))
            self.values[2 * k + 1] = at

    def cursors(self) -> list[ir.Value]:
        return self.values[1::2]


class ItemStackReader(StackReader):
    """The reverse kernel's view of its item's packed stacks: each type's pointer starts at
    offsets[item + 1], the end of what this item pushed."""

    def __init__(self, entry_ip: ir.InsertionPoint, param, item: ir.Value):
        super().__init__(entry_ip, param)
        self._item = item

    def _stack(self, t: ir.Type) -> tuple[ir.Value, ir.Value]:
        if str(t) not in self._pointers:
            dyn = ir.ShapedType.get_dynamic_size()
            buf = self._param(("dstack", str(t)), ir.MemRefType.get([dyn], t))
            offsets = self._param(("doffsets", str(t)),
                                  ir.MemRefType.get([dyn], ir.IndexType.get()))
            with self._entry_ip:
                end = memref.load(offsets, [arith.addi(self._item, index(1))])
                pointer = memref.alloca(ir.MemRefType.get([], ir.IndexType.get()), [], [])
                memref.store(end, pointer, [])
            self._pointers[str(t)] = (buf, pointer)
        return self._pointers[str(t)]


SCAN_CHUNK = 1024      # counts per work item of the offsets' scan


def emit_offsets(diff: "Host", counts: ir.Value, items: ir.Value) -> ir.Value:
    """At the insertion point: offsets[0..items], the exclusive scan of counts[0..items)
    (offsets[i + 1] = offsets[i] + counts[i]), by three launches on the device that runs the
    kernels: each chunk of SCAN_CHUNK counts is summed, one item scans the chunk sums (and
    writes offsets[items], the total), and each chunk writes its offsets from its start. One
    item scanning every count was one serial loop of a million global loads on a GPU."""
    idx = ir.IndexType.get()
    vec = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], idx)
    chunks = arith.ceildivui(items, index(SCAN_CHUNK))
    sums = memref.alloc(vec, [arith.addi(chunks, index(1))], [])
    offsets = memref.alloc(vec, [arith.addi(items, index(1))], [])
    for name, args, extent in ((_chunk_sums(diff), [counts, sums], chunks),
                               (_scan_chunks(diff), [sums, offsets], index(1)),
                               (_chunk_offsets(diff), [counts, sums, offsets], chunks)):
        adj.launch(name, ir.FunctionType.get([vec] * len(args), []), args, [extent], None)
        adj.sync()
    return offsets


def _scan_kernel(diff: "Host", name: str, n_args: int, body) -> str:
    """A one-dimensional kernel @name of `n_args` index arrays (made once per module), whose
    body `body(args, item)` emits."""
    vec = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], ir.IndexType.get())
    diff.symbols[name] = one_dimensional_kernel(diff.body, name, [vec] * n_args, body)
    return name


def _chunk_range(counts: ir.Value, c: ir.Value) -> tuple[ir.Value, ir.Value]:
    lo = arith.muli(c, index(SCAN_CHUNK))
    return lo, arith.minui(arith.addi(lo, index(SCAN_CHUNK)), memref.dim(counts, index(0)))


def _chunk_sums(diff: "Host") -> str:
    """sums[c] = counts[c * SCAN_CHUNK ...] summed over the chunk."""
    def body(args, c):
        counts, sums = args
        lo, hi = _chunk_range(counts, c)
        loop = scf.ForOp(lo, hi, index(1), [index(0)])
        with ir.InsertionPoint(loop.body):
            scf.YieldOp([arith.addi(loop.inner_iter_args[0],
                                    memref.load(counts, [loop.induction_variable]))])
        memref.store(loop.results[0], sums, [c])
    return _scan_kernel(diff, "__adj_tape_chunk_sums", 2, body)


def _scan_chunks(diff: "Host") -> str:
    """One item: sums[c] becomes the start of chunk c; offsets[items] the total."""
    def body(args, _):
        sums, offsets = args
        chunks = arith.subi(memref.dim(sums, index(0)), index(1))
        loop = scf.ForOp(index(0), chunks, index(1), [index(0)])
        with ir.InsertionPoint(loop.body):
            c = loop.induction_variable
            total = loop.inner_iter_args[0]
            count = memref.load(sums, [c])
            memref.store(total, sums, [c])
            scf.YieldOp([arith.addi(total, count)])
        memref.store(loop.results[0], sums, [chunks])
        memref.store(loop.results[0], offsets,
                     [arith.subi(memref.dim(offsets, index(0)), index(1))])
    return _scan_kernel(diff, "__adj_tape_scan_chunks", 2, body)


def _chunk_offsets(diff: "Host") -> str:
    """offsets[i] for the counts of chunk c, from the chunk's start."""
    def body(args, c):
        counts, sums, offsets = args
        lo, hi = _chunk_range(counts, c)
        loop = scf.ForOp(lo, hi, index(1), [memref.load(sums, [c])])
        with ir.InsertionPoint(loop.body):
            i = loop.induction_variable
            at = loop.inner_iter_args[0]
            memref.store(at, offsets, [i])
            scf.YieldOp([arith.addi(at, memref.load(counts, [i]))])
    return _scan_kernel(diff, "__adj_tape_chunk_offsets", 3, body)


def check_ends(cursors: list[ir.Value], ends: list[ir.Value]) -> None:
    """In the augmented kernel: each type's cursor ended where the counting pass said."""
    ok = None
    for at, end in zip(cursors, ends):
        same = arith.cmpi(arith.CmpIPredicate.eq, at, end)
        ok = same if ok is None else arith.andi(ok, same)
    if ok is not None:
        adj.check(ok, "RuntimeError",
                  "autodiff: a work item ran its loops a different number of times when its "
                  "tape was sized than when it was filled (a loop's count depends on "
                  "something that changed between the two passes); its gradient would be "
                  "wrong")
