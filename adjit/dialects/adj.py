"""The `adj` dialect: loading its IRDL declaration and typed builders for its ops.

Ops are created with `ir.Operation.create` because IRDL dialects have no generated Python
classes; each builder below is the one place that spells an op's operands and attributes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from mlir import ir
from mlir.dialects import irdl

from ..core.derivative_abi import DerivativeABI


def _generic_llvm_and_gpu_ops() -> None:
    # The bindings import `mlir.dialects.<dialect>` the first time an op of that dialect is
    # seen from Python (to give it its OpView class), so walking a module in the LLVM dialect
    # or an adj.launch's gpu.yield cost each compiling process 12-25 ms (llvm) and 6-14 ms
    # (gpu) of imports for classes adjit does not use there. The search finds these empty
    # modules first; whoever needs the classes imports `mlir.dialects.llvm`/`.gpu`, which
    # registers them (passes/lower_gpu.py, opt.py do).
    from mlir._mlir_libs import _mlir
    prefixes = list(_mlir.globals.dialect_search_modules)
    if __package__ + "._generic_ops" not in prefixes:
        _mlir.globals.dialect_search_modules = [__package__ + "._generic_ops", *prefixes]


_generic_llvm_and_gpu_ops()

IRDL_PATH = Path(__file__).with_name("adj.irdl.mlir")
_IRDL_TEXT = IRDL_PATH.read_text()

KERNEL_ATTR = "adj.kernel"       # on func.func: this function is a kernel body
NDIM_ATTR = "adj.ndim"           # on kernels: rank of the ndrange it is launched over
FUNC_ATTR = "adj.func"           # on func.func: a device function (@adjit.func)
ENTRY_ATTR = "adj.entry"         # on func.func: called from Python
# On kernels: [{arg, dim, id, message}, ...]: every work item indexes array argument `arg` in
# dimension `dim` with its id in ndrange dimension `id`, so a launch whose extent `id` exceeds
# that size would go out of bounds; the lowerings check it at each launch. Computed from the
# IR (passes/ndrange_bounds.py); the autodiff pass carries it onto the kernels it generates.
BOUNDS_ATTR = "adj.ndrange_bounds"
# On functions the frontend made: {name = "<Python name>", args = ["<parameter>", ...]}, the
# user's names, for messages about the function.
SOURCE_ATTR = "adj.source"
# On an scf.if that only guards one element access against an out-of-bounds index (debug
# mode's checks).
GUARD_ATTR = "adj.bounds_guard"
# on scf.for: the loop is adjit.checkpointed; a dict of its schedule ({snapshots = k},
# {every = m} or {max_bytes = b}), which reverse mode follows (passes/autodiff/rules/checkpoint.py)
CHECKPOINT_ATTR = "adj.checkpoint"
# on func.func: the function iterates a step to its fixed point (adjit.fixed_point): a dict
# {step = @W, tol, max_iter}; reverse mode differentiates it implicitly
# (passes/autodiff/generate/fixed_point_reverse.py)
FIXED_POINT_ATTR = "adj.fixed_point"
# on scf.parallel: the loop nest loads one array, defined outside it, and reads each of its
# elements exactly once (adjit.sum/max/min over a whole array: compiler/arrays.py `reduce`).
# Reverse mode then reverses it in parallel and, where the array's shadow is still untouched,
# stores the adjoints instead of adding them (passes/autodiff/rules/control_flow_ops.py).
COVERS_ONCE_ATTR = "adj.covers_once"


def load_adj(ctx: ir.Context) -> None:
    """Registers the `adj` dialect in `ctx` once (loading it twice aborts the process)."""
    if ctx.is_registered_operation("adj.launch"):
        return
    with ctx, ir.Location.unknown():
        irdl.load_dialects(ir.Module.parse(_IRDL_TEXT))


def make_context() -> ir.Context:
    """A context with every upstream dialect and `adj` loaded, and no thread pool: a forked
    child cannot use a pool whose threads ran in its parent (the first verify hangs), and
    adjit's modules are too small to gain from one (measured: no difference)."""
    ctx = ir.Context()
    ctx.enable_multithreading(False)   # before any use, so no pool thread ever starts
    load_adj(ctx)
    return ctx


_SHARED: ir.Context | None = None


