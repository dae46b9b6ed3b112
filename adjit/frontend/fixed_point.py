"""`adjit.fixed_point(step, x0, *params, tol=, max_iter=)`: the fixed point x* = step(x*,
*params) of an iteration, differentiated implicitly (Christianson's two-phase method, JAX's
`custom_root`/`fixed_point` recipe): the reverse pass solves the adjoint fixed point
lambda = xbar + (d step / d x)^T lambda at x* by the same iteration, then gives the
parameters (d step / d params)^T lambda; memory does not grow with the iteration count (the
tape holds x* alone).

In compiled code a call becomes a function of the unit, `@__adj_fixed_point_*`, marked
`adj.fixed_point` (its step, tolerance and iteration limit), which iterates `step` until the
largest change is at most `tol` or `max_iter` steps ran; the autodiff pass gives its reverse
derivative (passes/autodiff/fixed_point.py). For an array x it writes x* into an array the
call allocates (`F(x0, out, params...)`: the pass's reverse mode takes array results as
outputs written in place), through a step wrapper `W(x, out, params...)` that stores
step(x, params) into out; for a float it returns x* (`F(x0, params...) -> x*`, `W(x,
params...) -> step(x, params)`). Primal and forward mode run the iteration as it is (forward
mode's tangent iteration converges with it).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..core.errors import UserError

if TYPE_CHECKING:
    from .codegen import CodeGenerator


def fixed_point(step, x0, *params, tol: float = 1e-10, max_iter: int = 1000):
    """x* = step(x*, *params), iterating x <- step(x, *params) from x0 until the largest
    change is at most `tol` (or `max_iter` steps ran). In @adjit.jit code, differentiable:
    the gradient solves the adjoint fixed point at x* (implicit differentiation), so it
    costs no memory per iteration. From Python, the iteration runs in Python (each step
    compiled)."""
    x = x0
    for _ in range(max_iter):
        new = step(x, *params)
        change = np.max(np.abs(np.asarray(new) - np.asarray(x))) if np.size(new) else 0.0
        x = new
        if change <= tol:
            break
    return x


def _constant(v, name: str, kind: type):
    from .values import Literal
    if not isinstance(v, Literal) or isinstance(v.value, bool) or \
            not isinstance(v.value, (int, float) if kind is float else int):
        raise UserError(f"adjit.fixed_point: {name}= must be a constant {kind.__name__} "
                        f"(known while compiling)")
    return kind(v.value)


def compile_fixed_point(gen: "CodeGenerator", args: list, kwargs: dict):
    from mlir import ir
    from mlir.dialects import arith, func, memref, scf

    from ..core.types import ArrayType
    from ..dialects import adj
    from . import arrays as A
    from . import scalar_ops as S
    from .derivative_calls import _new_function, _value
    from .values import Array, Literal, PyObj, Scalar

    unknown = set(kwargs) - {"tol", "max_iter"}
    if unknown:
        raise UserError(f"adjit.fixed_point has no argument {sorted(unknown)[0]!r}")
    tol = _constant(kwargs["tol"], "tol", float) if "tol" in kwargs else 1e-10
    max_iter = _constant(kwargs["max_iter"], "max_iter", int) if "max_iter" in kwargs else 1000
    if tol < 0 or max_iter < 1:
        raise UserError("adjit.fixed_point: tol >= 0 and max_iter >= 1")
    if len(args) < 2 or not isinstance(args[0], PyObj):
        raise UserError("adjit.fixed_point(step, x0, *params) takes a function, then the start")
    step = args[0].obj
    x0 = _value(args[1], "adjit.fixed_point: x0")
    params = [_value(a, f"adjit.fixed_point: parameter {k}") for k, a in enumerate(args[2:])]
    xt = x0.type
    is_array = isinstance(xt, ArrayType)
    if not (xt.dtype if is_array else xt).is_float:
        raise UserError(f"adjit.fixed_point: x0 is {S.describe(x0)}; the iterate is a float "
                        "scalar or array")
    unit = gen.unit
    types = [xt] + [p.type for p in params]
    symbol, results, _ = unit.function(step, types)
    if results != [xt]:
        raise UserError(f"adjit.fixed_point: {getattr(step, '__name__', step)} must return one "
                        f"value of x0's type ({xt!r}), the next iterate")

    def call_step(x, ps):
        return func.CallOp([xt.mlir()], ir.FlatSymbolRefAttr.get(symbol),
                           [x.value] + [p.value for p in ps]).results[0]

    # W: one step, stored into `out` for an array (the form the pass differentiates).
    if is_array:
        def wrapper(values):
            x, out, *ps = values
            memref.copy(call_step(x, ps), out.value)
            return []
        _, w_symbol, _ = _new_function(unit, "__adj_fixed_point_step_", step.__name__,
                                       [xt, xt] + types[1:], wrapper)
    else:
        _, w_symbol, _ = _new_function(unit, "__adj_fixed_point_step_", step.__name__, types,
                                       lambda values: [Scalar(call_step(values[0], values[1:]),
                                                              xt)])

    def iterate(values):
        """F: x <- step(x) until the largest change is at most tol or max_iter steps."""
        if is_array:
            x_start, out, *ps = values
            start = A.copy(x_start).value
        else:
            x_start, *ps = values
            start = x_start.value
        i1, index = ir.IntegerType.get_signless(1), ir.IndexType.get()
        carried = [xt.mlir(), index, i1]
        loop = scf.WhileOp(carried[:2], [start, A.idx(0), arith.constant(i1, 1)])
        before = loop.before.blocks.append(*carried)
        after = loop.after.blocks.append(*carried[:2])
        with ir.InsertionPoint(before):
            x, k, go = before.arguments
            more = arith.andi(go, arith.cmpi(arith.CmpIPredicate.slt, k, A.idx(max_iter)))
            scf.ConditionOp(more, [x, k])
        with ir.InsertionPoint(after):
            x, k = after.arguments
            new = call_step(Array(x, xt) if is_array else Scalar(x, xt), ps)
            if is_array:
                change = A.reduce("max", A.elementwise(
                    lambda a, b: S.absolute(S.binary("-", a, b)),
                    [Array(new, xt), Array(x, xt)]))
            else:
                change = S.absolute(S.binary("-", Scalar(new, xt), Scalar(x, xt)))
            limit = S.cast(S.as_scalar(Literal(tol)), change.type)
            go = arith.cmpf(arith.CmpFPredicate.UGT, change.value, limit.value)
            scf.YieldOp([new, arith.addi(k, A.idx(1)), go])
        final = loop.results[0]
        if is_array:
            memref.copy(final, out.value)
            return []
        return [Scalar(final, xt)]

    f_types = ([xt, xt] if is_array else [xt]) + types[1:]
    fn, f_symbol, f_results = _new_function(unit, "__adj_fixed_point_", step.__name__, f_types,
                                            iterate)
    fn.attributes[adj.FIXED_POINT_ATTR] = ir.DictAttr.get({
        "step": ir.FlatSymbolRefAttr.get(w_symbol),
        "tol": ir.FloatAttr.get(ir.F64Type.get(), tol),
        "max_iter": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), max_iter)})
    if is_array:
        out = A.alloc(xt.dtype, A.dims(x0))
        func.CallOp([], ir.FlatSymbolRefAttr.get(f_symbol),
                    [x0.value, out.value] + [p.value for p in params])
        return out
    return Scalar(func.CallOp([xt.mlir()], ir.FlatSymbolRefAttr.get(f_symbol),
                              [x0.value] + [p.value for p in params]).results[0], xt)


fixed_point._adjit_compile_call = compile_fixed_point
