"""What a call of `adjit.fixed_point(step, x0, *params, tol=, max_iter=, must_converge=)`
compiles to (lang/fixed_point.py declares it and says what it computes): a function of the
unit, `@__adj_fixed_point_*`, marked `adj.fixed_point` (its step, tolerance, iteration limit
and `must_converge`), which iterates `step` until the largest change is at most `tol` or
`max_iter` steps ran (then, by default, a failed check: a RuntimeError at the user's call,
the checks located there); the autodiff pass gives its reverse derivative
(passes/autodiff/generate/fixed_point_reverse.py). For an array x it writes x* into an array
the call allocates (`F(x0, out, params...)`: the pass's reverse mode takes array results as
outputs written in place), through a step wrapper `W(x, out, params...)` that stores
step(x, params) into out; for a float it returns x* (`F(x0, params...) -> x*`, `W(x,
params...) -> step(x, params)`).
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from ..core.errors import UserError
from ..core.types import ArrayType, f64
from ..dialects import adj
from ..dialects.mlir_types import mlir_type
from ..lang.fixed_point import fixed_point
from ..passes.autodiff.generate.fixed_point_reverse import check_converged, not_converged
from . import arrays as A
from . import callables
from . import scalar_ops as S
from .new_functions import new_function, operand
from .values import Array, Literal, PyObj, Scalar


def _constant(v, name: str, kind: type):
    if kind is bool:
        ok = isinstance(v, Literal) and isinstance(v.value, bool)
    else:
        ok = (isinstance(v, Literal) and not isinstance(v.value, bool)
              and isinstance(v.value, (int, float) if kind is float else int))
    if not ok:
        what = ("a float (a constant or a value of the code)" if kind is float else
                f"a constant {kind.__name__} (known while compiling)")
        raise UserError(f"adjit.fixed_point: {name}= must be {what}")
    return kind(v.value)


def compile_fixed_point(gen, args: list, kwargs: dict):
    unknown = set(kwargs) - {"tol", "max_iter", "must_converge"}
    if unknown:
        raise UserError(f"adjit.fixed_point has no argument {sorted(unknown)[0]!r}")
    tol = kwargs.get("tol", Literal(1e-10))
    if isinstance(tol, Scalar) and not tol.type.is_bool:
        # A tolerance given at run time: F's last parameter (`tol_arg` in its attribute),
        # which the reverse pass's adjoint solve reads too. Never differentiated: it
        # decides when to stop, and x* does not depend on it (to tol).
        tol = S.cast(tol, f64)
    else:
        tol = _constant(tol, "tol", float)
    max_iter = _constant(kwargs["max_iter"], "max_iter", int) if "max_iter" in kwargs else 1000
    must_converge = (_constant(kwargs["must_converge"], "must_converge", bool)
                     if "must_converge" in kwargs else True)
    if isinstance(tol, float) and tol < 0 or max_iter < 1:
        raise UserError("adjit.fixed_point: tol >= 0 and max_iter >= 1")
    if len(args) < 2 or not isinstance(args[0], PyObj):
        raise UserError("adjit.fixed_point(step, x0, *params) takes a function, then the start")
    step = args[0].obj
    x0 = operand(args[1], "adjit.fixed_point: x0")
    params = [operand(a, f"adjit.fixed_point: parameter {k}") for k, a in enumerate(args[2:])]
    xt = x0.type
    is_array = isinstance(xt, ArrayType)
    if is_array and (xt.strided or xt.units):
        # A view (or an array with dimensions known to be 1) starts a copy of it: the step
        # returns a new contiguous array of the plain type, the iterate's.
        x0 = A.copy(x0)
        xt = x0.type
    if not (xt.dtype if is_array else xt).is_float:
        raise UserError(f"adjit.fixed_point: x0 is {S.describe(x0)}; the iterate is a float "
                        "scalar or array")
    unit = gen.unit
    types = [xt] + [p.type for p in params]
    symbol, results, _ = unit.function(step, types)
    if (not is_array and len(results) == 1 and results[0] != xt
            and mlir_type(results[0]) == mlir_type(xt)
            and getattr(results[0], "name", None) == xt.name):
        # A Python float start (0.0: weak, NEP 50) iterates as the step's f64: one type
        # at the machine level, the step's is the iterate's.
        xt = results[0]
        types[0] = xt
    if results != [xt]:
        raise UserError(f"adjit.fixed_point: {getattr(step, '__name__', step)} must return one "
                        f"value of x0's type ({xt!r}), the next iterate")

    def call_step(x, ps):
        return func.CallOp([mlir_type(xt)], ir.FlatSymbolRefAttr.get(symbol),
                           [x.value] + [p.value for p in ps]).results[0]

    # W: one step, stored into `out` for an array (the form the pass differentiates).
    if is_array:
        def wrapper(values):
            x, out, *ps = values
            memref.copy(call_step(x, ps), out.value)
            return []
        _, w_symbol, _ = new_function(unit, "__adj_fixed_point_step_", step.__name__,
                                       [xt, xt] + types[1:], wrapper)
    else:
        _, w_symbol, _ = new_function(unit, "__adj_fixed_point_step_", step.__name__, types,
                                       lambda values: [Scalar(call_step(values[0], values[1:]),
                                                              xt)])

    where = ir.Location.current        # the user's call: F's checks report it

    def iterate(values):
        """F: x <- step(x) until the largest change is at most tol or max_iter steps (then,
        with must_converge, a RuntimeError naming the residual)."""
        limit = tol
        if not isinstance(tol, float):
            values, limit = values[:-1], values[-1].value
            with where:
                adj.check(arith.cmpf(arith.CmpFPredicate.OGE, limit,
                                     arith.constant(ir.F64Type.get(), 0.0)),
                          "ValueError", "adjit.fixed_point: tol= must be >= 0 (and not NaN)")
        if is_array:
            x_start, out, *ps = values
            start = A.copy(x_start).value
        else:
            x_start, *ps = values
            start = x_start.value
        index, ftype = ir.IndexType.get(), mlir_type(xt.dtype) if is_array else mlir_type(xt)
        # The change before the first step: +inf (so the loop runs), 0 for an empty array
        # (nothing to iterate: x0 is its own fixed point).
        first = arith.constant(ftype, float("inf"))
        if is_array:
            empty = arith.cmpi(arith.CmpIPredicate.eq, A.numel(A.dims(x_start)), A.idx(0))
            first = arith.select(empty, arith.constant(ftype, 0.0), first)
        carried = [mlir_type(xt), index, ftype]
        loop = scf.WhileOp(carried, [start, A.idx(0), first])
        before = loop.before.blocks.append(*carried)
        after = loop.after.blocks.append(*carried)
        with ir.InsertionPoint(before):
            x, k, change = before.arguments
            scf.ConditionOp(not_converged(change, limit, k, max_iter), [x, k, change])
        with ir.InsertionPoint(after):
            x, k, _ = after.arguments
            new = call_step(Array(x, xt) if is_array else Scalar(x, xt), ps)
            if is_array:
                change = A.reduce("max", A.elementwise(
                    lambda a, b: S.absolute(S.binary("-", a, b)),
                    [Array(new, xt), Array(x, xt)]))
            else:
                change = S.absolute(S.binary("-", Scalar(new, xt), Scalar(x, xt)))
            scf.YieldOp([new, arith.addi(k, A.idx(1)), change.value])
        if must_converge:
            with where:
                check_converged(loop.results[2], limit, max_iter, "adjit.fixed_point")
        final = loop.results[0]
        if is_array:
            memref.copy(final, out.value)
            return []
        return [Scalar(final, xt)]

    f_types = ([xt, xt] if is_array else [xt]) + types[1:]
    i64 = ir.IntegerType.get_signless(64)
    if isinstance(tol, float):
        tol_entry = ("tol", ir.FloatAttr.get(ir.F64Type.get(), tol))
        tail = []
    else:
        tol_entry = ("tol_arg", ir.IntegerAttr.get(i64, len(f_types)))
        f_types, tail = f_types + [f64], [tol.value]
    fn, f_symbol, f_results = new_function(unit, "__adj_fixed_point_", step.__name__, f_types,
                                            iterate)
    fn.attributes[adj.FIXED_POINT_ATTR] = ir.DictAttr.get({
        "step": ir.FlatSymbolRefAttr.get(w_symbol), tol_entry[0]: tol_entry[1],
        "max_iter": ir.IntegerAttr.get(i64, max_iter),
        "must_converge": ir.BoolAttr.get(must_converge)})
    if is_array:
        out = A.alloc(xt.dtype, A.dims(x0))
        func.CallOp([], ir.FlatSymbolRefAttr.get(f_symbol),
                    [x0.value, out.value] + [p.value for p in params] + tail)
        return out
    return Scalar(func.CallOp([mlir_type(xt)], ir.FlatSymbolRefAttr.get(f_symbol),
                              [x0.value] + [p.value for p in params] + tail).results[0], xt)


callables.register(fixed_point, compile_fixed_point)
