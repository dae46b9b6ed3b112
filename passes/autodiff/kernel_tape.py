"""Reverse mode of a kernel: the tape is one slot range per work item.

A kernel's augmented and reverse functions are kernels themselves (the launch rule in
launch.py runs them over the same ndrange), and work items cannot grow a shared buffer, so the
tape layout is fixed at compile time: per element type T one memref<?xT> tape parameter with
K_T slots per work item, item i owning [i*K_T, (i+1)*K_T). Each saved key has a fixed base
offset within the item's range; a key inside scf.for loops with constant trip counts takes one
slot per iteration of those loops (base + linearized iteration). A value the reverse pass needs
from inside an scf.while or a loop with a runtime trip count cannot have a fixed slot and is
refused.

Adjoints of active scalar arguments are per work item too: the reverse kernel stores its
item's adjoint of each into an extra memref<?xT> parameter at [adj.index]; the caller sums.
"""
from __future__ import annotations

from typing import Callable

from mlir import ir
from mlir.dialects import arith, func, memref

from ...dialects import adj
from ...dialects.adj import AdjError
from .ir_util import index, is_memref, parent_op
from .augment import AugGen
from .context import ReverseContext
from .reverse import RevGen, Scope
from .signature import TapeField
from .tape import Key, TapePlan, describe, key_block

Loop = tuple[ir.Operation, int, int, int]   # (scf.for, lb, step, trip count)


