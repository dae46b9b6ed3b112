"""`--adj-lower-cuda-host`: the host side of an `@adjit.jit` function run with
`device="cuda"`, whose kernel launches go to the GPU while its own code runs on the CPU.

Each `adj.launch` becomes a call of a launcher, a private function per kernel and block size,
that calls `@__adjit_cuda_launch(slot, words, nwords, items, block)`:
- `slot` numbers the launched kernel (lower_cuda_host returns them in slot order), which
  was compiled to PTX (passes/lower_gpu.py) and which the runtime loaded;
- `words` points at the kernel's parameters packed as 64-bit words, in the order and the
  encoding of the PTX entry's parameters: a memref as (aligned, aligned, offset, sizes...,
  strides...), a scalar's bits zero-extended (an f32 in the low half), then the ndrange
  extents. So the runtime hands `words` to cuLaunchKernel as they are (runtime/host_program.py);
- `items` is prod(ndrange) and `block` the threads per block (prod(workgroupsize) or 256).
The words live in a stack slot of the launcher, which is marked `no_inline`: MLIR's inliner
would put the slot in the caller's loop body, growing the stack on every iteration (LLVM's,
should it inline the launcher later, hoists it to the caller's entry).

`hook_runtime_calls` then makes the lowered (LLVM dialect) module call the runtime through
function pointers that it holds in globals (`__adjit_hook_<symbol>`), which the runtime fills
after loading the shared object: the allocator (which the runtime points at CUDA managed
memory, so that the host code and the kernels reach the same arrays), the launcher, the
copy and the host allocator (below), and the checkpointing schedule of a checkpointed loop's
reverse pass (`adj_ckpt_*`, which the runtime points at the native extension's functions). The shared object then refers to nothing
but the C and math libraries (libc, libm, libmvec), and loads on a GPU machine that has no
MLIR (no async runtime either: host programs are compiled single-threaded).

Copies run on the device: every array of a host program (the arguments' copies, what it
allocates) is in CUDA managed memory, which the CPU addresses, so a `memref.copy` of host
code would be a CPU memcpy for which the driver migrates the pages to the host and back to
the GPU for the next launch. Each contiguous one (an identity layout, or a 1-D view of unit
stride: a checkpointed loop's snapshots and restores, passes/autodiff/rules/checkpoint.py, and the
copies of its state onto the tape) becomes a call of `@__adjit_cuda_copy(dst, src, bytes)`
(COPY_SYMBOL, hooked: cuMemcpy, which copies device to device in place); any other stays a
CPU copy. Functions that kernels call are left alone (their code goes into the PTX).

Spilled snapshots (`adjit.checkpointed(..., spill=True)`): an allocation marked
`adj.host_memory` (HOST_MEMORY_ATTR) becomes a call of `@__adjit_host_memref_<type>(n,
bytes)`, a function returning a fresh memref<?xT> (owned by the caller, as buffer
deallocation assumes of calls) whose body `hook_runtime_calls` writes in the LLVM dialect: it
calls the hooked HOST_ALLOC_SYMBOL (pinned host memory) for the bytes; the free hook frees
host memory and managed memory alike (runtime/cuda_driver.py). The copies to and from such
slots are then device<->host transfers.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, memref

from ..core.kernel import GpuKernel
from ..core.symbols import (ALLOC_SYMBOL, COPY_SYMBOL, FREE_SYMBOL, GEMM_SYMBOLS, HOOK_PREFIX,
                            HOST_ALLOC_SYMBOL, HOST_MEMORY_ATTR, LAUNCH_SYMBOL)
from .ir_util import symbol_table
from .kernel_abi import check_ndrange_bounds, guarded_at, is_kernel, launched
from .lower_cpu import error_table
from .lower_gpu import kernel_to_ptx, launch_block_size
from .pipeline import cuda_host_pipeline
from .registry import AdjPass, run_pipeline
from .summation import expand_item_sums
from .walk import ops_named

# symbol -> (LLVM result type or None, LLVM parameter types) of each hooked runtime call
HOOKS = {
    ALLOC_SYMBOL: ("!llvm.ptr", ["i64"]),
    FREE_SYMBOL: (None, ["!llvm.ptr"]),
    LAUNCH_SYMBOL: (None, ["i64"] * 5),
    COPY_SYMBOL: (None, ["i64"] * 3),          # (dst, src, bytes)
    HOST_ALLOC_SYMBOL: ("!llvm.ptr", ["i64"]),
    # the checkpointing schedule (CHECKPOINT_SYMBOLS; runtime/native/checkpoint.cpp): a handle
    # made from (steps, snapshots, kind, every), then its actions, steps and slots, all i64
    "adj_ckpt_new": ("i64", ["i64"] * 4),
    "adj_ckpt_next": ("i64", ["i64"]),
    "adj_ckpt_from": ("i64", ["i64"]),
    "adj_ckpt_to": ("i64", ["i64"]),
    "adj_ckpt_slot": ("i64", ["i64"]),
    "adj_ckpt_free": (None, ["i64"]),
    "adj_ckpt_count": (None, ["i64"]),
    # the matrix products (GEMM_SYMBOLS; runtime/native/gemm.cpp, on the CPU over managed
    # memory): flags, then three 3-D memrefs as the default calling convention expands them
    **{symbol: (None, ["i64"] + (["!llvm.ptr"] * 2 + ["i64"] * 7) * 3)
       for symbol in GEMM_SYMBOLS},
}


# On the module: the launched kernels' symbols in slot order (adj-lower-cuda-host), and the
# hook globals the runtime must fill (adj-hook-runtime-calls).
SLOTS_ATTR = "adj.cuda_slots"
HOOKS_ATTR = "adj.runtime_hooks"


def compile_host(module: ir.Module, chip: str) -> tuple[str, list[GpuKernel], list, list[str]]:
    """Compiles an adj-level module (rewritten in place) into a host program's parts:
    (LLVM IR, the launched kernels' PTX by slot, the (error, message) of each check, the
    hook globals to fill): `cuda_host_pipeline`, with the kernels compiled to PTX
    (`kernel_to_ptx`) between its launch and its host halves."""
    from mlir.dialects.llvm import translate_module_to_llvmir
    launches, host = cuda_host_pipeline()
    op = module.operation
    with module.context, ir.Location.unknown():
        run_pipeline(op, launches)
        kernels = [kernel_to_ptx(module, name, chip) for name in _strings(op, SLOTS_ATTR)]
        run_pipeline(op, host)
        return (str(translate_module_to_llvmir(op)), kernels, error_table(op),
                _strings(op, HOOKS_ATTR))


def _strings(module: ir.Operation, attr: str) -> list[str]:
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(module.attributes[attr])]


def _set_strings(module: ir.Operation, attr: str, values: list[str]) -> None:
    with module.context:
        module.attributes[attr] = ir.ArrayAttr.get([ir.StringAttr.get(v) for v in values])


def lower_cuda_host(module: ir.Operation) -> list[str]:
    """Replaces every adj.launch in `module` with a call of its launcher, and in host code
    each contiguous memref.copy with a copy call and each allocation marked
    HOST_MEMORY_ATTR with a host allocation; returns the launched kernels' symbols in slot
    order. The kernels stay in the module (their PTX is compiled from it); the CPU pipeline
    drops them once nothing calls them."""
    module = getattr(module, "operation", module)
    with module.context, module.location:
        slots: dict[str, int] = {}
        launchers: dict[tuple[str, int], str] = {}
        for launch in ops_named(module, "adj.launch"):
            # the kernels fill their per-item buffers on the GPU, and sum them there
            expand_item_sums(launch, on_device=True)
        symbols = symbol_table(module)       # with the summing kernels
        for launch in ops_named(module, "adj.launch"):
            _lower_launch(launch, symbols, slots, launchers, module)
        if slots:
            i64 = ir.IntegerType.get_signless(64)
            with ir.InsertionPoint(module.regions[0].blocks[0]):
                func.FuncOp(LAUNCH_SYMBOL, ([i64] * 5, []), visibility="private")
        host = _host_functions(symbol_table(module))
        _lower_copies(module, host)
        _lower_host_allocations(module, host)
    return list(slots)


def _host_functions(symbols: dict[str, ir.Operation]) -> list[ir.Operation]:
    """The func.funcs with a body that run on the CPU: all but the kernels and the
    functions they call (which lower_gpu compiles into their PTX)."""
    device: set[str] = set()
    todo = [name for name, op in symbols.items() if is_kernel(op)]
    while todo:
        name = todo.pop()
        if name in device or name not in symbols:
            continue
        device.add(name)
        todo += [ir.FlatSymbolRefAttr(c.attributes["callee"]).value
                 for c in ops_named(symbols[name], "func.call")]
    return [op for name, op in symbols.items() if op.name == "func.func"
            and name not in device and len(op.regions[0].blocks) > 0]


def _element_bytes(t: ir.Type) -> int | None:
    """The bytes of one element of memref type `t` on the host (index: 64 bits; i1: a
    byte, as widen_bool_memrefs stores it), None for other element types."""
    elem = ir.MemRefType(t).element_type
    if isinstance(elem, ir.IndexType):
        return 8
    if isinstance(elem, (ir.IntegerType, ir.FloatType)):
        return max(1, (elem.width + 7) // 8)
    return None


def _contiguous(t: ir.Type) -> bool:
    """Whether memref type `t` is one contiguous run of its elements, as the type alone
    shows: the identity layout, or strides that are the row-major ones of its sizes (unit
    stride for 1-D, whatever the offset)."""
    t = ir.MemRefType(t)
    if _identity(t):
        return True
    if not isinstance(t.layout, ir.StridedLayoutAttr):
        return False
    expected = 1
    for size, stride in reversed(list(zip(t.shape, t.layout.strides))):
        if size == 1:
            continue
        if expected is None or stride != expected:
            return False
        expected = None if size == ir.ShapedType.get_dynamic_size() else expected * size
    return True


def _identity(t: ir.MemRefType) -> bool:
    layout = t.layout
    return (isinstance(layout, ir.AffineMapAttr) and
            layout.value == ir.AffineMap.get_identity(t.rank))


def _address(value: ir.Value, elem_bytes: int) -> ir.Value:
    """The address (i64) of a memref's first element: aligned pointer + offset * bytes."""
    idx = ir.IndexType.get()
    offset = memref.ExtractStridedMetadataOp(value).offset
    at = arith.addi(memref.extract_aligned_pointer_as_index(value),
                    arith.muli(offset, arith.constant(idx, elem_bytes)))
    return _index_word(at)


