"""`--adj-lower-gpu`: kernels to PTX in `gpu.binary` ops, launches to `gpu.launch_func`; and
`kernel_to_ptx`, which compiles one kernel to a `GpuKernel` for the CUDA launcher.

Upstream passes do the work after the adj-specific outlining: nvvm-attach-target,
convert-gpu-to-nvvm and gpu-module-to-binary{format=isa}, which makes PTX with no CUDA
toolkit installed.

Kernel @k becomes `gpu.module @k__gpu` holding the entry `gpu.func @k` and private copies of
@k's body (renamed @"k.body") and of the device functions it calls. The entry takes @k's
arguments, then the ndrange extents, and runs on a 1-D grid over prod(ndrange) work items:
linear = block_id.x * block_dim.x + thread_id.x; items at or past the total return at once
(the seed's __validindex); the item's ids come from `linear` by div/mod, row-major, and go
with the extents to the body, whose parameters `kernel_abi.expose_work_item` made explicit
as on the CPU. A 1-D grid keeps any ndrange within the grid limits and coalesces the last
dimension.

`adj.check` becomes a store of the check's number into the launch's error cell: a kernel with
checks takes one more, hidden, parameter after the extents, a memref<1xi64> that the entry
passes on to the body and the device functions (lower_cpu.lower_checks_per_call, applied to
the gpu.module, as the CPU does per call). The launcher passes each launch a cell of its own
(runtime/cuda.py: one per thread, whose launches run one at a time), reads it after the
kernel and raises. A module global cell, as before, was shared by every launch of the
kernel: concurrent launches from several threads took each other's errors, or lost them.

`adj.print` becomes a call of CUDA's vprintf (lower_print.py).

Math is expanded first (math_approx): `convert-gpu-to-nvvm` would turn it into libdevice
calls that PTX cannot resolve. `memref.atomic_rmw` lowers to `atomicrmw acq_rel`, which
NVPTX fences on both sides; atomic_add needs no ordering (CUDA's atomicAdd is relaxed), so
atomics are made monotonic after conversion. Float add/sub/mul may contract into fma, as
CUDA's default (--fmad=true) does: without it NVPTX emits `mul.rn`+`add.rn`, which ptxas
may not fuse, doubling the cost of polynomials.
"""
from __future__ import annotations

import dataclasses
import re

from mlir import ir
from mlir.dialects import arith, func, gpu, llvm, scf

from ..core.kernel import DEFAULT_BLOCK, GpuKernel, Param
from ..core.types import BY_MLIR_NAME
from ..dialects.adj import AUTODIFF, KERNEL_ATTR, NDIM_ATTR, AdjError
from .ir_util import symbol_table
from .kernel_abi import expose_work_item, is_kernel, kernel_ndim, launched, ndrange_bounds
from .lower_cpu import add_cell_parameter, error_table, lower_checks_per_call, pass_cell
from .lower_print import lower_prints
from .math_approx import expand_math
from .pipeline import gpu_binary_passes, gpu_pipeline, widen_bool_memrefs
from .registry import AdjPass, PassError, run_pipeline
from .summation import expand_item_sums
from .walk import ops_named, walk
from .written import WrittenArguments

GPU_MODULE_SUFFIX = "__gpu"


def lower_gpu(module: ir.Operation, chip: str = "sm_90") -> None:
    """Rewrites `module` in place, down to gpu.binary ops holding PTX (format isa: no CUDA
    toolkit needed) and host code with gpu.launch_func. Raises AdjError (with the op) on
    malformed adj IR. An ir.Module is taken too."""
    run_pipeline(getattr(module, "operation", module), gpu_pipeline(chip))


def emit_ptx(module: ir.Operation) -> dict[str, str]:
    """The PTX in the gpu.binary ops of a module that lower_gpu produced, by symbol."""
    module = getattr(module, "operation", module)
    return {ir.StringAttr(op.attributes["sym_name"]).value:
            gpu.ObjectAttr(op.attributes["objects"][0]).object.decode()
            for op in ops_named(module, "gpu.binary")}


def kernel_to_ptx(module: ir.Module, kernel: str, chip: str = "sm_90") -> GpuKernel:
    """Compiles kernel @`kernel` of `module` (adj-level IR; left unchanged) to PTX."""
    module_op = getattr(module, "operation", module)
    symbols = symbol_table(module_op)
    fn = symbols.get(kernel)
    if fn is None or not is_kernel(fn):
        raise ValueError(f"@{kernel} is not a func.func marked {KERNEL_ATTR} in this module")
    with module_op.context, module_op.location:
        work = ir.Module.create()
        with ir.InsertionPoint(work.body):
            for op in _closure(fn, symbols):
                op.clone()
        params = tuple(_param(t, fn) for t in _inputs(fn))
        written = tuple(sorted(WrittenArguments(symbols)(kernel)))
        bounds = tuple(ndrange_bounds(fn))
        _outline_kernels(work.operation)
        gpu_module = symbol_table(work.operation)[kernel + GPU_MODULE_SUFFIX]
        checks = tuple(error_table(gpu_module))
        _to_binary(work.operation, chip)
        ptx = emit_ptx(work.operation)[kernel + GPU_MODULE_SUFFIX]
    entry = re.search(r"\.entry\s+([\w$]+)", ptx).group(1)
    return GpuKernel(name=kernel, entry=entry, ptx=ptx, chip=chip, params=params,
                     ndim=kernel_ndim(fn), checks=checks,
                     written=written, ndrange_bounds=bounds)


