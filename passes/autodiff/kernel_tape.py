"""Reverse mode of a kernel: the tape is one slot range per work item.

A kernel's augmented and reverse functions are kernels themselves (the launch rule in
launch.py runs them over the same ndrange), and work items cannot grow a shared buffer, so the
tape layout is fixed before the augmented kernel runs: per element type T one memref<?xT> tape
parameter with K_T slots per work item, item i owning [i*K_T, (i+1)*K_T). Each saved key has a
base offset within the item's range; a key inside scf.for loops takes one slot per iteration of
those loops (base + linearized iteration). K_T and the bases are sums of products of trip
counts: ints when the loops' bounds are constants, else expressions of the kernel's arguments
(uniform.py) that the kernels and the launch compute at run time, so that a loop over a
scalar argument (`for _ in range(steps)`) or an array's size can be taped. A value the reverse
pass needs from inside an scf.while, or from a loop whose bounds depend on the work item (its
index, loaded values), cannot have a slot that every item agrees on and is refused.

Adjoints of active scalar arguments are per work item too: the reverse kernel stores its
item's adjoint of each into an extra memref<?xT> parameter at [adj.index]; the caller sums.
"""
from __future__ import annotations

from typing import Callable

from mlir import ir
from mlir.dialects import arith, func, memref

from ...dialects import adj
from ...dialects.adj import AdjError
from .ir_util import is_memref, parent_op
from .augment import AugGen
from .context import ReverseContext
from .reverse import RevGen, Scope
from .signature import TapeField
from .tape import Key, TapePlan, describe, key_block
from ...runtime.tape_size import Expr, add, mul, trip
from .uniform import emit, uniform

Loop = tuple[ir.Operation, Expr, Expr, Expr]   # (scf.for, lb, step, trip count)


def _enclosing_loops(block: ir.Block, fn: ir.Operation) -> list[Loop]:
    """The scf.for loops around `block`, outermost first, with their bounds as expressions
    of the kernel's arguments (uniform.py)."""
    loops: list[Loop] = []
    op = parent_op(block)
    while op != fn:
        if op.name == "scf.while":
            raise AdjError(op, "autodiff: a kernel's reverse pass needs values from inside this "
                               "scf.while, whose iteration count varies: a kernel's per-item "
                               "tape has a fixed size")
        if op.name == "scf.for":
            bounds = [uniform(v, fn) for v in list(op.operands)[:3]]
            if None in bounds:
                raise AdjError(op, "autodiff: a kernel's reverse pass needs values from inside "
                                   "this loop, whose trip count may differ between work items "
                                   "(it depends on the item's index or on values it loads): "
                                   "every item's tape has the same size")
            lb, ub, step = bounds
            loops.append((op, lb, step, trip(lb, ub, step)))
        op = op.parent.operation
    return loops[::-1]


class KernelLayout:
    """Slots per item (K_T) and each key's base offset, per element type: expressions of the
    kernel's arguments (ints when every loop around taped values has constant bounds)."""

    def __init__(self, plan: TapePlan, fn: ir.Operation):
        self.per_item: dict[str, Expr] = {}
        self.types: dict[str, ir.Type] = {}
        self.base: dict[Key, Expr] = {}
        for block, keys in plan.blocks.items():
            slots: Expr = 1
            for _, _, _, n in _enclosing_loops(block, fn):
                slots = mul(slots, n)
            for key in keys:
                t = plan.types[key]
                if is_memref(t):
                    owner = key.owner.operation if isinstance(key, ir.OpResult) else key[1]
                    raise AdjError(owner, "autodiff: a kernel's reverse pass would need an array "
                                          "on its per-item tape")
                name = str(t)
                self.types.setdefault(name, t)
                self.base[key] = self.per_item.get(name, 0)
                self.per_item[name] = add(self.base[key], slots)


def kernel_fields(plan: TapePlan) -> list[TapeField]:
    layout = KernelLayout(plan, parent_op(plan.top))
    return [TapeField(f"{name} values per work item: " +
                      "; ".join(describe(k) for k in plan.types if str(plan.types[k]) == name),
                      ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], t),
                      per_item=layout.per_item[name])
            for name, t in layout.types.items()]


def _slot(item: ir.Value, per_item: ir.Value, base: ir.Value, block: ir.Block,
          fn: ir.Operation, iv: Callable[[ir.Operation], ir.Value],
          args: list[ir.Value]) -> ir.Value:
    """item * per_item + base + the linearized iteration of the loops around `block`
    (`args`: the kernel's arguments, from which runtime bounds are computed)."""
    offset = base
    loops = _enclosing_loops(block, fn)
    if loops:
        linear = None
        for loop, lb, step, n in loops:
            i = iv(loop)
            if not isinstance(i.type, ir.IndexType):
                i = arith.index_cast(ir.IndexType.get(), i)
            k = arith.divsi(arith.subi(i, emit(lb, args)), emit(step, args))
            linear = k if linear is None else arith.addi(arith.muli(linear, emit(n, args)), k)
        offset = arith.addi(offset, linear)
    return arith.addi(arith.muli(item, per_item), offset)


class KernelRevGen(RevGen):
    """The reverse kernel: tape slots of this item; active scalars' adjoints stored per item."""

    def prologue(self, top: Scope) -> None:
        with ir.InsertionPoint(top.marker):
            self.item = adj.index()
        self.constants: dict = {}
        self.args = [top.values[a] for a in self.ctx.entry.arguments]

    def tape_read(self, key: Key, t: ir.Type, scope: Scope) -> ir.Value:
        field = self.param(("field", str(t)), ir.MemRefType.get(
            [ir.ShapedType.get_dynamic_size()], t))
        per_item = self._constant(("per_item", str(t)))
        base = self._constant(("base", key))
        addr = _slot(self.item, per_item, base, key_block(key), self.ctx.fn,
                     lambda loop: self.primal(loop.regions[0].blocks[0].arguments[0]),
                     self.args)
        return memref.load(field, [addr])

    def _constant(self, name) -> ir.Value:
        """An index known once the plan is complete (a placeholder until then): a constant,
        or computed from the kernel's arguments at entry."""
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
                    ph.replace_all_uses_with(emit(value, self.args))
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
        self.args = [self.vmap[a] for a in self.ctx.entry.arguments]
        # Computed once at entry (not in each loop that saves): the layout's sizes.
        self.per_item = {name: emit(n, self.args) for name, n in self.layout.per_item.items()}

    def epilogue(self, ret: ir.Operation) -> None:
        func.ReturnOp([])

    def save(self, block: ir.Block) -> None:
        for key in self.ctx.plan.keys(block):
            name = str(self.ctx.plan.types[key])
            addr = _slot(self.item, self.per_item[name], emit(self.layout.base[key], self.args),
                         block, self.ctx.fn,
                         lambda loop: self.vmap[loop.regions[0].blocks[0].arguments[0]],
                         self.args)
            memref.store(self.key_value(key), self.fields[name], [addr])
