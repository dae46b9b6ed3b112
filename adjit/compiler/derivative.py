"""Compiling derivatives, for the compile service (service.py; MLIR is imported here). One
module holding the primal function (or, for a kernel, a wrapper that launches it), an
`adj.autodiff` request op, the autodiff pass (which replaces the request by
generated functions, see passes/autodiff for their ABI), then entry functions Python calls;
compiled for the CPU, or, with device="cuda", as a host program whose launches (the
derivative kernels', and for a reverse launch the kernels that count its per-item tapes and
sum its per-item adjoints) run on the GPU: a kernel's launch is differentiated by the
autodiff pass's launch rule on either device.

Forward mode differentiates a function returning a float array as it does one returning a
scalar (the pass returns the result's shadow: its tangent). Reverse mode needs a scalar
result, so the vjp of an array-valued function differentiates a generated function instead:
the inner product of the result with a cotangent argument (`inner_product`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import arith, func

from ..core.activity import Activity
from ..core.derivative_abi import DerivativeABI, DerivativeEntries
from ..dialects import adj
from ..dialects.mlir_types import mlir_type
from ..lang import pytrees
from ..runtime import profiling
from ..lang.modes import Annotation, Mode, batch_width
from ..passes.kernel_abi import ndrange_bounds
from .unit import CompileUnit, function_type, host_program
from .vectors import flat_types
from ..core.errors import CompilationError
from ..lang.functions import Function, Kernel, debug_enabled
from .rule_compiler import FunctionRules
from ..core.types import BY_MLIR_NAME, ArrayType, i64

if TYPE_CHECKING:
    from ..runtime.host_program import HostProgram


def run_pass(unit: CompileUnit) -> None:
    """The autodiff pass over `unit`; what it refuses becomes an error at the user's line."""
    from ..dialects.adj import AdjError
    from ..passes.autodiff import run_autodiff
    try:
        with profiling.phase("autodiff pass"):
            run_autodiff(unit.module.operation, rule_provider=FunctionRules(unit))
    except AdjError as e:
        raise CompilationError.at_location(f"cannot differentiate this: {e}",
                                           str(e.op.location)) from None


def _generated(unit: CompileUnit, symbol: str) -> tuple[list, list]:
    """Input and result MLIR types of a function the autodiff pass generated."""
    ftype = function_type(unit, symbol)
    return list(ftype.inputs), list(ftype.results)


def _type_from_mlir(t: ir.Type):
    """adjit type of a generated function's tape value (memref or scalar)."""
    if isinstance(t, ir.MemRefType):
        return ArrayType(BY_MLIR_NAME[str(t.element_type)], t.rank)
    return BY_MLIR_NAME[str(t)]


def _as_python(from_mlir: list, declared: list) -> list:
    """The types of generated results, `from_mlir`, with the Python scalars among them: a
    result whose declared type (the primal's result, an Active argument's) is weak, a Python
    float or int (core/types.py), is weak too, so that Python gets a Python float back, as
    for the primal (a gradient with respect to a Python float is a Python float)."""
    if len(from_mlir) != len(declared):
        return from_mlir
    return [d if getattr(d, "weak", False) and d.strong == t else t
            for t, d in zip(from_mlir, declared)]


def _dtype(t):
    """The element type of an array type, or the scalar type itself."""
    return t.dtype if isinstance(t, ArrayType) else t


def _check_results(name: str, results: list, mode: Mode, pullback: bool,
                   layout: list | None = None, tree: bool = False) -> None:
    """Forward mode takes one float scalar or array result (or none), or the scalars of
    struct and vector results (`layout`: struct_values.regroup's), or the leaves of a tree
    result (`tree`: a tuple, dict or NamedTuple of scalars and arrays); reverse mode a
    scalar, or an array, struct and vector results or a tree through their inner product
    with a cotangent (`pullback`)."""
    if tree and layout is None:
        if not any(_dtype(t).is_float for t in results):
            raise TypeError(f"{name}: the tuple or tree it returns holds no float result to "
                            "differentiate")
        if mode.reverse and not pullback:
            raise TypeError(f"{name}: reverse mode differentiates functions that return one "
                            "float scalar; for a function returning a tuple or tree, "
                            "adjit.vjp gives the vector-Jacobian product")
        return
    if layout is not None and not any(isinstance(t, ArrayType) for t in results):
        if mode.reverse and not pullback and len(results) > 1:
            raise TypeError(f"{name}: reverse mode differentiates functions that return one "
                            "float scalar; for a function returning a struct or vector, "
                            "adjit.vjp gives the vector-Jacobian product")
        if pullback and not any(t.is_float for t in results):
            raise TypeError(f"{name}: a pullback needs a float result")
        return
    if len(results) > 1:
        raise TypeError(f"{name}: autodiff differentiates functions that return one float "
                        "scalar, one float array, one struct or vector of scalars, or nothing, "
                        "not a tuple")
    array = bool(results) and isinstance(results[0], ArrayType)
    if pullback and not (array and results[0].dtype.is_float):
        raise TypeError(f"{name}: a pullback of an array needs a function returning one float "
                        "array")
    if mode.reverse and array and not pullback:
        raise TypeError(f"{name}: reverse mode differentiates functions that return one float "
                        "scalar or nothing; for a function returning an array, adjit.vjp "
                        "gives the vector-Jacobian product")