def _numel(value: ir.Value) -> ir.Value:
    idx = ir.IndexType.get()
    t = ir.MemRefType(value.type)
    n = arith.constant(idx, 1)
    for d, size in enumerate(t.shape):
        extent = (arith.constant(idx, size) if size != ir.ShapedType.get_dynamic_size()
                  else memref.dim(value, arith.constant(idx, d)))
        n = arith.muli(n, extent)
    return n


def _lower_copies(module: ir.Operation, host: list[ir.Operation]) -> None:
    """Each contiguous memref.copy of the host functions `host`: a call of COPY_SYMBOL."""
    copies = [c for fn in host for c in ops_named(fn, "memref.copy")
              if all(_contiguous(v.type) for v in c.operands)
              and _element_bytes(c.operands[0].type) is not None]
    if not copies:
        return
    i64 = ir.IntegerType.get_signless(64)
    _declare(module, COPY_SYMBOL, [i64] * 3, [])
    for copy in copies:
        src, dst = copy.operands
        size = _element_bytes(src.type)
        with ir.InsertionPoint(copy), copy.location:
            nbytes = arith.muli(_numel(src), arith.constant(ir.IndexType.get(), size))
            func.CallOp([], ir.FlatSymbolRefAttr.get(COPY_SYMBOL),
                        [_address(dst, size), _address(src, size), _index_word(nbytes)])
        copy.erase()


