"""The sum of a kernel launch's per-item adjoints, as accurate as adjit.sum.

A reverse kernel leaves, per work item, its adjoint of each Active scalar argument (and of each
array element that every item reads at one index, kernel_tape.UniformLoads) in a buffer of one
element per item, and the launch returns their sums (adj.launch's results, f64): the CPU's
lowering computes them per chunk of items as they run, without the buffers
(lower_cpu.lower_summing_launch); the GPU's fills the buffers and sums them on the device
(expand_item_sums, sum_items_on_device). A serial float32 loop stops growing at 2^24
(on 2^25 items of 1.0 it gave 2^24), and its error grows with the number of items (1.5e-5
relative at 2^20 random items). So this is adjit.sum's scheme (compiler/arrays.py, which builds its sums with
the same CHUNK and pairwise_sum): CHUNK-element chunks summed in parallel, each by LANES independent
accumulators whose adds may be reassociated (LLVM vectorises them), in float64 for float32
items, then the chunks' partial sums added pairwise: the error is that of float64 pairwise
summation, far below float32's rounding of the result.
"""
from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, memref, scf

from ..dialects import adj
from .ir_util import index, one_dimensional_kernel, walk
from .registry import AdjPass

CHUNK = 4096
LANES = 4
_REASSOC = "#arith.fastmath<reassoc>"


def accumulator_type(t: ir.Type) -> ir.Type:
    """float64 for narrower floats, as adjit.sum accumulates them."""
    return ir.F64Type.get() if ir.FloatType(t).width < 64 else t


def sum_items(buf: ir.Value, n: ir.Value) -> ir.Value:
    """buf[0] + ... + buf[n-1] (a memref<?xT>) in T's accumulator type (f64 for f32); 0 when
    n is 0."""
    acc_t = accumulator_type(ir.MemRefType(buf.type).element_type)
    chunks = arith.ceildivui(n, index(CHUNK))
    partial = memref.alloc(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], acc_t),
                           [chunks], [])
    loop = scf.ParallelOp([], [index(0)], [chunks], [index(1)], [])
    body = loop.regions[0].blocks.append(ir.IndexType.get())
    with ir.InsertionPoint(body):
        _store_chunk_sum(buf, n, body.arguments[0], partial, acc_t)
        scf.ReduceOp([], 0)
    return pairwise_sum(partial, chunks, acc_t)


def _store_chunk_sum(buf: ir.Value, n: ir.Value, c: ir.Value, partial: ir.Value,
                     acc_t: ir.Type) -> None:
    """partial[c] = the sum of buf's chunk c (LANES reassociable accumulators, then a tail)."""
    zero = arith.constant(acc_t, 0.0)
    lo = arith.muli(c, index(CHUNK))
    hi = arith.minui(arith.addi(lo, index(CHUNK)), n)
    full = arith.addi(lo, arith.muli(arith.divui(arith.subi(hi, lo), index(LANES)),
                                     index(LANES)))
    lanes = scf.ForOp(lo, full, index(LANES), [zero] * LANES)
    with ir.InsertionPoint(lanes.body):
        j = lanes.induction_variable
        accs = []
        for k, a in enumerate(lanes.inner_iter_args):
            x = _widen(memref.load(buf, [arith.addi(j, index(k))]), acc_t)
            accs.append(arith.addf(a, x, fastmath=ir.Attribute.parse(_REASSOC)))
        scf.YieldOp(accs)
    total = lanes.results[0]
    for k in range(1, LANES):
        total = arith.addf(total, lanes.results[k])
    tail = scf.ForOp(full, hi, index(1), [total])
    with ir.InsertionPoint(tail.body):
        x = _widen(memref.load(buf, [tail.induction_variable]), acc_t)
        scf.YieldOp([arith.addf(tail.inner_iter_args[0], x)])
    memref.store(tail.results[0], partial, [c])


def sum_items_on_device(module: ir.Operation, buf: ir.Value, n: ir.Value) -> ir.Value:
    """sum_items, its loops as launches on the device that filled `buf` (a GPU's host program):
    one item per chunk sums it, one item adds the chunks' partials pairwise; the host reads
    the one result (not the buffer, which a host-side sum would read across the bus)."""
    t = ir.MemRefType(buf.type).element_type
    acc_t = accumulator_type(t)
    dyn = ir.ShapedType.get_dynamic_size()
    acc_vec = ir.MemRefType.get([dyn], acc_t)
    chunks = arith.ceildivui(n, index(CHUNK))
    partial = memref.alloc(acc_vec, [chunks], [])
    out = memref.alloc(acc_vec, [index(1)], [])

    def chunk_body(args, item):
        b, p = args
        _store_chunk_sum(b, memref.dim(b, index(0)), item, p, acc_t)

    def total_body(args, _):
        p, o = args
        memref.store(pairwise_sum(p, memref.dim(p, index(0)), acc_t), o, [index(0)])

    for name, types, args, extent, body in (
            (f"__adj_item_sums_{t}", [buf.type, acc_vec], [buf, partial], chunks, chunk_body),
            (f"__adj_pairwise_{acc_t}", [acc_vec, acc_vec], [partial, out], index(1),
             total_body)):
        one_dimensional_kernel(module.regions[0].blocks[0], name, types, body)
        adj.launch(name, ir.FunctionType.get(types, []), args, [extent], None)
        adj.sync()
    return memref.load(out, [index(0)])


