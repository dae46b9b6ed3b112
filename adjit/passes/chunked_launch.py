"""CPU launches whose items' values are summed, summed per chunk of items as the items run.

Two kinds of launch add a value of every work item into one place:
- a launch returning item sums (`adj.launch`'s results: the reverse kernel of a kernel with
  Active scalar arguments, whose per-item adjoints are its buffers' elements);
- a kernel adding into one array element atomically, at an index every item shares
  (`adjit.atomic_add(out, 0, x[i] * x[i])`, W4 of issue 11).
Either would write a buffer of one value per item and read it back (2x the primal's memory
traffic on an Active-scalar kernel), or make every item's add an atomic on one address (a
locked compare-and-swap loop the cores fight over: 10M f32 items took 224 ms, and a float32
running sum lost 1% of the result). Here the launch becomes an `scf.parallel` over chunks of
CHUNK items; each chunk calls a copy of the kernel that returns its item's values instead of
storing or adding them (`@<kernel>__item_sums` / `__atomic_sums`, without the buffer
parameters) and adds them up in f64 (ints in their own type) as it goes, reassociably, so
LLVM vectorises the loop. Then the chunks' partial sums are added pairwise: they are the
launch's results, or, once the launch is over, added into the element (rounded once: a
float32 sum of 10M items is within float32's rounding of the float64 one).

Only kernels of the plain form qualify: each value is stored (added) once, in the body's
top-level block, so once per item; a buffer at the item's own index (adj.index), never read;
an atomic target never read nor written otherwise, at indices every item shares (constants,
the kernel's scalar arguments), the atomic's old value unused. Others are launched as they are.

A third kind adds atomically into a small array at indices that vary (a histogram, the
reverse of a gather `w[idx[i]]`, whose adjoint scatters into dw): `lower_privatised_launch`
gives each of PARTS * threads parts of the items a private copy of the array, in f64 for
floats, zeroed; the part's items run one after another on one thread and add into it with a
plain load/add/store (`@<kernel>__private`, the atomics rewritten); then each element adds
up the parts' copies and is added into the array once. An atomic on x86 is a locked
compare-and-swap loop that does not vectorise and that cores contending for one line take
turns at. It applies where the copies are small beside the work: parts * size <= items / 4
and parts * size <= PRIVATE_LIMIT elements, decided at run time (else the launch runs with
its atomics as written).
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from ..dialects.adj import item_sum_buffers, launch_call
from .ir_util import constant_int, index, unravel, walk
from .kernel_abi import check_ndrange_bounds, launched
from .summation import CHUNK, pairwise_sum

_ADDF, _ADDI = 0, 1                     # memref.atomic_rmw kinds (arith.AtomicRMWKind)
_REASSOC = "#arith.fastmath<reassoc>"
PARTS = 4                 # private copies per thread: parts finish at about the same time
PRIVATE_LIMIT = 1 << 20   # elements of all parts' copies of one array (8 MiB in f64)

Copies = dict[tuple[str, str], "str | None"]


def lower_summing_launch(launch: ir.Operation, kernels: dict[str, ir.Operation],
                         copies: Copies) -> bool:
    """A launch that returns item sums, as chunks summing as they go (the module docstring);
    its results are the chunks' partials added pairwise, as adjit.sum adds them. False
    (nothing changed) where the kernel is not of the plain form: then the buffers are filled
    and summed afterwards (summation.expand_item_sums)."""
    call, name, ndrange = launched(launch, kernels)
    buffers = item_sum_buffers(launch)
    n = len(buffers)
    kernel = kernels[name]
    entry = kernel.regions[0].blocks[0]
    first = len(entry.arguments) - n
    key = (name, "item_sums")
    if key not in copies:
        stores = [_own_element_store(p) for p in list(entry.arguments)[first:]]
        copies[key] = (None if any(s is None for s in stores) else
                       _returning_copy(kernel, f"{name}__item_sums", stores, first))
    if copies[key] is None:
        return False
    value_types = [ir.MemRefType(b.type).element_type for b in buffers]
    acc_types = [r.type for r in launch.results]    # f64

    with ir.InsertionPoint(launch), launch.location:
        chunks, partials = _chunk_loop(launch, kernel, ndrange, copies[key],
                                       list(call.operands)[:first], value_types, acc_types)
        for r, p in zip(launch.results, partials):
            r.replace_all_uses_with(pairwise_sum(p, chunks, r.type))
    launch.erase()
    return True


def lower_accumulating_launch(launch: ir.Operation, kernels: dict[str, ir.Operation],
                              copies: Copies) -> bool:
    """A launch of a kernel that adds into elements every item shares with atomics, as
    chunks summing as they go; once the launch is over, each sum (the chunks' partials
    pairwise) is added into its element (the module docstring). False (nothing changed)
    where the kernel has no such atomic or is not of the plain form."""
    call, name, ndrange = launched(launch, kernels)
    kernel = kernels[name]
    atomics = _uniform_atomics(kernel)
    if not atomics:
        return False
    key = (name, "atomic_sums")
    if key not in copies:
        copies[key] = _returning_copy(kernel, f"{name}__atomic_sums", atomics, None)
    entry = kernel.regions[0].blocks[0]
    args = list(call.operands)
    params = list(entry.arguments)
    targets = [(args[params.index(a.operands[1])],
                [args[params.index(i)] if i in params else None for i in a.operands[2:]],
                list(a.operands[2:]), a) for a in atomics]
    value_types = [a.operands[0].type for a in atomics]
    acc_types = [ir.F64Type.get() if isinstance(t, ir.FloatType) else t for t in value_types]

    with ir.InsertionPoint(launch), launch.location:
        chunks, partials = _chunk_loop(launch, kernel, ndrange, copies[key], args, value_types,
                                       acc_types)
        # After the launch, nothing else adds into these elements: plain adds, each of a
        # sum rounded once (chunk partials pairwise, in f64 for floats).
        for p, t, acc, (array, passed, indices, _) in zip(partials, value_types, acc_types,
                                                         targets):
            total = pairwise_sum(p, chunks, acc)
            value = total if total.type == t else arith.truncf(t, total)
            at = [q if q is not None else _constant_copy(i) for q, i in zip(passed, indices)]
            old = memref.load(array, at)
            memref.store(arith.addf(old, value) if isinstance(t, ir.FloatType)
                         else arith.addi(old, value), array, at)
    launch.erase()
    return True


def _chunk_loop(launch: ir.Operation, kernel: ir.Operation, ndrange: list[ir.Value],
                copy: str, args: list[ir.Value], value_types: list[ir.Type],
                acc_types: list[ir.Type]) -> tuple[ir.Value, list[ir.Value]]:
    """At the insertion point: scf.parallel over chunks of CHUNK items of `ndrange`, each
    calling @copy(args, ids, sizes) per item and adding its results into accumulators of
    `acc_types`, stored per chunk into one buffer per result. Returns (the number of chunks,
    those buffers). A launch that does not fit its arrays runs no item (its ndrange check
    reports)."""
    idx = ir.IndexType.get()
    fits = check_ndrange_bounds(kernel, list(launch_call(launch).operands), ndrange)
    items = arith.constant(idx, 1)
    for e in ndrange:
        items = arith.muli(items, e)
    if fits is not None:
        items = arith.select(fits, items, arith.constant(idx, 0))
    chunks = arith.ceildivui(items, arith.constant(idx, CHUNK))
    partials = [memref.alloc(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], t),
                             [chunks], []) for t in acc_types]
    loop = scf.ParallelOp([], [arith.constant(idx, 0)], [chunks], [arith.constant(idx, 1)], [])
    body = loop.regions[0].blocks.append(idx)
    with ir.InsertionPoint(body):
        lo = arith.muli(body.arguments[0], arith.constant(idx, CHUNK))
        hi = arith.minui(arith.addi(lo, arith.constant(idx, CHUNK)), items)
        zeros = [arith.constant(t, 0.0 if isinstance(t, ir.FloatType) else 0)
                 for t in acc_types]
        chunk = scf.ForOp(lo, hi, arith.constant(idx, 1), zeros)
        with ir.InsertionPoint(chunk.body):
            ids = unravel(chunk.induction_variable, ndrange)
            values = func.CallOp(value_types, ir.FlatSymbolRefAttr.get(copy),
                                 args + ids + ndrange).results
            scf.YieldOp([_accumulate(a, v, t)
                         for a, v, t in zip(chunk.inner_iter_args, values, acc_types)])
        for total, p in zip(chunk.results, partials):
            memref.store(total, p, [body.arguments[0]])
        scf.ReduceOp([], 0)
    return chunks, partials


def _accumulate(acc: ir.Value, v: ir.Value, t: ir.Type) -> ir.Value:
    if isinstance(t, ir.FloatType):
        wide = v if v.type == t else arith.extf(t, v)
        return arith.addf(acc, wide, fastmath=ir.Attribute.parse(_REASSOC))
    return arith.addi(acc, v)


def _own_element_store(param: ir.Value) -> ir.Operation | None:
    """The one op using `param`: a store in the kernel's top-level block at adj.index."""
    uses = list(param.uses)
    if len(uses) != 1:
        return None
    store = uses[0].owner.operation
    if (store.name != "memref.store" or uses[0].operand_number != 1
            or store.block != param.owner or len(store.operands) != 3):
        return None
    at = store.operands[2].owner
    if isinstance(at, ir.Block) or at.operation.name != "adj.index":
        return None
    return store