_HOST_MEMREF = "__adjit_host_memref_"


def _lower_host_allocations(module: ir.Operation, host: list[ir.Operation]) -> None:
    """Each memref.alloc of the host functions marked HOST_MEMORY_ATTR (1-D: a
    checkpointed loop's spilled slots): a call of `@__adjit_host_memref_<type>(n, bytes)`,
    declared here, defined by hook_runtime_calls (_host_memref_text)."""
    idx = ir.IndexType.get()
    for alloc in [a for fn in host for a in ops_named(fn, "memref.alloc")
                  if HOST_MEMORY_ATTR in a.attributes]:
        t = ir.MemRefType(alloc.result.type)
        size = _element_bytes(t)
        if (t.rank != 1 or not _identity(t) or size is None
                or len(alloc.operands) != (1 if t.is_dynamic_dim(0) else 0)):
            del alloc.attributes[HOST_MEMORY_ATTR]     # (only the slots' shape is marked)
            continue
        name = _HOST_MEMREF + str(t.element_type)
        _declare(module, name, [idx, idx], [t])
        with ir.InsertionPoint(alloc), alloc.location:
            n = alloc.operands[0] if len(alloc.operands) else arith.constant(idx, t.shape[0])
            call = func.CallOp([t], ir.FlatSymbolRefAttr.get(name),
                               [n, arith.muli(n, arith.constant(idx, size))])
        alloc.result.replace_all_uses_with(call.result)
        alloc.erase()


