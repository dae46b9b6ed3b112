"""The tape: what the augmented pass records for the reverse pass, and where it lives.

The reverse function is generated first. Whenever it needs a primal value that it cannot
recompute, it asks the tape for it, at the start of the reversed block where that value was
defined; the TapePlan records, per primal block, the keys asked for, in order. The augmented
function is generated next from the finished plan: at the end of each primal block it saves
that block's keys.

Where keys live, in a plain function:
- keys of the function's top-level block: one tape value each (a scalar, or an array the
  reverse pass reads again), returned by the augmented function;
- keys of blocks inside loops and branches: one stack per element type (a growable buffer
  and its size, both tape values; a push in the body of loops with trip counts grows it to
  what the loops' remaining runs need, elsewhere it doubles: `_reserve`). The augmented pass
  pushes a block's keys at the block's end (last asked first); the reverse pass pops them at
  the start of the reversed block, so that a block's own values are popped before those of
  the loops nested in it, which the augmented pass pushed earlier. An array pushed there
  (another function's tape, say) goes on as its elements and its sizes. The reverse pass
  reads the tape without changing it (its stack pointers are locals), so a tape can serve
  several reverse calls;
- a kernel launch's per-item tape inside a loop or branch: not made and then pushed, but
  kept in place (`Stacks.place`): the augmented kernel writes it straight into a view of a
  growable buffer per element type (the "in-place stack", a pair of tape values like a
  stack's), and the key's value is the view's offset there, an index saved as above; the
  reverse kernel reads a view of the same buffer at that offset (`StackReader.region`). A
  launch tape pushed as elements cost a copy of its whole tape into the stack and one out
  of it per launch (G2b: a state each way per step). The in-place stack is never popped
  (offsets say where each array is), so the order of its arrays does not matter.
A kernel's tape has a fixed number of slots per work item instead: see kernel_tape.py.

A key is a primal ir.Value, or a tuple for values the reverse pass needs that the primal
function never names: ("count", while_op) the iteration count of an scf.while, ("tape", op, k)
the k-th tape value of a call's or launch's own augmented pass, ("site", array) which argument
or top-level allocation a loop-carried array is, ("dim", array, d) an array's size d.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Hashable

from mlir import ir
from mlir.dialects import arith, memref, scf

from ...ir_util import (alloc_as, dims, for_each_index, index, is_ancestor, is_memref, linear_index,
                        memref_type, numel, parent_op)
from ..signature import TapeField

Key = Hashable
INITIAL_CAPACITY = 16


def key_block(key: Key) -> ir.Block:
    """The primal block at whose end the augmented pass can save `key`."""
    if isinstance(key, ir.Value):
        if isinstance(key, ir.BlockArgument):
            return key.owner
        return key.owner.operation.block
    if key[0] in ("shadow", "site", "dim"):
        return key_block(key[1])
    return key[1].block


def describe(key: Key) -> str:
    if isinstance(key, ir.Value):
        if isinstance(key, ir.BlockArgument):
            owner = key.owner.owner.operation
            what = f"argument {key.arg_number} of a block of {owner.name}"
            loc = owner.location
        else:
            owner = key.owner.operation
            what = f"result of {owner.name}"
            loc = owner.location
    elif key[0] == "count":
        what, loc = "iteration count of scf.while", key[1].location
    elif key[0] == "site":
        return f"which array is {describe(key[1])}"
    elif key[0] == "dim":
        return f"size {key[2]} of {describe(key[1])}"
    else:
        what, loc = f"tape value {key[2]} of {key[1].name}", key[1].location
    return f"{what} at {loc}"


@dataclass
class TapePlan:
    """The keys the reverse pass takes from the tape, per primal block, in the order asked."""
    top: ir.Block
    blocks: dict[ir.Block, list[Key]] = field(default_factory=dict)
    types: dict[Key, ir.Type] = field(default_factory=dict)
    # Element types of the in-place stacks (arrays kept in place), by str, first use first.
    regions: dict[str, ir.Type] = field(default_factory=dict)

    def add(self, block: ir.Block, key: Key, t: ir.Type) -> None:
        keys = self.blocks.setdefault(block, [])
        if key not in keys:
            keys.append(key)
            self.types[key] = t

    def drop_inside(self, op: ir.Operation) -> None:
        """Forgets the keys of blocks nested in `op` (whose reversal is being redone)."""
        for block in [b for b in self.blocks if is_ancestor(op, parent_op(b))]:
            for key in self.blocks.pop(block):
                del self.types[key]

    def keys(self, block: ir.Block) -> list[Key]:
        return self.blocks.get(block, [])

    def add_region(self, t: ir.Type) -> None:
        """Asks for the in-place stack of element type `t`."""
        self.regions.setdefault(str(t), t)

    def region_types(self) -> list[ir.Type]:
        return list(self.regions.values())

    def nested_blocks(self) -> list[ir.Block]:
        return [b for b, keys in self.blocks.items() if b != self.top and keys]

    def stack_types(self) -> list[ir.Type]:
        """Element types of the stacks, in first-use order (by string: types hash poorly).
        An array on a stack takes its elements' stack and the index stack (its sizes)."""
        seen: dict[str, ir.Type] = {}
        for block in self.nested_blocks():
            for key in self.blocks[block]:
                t = self.types[key]
                if is_memref(t):
                    seen.setdefault(str(ir.IndexType.get()), ir.IndexType.get())
                    t = memref_type(t).element_type
                seen.setdefault(str(t), t)
        return list(seen.values())


