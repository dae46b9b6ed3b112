"""`@adjit.kernel`, `@adjit.func` and `@adjit.jit`: specialisation per argument types,
compilation of a module per specialisation, and the Python call path.

A call computes the argument types (the specialisation key), finds or builds the compiled
entry point for them, and calls it. Building one: a `CompileUnit` (one MLIR module) gets the
called function and, recursively, everything it calls or launches, then an entry function
that Python calls through the runtime.
"""
from __future__ import annotations

import inspect
import os
from typing import Callable, Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, func

from ..dialects import adj, make_context
from . import scalar_ops as S
from .codegen import CodeGenerator, parse_source
from .errors import CompilationError, UserError
from .types import ArrayType, ScalarType, as_scalar_type, i64, index, type_of_value
from .values import Array, ArrayExpr, Literal, Scalar, Shape

_CONTEXT: ir.Context | None = None


def context() -> ir.Context:
    """The one MLIR context adjit builds IR in (a context costs ~7 ms to make)."""
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = make_context()
    return _CONTEXT


def debug_enabled() -> bool:
    return os.environ.get("ADJIT_DEBUG", "") not in ("", "0")


def _mangle(name: str, types: Sequence) -> str:
    parts = []
    for t in types:
        parts.append(f"a{t.ndim}{t.dtype.name}" if isinstance(t, ArrayType) else t.name)
    return f"{name}__{'_'.join(parts)}" if parts else name


class CompileUnit:
    """One MLIR module under construction, with the functions already compiled into it."""

    def __init__(self, debug: bool):
        self.debug = debug
        self.ctx = context()
        with self.ctx, ir.Location.unknown():
            self.module = ir.Module.create()
        self.compiled: dict[tuple, tuple[str, list, bool]] = {}
        self._active: set[tuple] = set()

    def add(self, gen: CodeGenerator) -> func.FuncOp:
        with ir.InsertionPoint(self.module.body):
            return gen.compile()

    def function(self, fn: "Function", arg_types: Sequence) -> tuple[str, list, bool]:
        """(symbol, result types, whether the result is a tuple) of `fn` for `arg_types`."""
        key = ("func", id(fn), tuple(arg_types))
        if key in self.compiled:
            return self.compiled[key]
        if key in self._active:
            raise UserError(f"{fn.__name__} calls itself: recursion is not supported")
        self._active.add(key)
        symbol = _mangle(fn.__name__, arg_types)
        gen = CodeGenerator(self, fn.pyfn, fn.source, fn.kind, arg_types, symbol,
                            debug=self.debug)
        op = self.add(gen)
        op.operation.attributes[adj.FUNC_ATTR] = ir.UnitAttr.get()
        self._active.discard(key)
        out = (symbol, gen.result_types or [], getattr(gen, "tuple_result", False))
        self.compiled[key] = out
        return out

    def kernel(self, k: "Kernel", arg_types: Sequence, ndim: int) -> str:
        key = ("kernel", id(k), tuple(arg_types), ndim)
        if key in self.compiled:
            return self.compiled[key][0]
        symbol = _mangle(k.__name__, arg_types) + f"__{ndim}d"
        gen = CodeGenerator(self, k.pyfn, k.source, "kernel", arg_types, symbol, ndim=ndim,
                            debug=self.debug)
        op = self.add(gen)
        op.operation.attributes[adj.KERNEL_ATTR] = ir.UnitAttr.get()
        op.operation.attributes[adj.NDIM_ATTR] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(64), ndim)
        self.compiled[key] = (symbol, [], False)
        return symbol

    def entry(self, name: str, inputs: list, results: list, body: Callable) -> None:
        """A public function Python calls: `body(args)` emits its code, returns values."""
        with self.ctx, ir.Location.unknown(), ir.InsertionPoint(self.module.body):
            fn = func.FuncOp(name, ([t.mlir() for t in inputs], [t.mlir() for t in results]))
            fn.operation.attributes[adj.ENTRY_ATTR] = ir.UnitAttr.get()
            fn.operation.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
            block = fn.add_entry_block()
            with ir.InsertionPoint(block):
                func.ReturnOp(body(list(block.arguments)))