def _uniform(v: ir.Value, entry: ir.Block) -> bool:
    """An index every work item shares: a constant, or an argument of the kernel."""
    owner = v.owner
    if isinstance(owner, ir.Block):
        return owner == entry
    return owner.operation.name == "arith.constant"


def _constant_copy(v: ir.Value) -> ir.Value:
    """A constant index of the kernel, made again at the launch."""
    return arith.constant(v.type, constant_int(v))


def _uniform_atomics(kernel: ir.Operation) -> list[ir.Operation]:
    """The kernel's atomic adds into an array argument at indices every item shares, in its
    top-level block, their old values unused, the array used by nothing else; [] unless
    every atomic add of the kernel is such (a partly rewritten kernel would add twice)."""
    entry = kernel.regions[0].blocks[0]
    found = []
    for op in [op for op in walk(kernel) if op.name == "memref.atomic_rmw"]:
        kind = ir.IntegerAttr(op.attributes["kind"]).value
        array = op.operands[1]
        indices = list(op.operands[2:])
        if (kind not in (_ADDF, _ADDI) or op.block != entry or len(list(op.results[0].uses))
                or not isinstance(array.owner, ir.Block) or array.owner != entry
                or any(u.owner.operation.name != "memref.atomic_rmw" or u.operand_number != 1
                       for u in array.uses)
                or not all(_uniform(i, entry) for i in indices)):
            return []
        found.append(op)
    return found


