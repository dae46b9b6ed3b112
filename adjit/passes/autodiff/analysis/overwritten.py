"""Which memory may be overwritten after a point: the basis of caching versus reloading.

The reverse pass needs some primal values read from memory. It may read them again (from the
primal array, in the reverse function) only if nothing writes that array between the original
read and the reverse pass: no later op of this function, no later iteration of an enclosing
loop, and not the caller between the augmented and the reverse call (the request's
`overwritten` flags). Otherwise the value goes on the tape. In a kernel every write counts, at
any position, since other work items run in any order.

One refinement (`_other_rows`): a loop that writes row t + b of an array and reads row t + a
of it (`u_all[t + 1] = step(u_all[t])`, the stacked-state form: views of one row along the
first dimension of a C-contiguous array, at the loop's variable plus constants) never
overwrites a row it read when a < b: its variable only grows. So the reverse pass reloads
each state from the stacked array instead of taping a copy of it per step.

The other direction, in the reverse function: whether an array's shadow is dead after a
launch's reverse (`shadow_dead_after`), so that the launch may run a copy of the reverse
kernel that does not zero it (`without_dead_zeroing`); and whether it is still untouched
(only zero-filled) when a loop's reverse runs (`shadow_fresh_before`), so that a sum over
the whole array may store its adjoints into it instead of adding them.
"""
from __future__ import annotations

from typing import Callable

from mlir import ir

from ...aliases import AliasClasses
from ...ir_util import constant_int, is_memref, walk
from ...op_facts import facts
from ...written import written_arrays


def _ancestors(op: ir.Operation, root: ir.Operation) -> list[ir.Operation]:
    """`op` and its enclosing ops up to (not including) `root`, outermost first."""
    chain = []
    while op != root:
        chain.append(op)
        op = op.parent.operation
    return chain[::-1]


def may_run_after(later: ir.Operation, earlier: ir.Operation, root: ir.Operation,
                  position: Callable[[ir.Operation], int]) -> bool:
    """Whether some execution of `later` can follow some execution of `earlier`.
    `position(op)` is op's index in its block."""
    a, b = _ancestors(earlier, root), _ancestors(later, root)
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        if facts(a[k].name).loop:
            return True
        k += 1
    if k == len(a) or k == len(b):   # the same op (or one nested in the other)
        return False
    if a[k].block != b[k].block:     # different branches of an scf.if
        return False
    return position(b[k]) > position(a[k])


class Writes:
    """Writers of each alias class of one function."""

    def __init__(self, fn: ir.Operation, classes: AliasClasses, args_overwritten: list[bool],
                 callee_writes: Callable[[str], set[int]], kernel: bool):
        self.fn = fn
        self.classes = classes
        self.kernel = kernel
        # per alias class, (op, array) for each array an op may write in it
        self.writers: dict[ir.Value, list[tuple[ir.Operation, ir.Value]]] = {}
        entry = fn.regions[0].blocks[0]
        self.external = {classes.find(a) for a, o in zip(entry.arguments, args_overwritten)
                         if o and is_memref(a.type)}
        self._positions: dict[ir.Operation, int] = {}   # index of each op in its block
        for op in walk(fn):
            for region in op.regions:
                for block in region.blocks:
                    for k, inner in enumerate(block.operations):
                        self._positions[inner.operation] = k
            for m in written_arrays(op, callee_writes):
                self.writers.setdefault(classes.find(m), []).append((op, m))

    def written_after(self, op: ir.Operation, array: ir.Value) -> bool:
        """Whether `array`'s memory may change after `op` reads it, before the reverse pass."""
        c = self.classes.find(array)
        if c in self.external:
            return True
        writers = self.writers.get(c, [])
        if self.kernel:
            return bool(writers)
        position = self._positions.__getitem__
        return any(may_run_after(w, op, self.fn, position) and
                   not _other_rows(w, m, op, array, self.fn, position) for w, m in writers)


def _other_rows(writer: ir.Operation, written: ir.Value, op: ir.Operation, array: ir.Value,
                root: ir.Operation, position: Callable[[ir.Operation], int]) -> bool:
    """Whether no later run of `writer`, writing `written`, writes the row of `array`'s
    source that `op` reads: `array` is row t + a of a C-contiguous array (`_row`), `written`
    row t + b of the same array value, t the variable of a loop around both that no loop
    encloses, and the writer's later runs come at t' >= t (after `op` in the same
    iteration) or t' > t (the op itself, run once an iteration, or an op before it): no such
    t' has t' + b = t + a when a < b (or a <= b for t' > t). Anything else is not proven
    (False)."""
    read, row = _row(array), _row(written)
    if read is None or row is None or read[0] != row[0] or read[1][0] != row[1][0]:
        return False
    loop, a, b = read[1][0], read[1][1], row[1][1]
    outer, inner = _ancestors(op, root), _ancestors(writer, root)
    if (loop not in outer or loop not in inner or
            any(facts(x.name).loop for x in _ancestors(loop, root)[:-1])):
        return False
    k = outer.index(loop) + 1
    if outer[k] == inner[k]:
        # the same op of the body: again in this iteration unless it is `op`'s own run
        again = not (writer == op and k == len(outer) - 1)
    else:
        again = position(inner[k]) > position(outer[k])
    return a - b < (0 if again else 1)