def _widen(x: ir.Value, acc_t: ir.Type) -> ir.Value:
    return x if x.type == acc_t else arith.extf(acc_t, x)


def pairwise_sum(partial: ir.Value, count: ir.Value, acc_t: ir.Type) -> ir.Value:
    """partial[0:count] (floats or integers of type `acc_t`) added pairwise in place, level
    by level (partial[i] += partial[i + step] for i a multiple of 2*step), 0 when count is 0:
    the error grows with log2(count)."""
    index_t = ir.IndexType.get()
    add = arith.addi if isinstance(acc_t, (ir.IntegerType, ir.IndexType)) else arith.addf
    levels = scf.WhileOp([index_t], [index(1)])
    before = levels.before.blocks.append(index_t)
    with ir.InsertionPoint(before):
        step = before.arguments[0]
        scf.ConditionOp(arith.cmpi(arith.CmpIPredicate.ult, step, count), [step])
    after = levels.after.blocks.append(index_t)
    with ir.InsertionPoint(after):
        step = after.arguments[0]
        stride = arith.muli(step, index(2))
        pairs = scf.ForOp(index(0), arith.subi(count, step), stride, [])
        with ir.InsertionPoint(pairs.body):
            i = pairs.induction_variable
            pair = add(memref.load(partial, [i]), memref.load(partial, [arith.addi(i, step)]))
            memref.store(pair, partial, [i])
            scf.YieldOp([])
        scf.YieldOp([stride])
    nonempty = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ugt, count, index(0)), [acc_t],
                        has_else=True)
    with ir.InsertionPoint(nonempty.then_block):
        scf.YieldOp([memref.load(partial, [index(0)])])
    with ir.InsertionPoint(nonempty.else_block):
        zero = ir.IntegerAttr.get(acc_t, 0) if add is arith.addi else ir.FloatAttr.get(acc_t, 0.0)
        scf.YieldOp([arith.constant(acc_t, zero)])
    return nonempty.results[0]


def expand_item_sums(launch: ir.Operation, on_device: bool = False) -> None:
    """Rewrites an adj.launch with results (item sums) into the launch alone, `adj.sync`, and
    sum_items over each per-item buffer: the form of targets that fill the buffers (the GPU's
    launches and host programs); `on_device`: the sums as launches too
    (sum_items_on_device: a GPU host program's)."""
    if not len(launch.results):
        return
    buffers = adj.item_sum_buffers(launch)
    call = adj.launch_call(launch)
    kernel = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
    attrs = launch.attributes
    wgs = (list(ir.DenseI64ArrayAttr(attrs["workgroupsize"]))
           if "workgroupsize" in attrs else None)
    ndrange = list(launch.operands)
    with ir.InsertionPoint(launch), launch.location:
        ktype = ir.FunctionType.get([v.type for v in call.operands], [])
        adj.launch(kernel, ktype, list(call.operands), ndrange, wgs)
        adj.sync()
        items = index(1)
        for n in ndrange:
            items = arith.muli(items, n)
        module = launch
        while module.name != "builtin.module":
            module = module.parent.operation
        for r, buf in zip(launch.results, buffers):
            r.replace_all_uses_with(sum_items_on_device(module, buf, items) if on_device
                                    else sum_items(buf, items))
    launch.erase()


def expand_all_item_sums(module: ir.Module, on_device: bool = False) -> None:
    """adjit-opt --adj-expand-item-sums: expand_item_sums on every launch of `module` (what
    the GPU lowerings do first), so FileCheck tests can see the sums over filled buffers."""
    op = getattr(module, "operation", module)
    launches = [inner for inner in walk(op) if inner.name == "adj.launch"]
    with op.context, op.location:
        for launch in launches:
            expand_item_sums(launch, on_device)


@dataclasses.dataclass
class ExpandItemSums(AdjPass):
    """--adj-expand-item-sums{on_device=false}: expand_all_item_sums."""
    name = "adj-expand-item-sums"
    on_device: bool = False

    def apply(self, module: ir.Operation) -> None:
        expand_all_item_sums(module, self.on_device)