def _returning_copy(kernel: ir.Operation, new_name: str, sinks: list[ir.Operation],
                    drop_from: int | None) -> str:
    """A copy of `kernel` named `new_name` that returns the value each of `sinks` (stores or
    atomic adds in its top-level block) would write, without writing it; without its
    parameters from `drop_from` on (the per-item buffers) when that is not None."""
    entry = kernel.regions[0].blocks[0]
    positions = [list(entry.operations).index(s) for s in sinks]
    copy = kernel.clone(ir.InsertionPoint.after(kernel))
    copy.attributes["sym_name"] = ir.StringAttr.get(new_name)
    block = copy.regions[0].blocks[0]
    ops = list(block.operations)
    copied = [ops[k] for k in positions]
    values = [op.operands[0] for op in copied]
    ret = ops[-1]
    with ir.InsertionPoint(ret), ret.location:
        func.ReturnOp(values)
    ret.erase()
    for op in copied:
        op.erase()
    ftype = ir.FunctionType(ir.TypeAttr(copy.attributes["function_type"]).value)
    inputs = list(ftype.inputs)
    if drop_from is not None:
        for k in reversed(range(drop_from, len(block.arguments))):
            block.erase_argument(k)
        inputs = inputs[:drop_from]
        if "arg_attrs" in copy.attributes:
            copy.attributes["arg_attrs"] = ir.ArrayAttr.get(
                list(ir.ArrayAttr(copy.attributes["arg_attrs"]))[:drop_from])
    copy.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(inputs, [v.type for v in values]))
    return new_name