def inner_product(unit: CompileUnit, fn_symbol: str, types: list,
                   result: ArrayType) -> tuple[str, list]:
    """A function `s(args..., ct) = sum(fn(args...) * ct)` and its result types. Reverse mode
    of `s` with `ct` Const gives the vjp of array-valued `fn` for the cotangent `ct`, with
    the pass as it is (its reverse mode needs a scalar result): the call to `fn` is inlined
    by the pass, and the sum is adjit.sum's (f32 accumulated in f64)."""
    from .arrays import elementwise, reduce
    from .scalar_ops import binary
    from .values import Array
    name = f"__adjit_inner_{fn_symbol}"
    with ir.InsertionPoint(unit.module.body):
        fn = func.FuncOp(name, ([mlir_type(t) for t in types] + [mlir_type(result)],
                                [mlir_type(result.dtype)]), visibility="private")
        block = fn.add_entry_block()
        with ir.InsertionPoint(block):
            *args, ct = block.arguments
            y = func.CallOp([mlir_type(result)], ir.FlatSymbolRefAttr.get(fn_symbol), args).result
            product = elementwise(lambda a, b: binary("*", a, b),
                                  [Array(y, result), Array(ct, result)])
            func.ReturnOp([reduce("sum", product).value])
    return name, [result.dtype]


def results_inner_product(unit: CompileUnit, fn_symbol: str, types: list,
                          results: list) -> tuple[str, list]:
    """A function `s(args..., ct_1, ..., ct_m) = sum_k <r_k, ct_k>` over the float results
    r_k of `fn` (a struct's or vector's scalar leaves, a tree's scalars and arrays; an
    array's term the sum of its elementwise product with its cotangent) and its result
    type: reverse mode of it with the ct_k Const gives the vjp of `fn` for that cotangent,
    as `inner_product` does for one array result."""
    from .arrays import elementwise, reduce
    from .scalar_ops import binary, cast
    from .values import Array, Scalar
    floats = [t for t in results if _dtype(t).is_float]
    acc_t = _dtype(floats[0])
    for t in floats[1:]:
        acc_t = _dtype(t) if _dtype(t).bits > acc_t.bits else acc_t

    def term(y, t, ct):
        if isinstance(t, ArrayType):
            product = elementwise(lambda a, b: binary("*", a, b), [Array(y, t), Array(ct, t)])
            return cast(reduce("sum", product), acc_t)
        return cast(binary("*", Scalar(y, t), Scalar(ct, t)), acc_t)
    name = f"__adjit_inner_results_{fn_symbol}"
    with ir.InsertionPoint(unit.module.body):
        fn = func.FuncOp(name, ([mlir_type(t) for t in types] + [mlir_type(t) for t in floats],
                                [mlir_type(acc_t)]), visibility="private")
        block = fn.add_entry_block()
        with ir.InsertionPoint(block):
            args, cts = block.arguments[:len(types)], block.arguments[len(types):]
            ys = func.CallOp([mlir_type(t) for t in results], ir.FlatSymbolRefAttr.get(fn_symbol),
                             list(args)).results
            total = None
            for y, t, ct in zip([y for y, t in zip(ys, results) if _dtype(t).is_float],
                                floats, cts):
                part = term(y, t, ct)
                total = part if total is None else binary("+", total, part)
            func.ReturnOp([total.value])
    return name, [acc_t]