def _row(v: ir.Value) -> tuple[ir.Value, tuple[ir.Operation, int]] | None:
    """(source, (loop, c)) when `v` is one row of C-contiguous `source` along its first
    dimension, row `iv + c` of scf.for `loop` (through casts, collapses of that unit
    dimension and index casts); else None."""
    while isinstance(v, ir.OpResult) and v.owner.operation.name in ("memref.cast",
                                                                     "memref.collapse_shape"):
        v = v.owner.operation.operands[0]
    if not isinstance(v, ir.OpResult) or v.owner.operation.name != "memref.subview":
        return None
    view = v.owner.operation.opview
    src = view.operands[0]
    t = ir.MemRefType(src.type)
    # Rows of a strided source may overlap (a stride of 0); a C-contiguous one's do not.
    if (not isinstance(t.layout, ir.AffineMapAttr) or
            ir.AffineMapAttr(t.layout).value != ir.AffineMap.get_identity(t.rank)):
        return None
    if list(view.static_sizes)[0] != 1:
        return None
    offset0 = list(view.static_offsets)[0]
    if offset0 != ir.ShapedType.get_dynamic_stride_or_offset():
        return None
    at = _affine(list(view.offsets)[0])
    return None if at is None else (src, at)


def _affine(v: ir.Value) -> tuple[ir.Operation, int] | None:
    """(scf.for, c) when index `v` is that loop's variable plus the constant c."""
    c = 0
    while True:
        if isinstance(v, ir.BlockArgument):
            owner = v.owner.owner.operation
            if owner.name == "scf.for" and v.arg_number == 0:
                return owner, c
            return None
        op = v.owner.operation
        if op.name == "arith.index_cast":
            v = op.operands[0]
        elif op.name in ("arith.addi", "arith.subi"):
            k = constant_int(op.operands[1])
            if k is None and op.name == "arith.addi":
                k, v = constant_int(op.operands[0]), op.operands[1]
            else:
                v = op.operands[0]
            if k is None:
                return None
            c += k if op.name == "arith.addi" else -k
        else:
            return None


# Ops that touch no element of their array (its shape, address or release only).
_NO_ELEMENTS = ("memref.dim", "memref.dealloc", "memref.extract_aligned_pointer_as_index",
                "memref.extract_strided_metadata")


def shadow_dead_after(fn: ir.Operation, classes: AliasClasses, launch: ir.Operation,
                      array: ir.Value) -> bool:
    """Whether, in the reverse function, nothing reads `array`'s shadow after the reverse of
    `launch` (an adj.launch of `fn` given `array`): the shadow is then an internal temporary
    that the reverse kernel need not zero where it reads the adjoint of a stored element.

    Proven when `array`'s alias class holds one `memref.alloc` of `fn` and views of it (no
    argument, whose shadow the caller reads afterwards; no array a call, loop or branch gives,
    which might be another array's), and every op that touches it other than the launch ran
    after it (its reverse ran before the launch's), none returns it, and the launch runs once
    (not in a loop: a later iteration's reverse would read the shadow again). Anything else
    is not proven (False)."""
    c = classes.find(array)
    allocs = 0
    positions: dict[ir.Block, dict[ir.Operation, int]] = {}

    def position(op: ir.Operation) -> int:
        if op.block not in positions:
            positions[op.block] = {o.operation: k for k, o in enumerate(op.block.operations)}
        return positions[op.block][op]

    if may_run_after(launch, launch, fn, position):
        return False
    for op in walk(fn):
        if op == fn:
            continue
        for region in op.regions:
            for block in region.blocks:
                if any(is_memref(a.type) and classes.find(a) == c for a in block.arguments):
                    return False
        if any(is_memref(r.type) and classes.find(r) == c for r in op.results):
            if op.name == "memref.alloc":
                allocs += 1
            elif not facts(op.name).view:
                return False
        if not any(is_memref(v.type) and classes.find(v) == c for v in op.operands):
            continue
        user = op
        if op.name == "func.call" and op.parent.operation.name == "adj.launch":
            user = op.parent.operation
        if user == launch or op.name in _NO_ELEMENTS or facts(op.name).view:
            continue
        if op.name == "func.return" or may_run_after(launch, user, fn, position):
            return False
    entry = fn.regions[0].blocks[0]
    return allocs == 1 and not any(classes.find(a) == c for a in entry.arguments
                                   if is_memref(a.type))