def lower_privatised_launch(launch: ir.Operation, kernels: dict[str, ir.Operation],
                            copies: Copies, threads: int) -> bool:
    """A launch of a kernel that adds atomically into array arguments it uses for nothing
    else, as parts of the items adding into private copies of those arrays where they are
    small beside the work (the module docstring); the launch as written elsewhere, decided
    at run time. False (nothing changed) where the kernel has no such array."""
    call, name, ndrange = launched(launch, kernels)
    kernel = kernels[name]
    targets = _private_targets(kernel)
    if not targets:
        return False
    key = (name, "private")
    if key not in copies:
        copies[key] = _private_copy(kernel, f"{name}__private", targets)
    args = list(call.operands)
    arrays = [args[k] for k in targets]
    elem = [ir.MemRefType(a.type).element_type for a in arrays]
    acc_types = [ir.F64Type.get() if isinstance(t, ir.FloatType) else t for t in elem]
    c = index

    with ir.InsertionPoint(launch), launch.location:
        parts = c(max(1, threads) * PARTS)
        items = c(1)
        for e in ndrange:
            items = arith.muli(items, e)
        sizes = [[memref.dim(a, c(d)) for d in range(ir.MemRefType(a.type).rank)]
                 for a in arrays]
        counts = []
        worth = None
        for dims_ in sizes:
            m = c(1)
            for d in dims_:
                m = arith.muli(m, d)
            counts.append(m)
            copy_elems = arith.muli(m, parts)
            ok = arith.andi(
                arith.cmpi(arith.CmpIPredicate.ule, arith.muli(copy_elems, c(4)), items),
                arith.cmpi(arith.CmpIPredicate.ule, copy_elems, c(PRIVATE_LIMIT)))
            worth = ok if worth is None else arith.andi(worth, ok)
        branch = scf.IfOp(worth, [], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            _run_privatised(launch, kernel, ndrange, copies[key], args, arrays, sizes, counts,
                            acc_types, parts, items)
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block):
            launch.clone()        # as written: lowered to a parallel loop later
            scf.YieldOp([])
    launch.erase()
    return True


def _run_privatised(launch, kernel, ndrange, copy, args, arrays, sizes, counts, acc_types,
                    parts, items) -> None:
    idx = ir.IndexType.get()
    c = index
    fits = check_ndrange_bounds(kernel, list(launch_call(launch).operands), ndrange)
    if fits is not None:     # a launch that does not fit its arrays runs no item
        items = arith.select(fits, items, c(0))
    privates = []
    for m, t in zip(counts, acc_types):
        buf = memref.alloc(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], t),
                           [arith.muli(m, parts)], [])
        fill = scf.ParallelOp([], [c(0)], [arith.muli(m, parts)], [c(1)], [])
        body = fill.regions[0].blocks.append(idx)
        with ir.InsertionPoint(body):
            memref.store(arith.constant(t, 0.0 if isinstance(t, ir.FloatType) else 0), buf,
                         [body.arguments[0]])
            scf.ReduceOp([], 0)
        privates.append(buf)
    per = arith.ceildivui(items, parts)
    loop = scf.ParallelOp([], [c(0)], [parts], [c(1)], [])
    body = loop.regions[0].blocks.append(idx)
    with ir.InsertionPoint(body):
        p = body.arguments[0]
        lo = arith.minui(arith.muli(p, per), items)
        hi = arith.minui(arith.addi(lo, per), items)
        extra = []
        for buf, m in zip(privates, counts):
            extra += [buf, arith.muli(p, m)]
        run = scf.ForOp(lo, hi, c(1), [])
        with ir.InsertionPoint(run.body):
            ids = unravel(run.induction_variable, ndrange)
            func.CallOp([], ir.FlatSymbolRefAttr.get(copy), args + extra + ids + ndrange)
            scf.YieldOp([])
        scf.ReduceOp([], 0)
    # Each element: its parts' copies added in order, then into the array once.
    for array, dims_, m, buf, t in zip(arrays, sizes, counts, privates, acc_types):
        elem = ir.MemRefType(array.type).element_type
        reduce = scf.ParallelOp([], [c(0)], [m], [c(1)], [])
        body = reduce.regions[0].blocks.append(idx)
        with ir.InsertionPoint(body):
            e = body.arguments[0]
            zero = arith.constant(t, 0.0 if isinstance(t, ir.FloatType) else 0)
            total = scf.ForOp(c(0), parts, c(1), [zero])
            with ir.InsertionPoint(total.body):
                at = arith.addi(arith.muli(total.induction_variable, m), e)
                x = memref.load(buf, [at])
                scf.YieldOp([arith.addf(total.inner_iter_args[0], x)
                             if isinstance(t, ir.FloatType)
                             else arith.addi(total.inner_iter_args[0], x)])
            value = total.results[0]
            if value.type != elem:
                value = arith.truncf(elem, value)
            at = unravel(e, dims_)
            old = memref.load(array, at)
            memref.store(arith.addf(old, value) if isinstance(elem, ir.FloatType)
                         else arith.addi(old, value), array, at)
            scf.ReduceOp([], 0)