def _enclosing_loops(block: ir.Block, fn: ir.Operation) -> list[Loop]:
    """The scf.for loops around `block`, outermost first, with their constant bounds."""
    loops: list[Loop] = []
    op = parent_op(block)
    while op != fn:
        if op.name == "scf.while":
            raise AdjError(op, "autodiff: a kernel's reverse pass needs values from inside this "
                               "scf.while, whose iteration count varies: a kernel's per-item "
                               "tape has a fixed size")
        if op.name == "scf.for":
            bounds = [_constant(v) for v in list(op.operands)[:3]]
            if None in bounds:
                raise AdjError(op, "autodiff: a kernel's reverse pass needs values from inside "
                                   "this loop, whose trip count is not a constant: a kernel's "
                                   "per-item tape has a fixed size")
            lb, ub, step = bounds
            loops.append((op, lb, step, max(0, -(-(ub - lb) // step))))
        op = op.parent.operation
    return loops[::-1]


def _constant(v: ir.Value) -> int | None:
    if isinstance(v, ir.OpResult) and v.owner.operation.name == "arith.constant":
        return ir.IntegerAttr(v.owner.operation.attributes["value"]).value
    return None


class KernelLayout:
    """Slots per item (K_T) and each key's base offset, per element type."""

    def __init__(self, plan: TapePlan, fn: ir.Operation):
        self.per_item: dict[str, int] = {}
        self.types: dict[str, ir.Type] = {}
        self.base: dict[Key, int] = {}
        for block, keys in plan.blocks.items():
            slots = 1
            for _, _, _, n in _enclosing_loops(block, fn):
                slots *= n
            for key in keys:
                t = plan.types[key]
                if is_memref(t):
                    owner = key.owner.operation if isinstance(key, ir.OpResult) else key[1]
                    raise AdjError(owner, "autodiff: a kernel's reverse pass would need an array "
                                          "on its per-item tape")
                name = str(t)
                self.types.setdefault(name, t)
                self.base[key] = self.per_item.get(name, 0)
                self.per_item[name] = self.base[key] + slots


def kernel_fields(plan: TapePlan) -> list[TapeField]:
    layout = KernelLayout(plan, parent_op(plan.top))
    return [TapeField(f"{name} values per work item: " +
                      "; ".join(describe(k) for k in plan.types if str(plan.types[k]) == name),
                      ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], t),
                      per_item=layout.per_item[name])
            for name, t in layout.types.items()]


def _slot(item: ir.Value, per_item: ir.Value, base: ir.Value, block: ir.Block,
          fn: ir.Operation, iv: Callable[[ir.Operation], ir.Value]) -> ir.Value:
    """item * per_item + base + the linearized iteration of the loops around `block`."""
    offset = base
    loops = _enclosing_loops(block, fn)
    if loops:
        linear = None
        for loop, lb, step, n in loops:
            i = iv(loop)
            if not isinstance(i.type, ir.IndexType):
                i = arith.index_cast(ir.IndexType.get(), i)
            k = arith.divsi(arith.subi(i, index(lb)), index(step))
            linear = k if linear is None else arith.addi(arith.muli(linear, index(n)), k)
        offset = arith.addi(offset, linear)
    return arith.addi(arith.muli(item, per_item), offset)


class KernelRevGen(RevGen):
    """The reverse kernel: tape slots of this item; active scalars' adjoints stored per item."""

    def prologue(self, top: Scope) -> None:
        with ir.InsertionPoint(top.marker):
            self.item = adj.index()
        self.constants: dict = {}

    def tape_read(self, key: Key, t: ir.Type, scope: Scope) -> ir.Value:
        field = self.param(("field", str(t)), ir.MemRefType.get(
            [ir.ShapedType.get_dynamic_size()], t))
        per_item = self._constant(("per_item", str(t)))
        base = self._constant(("base", key))
        addr = _slot(self.item, per_item, base, key_block(key), self.ctx.fn,
                     lambda loop: self.primal(loop.regions[0].blocks[0].arguments[0]))
        return memref.load(field, [addr])

    def _constant(self, name) -> ir.Value:
        """An index constant known once the plan is complete (a placeholder until then)."""
        if name not in self.constants:
            self.constants[name] = self.param(name, ir.IndexType.get())
        return self.constants[name]

    def epilogue(self, adjoints: list[ir.Value]) -> None:
        for k, a in enumerate(adjoints):
            out = self.param(("out", k), ir.MemRefType.get([ir.ShapedType.get_dynamic_size()],
                                                           a.type))
            memref.store(a, out, [self.item])
        func.ReturnOp([])

    def tape_params(self) -> list[tuple]:
        layout = KernelLayout(self.ctx.plan, self.ctx.fn)
        with ir.InsertionPoint.at_block_begin(self.entry), self.ctx.fn.location:
            for name, ph in list(self.placeholders.items()):
                if name[0] in ("per_item", "base"):
                    value = layout.per_item[name[1]] if name[0] == "per_item" \
                        else layout.base[name[1]]
                    ph.replace_all_uses_with(index(value))
                    ph.owner.operation.erase()
                    del self.placeholders[name]
        params = [(("field", name), ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], t))
                  for name, t in layout.types.items()]
        outs = sorted(n for n in self.placeholders if n[0] == "out")
        return params + [(n, self.placeholders[n].type) for n in outs]


class KernelAugGen(AugGen):
    """The augmented kernel: the primal body, saving this item's keys into its slots."""

    def __init__(self, ctx: ReverseContext):
        super().__init__(ctx)
        self._threads = set()
        self.stacks.types = []
        self.layout = KernelLayout(ctx.plan, ctx.fn)

    def prologue(self, tape_params: list[ir.Value]) -> None:
        self.fields = dict(zip(self.layout.types, tape_params))
        self.item = adj.index()

    def epilogue(self, ret: ir.Operation) -> None:
        func.ReturnOp([])

    def save(self, block: ir.Block) -> None:
        for key in self.ctx.plan.keys(block):
            name = str(self.ctx.plan.types[key])
            addr = _slot(self.item, index(self.layout.per_item[name]), index(self.layout.base[key]),
                         block, self.ctx.fn,
                         lambda loop: self.vmap[loop.regions[0].blocks[0].arguments[0]])
            memref.store(self.key_value(key), self.fields[name], [addr])