def shadow_fresh_before(fn: ir.Operation, classes: AliasClasses, loop: ir.Operation,
                        array: ir.Value) -> bool:
    """Whether, in the reverse function, `array`'s shadow holds nothing but its zero-fill
    when the reverse of `loop` (an op of `fn` whose nest reads `array`) runs: the mirror of
    shadow_dead_after. Then a loop that reads each element once may store its adjoints
    instead of adding them, and, covering the whole array, need not have it zero-filled.

    Proven when `array`'s alias class holds one `memref.alloc` of `fn` and views of it (not
    an argument, whose shadow the caller gives with values in it; no array a call, loop or
    branch gives), no op outside `loop` that touches it may run after `loop` (their reverses
    run before its: another read adds into the shadow, a write zeroes it), none returns it,
    and `loop` runs once (not in a loop: a later iteration's reverse would have added into
    it). The ops inside `loop` are the caller's to check. Anything else: False."""
    c = classes.find(array)
    allocs = 0
    positions: dict[ir.Block, dict[ir.Operation, int]] = {}

    def position(op: ir.Operation) -> int:
        if op.block not in positions:
            positions[op.block] = {o.operation: k for k, o in enumerate(op.block.operations)}
        return positions[op.block][op]

    if any(facts(x.name).loop for x in _ancestors(loop, fn)[:-1]):
        return False
    for op in walk(fn):
        if op == fn:
            continue
        inside = loop in _ancestors(op, fn)
        for region in op.regions:
            for block in region.blocks:
                if not inside and any(is_memref(a.type) and classes.find(a) == c
                                      for a in block.arguments):
                    return False
        if any(is_memref(r.type) and classes.find(r) == c for r in op.results):
            if op.name == "memref.alloc":
                allocs += 1
            elif not facts(op.name).view:
                return False
        if inside or not any(is_memref(v.type) and classes.find(v) == c for v in op.operands):
            continue
        user = op
        if op.name == "func.call" and op.parent.operation.name == "adj.launch":
            user = op.parent.operation
        if op.name in _NO_ELEMENTS or facts(op.name).view:
            continue
        if op.name == "func.return" or may_run_after(user, loop, fn, position):
            return False
    entry = fn.regions[0].blocks[0]
    return allocs == 1 and not any(classes.find(a) == c for a in entry.arguments
                                   if is_memref(a.type))


def without_dead_zeroing(diff, rev: str, params: list[int]) -> str:
    """The reverse kernel `rev` for a launch after which nothing reads the shadows passed as
    `params` (overwritten.shadow_dead_after): a copy without its stores of 0 into them, or `rev`
    itself where none can go. Reverse mode zeroes the adjoint of an element the kernel
    stores over, after reading it (memory_ops.reverse_store), for what reads the shadow
    next; for a dead shadow that store is a pass of writes over the whole output for
    nothing (G3: 16 MB; once per adjoint iteration of a fixed point). The stores go only
    where no read of that shadow can follow them: its every use in the kernel is a load or a
    store of 0.0, and no load may run after a store (overwritten.may_run_after: not later in the
    same block, not in a loop around both; the exclusive branches of an `if` are fine). Two
    stores over one element, or a store in a loop, read the zero."""
    kernel = diff.lookup(rev).operation
    entry = kernel.regions[0].blocks[0]
    droppable = [k for k in params if _zero_stores(kernel, entry.arguments[k]) is not None]
    if not droppable:
        return rev
    name = f"{rev}__dead{'_'.join(str(k) for k in droppable)}"
    if diff.lookup(name) is None:
        copy = kernel.clone(ir.InsertionPoint(diff.body)).operation
        copy.attributes["sym_name"] = ir.StringAttr.get(name)
        diff.symbols[name] = copy
        for k in droppable:
            for store in _zero_stores(copy, copy.regions[0].blocks[0].arguments[k]):
                store.erase()
    return name


def _zero_stores(kernel: ir.Operation, shadow: ir.Value) -> list[ir.Operation] | None:
    """The stores of 0.0 into `shadow` (a parameter of `kernel`) if they may be dropped
    (without_dead_zeroing), else None."""
    uses = [u.owner for u in shadow.uses]
    uses = [u.operation if hasattr(u, "operation") else u for u in uses]
    if not uses or any(u.name not in ("memref.load", "memref.store") for u in uses):
        return None
    stores = [u for u in uses if u.name == "memref.store"]
    if any(s.operands[1] != shadow or not _is_zero(s.operands[0]) for s in stores):
        return None
    positions: dict[ir.Block, dict[ir.Operation, int]] = {}

    def position(op: ir.Operation) -> int:
        if op.block not in positions:
            positions[op.block] = {o.operation: k for k, o in enumerate(op.block.operations)}
        return positions[op.block][op]
    # (The branches of an if, a border's and the interior's, each read then zero: fine.)
    loads = [u for u in uses if u.name == "memref.load"]
    if any(may_run_after(load, store, kernel, position) for load in loads for store in stores):
        return None
    return stores or None


def _is_zero(v: ir.Value) -> bool:
    if not isinstance(v, ir.OpResult) or v.owner.operation.name != "arith.constant":
        return False
    value = v.owner.operation.attributes["value"]
    return isinstance(value, ir.FloatAttr) and ir.FloatAttr(value).value == 0.0