def compile_text(ir_text: str, kernel: str, chip: str = "sm_90") -> GpuKernel:
    """kernel_to_ptx of IR text, in a fresh context (what the kernel cache calls on a miss).
    Autodiff requests in the text are carried out first, so `kernel` may be a derivative."""
    from ..dialects import make_context
    with make_context(), ir.Location.unknown():
        module = ir.Module.parse(ir_text)
        if ops_named(module.operation, AUTODIFF):
            from .autodiff import run_autodiff
            run_autodiff(module)
        return kernel_to_ptx(module, kernel, chip)


def _outline_kernels(module: ir.Operation) -> None:
    """adj to the gpu dialect: a gpu.module per kernel, gpu.launch_func per launch."""
    symbols = symbol_table(module)
    kernels = {name: op for name, op in symbols.items() if is_kernel(op)}
    for launch in ops_named(module, "adj.launch"):
        expand_item_sums(launch)        # the kernels fill their per-item buffers on the GPU
    for launch in ops_named(module, "adj.launch"):
        _lower_launch(launch, kernels)
    for name, kernel in kernels.items():
        _outline(kernel, name, symbols)
        kernel.erase()
    for op in ops_named(module, "adj.sync"):     # gpu.launch_func blocks until done
        op.erase()
    module.attributes["gpu.container_module"] = ir.UnitAttr.get()


def _to_binary(module: ir.Operation, chip: str) -> None:
    run_pipeline(module, f"builtin.module({','.join(gpu_binary_passes(chip))})")


def _relax_atomics(module: ir.Operation) -> None:
    for op in ops_named(module, "llvm.atomicrmw"):
        op.attributes["ordering"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                       int(llvm.AtomicOrdering.monotonic))


def _inputs(fn: ir.Operation) -> list[ir.Type]:
    return list(ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value).inputs)


def _dtype(t: ir.Type, where: ir.Operation) -> str:
    name = str(t)      # (MLIR's spelling, as a kernel's Param names its scalar type)
    if name not in BY_MLIR_NAME:
        raise AdjError(where, f"a GPU kernel cannot take {t}")
    return name


def _param(t: ir.Type, fn: ir.Operation) -> Param:
    if isinstance(t, ir.MemRefType):
        return Param("memref", _dtype(t.element_type, fn), t.rank)
    return Param("scalar", _dtype(t, fn))


def _closure(fn: ir.Operation, symbols: dict[str, ir.Operation]) -> list[ir.Operation]:
    """`fn` and every top-level symbol it references, transitively (device functions,
    globals), in module order."""
    seen = {ir.StringAttr(fn.attributes["sym_name"]).value}
    todo = [fn]
    while todo:
        def visit(op: ir.Operation) -> ir.WalkResult:
            for key in op.attributes:
                attr = op.attributes[key]
                if isinstance(attr, ir.FlatSymbolRefAttr):
                    name = attr.value
                    if name in symbols and name not in seen:
                        seen.add(name)
                        todo.append(symbols[name])
            return ir.WalkResult.ADVANCE
        walk(todo.pop(), visit)
    return [op for name, op in symbols.items() if name in seen]


def _outline(kernel: ir.Operation, name: str, symbols: dict[str, ir.Operation]) -> None:
    """Builds gpu.module @<name>__gpu next to `kernel` (see the module docstring)."""
    inputs = _inputs(kernel)
    ndim = kernel_ndim(kernel)
    idx = ir.IndexType.get()
    with ir.InsertionPoint(kernel), kernel.location:
        module = gpu.GPUModuleOp(name + GPU_MODULE_SUFFIX)
        with ir.InsertionPoint(module.bodyRegion.blocks.append()):
            for op in _closure(kernel, symbols):   # private: dropped once inlined
                op.clone().attributes["sym_visibility"] = ir.StringAttr.get("private")
            body = symbol_table(module.operation)[name]
            body.attributes["sym_name"] = ir.StringAttr.get(name + ".body")
            expose_work_item(body)
            del body.attributes[KERNEL_ATTR]
            del body.attributes[NDIM_ATTR]
            entry = gpu.GPUFuncOp(ir.TypeAttr.get(ir.FunctionType.get(inputs + [idx] * ndim, [])),
                                  sym_name=name, kernel=True)
            block = entry.body.blocks.append(*inputs, *[idx] * ndim)
            with ir.InsertionPoint(block):
                args, sizes = list(block.arguments)[:len(inputs)], list(block.arguments)[len(inputs):]
                _call_if_valid(name + ".body", args, sizes)
                gpu.ReturnOp([])
    widen_bool_memrefs(module.operation)
    _lower_checks(module.operation, entry.operation)
    expand_math(module.operation)
    contract = ir.Attribute.parse("#arith.fastmath<contract>")
    prints = []
    for op in ops_named(module.operation, "arith.addf", "arith.subf", "arith.mulf", "adj.print"):
        if op.name == "adj.print":
            prints.append(op)
        else:
            op.attributes["fastmath"] = contract
    lower_prints(module.operation, prints, gpu=True)


