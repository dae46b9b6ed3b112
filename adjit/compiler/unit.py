"""Compiling Function and Kernel specialisations: MLIR is imported here, and this module is
imported only when something is compiled.

A `CompileUnit` (one MLIR module) gets the called function and, recursively, everything it
calls or launches, then an entry function that Python calls through the runtime.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from mlir import ir
from mlir.dialects import arith, func

from ..dialects import adj, shared_context
from ..dialects.mlir_types import mlir_type
from . import scalar_ops as S
from .codegen import CodeGenerator
from ..passes.ndrange_bounds import annotate as annotate_ndrange_bounds
from .compiled import Compiled
from ..core.errors import UserError
from ..runtime import profiling
from ..core.types import ArrayType, ScalarType, VecArrayType, VecType, as_scalar_type, i64
from . import struct_values as SV
from . import trees as T
from . import vectors as V
from .values import Array, ArrayExpr, Literal, Scalar, Shape, StructValue, Vec, VecArray
from ..lang.functions import Function, Kernel, bind_arguments
from . import callables
from . import ir_dump
from .linalg_calls import uses_lapack

if TYPE_CHECKING:
    from ..runtime.host_program import HostProgram
    from ..core.kernel import GpuKernel


def context() -> ir.Context:
    """The one MLIR context adjit builds IR in (dialects.shared_context)."""
    return shared_context()


def _mangle(name: str, types: Sequence) -> str:
    parts = []
    for t in types:
        # (a weak scalar, a Python float or int, is a specialisation of its own: "wf64")
        parts.append(f"a{t.ndim}{t.dtype.name}" if isinstance(t, ArrayType) else
                     f"w{t.name}" if getattr(t, "weak", False) else t.name)
    return f"{name}__{'_'.join(parts)}" if parts else name


class CompileUnit:
    """One MLIR module under construction, with the functions already compiled into it."""

    def __init__(self, debug: bool):
        self.debug = debug
        self.ctx = context()
        with self.ctx, ir.Location.unknown():
            self.module = ir.Module.create()
        self.compiled: dict[tuple, tuple[str, list, bool]] = {}
        # symbol -> (the @adjit.func or @adjit.jit function, argument types, result types):
        # what the autodiff pass's rule lookup (rule_compiler.FunctionRules) asks about.
        self.functions: dict[str, tuple[Function, tuple, list]] = {}
        self._active: set[tuple] = set()
        self._named: set[str] = set()     # the names _unused gave (before their ops exist)
        # derivatives called from the code (derivative_calls.py): signature -> the name of
        # the function its adj.autodiff request defines
        self.requests: dict[tuple, str] = {}
        # what must run on the module before it is lowered (the autodiff pass, when the code
        # calls derivatives), each once
        self.before_lowering: list[Callable[[CompileUnit], None]] = []
        # symbol -> per result of the Python function, its VecType, StructType or None, for
        # functions that return vectors or structs (whose IR results are their scalars and
        # leaves: compiler/struct_values.py)
        self.vector_results: dict[str, list] = {}
        # symbol -> the TreeDef of the result of functions that return a tree (a dict, a
        # NamedTuple, nested tuples: compiler/trees.py), whose IR results are its leaves
        self.tree_results: dict = {}

    def finish(self) -> None:
        """Runs what must run before the module is lowered (before_lowering), once."""
        with self.ctx, ir.Location.unknown():
            while self.before_lowering:
                self.before_lowering.pop(0)(self)

    def add(self, gen: CodeGenerator) -> func.FuncOp:
        with ir.InsertionPoint(self.module.body), profiling.phase("frontend"):
            return gen.compile()

    def function(self, fn: "Function", arg_types: Sequence) -> tuple[str, list, bool]:
        """(symbol, result types, whether the result is a tuple) of `fn` for `arg_types`."""
        key = ("func", id(fn), tuple(arg_types))
        if key in self.compiled:
            return self.compiled[key]
        if key in self._active:
            raise UserError(f"{fn.__name__} calls itself: recursion is not supported")
        self._active.add(key)
        symbol = self._unused(_mangle(fn.__name__, arg_types))
        gen = CodeGenerator(self, fn.pyfn, fn.source, fn.kind, arg_types, symbol,
                            debug=self.debug, trees=fn.tree_layout)
        op = self.add(gen)
        op.operation.attributes[adj.FUNC_ATTR] = ir.UnitAttr.get()
        self._active.discard(key)
        out = (symbol, gen.result_types or [], getattr(gen, "tuple_result", False))
        if any(gen.result_layout or []):
            self.vector_results[symbol] = gen.result_layout
        if gen.result_tree is not None:
            self.tree_results[symbol] = gen.result_tree
        self.compiled[key] = out
        self.functions[symbol] = (fn, tuple(arg_types), out[1])
        return out

    def kernel(self, k: "Kernel", arg_types: Sequence, ndim: int) -> str:
        key = ("kernel", id(k), tuple(arg_types), ndim)
        if key in self.compiled:
            return self.compiled[key][0]
        symbol = self._unused(_mangle(k.__name__, arg_types) + f"__{ndim}d")
        gen = CodeGenerator(self, k.pyfn, k.source, "kernel", arg_types, symbol, ndim=ndim,
                            debug=self.debug, trees=k.tree_layout)
        op = self.add(gen)
        op.operation.attributes[adj.KERNEL_ATTR] = ir.UnitAttr.get()
        op.operation.attributes[adj.NDIM_ATTR] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(64), ndim)
        annotate_ndrange_bounds(op.operation)
        self.compiled[key] = (symbol, [], False)
        return symbol

    def _unused(self, symbol: str) -> str:
        """`symbol`, or with `_` added until no op of the module has the name: a mangled
        name leaves out what else tells specialisations apart (a layout, dimensions known
        to be 1, which function of that name: f(x) and f(x[::-1]) in one unit)."""
        def taken(name: str) -> bool:
            try:
                return name in self._named or self.symbol(name) is not None
            except KeyError:
                return False
        while taken(symbol):
            symbol += "_"
        self._named.add(symbol)
        return symbol

    def symbol(self, name: str) -> ir.Operation:
        """The top-level op of the module named `name`."""
        for op in self.module.body.operations:
            if ("sym_name" in op.attributes and
                    ir.StringAttr(op.attributes["sym_name"]).value == name):
                return op
        raise KeyError(name)

    def entry(self, name: str, inputs: list, results: list, body: Callable) -> None:
        """A public function Python calls: `body(args)` emits its code, returns values."""
        with self.ctx, ir.Location.unknown(), ir.InsertionPoint(self.module.body):
            fn = func.FuncOp(name, ([mlir_type(t) for t in inputs],
                                    [mlir_type(t) for t in results]))
            fn.operation.attributes[adj.ENTRY_ATTR] = ir.UnitAttr.get()
            fn.operation.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
            block = fn.add_entry_block()
            with ir.InsertionPoint(block):
                func.ReturnOp(body(list(block.arguments)))


def compiled(unit: CompileUnit, entry: str, arg_types: list, result_types: list,
             tuple_result: bool, target: Function | Kernel) -> Compiled:
    """The unit's module compiled (or loaded from the disk cache by its text), behind a
    callable `entry`."""
    from ..passes.written import written_arguments
    from .engine import compile_module
    unit.finish()
    adj_text = str(unit.module)
    ir_dump.dump(f"{entry} (adj)", adj_text)
    with unit.ctx, ir.Location.unknown():
        written = written_arguments(unit.module, entry)
        module = compile_module(unit.module)
    # (an ExecutionEngine generates its code at the first lookup of an entry: here)
    with profiling.phase("LLVM"):
        return Compiled(module, entry, arg_types, result_types, tuple_result, written,
                        target, adj_text, getattr(unit, "entry_vectors", None),
                        getattr(unit, "entry_tree", None))


def function_unit(fn: "Function", types: list, debug: bool,
                  entry: str = "entry") -> tuple[CompileUnit, list, bool]:
    """A unit holding `fn` for argument `types` behind the entry function `entry`; with the
    result types and whether the result is a tuple."""
    unit = CompileUnit(debug)
    with unit.ctx:
        symbol, results, is_tuple = unit.function(fn, types)
        # (its vector results, which Python gets back as arrays: compiled.Compiled)
        unit.entry_vectors = unit.vector_results.get(symbol)
        unit.entry_tree = unit.tree_results.get(symbol)    # (a tree result's structure)

        def body(args):
            call = func.CallOp([mlir_type(t) for t in results], ir.FlatSymbolRefAttr.get(symbol),
                               args)
            return list(call.results)

        unit.entry(entry, types, results, body)
    return unit, results, is_tuple


def build_function(fn: "Function", types: list, debug: bool) -> Compiled:
    """`fn` for argument `types`, behind an entry Python calls."""
    unit, results, is_tuple = function_unit(fn, types, debug)
    return compiled(unit, "entry", types, results, is_tuple, fn)


def host_program(unit: CompileUnit, name: str, entries: dict[str, tuple[list, list]],
                 meta: dict, chip: str) -> tuple[str, "HostProgram"]:
    """The module of `unit`, whose entry functions are `entries` (name: (argument types,
    result types)), compiled for device="cuda" (passes/lower_cuda_host.py): (the host code's
    LLVM IR, the host program). The module is rewritten."""
    from ..passes.lower_cuda_host import compile_host
    from ..passes.written import written_arguments
    from ..runtime import cpu_cache
    from ..core.types import type_code
    from ..runtime.host_program import HostProgram
    unit.finish()
    if uses_lapack(unit.module):
        raise UserError(f"{name}: np.linalg's solve, inv, det and cholesky call LAPACK on the "
                        "CPU and are not compiled for device='cuda' (run the function on the "
                        "CPU, or use the matrix types' adjit.inverse and adjit.determinant "
                        "in kernels)")
    written = {entry: tuple(written_arguments(unit.module, entry)) for entry in entries}
    with profiling.phase("MLIR passes"):      # (the kernels' PTX included)
        llvm_ir, kernels, errors, hooks = compile_host(unit.module, chip)
    with profiling.phase("LLVM"):
        library = cpu_cache.build_shared_object(llvm_ir, 3, cpu_cache.portable_target())
    codes = {entry: ([type_code(t) for t in args], [type_code(t) for t in results])
             for entry, (args, results) in entries.items()}
    return llvm_ir, HostProgram(name=name, entries=codes, written=written, kernels=tuple(kernels),
                                errors=tuple(errors), hooks=tuple(hooks), library=library,
                                meta=meta)


def build_kernel(k: "Kernel", types: list, ndim: int, wgs: tuple[int, ...] | None,
                 debug: bool) -> Compiled:
    """An entry that launches `k` on the CPU: the kernel's arguments, then the extents."""
    unit = CompileUnit(debug)
    with unit.ctx:
        symbol = unit.kernel(k, types, ndim)
        ktype = function_type(unit, symbol)

        def body(args):
            n = len(types)
            extents = [arith.index_cast(ir.IndexType.get(), a) for a in args[n:]]
            adj.launch(symbol, ktype, args[:n], extents, wgs)
            return []

        unit.entry("entry", types + [i64] * ndim, [], body)
    return compiled(unit, "entry", types + [i64] * ndim, [], False, k)