def stack_fields(plan: TapePlan) -> list[TapeField]:
    held: dict[str, list[str]] = {}
    for block in plan.nested_blocks():
        for key in plan.blocks[block]:
            t = plan.types[key]
            if is_memref(t):
                held.setdefault(str(memref_type(t).element_type), []).append(
                    f"elements of {describe(key)}")
                held.setdefault(str(ir.IndexType.get()), []).append(f"sizes of {describe(key)}")
            else:
                held.setdefault(str(t), []).append(describe(key))
    fields = []
    for t in plan.stack_types():
        fields.append(TapeField(f"{t} stack, per run of its block: {'; '.join(held[str(t)])}",
                                ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], t)))
        fields.append(TapeField(f"{t} stack: number of values", ir.IndexType.get()))
    for t in plan.region_types():
        fields.append(TapeField(f"{t} arrays kept in place (launch tapes in loops and "
                                f"branches), each at an offset the index stack holds",
                                ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], t)))
        fields.append(TapeField(f"{t} arrays kept in place: number of values",
                                ir.IndexType.get()))
    return fields


def top_fields(plan: TapePlan) -> list[TapeField]:
    return [TapeField(describe(k), plan.types[k]) for k in plan.keys(plan.top)]


def region_view_type(t: ir.Type) -> ir.MemRefType:
    """The type of an array kept in place: a 1-D view at a run-time offset, unit stride."""
    dyn = ir.ShapedType.get_dynamic_size()
    return ir.MemRefType.get([dyn], t, ir.StridedLayoutAttr.get(dyn, [1]))


def region_view(buf: ir.Value, offset: ir.Value, n: ir.Value) -> ir.Value:
    """buf[offset : offset + n], without a copy."""
    t = region_view_type(memref_type(buf.type).element_type)
    return memref.subview(buf, [offset], [n], [1], result_type=t)


class Stacks:
    """The augmented pass's growable stacks: (buffer, size) per element type, then per
    element type of `regions` the in-place stack's (buffer, size), as SSA values that
    control flow threads through (a buffer changes when it grows)."""

    def __init__(self, types: list[ir.Type], regions: list[ir.Type] | None = None):
        self.types = types
        self.regions = list(regions or [])
        self.values: list[ir.Value] = []

    def create(self) -> None:
        self.values = []
        for t in self.types + self.regions:
            buf = memref.alloc(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], t),
                               [index(INITIAL_CAPACITY)], [])
            self.values += [buf, index(0)]

    def push(self, values: list[ir.Value],
             runs: Callable[[], ir.Value] | None = None) -> None:
        """Pushes scalars, and arrays as their elements (row-major) then their sizes.

        `runs`: where it is known (a block of loops with trip counts, which pushes every
        iteration), emits how many times this push runs from now on, this time included;
        a stack that must grow then grows to what these pushes need, not to twice its
        capacity (the count is computed only when a stack grows)."""
        by_type: dict[str, list[ir.Value]] = {}
        for v in values:
            if is_memref(v.type):
                by_type.setdefault(str(memref_type(v.type).element_type), []).append(v)
                by_type.setdefault(str(ir.IndexType.get()), []).extend(dims(v))
            else:
                by_type.setdefault(str(v.type), []).append(v)
        for k, t in enumerate(self.types):
            group = by_type.get(str(t), [])
            if not group:
                continue
            buf, size = self.values[2 * k], self.values[2 * k + 1]
            lengths = [numel(dims(v)) if is_memref(v.type) else index(1) for v in group]
            need = size
            for n in lengths:
                need = arith.addi(need, n)
            buf = _reserve(buf, size, need, runs)
            at = size
            for v, n in zip(group, lengths):
                if is_memref(v.type):
                    sizes = dims(v)
                    for_each_index(sizes, lambda i, v=v, at=at, sizes=sizes: memref.store(
                        memref.load(v, i), buf, [arith.addi(at, linear_index(i, sizes))]))
                else:
                    memref.store(v, buf, [at])
                at = arith.addi(at, n)
            self.values[2 * k], self.values[2 * k + 1] = buf, need

    def place(self, t: ir.Type, n: ir.Value,
              runs: Callable[[], ir.Value] | None = None) -> tuple[ir.Value, ir.Value]:
        """Room for `n` values of type `t` on its in-place stack, for an array that is
        written there rather than pushed: (a view of that room, its offset). `runs` as in
        push(). The view is valid until the next place() of that type, which may move the
        buffer (its contents are copied); offsets stay valid."""
        names = [str(r) for r in self.regions]
        assert str(t) in names, "an array kept in place whose type the plan did not ask for"
        k = len(self.types) + names.index(str(t))
        buf, size = self.values[2 * k], self.values[2 * k + 1]
        need = arith.addi(size, n)
        buf = _reserve(buf, size, need, runs)
        self.values[2 * k], self.values[2 * k + 1] = buf, need
        return region_view(buf, size, n), size