def _declare(module: ir.Operation, name: str, inputs: list[ir.Type],
             results: list[ir.Type]) -> None:
    body = module.regions[0].blocks[0]
    if any("sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value
           == name for op in body.operations):
        return
    with ir.InsertionPoint.at_block_begin(body):
        func.FuncOp(name, (inputs, results), visibility="private")


def _lower_launch(launch: ir.Operation, symbols: dict[str, ir.Operation],
                  slots: dict[str, int], launchers: dict[tuple[str, int], str],
                  module: ir.Operation) -> None:
    call, name, ndrange = launched(launch, symbols)
    block = launch_block_size(launch)
    key = (name, block)
    if key not in launchers:
        launchers[key] = _launcher(module, name, slots.setdefault(name, len(slots)), block,
                                   [o.type for o in call.operands], len(ndrange))
    with ir.InsertionPoint(launch), launch.location:
        fits = check_ndrange_bounds(symbols[name], list(call.operands), ndrange)
    with guarded_at(launch, fits), launch.location:
        func.CallOp([], ir.FlatSymbolRefAttr.get(launchers[key]), [*call.operands, *ndrange])
    launch.erase()


def _launcher(module: ir.Operation, kernel: str, slot: int, block: int,
              inputs: list[ir.Type], ndim: int) -> str:
    """A private, never inlined, function that launches `kernel` (slot `slot`, `block`
    threads per block) on its arguments and ndrange: it packs the parameter words into a
    stack slot of its own, which its return frees (an alloca inlined into a loop would
    grow the stack on every iteration), and calls the launch hook."""
    name = f"__adjit_launch__{kernel}__b{block}"
    i64, idx = ir.IntegerType.get_signless(64), ir.IndexType.get()
    with ir.InsertionPoint(module.regions[0].blocks[0]):
        fn = func.FuncOp(name, (inputs + [idx] * ndim, []), visibility="private")
        fn.operation.attributes["no_inline"] = ir.UnitAttr.get()
        with ir.InsertionPoint(fn.add_entry_block()):
            args = list(fn.entry_block.arguments)
            operands, ndrange = args[:len(inputs)], args[len(inputs):]
            packed = [w for o in operands for w in _words(o)] + [_index_word(n) for n in ndrange]
            words = memref.alloca(ir.MemRefType.get([len(packed)], i64), [], [])
            for position, word in enumerate(packed):
                memref.store(word, words, [arith.constant(idx, position)])
            items = ndrange[0]
            for n in ndrange[1:]:
                items = arith.muli(items, n)
            func.CallOp([], ir.FlatSymbolRefAttr.get(LAUNCH_SYMBOL), [
                arith.constant(i64, slot),
                _index_word(memref.extract_aligned_pointer_as_index(words)),
                arith.constant(i64, len(packed)), _index_word(items), arith.constant(i64, block)])
            func.ReturnOp([])
    return name


def _index_word(value: ir.Value) -> ir.Value:
    return arith.index_cast(ir.IntegerType.get_signless(64), value)


def _words(value: ir.Value) -> list[ir.Value]:
    """One kernel argument as the 64-bit words of its PTX parameters."""
    i64 = ir.IntegerType.get_signless(64)
    t = value.type
    if isinstance(t, ir.MemRefType):
        aligned = _index_word(memref.extract_aligned_pointer_as_index(value))
        meta = memref.ExtractStridedMetadataOp(value)
        return [aligned, aligned, _index_word(meta.offset),
                *(_index_word(s) for s in meta.sizes), *(_index_word(s) for s in meta.strides)]
    if isinstance(t, ir.IndexType):
        return [_index_word(value)]
    if isinstance(t, ir.F64Type):
        return [arith.bitcast(i64, value)]
    if isinstance(t, ir.F32Type):
        return [arith.extui(i64, arith.bitcast(ir.IntegerType.get_signless(32), value))]
    if isinstance(t, ir.IntegerType) and t.width < 64:
        return [arith.extui(i64, value)]   # the PTX parameter reads only its low bytes
    return [value]


def hook_runtime_calls(module: ir.Operation) -> list[str]:
    """In a module lowered to the LLVM dialect, defines each runtime function of HOOKS that
    the module declares as a call through the pointer in global `__adjit_hook_<symbol>`;
    returns the globals' names, which the runtime must fill before calling the module."""
    module = getattr(module, "operation", module)
    globals_: list[str] = []
    with module.context, module.location:
        _define_host_memrefs(module)
        for op in list(module.regions[0].blocks[0].operations):
            op = op.operation
            if op.name != "llvm.func" or "sym_name" not in op.attributes:
                continue
            symbol = ir.StringAttr(op.attributes["sym_name"]).value
            if symbol not in HOOKS or len(op.regions[0].blocks) > 0:
                continue
            with ir.InsertionPoint(op):
                for defined in ir.Module.parse(_hook_text(symbol)).body.operations:
                    defined.operation.clone()
            op.erase()
            globals_.append(HOOK_PREFIX + symbol)
    return globals_