def shared_context() -> ir.Context:
    """The one context adjit builds and compiles IR in (making one costs ~7 ms): the
    compiler's, and the engine's for a module it has only as text."""
    global _SHARED
    if _SHARED is None:
        _SHARED = make_context()
    return _SHARED


def _i64(v: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)


def index() -> ir.Value:
    return ir.Operation.create("adj.index", results=[ir.IndexType.get()]).result


def global_id(dim: int) -> ir.Value:
    return ir.Operation.create("adj.global_id", results=[ir.IndexType.get()],
                               attributes={"dim": _i64(dim)}).result


def global_size(dim: int) -> ir.Value:
    return ir.Operation.create("adj.global_size", results=[ir.IndexType.get()],
                               attributes={"dim": _i64(dim)}).result


def sync() -> ir.Operation:
    return ir.Operation.create("adj.sync")


def check(ok: ir.Value, error: str, message: str) -> ir.Operation:
    return ir.Operation.create("adj.check", operands=[ok], attributes={
        "error": ir.StringAttr.get(error), "message": ir.StringAttr.get(message)})


def print_(words: Sequence[ir.Value], format: str, kinds: str) -> ir.Operation:
    """`adj.print`: `format`, a printf format, of the 64-bit `words`, each read as `kinds`
    says (the IRDL declaration: "i" integer, "f" a double's bits, "b" a boolean, "w"/"p" a
    whole number's point)."""
    if len(kinds) != len(words) or set(kinds) - set("ifbwp"):
        raise ValueError(f"adj.print: kinds {kinds!r} do not describe {len(words)} words")
    return ir.Operation.create("adj.print", operands=list(words), attributes={
        "format": ir.StringAttr.get(format), "kinds": ir.StringAttr.get(kinds)})


def launch(kernel: str, kernel_type: ir.FunctionType, args: Sequence[ir.Value],
           ndrange: Sequence[ir.Value], workgroupsize: Sequence[int] | None = None,
           sums: int = 0) -> ir.Operation:
    """`adj.launch` over `ndrange` whose body calls `kernel(*args)`; with `sums` results, the
    sums over items of the per-item buffers that are the last `sums` arguments (the IRDL
    declaration says how)."""
    from mlir.dialects import func
    attrs = {"kernel": ir.FlatSymbolRefAttr.get(kernel)}
    if workgroupsize:
        attrs["workgroupsize"] = ir.DenseI64ArrayAttr.get(list(workgroupsize))
    op = ir.Operation.create("adj.launch", operands=list(ndrange),
                             results=[ir.F64Type.get()] * sums,
                             attributes=attrs, regions=1)
    block = op.regions[0].blocks.append()
    with ir.InsertionPoint(block):
        func.CallOp(list(kernel_type.results), ir.FlatSymbolRefAttr.get(kernel), list(args))
        # (generic: mlir.dialects.gpu's op classes cost 6-10 ms to import, for CPU kernels)
        ir.Operation.create("gpu.yield")
    return op


def launch_call(op: ir.Operation) -> ir.Operation:
    """The func.call inside a launch, after checking the body has the required shape."""
    ops = list(op.regions[0].blocks[0].operations) if len(op.regions[0].blocks) == 1 else []
    if len(ops) != 2 or ops[0].name != "func.call" or ops[1].name != "gpu.yield":
        raise AdjError(op, "adj.launch body must be one func.call of the kernel and gpu.yield")
    kernel = ir.FlatSymbolRefAttr(op.attributes["kernel"]).value
    if ir.FlatSymbolRefAttr(ops[0].attributes["callee"]).value != kernel:
        raise AdjError(op, f"adj.launch body calls a function other than its kernel @{kernel}")
    return ops[0]


def item_sum_buffers(op: ir.Operation) -> list[ir.Value]:
    """The per-item buffers whose sums a launch returns (the last of its call's arguments,
    one per result), after checking their types."""
    n = len(op.results)
    if not n:
        return []
    args = list(launch_call(op).operands)
    buffers = args[len(args) - n:] if len(args) >= n else []
    floats = (ir.F32Type.get(), ir.F64Type.get())
    for b in buffers:
        t = b.type
        if not (isinstance(t, ir.MemRefType) and ir.MemRefType(t).rank == 1
                and ir.MemRefType(t).element_type in floats):
            buffers = []
            break
    if len(buffers) != n:
        raise AdjError(op, "adj.launch with N results needs its call's last N arguments to be "
                           "per-item buffers memref<?xf32> or memref<?xf64>")
    return buffers