def _reserve(buf: ir.Value, size: ir.Value, need: ir.Value,
             runs: Callable[[], ir.Value] | None = None) -> ir.Value:
    """`buf`, or a copy of its first `size` elements in a buffer of capacity >= `need`.

    The copy coexists with `buf` until buf is freed, so each growth costs old plus new
    capacity at once. Without `runs`, the capacity doubles (amortised O(1) pushes; a stack
    that ends at n values has held up to 3n / 2 at its last growth, in two buffers). With
    `runs` (this push's remaining runs, itself included), it grows to `size + (need - size)
    * runs`, what the remaining runs need if each pushes as much as this one: one growth
    in a loop instead of log2(runs) (G2b: 50 launch tapes of a 256^2 grid went 32 + 64
    states at the last doubling, now 50 in one buffer). At least 9/8 of the capacity, so
    that pushes that vary still grow it geometrically (amortised O(1), a few copies per
    value at worst), while an exact plan after a full stack (a loop after a loop) wastes
    little."""
    capacity = memref.dim(buf, index(0))
    grow = arith.cmpi(arith.CmpIPredicate.ugt, need, capacity)
    branch = scf.IfOp(grow, [buf.type], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        if runs is None:
            new_capacity = arith.maxui(arith.muli(capacity, index(2)), need)
        else:
            planned = arith.addi(size, arith.muli(arith.subi(need, size), runs()))
            new_capacity = arith.maxui(
                arith.maxui(planned, need),
                arith.addi(capacity, arith.divui(capacity, index(8))))
        bigger = memref.alloc(buf.type, [new_capacity], [])
        for_each_index([size], lambda i: memref.store(memref.load(buf, i), bigger, i))
        scf.YieldOp([bigger])
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp([buf])
    return branch.results[0]


class StackReader:
    """The reverse pass's view of the stacks: each pops through a local pointer.

    `param(name, type)` gives the value of a tape parameter (the reverse function orders its
    parameters once the plan is complete: ("stack", T) and ("size", T) per element type T).
    """

    def __init__(self, entry_ip: ir.InsertionPoint, param):
        self._entry_ip = entry_ip
        self._param = param
        self._pointers: dict[str, tuple[ir.Value, ir.Value]] = {}

    def _stack(self, t: ir.Type) -> tuple[ir.Value, ir.Value]:
        """(buffer, pointer to its top) of the stack of `t`."""
        if str(t) not in self._pointers:
            buf = self._param(("stack", str(t)), ir.MemRefType.get(
                [ir.ShapedType.get_dynamic_size()], t))
            size = self._param(("size", str(t)), ir.IndexType.get())
            with self._entry_ip:
                pointer = memref.alloca(ir.MemRefType.get([], ir.IndexType.get()), [], [])
                memref.store(size, pointer, [])
            self._pointers[str(t)] = (buf, pointer)
        return self._pointers[str(t)]

    def _take(self, t: ir.Type, n: ir.Value) -> tuple[ir.Value, ir.Value]:
        """Moves the top of `t`'s stack down by `n`: (buffer, new top)."""
        buf, pointer = self._stack(t)
        top = arith.subi(memref.load(pointer, []), n)
        memref.store(top, pointer, [])
        return buf, top

    def pop(self, t: ir.Type) -> ir.Value:
        buf, top = self._take(t, index(1))
        return memref.load(buf, [top])

    def region(self, t: ir.Type, offset: ir.Value, n: ir.Value) -> ir.Value:
        """The `n` values of type `t` kept in place at `offset` (Stacks.place), as a view:
        no copy, and nothing popped (the caller's plan must ask for `t`'s in-place stack:
        TapePlan.add_region)."""
        buf = self._param(("region", str(t)), ir.MemRefType.get(
            [ir.ShapedType.get_dynamic_size()], t))
        return region_view(buf, offset, n)

    def pop_array(self, t: ir.Type) -> ir.Value:
        """A new array holding what the augmented pass pushed (elements, then sizes)."""
        mt = memref_type(t)
        sizes = [self.pop(ir.IndexType.get()) for _ in range(mt.rank)][::-1]
        buf, top = self._take(mt.element_type, numel(sizes))
        new = alloc_as(mt, [s for s, n in zip(sizes, mt.shape)
                            if n == ir.ShapedType.get_dynamic_size()])
        for_each_index(sizes, lambda i: memref.store(
            memref.load(buf, [arith.addi(top, linear_index(i, sizes))]), new, i))
        return new


def tape_param_names(plan: TapePlan) -> list:
    """Names of the tape values in order: top-level keys, then (stack, size) per type, then
    (region, region size) per type of the in-place stacks."""
    names: list = [("field", k) for k in plan.keys(plan.top)]
    for t in plan.stack_types():
        names += [("stack", str(t)), ("size", str(t))]
    for t in plan.region_types():
        names += [("region", str(t)), ("region size", str(t))]
    return names