def kernel_module(k: "Kernel", types: list, ndim: int, debug: bool) -> tuple[str, str]:
    """(adj-level IR text of a module holding just `k` for `types`, the kernel's symbol)."""
    unit = CompileUnit(debug)
    with unit.ctx:
        symbol = unit.kernel(k, types, ndim)
        unit.finish()
    return str(unit.module), symbol


def kernel_to_gpu(k: "Kernel", types: list, ndim: int, debug: bool, chip: str) -> "GpuKernel":
    """`k` compiled to PTX for `chip`, from the same adj IR that the CPU lowering takes."""
    from ..passes.lower_gpu import kernel_to_ptx
    unit = CompileUnit(debug)
    with unit.ctx:
        symbol = unit.kernel(k, types, ndim)
        unit.finish()
        with profiling.phase("MLIR passes"):      # (to PTX)
            return kernel_to_ptx(unit.module, symbol, chip)


def call_function(gen: CodeGenerator, fn: Function, args: list, kwargs: dict):
    """A call of `fn` from compiled code (keyword arguments and defaults bound as Python
    binds them: `_bound`)."""
    if fn.kind == "jit" and gen.kind != "jit":
        raise UserError(f"{fn.__name__} is an @adjit.jit function: kernels and device "
                        "functions call @adjit.func functions only")
    if kwargs or len(args) < len(fn.struct_params):
        args = bound_arguments(fn, args, kwargs)
    fn, args = T.variant_call(fn, args, f"{fn.__name__}()")
    args = _struct_fields(fn, args, f"{fn.__name__}()")
    if len(args) != len(fn.params):
        raise UserError(f"{fn.__name__}() takes {len(fn.params)} arguments, got {len(args)}")
    values, types = [], []
    for p, ann, a in zip(fn.params, fn.annotations, args):
        v = _operand(a, ann, f"{fn.__name__}(): argument {p!r}", keep_vectors=True)
        values.append(v)
        types.append(V.operand_type(v))
    symbol, results, is_tuple = gen.unit.function(fn, types)
    call = func.CallOp([mlir_type(t) for t in results], ir.FlatSymbolRefAttr.get(symbol),
                       [x for v in values for x in V.flat_values(v)])
    outs = [Array(r, t) if isinstance(t, ArrayType) else Scalar(r, t)
            for r, t in zip(call.results, results)]
    tree = gen.unit.tree_results.get(symbol)
    if not results and tree is None:
        return None
    layout = gen.unit.vector_results.get(symbol)
    if layout is not None:     # vector and struct results: their scalars gathered
        outs = SV.regroup(outs, layout)
    if tree is not None:       # a tree result: its leaves gathered (trees.py)
        return T.rebuild(tree, outs)
    return tuple(outs) if is_tuple or len(outs) > 1 else outs[0]