AUTODIFF = "adj.autodiff"
# The attributes that are an `adj.autodiff` request's own; any other is copied onto the
# functions it defines (the frontend puts `adj.entry`, `llvm.emit_c_interface` there).
AUTODIFF_ATTRS = frozenset({"sym_name", "fn", "mode", "activity", "ret_activity",
                            "with_primal", "overwritten", "width", "combined"})


def autodiff(name: str, fn: str, abi: DerivativeABI, overwritten: Sequence[bool] = (),
             combined: bool = False) -> ir.Operation:
    """An `adj.autodiff` request, at the insertion point: define @name (forward mode) or
    @name_aug and @name_rev (reverse mode), differentiating @fn with the layout `abi`.
    `overwritten`: per argument, whether the caller may change the array between the
    augmented and the reverse call (none: nothing is); `combined`: also define @name, the
    augmented function then the reverse one in one call (passes/autodiff/__init__.py)."""
    s = ir.StringAttr.get
    attrs = {"sym_name": s(name), "fn": ir.FlatSymbolRefAttr.get(fn), "mode": s(abi.mode.value),
             "activity": ir.ArrayAttr.get([s(a.value) for a in abi.activity]),
             "ret_activity": s(abi.ret_activity.value),
             "with_primal": ir.BoolAttr.get(abi.with_primal)}
    if overwritten:
        attrs["overwritten"] = ir.ArrayAttr.get([ir.BoolAttr.get(o) for o in overwritten])
    if abi.width != 1:
        attrs["width"] = _i64(abi.width)
    if combined:
        attrs["combined"] = ir.UnitAttr.get()
    return ir.Operation.create(AUTODIFF, attributes=attrs)


@dataclass(frozen=True)
class AutodiffRequest:
    """An `adj.autodiff` op's attributes, typed, as written: the strings are not yet checked
    against the function (the pass does that, and says what is wrong at the op). `overwritten`
    is None where the op says nothing; `extra`: the attributes that are not the request's."""
    name: str
    fn: str
    mode: str
    activity: tuple[str, ...]
    ret_activity: str
    with_primal: bool
    width: int
    overwritten: tuple[bool, ...] | None
    combined: bool
    extra: dict[str, ir.Attribute] = field(compare=False)


def read_autodiff(op: ir.Operation) -> AutodiffRequest:
    """The request `op` is; AdjError where an attribute is missing or of the wrong kind."""
    def get(key: str, kind: type, default=None):
        if key not in op.attributes:
            if default is not None:
                return default
            raise AdjError(op, f"adj.autodiff request lacks attribute `{key}`")
        attr = op.attributes[key]
        try:
            return kind(attr)
        except (ValueError, TypeError):
            raise AdjError(op, f"adj.autodiff attribute `{key}` must be a {kind.__name__}, "
                               f"not {attr}") from None

    overwritten = get("overwritten", ir.ArrayAttr) if "overwritten" in op.attributes else None
    return AutodiffRequest(
        name=get("sym_name", ir.StringAttr).value, fn=get("fn", ir.FlatSymbolRefAttr).value,
        mode=get("mode", ir.StringAttr).value,
        activity=tuple(ir.StringAttr(a).value for a in get("activity", ir.ArrayAttr)),
        ret_activity=get("ret_activity", ir.StringAttr).value,
        with_primal=get("with_primal", ir.BoolAttr, ir.BoolAttr.get(False)).value,
        width=get("width", ir.IntegerAttr, _i64(1)).value,
        overwritten=None if overwritten is None else tuple(ir.BoolAttr(a).value
                                                           for a in overwritten),
        combined="combined" in op.attributes,
        extra={k: op.attributes[k] for k in op.attributes if k not in AUTODIFF_ATTRS})


class AdjError(Exception):
    """A malformed adj op found by a pass; carries the op, whose location the diagnostic names."""

    def __init__(self, op: ir.Operation, message: str):
        super().__init__(message)
        self.op = op