def _private_targets(kernel: ir.Operation) -> list[int]:
    """Positions of the kernel's array parameters that only atomic adds (old values unused)
    and memref.dim use: the arrays a launch may privatise."""
    entry = kernel.regions[0].blocks[0]
    found = []
    for k, param in enumerate(entry.arguments):
        if not isinstance(param.type, ir.MemRefType):
            continue
        atomics = 0
        for use in param.uses:
            op = use.owner.operation
            if op.name == "memref.dim" and use.operand_number == 0:
                continue
            if (op.name != "memref.atomic_rmw" or use.operand_number != 1
                    or ir.IntegerAttr(op.attributes["kind"]).value not in (_ADDF, _ADDI)
                    or len(list(op.results[0].uses))):
                atomics = -1
                break
            atomics += 1
        if atomics > 0:
            found.append(k)
    return found


def _private_copy(kernel: ir.Operation, new_name: str, targets: list[int]) -> str:
    """A copy of `kernel` named `new_name` taking, after its parameters, a private buffer
    (flat, f64 for floats) and a base offset per target array, into which it adds with plain
    loads and stores where the kernel adds into the array atomically."""
    copy = kernel.clone(ir.InsertionPoint.after(kernel))
    copy.attributes["sym_name"] = ir.StringAttr.get(new_name)
    block = copy.regions[0].blocks[0]
    idx = ir.IndexType.get()
    ftype = ir.FunctionType(ir.TypeAttr(copy.attributes["function_type"]).value)
    inputs = list(ftype.inputs)
    loc = copy.location
    for k in targets:
        array = block.arguments[k]
        elem = ir.MemRefType(array.type).element_type
        acc = ir.F64Type.get() if isinstance(elem, ir.FloatType) else elem
        buf_t = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], acc)
        buf = block.add_argument(buf_t, loc)
        base = block.add_argument(idx, loc)
        inputs += [buf_t, idx]
        for use in list(array.uses):
            op = use.owner.operation
            if op.name != "memref.atomic_rmw":
                continue
            with ir.InsertionPoint(op), op.location:
                indices = list(op.operands)[2:]
                at = base
                if indices:
                    linear = indices[0]
                    for d in range(1, len(indices)):
                        size = memref.dim(array, arith.constant(idx, d))
                        linear = arith.addi(arith.muli(linear, size), indices[d])
                    at = arith.addi(base, linear)
                value = op.operands[0]
                if value.type != acc:
                    value = arith.extf(acc, value)
                old = memref.load(buf, [at])
                memref.store(arith.addf(old, value) if isinstance(acc, ir.FloatType)
                             else arith.addi(old, value), buf, [at])
            op.erase()
    if "arg_attrs" in copy.attributes:
        attrs = list(ir.ArrayAttr(copy.attributes["arg_attrs"]))
        copy.attributes["arg_attrs"] = ir.ArrayAttr.get(
            attrs + [ir.DictAttr.get({})] * (len(inputs) - len(attrs)))
    copy.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, []))
    return new_name