class Derivative(DerivativeEntries):
    """The derivative of one (function, mode, activities, types) specialisation: the
    module with its entry functions (`entries`: name -> (argument types, result types)),
    then, once compiled for the CPU (`compile_cpu`), a callable per entry (`calls`), which
    DerivativeEntries' methods call by the layout `abi`."""

    def __init__(self, target: Function | Kernel, mode: Mode, anns: list[Annotation],
                 types: list, ndrange: tuple | None, wgs, pullback: bool = False):
        """`pullback`: differentiate, in reverse mode, the inner product of the function's
        array result with a cotangent array that every entry takes after the arguments (the
        vjp of an array-valued function; see `inner_product`)."""
        self.mode = mode
        unit = CompileUnit(debug_enabled())
        activity = [a.activity for a in anns]
        with unit.ctx, ir.Location.unknown():
            fn_symbol, results, self.tuple_result = self.primal_function(unit, target, types, ndrange, wgs)
            # A launch's derivative runs the augmented kernel over the same items: the
            # primal's index facts (adj.ndrange_bounds) guard it too (autodiff.py checks).
            self.ndrange_bounds = tuple(ndrange_bounds(unit.symbol(
                unit.kernel(target, types, len(ndrange))))) if isinstance(target, Kernel) else ()
            # (struct and vector results: their scalars, gathered by this layout)
            self.layout = unit.vector_results.get(fn_symbol)
            # (a tree result, or several results `return a, b`: its leaves, which the API
            # gathers again; lang/pytrees.py)
            self.result_tree = unit.tree_results.get(fn_symbol)
            if (self.result_tree is None and self.tuple_result and len(results) > 1
                    and self.layout is None):
                self.result_tree = pytrees.TreeDef(
                    "tuple", None, (pytrees.LEAF,) * len(results))
            _check_results(target.__name__, results, mode, pullback, self.layout,
                           self.result_tree is not None)
            cotangent = results if pullback else []
            if pullback and (self.layout is not None or self.result_tree is not None):
                cotangent = [t for t in results if _dtype(t).is_float]
                fn_symbol, results = results_inner_product(unit, fn_symbol,
                                                           flat_types(types), results)
                activity = activity + [Activity.CONST] * len(cotangent)
                self.layout, self.result_tree = None, None
                self.cotangents = len(cotangent)
            elif pullback:
                fn_symbol, results = inner_product(unit, fn_symbol, types, results[0])
                activity = activity + [Activity.CONST]
            self.results = results
            ret = Activity.ACTIVE if mode.reverse else Activity.DUP
            ret = ret if results and _dtype(results[0]).is_float or (
                self.result_tree is not None) else Activity.CONST
            if isinstance(target, Kernel):
                activity = activity + [Activity.CONST] * len(ndrange)
            self.abi = DerivativeABI(mode.kind, tuple(activity), ret, mode.with_primal,
                                     1 if mode.reverse else batch_width(anns))
            # `overwritten`: the caller may change the arrays between the augmented and
            # the reverse call (split mode from Python: the user's code runs in between),
            # so the pass must tape what it would otherwise reload (Enzyme's default).
            with ir.InsertionPoint(unit.module.body):
                adj.autodiff("d", fn_symbol, self.abi,
                             overwritten=[True] * len(activity) if mode.split else ())
            run_pass(unit)
            # the generated functions' parameters (core/derivative_abi.py), then the extents
            flat_t = self.abi.inputs(types) + [i64] * len(ndrange or ()) + cotangent
            if mode.reverse:
                self._reverse_entries(unit, flat_t, types)
            else:
                self._forward_entry(unit, flat_t)
            self.written = self._written(unit)
            self.adj_text = str(unit.module)
        self.name = target.__name__
        self.unit = unit

    def compile_cpu(self) -> Derivative:
        from .engine import compile_module
        self.module = compile_module(self.unit.module)
        # `written` here too: an entry called directly refuses read-only arrays it writes.
        # (An ExecutionEngine generates its code at the first lookup of an entry: here.)
        with profiling.phase("LLVM"):
            self.calls = {name: self.module.function(name, ins, outs, self.written[name],
                                                     f"{self.name} ({name})")
                          for name, (ins, outs) in self.entries.items()}
        return self

    def host_program(self, name: str, chip: str) -> tuple[str, HostProgram]:
        """The module compiled for device="cuda" (compiler.host_program); `meta` records
        what autodiff needs to call it: the result types, the layout and, for a
        kernel's launch, the ndrange facts it checks before the call allocates any tape."""
        from ..core.types import type_code
        meta = {"results": [type_code(t) for t in self.results],
                "abi": self.abi.to_record(),
                "ndrange_bounds": [list(b) for b in self.ndrange_bounds],
                "tree": None if self.result_tree is None else pytrees.to_record(self.result_tree)}
        with self.unit.ctx:
            # host_program analyses the entries as _written does (the same written sets).
            return host_program(self.unit, name, self.entries, meta, chip)

    def _written(self, unit: CompileUnit) -> dict[str, frozenset]:
        """The array arguments each entry may write (primals the function writes, shadows
        and tangents the derivative writes): autodiff refuses read-only arrays there, and
        arrays overlapping them, before calling (autodiff_checks.py). The analysis of the
        entries themselves: the tape arrays d_aug allocates and returns are no alias of the
        arguments (passes/written.py, CallAliasClasses)."""
        from ..passes.written import written_arguments
        return {entry: frozenset(written_arguments(unit.module, entry))
                for entry in self.entries}

    @staticmethod
    def primal_function(unit: CompileUnit, target, types, ndrange, wgs):
        if isinstance(target, Function):
            return unit.function(target, types)
        # A kernel is differentiated through a function that launches it: the autodiff
        # pass's launch rule makes the forward, augmented and reverse kernels.
        symbol = unit.kernel(target, types, len(ndrange))
        ktype = function_type(unit, symbol)
        wrapper = f"launch_{symbol}"
        with ir.InsertionPoint(unit.module.body):
            params = [mlir_type(t) for t in types] + [mlir_type(i64)] * len(ndrange)
            fn = func.FuncOp(wrapper, (params, []), visibility="private")
            block = fn.add_entry_block()
            with ir.InsertionPoint(block):
                n = len(types)
                extents = [arith.index_cast(ir.IndexType.get(), a)
                           for a in block.arguments[n:]]
                adj.launch(symbol, ktype, list(block.arguments[:n]), extents, wgs)
                func.ReturnOp([])
        return wrapper, [], False

    def _forward_entry(self, unit: CompileUnit, flat_t: list) -> None:
        ins, outs = _generated(unit, "d")
        declared = self.abi.forward_results(self.results, lambda t: _dtype(t).is_float)
        out_types = _as_python([_type_from_mlir(t) for t in outs], declared)
        unit.entry(self.FORWARD, flat_t, out_types, lambda args: list(func.CallOp(
            outs, ir.FlatSymbolRefAttr.get("d"), args).results))
        self.entries = {self.FORWARD: (flat_t, out_types)}

    def _reverse_entries(self, unit: CompileUnit, flat_t: list, types) -> None:
        _, aug_outs = _generated(unit, "d_aug")
        _, rev_outs = _generated(unit, "d_rev")
        primal, tape = self.abi.split_results(aug_outs, len(self.results))
        primal_t, tape_t = self.results[:len(primal)], [_type_from_mlir(t) for t in tape]
        grads_t = _as_python([_type_from_mlir(t) for t in rev_outs], self.abi.adjoints(types))
        dret_t = self.abi.dret(self.results, lambda t: _dtype(t).is_float)

        def combined(args):
            # Augmented forward then reverse, in one call: the tape never leaves the machine.
            n = len(flat_t)
            aug = func.CallOp(aug_outs, ir.FlatSymbolRefAttr.get("d_aug"), args[:n])
            primal, tape = self.abi.split_results(list(aug.results), len(self.results))
            rev = func.CallOp(rev_outs, ir.FlatSymbolRefAttr.get("d_rev"),
                              args[:n] + args[n:] + tape)
            return primal + list(rev.results)

        self.entries = {self.COMBINED: (flat_t + dret_t, primal_t + grads_t),
                        self.AUGMENTED: (flat_t, primal_t + tape_t),
                        self.REVERSE: (flat_t + dret_t + tape_t, grads_t)}
        unit.entry(self.COMBINED, *self.entries[self.COMBINED], combined)
        unit.entry(self.AUGMENTED, *self.entries[self.AUGMENTED], lambda args: list(
            func.CallOp(aug_outs, ir.FlatSymbolRefAttr.get("d_aug"), args).results))
        unit.entry(self.REVERSE, *self.entries[self.REVERSE], lambda args: list(func.CallOp(
            rev_outs, ir.FlatSymbolRefAttr.get("d_rev"), args).results))
