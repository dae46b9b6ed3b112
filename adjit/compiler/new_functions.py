"""Functions the compiler makes in a unit from IR it emits rather than from Python source
(a gradient as a function, an entry calling a derivative, fixed_point's iteration and step),
and the code's values as their operands. Below both derivative_calls.py and
fixed_point_calls.py, which make such functions."""
from __future__ import annotations

import re

from mlir import ir
from mlir.dialects import func

from ..core.errors import UserError
from ..core.types import ArrayType
from ..dialects.mlir_types import mlir_type
from . import scalar_ops as S
from .values import Array, Literal, Scalar, StructValue


def operand(v, what: str):
    """A frontend value as a scalar or an array (a literal becomes a scalar of its type)."""
    if isinstance(v, (bool, int, float)):    # (a constant of a compile-time call)
        v = Literal(v)
    if isinstance(v, Literal):
        return S.as_scalar(v)
    if isinstance(v, (Scalar, Array)):
        return v
    if isinstance(v, StructValue):
        raise UserError(f"{what} is a {v.type.name} struct: a derivative inside compiled code "
                        "takes scalars and arrays (pass the struct's fields, or call "
                        "adjit.autodiff from Python, which takes Duplicated(s, ds))")
    raise UserError(f"{what} is {S.describe(v)}; a derivative takes scalars and arrays")


def typed(v: ir.Value, t):
    """The SSA value `v` of adjit type `t` as the code's value."""
    return Array(v, t) if isinstance(t, ArrayType) else Scalar(v, t)


def _defined(unit, name: str) -> bool:
    try:
        unit.symbol(name)
        return True
    except KeyError:
        return False


def new_function(unit, prefix: str, name: str, types: list,
                 emit) -> tuple[ir.Operation, str, list]:
    """A private function of the unit (named `prefix` + `name`, made unique), whose body
    `emit(values)` compiles from its parameters and whose results are what `emit` returns
    (a list of the code's values: the result types are known once the body is built).
    Returns (the function, its symbol, its result types)."""
    symbol = prefix + re.sub(r"\W", "_", name)
    while _defined(unit, symbol):
        symbol += "_"
    with ir.InsertionPoint(unit.module.body), ir.Location.unknown():
        fn = func.FuncOp(symbol, ([mlir_type(t) for t in types], []), visibility="private")
        entry = fn.add_entry_block()
    with ir.InsertionPoint(entry), ir.Location.unknown():
        items = emit([typed(a, t) for a, t in zip(entry.arguments, types)])
        func.ReturnOp([x.value for x in items])
    results = [x.type for x in items]
    fn.operation.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
        [mlir_type(t) for t in types], [mlir_type(t) for t in results]))
    return fn.operation, symbol, results