def annotations_of(pyfn: Callable) -> list:
    """Per parameter: an adjit type from its annotation, or None."""
    try:   # string annotations (`from __future__ import annotations`) are evaluated
        sig = inspect.signature(pyfn, eval_str=True)
    except Exception as e:
        raise TypeError(f"{pyfn.__qualname__}: cannot evaluate its annotations: {e}") from None
    out = []
    for p in sig.parameters.values():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            raise CompilationError(f"{pyfn.__qualname__}: parameter {p.name!r}: adjit takes "
                                   "plain positional parameters only")
        ann = p.annotation
        if ann is inspect.Parameter.empty:
            out.append(None)
        elif isinstance(ann, (ScalarType, ArrayType)):
            out.append(ann)
        else:
            try:
                out.append(as_scalar_type(ann))
            except TypeError:
                raise TypeError(f"{pyfn.__qualname__}: parameter {p.name!r} has annotation "
                                f"{ann!r}, which is not an adjit type (adjit.f32, "
                                "adjit.Array[adjit.f32, 2], float, int, ...)") from None
    return out


def specialise(name: str, params: list[str], anns: list, args: Sequence) -> tuple[list, list]:
    """Argument types and converted argument values, checked against annotations."""
    if len(args) != len(params):
        raise TypeError(f"{name}() takes {len(params)} arguments ({', '.join(params)}), "
                        f"got {len(args)}")
    types, values = [], []
    for p, ann, a in zip(params, anns, args):
        try:
            t = type_of_value(a)
        except TypeError as e:
            raise TypeError(f"{name}(): argument {p!r}: {e}") from None
        if isinstance(t, ArrayType):
            if isinstance(ann, ScalarType):
                raise TypeError(f"{name}(): argument {p!r} is annotated {ann!r} but got an array")
            if isinstance(ann, ArrayType) and ann != t:
                raise TypeError(f"{name}(): argument {p!r} must be {ann!r}, got an array of "
                                f"dtype {a.dtype} with ndim {a.ndim}")
            if not a.flags.c_contiguous:
                raise ValueError(f"{name}(): argument {p!r} is a non-contiguous array view; "
                                 "adjit takes C-contiguous arrays (use np.ascontiguousarray, "
                                 "which copies)")
        elif ann is not None:
            if isinstance(ann, ArrayType):
                raise TypeError(f"{name}(): argument {p!r} must be {ann!r}, got {type(a).__name__}")
            t = ann
            a = ann.np_dtype.type(a)
        types.append(t)
        values.append(a)
    return types, values


class _Compiled:
    """A compiled specialisation: the module text at each stage and the callable."""

    def __init__(self, unit: CompileUnit, entry: str, arg_types: list, result_types: list,
                 tuple_result: bool):
        from ..runtime.engine import compile_module
        self.adj_text = str(unit.module)
        if os.environ.get("ADJIT_DUMP_IR"):
            print(f"// ----- adjit: {entry} (adj) -----\n{self.adj_text}")
        with unit.ctx, ir.Location.unknown():
            self.module = compile_module(unit.module)
        call = self.module.function(entry, arg_types, result_types)
        if tuple_result and len(result_types) == 1:   # `return (x,)` stays a tuple
            self.call = lambda *args: (call(*args),)
        else:
            self.call = call


class Lowered:
    """What `f.lower(...)` returns: the IR of each stage, as text."""

    def __init__(self, adj_text: str, llvm_text: Callable[[], str],
                 ptx_text: Callable[[], str] | None = None):
        self._adj, self._llvm, self._ptx = adj_text, llvm_text, ptx_text

    def adj(self) -> str:
        return self._adj

    def llvm(self) -> str:
        return self._llvm()

    def ptx(self) -> str:
        if self._ptx is None:
            raise ValueError("PTX exists for device='cuda' only: lower(..., device='cuda')")
        return self._ptx()