def bound_arguments(fn: Function, args: list, kwargs: dict) -> list:
    """The arguments of a call of `fn` by position: keyword ones in their places, defaults
    filled in (a number or bool as a Python constant, weakly typed as in a Python call)."""
    try:
        bound = list(bind_arguments(fn, tuple(args), kwargs))
    except TypeError as e:
        raise UserError(str(e)) from None
    for k in range(len(args), len(bound)):
        p = fn.struct_params[k]
        if p in kwargs:
            continue
        a = bound[k]
        if isinstance(a, (bool, int, float)):
            bound[k] = Literal(a)
        elif hasattr(a, "dtype"):        # (a NumPy scalar: typed)
            bound[k] = S.as_scalar(Literal(a.item()), as_scalar_type(a.dtype))
        else:
            raise UserError(f"{fn.__name__}(): the default {a!r} of parameter {p!r} cannot be "
                            "passed in compiled code (it passes numbers, arrays, vectors and "
                            "structs): give the argument")
    return bound


def launch_kernel(gen: CodeGenerator, k: Kernel, args: list, kwargs: dict) -> None:
    """A launch of `k` inside an @adjit.jit function."""
    gen.require_host(f"launching kernel {k.__name__}")
    kwargs = dict(kwargs)
    ndrange = kwargs.pop("ndrange", None)
    wgs = kwargs.pop("workgroupsize", None)
    if "device" in kwargs:
        raise UserError(f"launching kernel {k.__name__} with device= inside compiled code: "
                        "launches run where the function runs; call it with device='cuda' "
                        "to launch on the GPU")
    if kwargs:
        raise UserError(f"kernel launch got unexpected keyword(s) {sorted(kwargs)}")
    if ndrange is None:
        raise UserError(f"launching kernel {k.__name__} needs ndrange=")
    extents = ndrange_values(ndrange)
    wg_static = None
    if wgs is not None:
        items = wgs if isinstance(wgs, tuple) else (wgs,)
        if not all(isinstance(w, Literal) and isinstance(w.value, int) and w.value > 0
                   for w in items):
            raise UserError("workgroupsize= inside compiled code must be constant ints")
        wg_static = tuple(w.value for w in items)
    k, args = T.variant_call(k, args, f"kernel {k.__name__}")
    args = _struct_fields(k, args, f"kernel {k.__name__}")
    if len(args) != len(k.params):
        raise UserError(f"kernel {k.__name__} takes {len(k.params)} arguments, "
                        f"got {len(args)}")
    values = [_operand(a, ann, f"kernel {k.__name__}: argument {p!r}")
              for p, ann, a in zip(k.params, k.annotations, args)]
    symbol = gen.unit.kernel(k, [v.type for v in values], len(extents))
    # (a vector argument is its components: the kernel's parameters are those scalars)
    adj.launch(symbol, function_type(gen.unit, symbol),
               [x for v in values for x in V.flat_values(v)], extents, wg_static)