def _define_host_memrefs(module: ir.Operation) -> None:
    """Defines each `__adjit_host_memref_<type>(n, bytes)` the module declares (lowered:
    it returns a 1-D memref descriptor) as a call of HOST_ALLOC_SYMBOL (declared here for
    hooking) for `bytes`, whose pointer becomes a fresh memref of `n` elements."""
    body = module.regions[0].blocks[0]
    declared = [op.operation for op in body.operations if op.operation.name == "llvm.func"
                and "sym_name" in op.operation.attributes
                and len(op.operation.regions[0].blocks) == 0]
    names = [ir.StringAttr(op.attributes["sym_name"]).value for op in declared]
    memrefs = [op for op, n in zip(declared, names) if n.startswith(_HOST_MEMREF)]
    if not memrefs:
        return
    if HOST_ALLOC_SYMBOL not in names:
        with ir.InsertionPoint.at_block_begin(body):
            for defined in ir.Module.parse(f"llvm.func @{HOST_ALLOC_SYMBOL}(i64) -> !llvm.ptr"
                                           ).body.operations:
                defined.operation.clone()
    for op in memrefs:
        name = ir.StringAttr(op.attributes["sym_name"]).value
        with ir.InsertionPoint(op):
            for defined in ir.Module.parse(_host_memref_text(name)).body.operations:
                if ir.StringAttr(defined.operation.attributes["sym_name"]).value == name:
                    defined.operation.clone()
        op.erase()


def _host_memref_text(name: str) -> str:
    desc = "!llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>"
    return f"""
llvm.func @{HOST_ALLOC_SYMBOL}(i64) -> !llvm.ptr
llvm.func internal @{name}(%n: i64, %bytes: i64) -> {desc} {{
  %p = llvm.call @{HOST_ALLOC_SYMBOL}(%bytes) : (i64) -> !llvm.ptr
  %zero = llvm.mlir.constant(0 : i64) : i64
  %one = llvm.mlir.constant(1 : i64) : i64
  %d0 = llvm.mlir.undef : {desc}
  %d1 = llvm.insertvalue %p, %d0[0] : {desc}
  %d2 = llvm.insertvalue %p, %d1[1] : {desc}
  %d3 = llvm.insertvalue %zero, %d2[2] : {desc}
  %d4 = llvm.insertvalue %n, %d3[3, 0] : {desc}
  %d5 = llvm.insertvalue %one, %d4[4, 0] : {desc}
  llvm.return %d5 : {desc}
}}
"""


def _hook_text(symbol: str) -> str:
    result, params = HOOKS[symbol]
    names = [f"%a{i}" for i in range(len(params))]
    signature = ", ".join(f"{n}: {t}" for n, t in zip(names, params))
    call = f"llvm.call %fn({', '.join(names)}) : !llvm.ptr, ({', '.join(params)}) -> {result or '()'}"
    body = f"%r = {call}\n  llvm.return %r : {result}" if result else f"{call}\n  llvm.return"
    return f"""
llvm.mlir.global external @{HOOK_PREFIX}{symbol}() : !llvm.ptr {{
  %null = llvm.mlir.zero : !llvm.ptr
  llvm.return %null : !llvm.ptr
}}
llvm.func @{symbol}({signature}){' -> ' + result if result else ''} {{
  %slot = llvm.mlir.addressof @{HOOK_PREFIX}{symbol} : !llvm.ptr
  %fn = llvm.load %slot : !llvm.ptr -> !llvm.ptr
  {body}
}}
"""


class LowerCudaHost(AdjPass):
    """--adj-lower-cuda-host: lower_cuda_host; the launched kernels' symbols, in slot order,
    go on the module (SLOTS_ATTR) for the PTX compilation that follows."""
    name = "adj-lower-cuda-host"

    def apply(self, module: ir.Operation) -> None:
        _set_strings(module, SLOTS_ATTR, lower_cuda_host(module))


class HookRuntimeCalls(AdjPass):
    """--adj-hook-runtime-calls: hook_runtime_calls; the globals to fill go on the module
    (HOOKS_ATTR)."""
    name = "adj-hook-runtime-calls"

    def apply(self, module: ir.Operation) -> None:
        _set_strings(module, HOOKS_ATTR, hook_runtime_calls(module))