class Function:
    """`@adjit.func` (a device function, callable from kernels) and `@adjit.jit` (a host
    function: arrays, launches). Both can be called from Python."""

    def __init__(self, pyfn: Callable, kind: str):
        self.pyfn, self.kind = pyfn, kind
        self.__name__ = pyfn.__name__
        self.__doc__ = pyfn.__doc__
        self.__wrapped__ = pyfn
        self.source = parse_source(pyfn)
        self.params = list(inspect.signature(pyfn).parameters)
        self.annotations = annotations_of(pyfn)
        self._cache: dict[tuple, _Compiled] = {}
        self.rules = {}    # custom derivative rules (adjit.rules), by kind

    def __repr__(self) -> str:
        return f"<adjit.{self.kind} {self.__name__}>"

    def __call__(self, *args):
        types, values = specialise(self.__name__, self.params, self.annotations, args)
        key = (tuple(types), debug_enabled())
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._cache[key] = self._build(types, key[1])
        return compiled.call(*values)

    def _build(self, types: list, debug: bool) -> _Compiled:
        unit = CompileUnit(debug)
        with unit.ctx:
            symbol, results, is_tuple = unit.function(self, types)

            def body(args):
                call = func.CallOp([t.mlir() for t in results], ir.FlatSymbolRefAttr.get(symbol),
                                   args)
                return list(call.results)

            unit.entry("entry", types, results, body)
        return _Compiled(unit, "entry", types, results, is_tuple)

    def lower(self, *args) -> Lowered:
        types, _ = specialise(self.__name__, self.params, self.annotations, args)
        compiled = self._build(types, debug_enabled())
        return Lowered(compiled.adj_text, compiled.module.llvm_text)

    # Called by the code generator when compiled code calls this function.
    def _adjit_compile_call(self, gen: CodeGenerator, args: list, kwargs: dict):
        if kwargs:
            raise UserError(f"{self.__name__}() called with keyword arguments; adjit passes "
                            "arguments by position")
        if self.kind == "jit" and gen.kind != "jit":
            raise UserError(f"{self.__name__} is an @adjit.jit function: kernels and device "
                            "functions call @adjit.func functions only")
        if len(args) != len(self.params):
            raise UserError(f"{self.__name__}() takes {len(self.params)} arguments, "
                            f"got {len(args)}")
        values, types = [], []
        for p, ann, a in zip(self.params, self.annotations, args):
            v = _operand(a, ann, f"{self.__name__}(): argument {p!r}")
            values.append(v)
            types.append(v.type)
        symbol, results, is_tuple = gen.unit.function(self, types)
        call = func.CallOp([t.mlir() for t in results], ir.FlatSymbolRefAttr.get(symbol),
                           [v.value for v in values])
        outs = [Array(r, t) if isinstance(t, ArrayType) else Scalar(r, t)
                for r, t in zip(call.results, results)]
        if not results:
            return None
        return tuple(outs) if is_tuple or len(outs) > 1 else outs[0]


def _operand(a, ann, what: str):
    """A call argument as a typed value, converted to the parameter's annotation."""
    from . import arrays as A
    if isinstance(a, ArrayExpr):
        a = A.materialize(a)
    if isinstance(a, Array):
        if isinstance(ann, ScalarType) or (isinstance(ann, ArrayType) and ann != a.type):
            raise UserError(f"{what} must be {ann!r}, got {a.type!r}")
        return a
    if isinstance(a, (Scalar, Literal)):
        if isinstance(ann, ArrayType):
            raise UserError(f"{what} must be {ann!r}, got a scalar")
        s = S.as_scalar(a, ann)
        return S.cast(s, ann) if ann is not None else s
    raise UserError(f"{what}: cannot pass {S.describe(a)}")


def _ndrange_tuple(ndrange, name: str) -> tuple[int, ...]:
    if ndrange is None:
        raise TypeError(f"launching kernel {name} needs ndrange= (an int or a tuple of ints)")
    items = tuple(ndrange) if isinstance(ndrange, (tuple, list)) else (ndrange,)
    if not items:
        raise ValueError(f"kernel {name}: ndrange must have at least one dimension")
    out = []
    for n in items:
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
            raise TypeError(f"kernel {name}: ndrange entries must be ints, got {n!r}")
        if n < 0:
            raise ValueError(f"kernel {name}: ndrange entries must be >= 0, got {n}")
        out.append(int(n))
    return tuple(out)


def _workgroup_tuple(wgs, ndim: int, name: str) -> tuple[int, ...] | None:
    if wgs is None:
        return None
    items = tuple(wgs) if isinstance(wgs, (tuple, list)) else (wgs,)
    if not all(isinstance(w, (int, np.integer)) and not isinstance(w, bool) and w > 0
               for w in items):
        raise ValueError(f"kernel {name}: workgroupsize must be positive ints, got {wgs!r}")
    if len(items) not in (1, ndim):
        raise ValueError(f"kernel {name}: workgroupsize has {len(items)} entries for a "
                         f"{ndim}-D ndrange")
    return tuple(int(w) for w in items)