def _lower_checks(module: ir.Operation, entry: ir.Operation) -> None:
    """Checks store into the launch's error cell: a last parameter of the body and device
    functions (lower_checks_per_call) and, when the kernel has checks, of the entry, which
    passes it to the body."""
    lower_checks_per_call(module)
    if not error_table(module):
        return
    cell = add_cell_parameter(entry)
    calls: list[ir.Operation] = []
    walk(entry, lambda op: (calls.append(op) if op.name == "func.call" else None)
         or ir.WalkResult.ADVANCE)
    for call in calls:
        pass_cell(call, cell)


def _call_if_valid(body: str, args: list[ir.Value], sizes: list[ir.Value]) -> None:
    linear = arith.addi(arith.muli(gpu.block_id(gpu.Dimension.x), gpu.block_dim(gpu.Dimension.x)),
                        gpu.thread_id(gpu.Dimension.x))
    valid = arith.cmpi(arith.CmpIPredicate.ult, linear, _product(sizes))
    branch = scf.IfOp(valid)
    with ir.InsertionPoint(branch.then_block):
        ids, rest = [], linear
        for size in reversed(sizes[1:]):          # row-major: the last dimension varies fastest
            ids.append(arith.remui(rest, size))
            rest = arith.divui(rest, size)
        ids.append(rest)
        func.CallOp([], ir.FlatSymbolRefAttr.get(body), args + ids[::-1] + sizes)
        scf.YieldOp([])


def _product(values: list[ir.Value]) -> ir.Value:
    total = values[0]
    for v in values[1:]:
        total = arith.muli(total, v)
    return total


def launch_block_size(launch: ir.Operation) -> int:
    """Threads per block of an adj.launch: prod(workgroupsize), or DEFAULT_BLOCK."""
    block_size = DEFAULT_BLOCK
    if "workgroupsize" in launch.attributes:
        block_size = 1
        for n in ir.DenseI64ArrayAttr(launch.attributes["workgroupsize"]):
            block_size *= n
    return block_size


def _lower_launch(launch: ir.Operation, kernels: dict[str, ir.Operation]) -> None:
    call, name, ndrange = launched(launch, kernels)
    block_size = launch_block_size(launch)
    idx = ir.IndexType.get()
    with ir.InsertionPoint(launch), launch.location:
        total = _product(ndrange)
        block = arith.constant(idx, block_size)
        grid = arith.divui(arith.addi(total, arith.constant(idx, block_size - 1)), block)
        one = arith.constant(idx, 1)
        nonempty = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ugt, total, arith.constant(idx, 0)))
        with ir.InsertionPoint(nonempty.then_block):
            gpu.LaunchFuncOp([name + GPU_MODULE_SUFFIX, name], (grid, one, one),
                             (block, one, one), list(call.operands) + ndrange)
            scf.YieldOp([])
    launch.erase()


@dataclasses.dataclass
class LowerGpu(AdjPass):
    """--adj-lower-gpu{chip=sm_90}: lower_gpu."""
    name = "adj-lower-gpu"
    chip: str = "sm_90"

    def __post_init__(self) -> None:
        if not re.fullmatch(r"sm_\d+a?", self.chip):
            raise PassError(f"option chip of {self.name} must name an NVIDIA architecture "
                            f"such as sm_90, got {self.chip!r}")

    def apply(self, module: ir.Operation) -> None:
        lower_gpu(module, self.chip)


class OutlineKernels(AdjPass):
    """--adj-outline-kernels: adj to the gpu dialect, a gpu.module per kernel and a
    gpu.launch_func per launch (the first step of gpu_pipeline)."""
    name = "adj-outline-kernels"

    def apply(self, module: ir.Operation) -> None:
        _outline_kernels(module)


class RelaxGpuAtomics(AdjPass):
    """--adj-relax-gpu-atomics: the kernels' atomic adds monotonic, as on the CPU
    (lower_cpu.relax_atomics says why), on the NVVM-lowered gpu.modules."""
    name = "adj-relax-gpu-atomics"

    def apply(self, module: ir.Operation) -> None:
        _relax_atomics(module)