# Declarations called in compiled code: an @adjit.func or @adjit.jit function is called (and
# is a function of the unit, which a derivative differentiates), a kernel launched.
callables.register_type(Function, call_function,
                        define=lambda unit, fn, types: unit.function(fn, types))
callables.register_type(Kernel, launch_kernel)


def _struct_fields(target, args: list, what: str) -> list:
    """The arguments of a call in compiled code with each struct argument replaced by its
    leaf fields' values, as `target`'s parameters are (structs.py)."""
    if target.struct_layout is None:
        return args
    if len(args) != len(target.struct_layout):
        raise UserError(f"{what} takes {len(target.struct_layout)} arguments, got {len(args)}")
    out = []
    for p, st, a in zip(target.struct_params, target.struct_layout, args):
        if st is None:
            out.append(a)
            continue
        if not (isinstance(a, StructValue) and a.type is st):
            raise UserError(f"{what}: argument {p!r} must be a {st.name} struct, got "
                            f"{S.describe(a)}")
        out.extend(SV.leaf_values(a, f"{what}: argument {p!r}"))
    return out


def _operand(a, ann, what: str, keep_vectors: bool = False):
    """A call argument as a typed value, converted to the parameter's annotation (an array
    of vectors passed to a device function stays one where `keep_vectors`)."""
    from . import arrays as A
    if isinstance(a, VecArray):
        if isinstance(ann, VecArrayType) and ann.vec != a.vec:
            raise UserError(f"{what} must be {ann!r}, got {S.describe(a)}")
        if keep_vectors and (ann is None or isinstance(ann, VecArrayType)):
            return a
        a = a.array
    if isinstance(a, Vec):
        if isinstance(ann, VecType):
            if ann.shape != a.type.shape:
                raise UserError(f"{what} must be {ann!r}, got {S.describe(a)}")
            return V.of_type(ann, a.items)
        if ann is not None:
            raise UserError(f"{what} must be {ann!r}, got {S.describe(a)}")
        return a
    if isinstance(a, ArrayExpr):
        a = A.materialize(a)
    if isinstance(a, Array):
        # (an annotation says nothing of which dimensions are 1, which a (1, n) array's type
        # knows: the callee is specialised for the array's type, units and all)
        if isinstance(ann, ScalarType) or (isinstance(ann, ArrayType) and
                                           ann.without_units() != a.type.without_units()):
            raise UserError(f"{what} must be {ann!r}, got {a.type!r}")
        return a
    if isinstance(a, (Scalar, Literal)):
        if isinstance(ann, (ArrayType, VecType, VecArrayType)):
            raise UserError(f"{what} must be {ann!r}, got a scalar")
        s = S.as_scalar(a, ann)
        return S.cast(s, ann) if ann is not None else s
    raise UserError(f"{what}: cannot pass {S.describe(a)}")


def ndrange_values(ndrange) -> list[ir.Value]:
    if isinstance(ndrange, Shape):
        return list(ndrange.dims)
    items = ndrange if isinstance(ndrange, tuple) else (ndrange,)
    out = []
    for n in items:
        if isinstance(n, Shape):
            out.extend(n.dims)
        else:
            out.append(S.to_index(n))
    return out


def function_type(unit: CompileUnit, symbol: str) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(unit.symbol(symbol).attributes["function_type"]).value)