class Kernel:
    """`@adjit.kernel`: a function run once per point of an index space."""

    def __init__(self, pyfn: Callable):
        self.pyfn = pyfn
        self.__name__ = pyfn.__name__
        self.__doc__ = pyfn.__doc__
        self.__wrapped__ = pyfn
        self.source = parse_source(pyfn)
        self.params = list(inspect.signature(pyfn).parameters)
        self.annotations = annotations_of(pyfn)
        self._cache: dict[tuple, object] = {}

    def __repr__(self) -> str:
        return f"<adjit.kernel {self.__name__}>"

    def _check_device(self, device: str) -> str:
        if device not in ("cpu", "cuda"):
            raise ValueError(f"kernel {self.__name__}: device must be 'cpu' or 'cuda', "
                             f"got {device!r}")
        return device

    def __call__(self, *args, ndrange=None, workgroupsize=None, device: str = "cpu"):
        nd = _ndrange_tuple(ndrange, self.__name__)
        wgs = _workgroup_tuple(workgroupsize, len(nd), self.__name__)
        device = self._check_device(device)
        if device == "cuda":
            from ..runtime.cuda_launch import launch_kernel
            return launch_kernel(self, args, nd, wgs)
        types, values = specialise(self.__name__, self.params, self.annotations, args)
        key = (tuple(types), len(nd), wgs, debug_enabled())
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._cache[key] = self._build(types, len(nd), wgs, key[-1])
        compiled.call(*values, *nd)

    def _build(self, types: list, ndim: int, wgs, debug: bool) -> _Compiled:
        unit = CompileUnit(debug)
        with unit.ctx:
            symbol = unit.kernel(self, types, ndim)
            ktype = _function_type(unit, symbol)

            def body(args):
                n = len(types)
                extents = [arith.index_cast(ir.IndexType.get(), a) for a in args[n:]]
                adj.launch(symbol, ktype, args[:n], extents, wgs)
                return []

            unit.entry("entry", types + [i64] * ndim, [], body)
        return _Compiled(unit, "entry", types + [i64] * ndim, [], False)

    def lower(self, *args, ndrange=None, workgroupsize=None, device: str = "cpu") -> Lowered:
        nd = _ndrange_tuple(ndrange, self.__name__)
        wgs = _workgroup_tuple(workgroupsize, len(nd), self.__name__)
        device = self._check_device(device)
        types, _ = specialise(self.__name__, self.params, self.annotations, args)
        unit = CompileUnit(debug_enabled())
        with unit.ctx:
            symbol = unit.kernel(self, types, len(nd))
        adj_text = str(unit.module)
        if device == "cuda":
            from ..passes.lower_gpu import kernel_to_ptx
            return Lowered(adj_text, lambda: _no_llvm(), lambda: kernel_to_ptx(
                ir.Module.parse(adj_text, unit.ctx), symbol).ptx)
        compiled = self._build(types, len(nd), wgs, debug_enabled())
        return Lowered(compiled.adj_text, compiled.module.llvm_text)

    # A launch inside an @adjit.jit function.
    def _adjit_compile_call(self, gen: CodeGenerator, args: list, kwargs: dict):
        gen.require_host(f"launching kernel {self.__name__}")
        kwargs = dict(kwargs)
        ndrange = kwargs.pop("ndrange", None)
        wgs = kwargs.pop("workgroupsize", None)
        device = kwargs.pop("device", None)
        if kwargs:
            raise UserError(f"kernel launch got unexpected keyword(s) {sorted(kwargs)}")
        if ndrange is None:
            raise UserError(f"launching kernel {self.__name__} needs ndrange=")
        extents = _ndrange_values(ndrange)
        wg_static = None
        if wgs is not None:
            items = wgs if isinstance(wgs, tuple) else (wgs,)
            if not all(isinstance(w, Literal) and isinstance(w.value, int) and w.value > 0
                       for w in items):
                raise UserError("workgroupsize= inside compiled code must be constant ints")
            wg_static = tuple(w.value for w in items)
        if len(args) != len(self.params):
            raise UserError(f"kernel {self.__name__} takes {len(self.params)} arguments, "
                            f"got {len(args)}")
        values = [_operand(a, ann, f"kernel {self.__name__}: argument {p!r}")
                  for p, ann, a in zip(self.params, self.annotations, args)]
        symbol = gen.unit.kernel(self, [v.type for v in values], len(extents))
        adj.launch(symbol, _function_type(gen.unit, symbol), [v.value for v in values],
                   extents, wg_static)
        return None


def _no_llvm() -> str:
    raise ValueError("lower(..., device='cuda') has .adj() and .ptx(); .llvm() is for the CPU")


def _ndrange_values(ndrange) -> list[ir.Value]:
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


def _function_type(unit: CompileUnit, symbol: str) -> ir.FunctionType:
    for op in unit.module.body.operations:
        if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value == symbol:
            return ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
    raise KeyError(symbol)


def kernel(pyfn: Callable) -> Kernel:
    return Kernel(pyfn)


def jit(pyfn: Callable) -> Function:
    return Function(pyfn, "jit")


def device_function(pyfn: Callable) -> Function:
    return Function(pyfn, "func")
