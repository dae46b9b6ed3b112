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
  several reverse calls.
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

from .ir_util import (alloc_as, dims, for_each_index, index, is_ancestor, is_memref, linear_index,
                      memref_type, numel, parent_op)
from .signature import TapeField

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
    return fields


def top_fields(plan: TapePlan) -> list[TapeField]:
    return [TapeField(describe(k), plan.types[k]) for k in plan.keys(plan.top)]


class Stacks:
    """The augmented pass's growable stacks: (buffer, size) per element type, as SSA values
    that control flow threads through (a buffer changes when it grows)."""

    def __init__(self, types: list[ir.Type]):
        self.types = types
        self.values: list[ir.Value] = []

    def create(self) -> None:
        self.values = []
        for t in self.types:
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
    """Names of the tape values in order: top-level keys, then (stack, size) per type."""
    names: list = [("field", k) for k in plan.keys(plan.top)]
    for t in plan.stack_types():
        names += [("stack", str(t)), ("size", str(t))]
    return names
