"""The two primitives that compiled code calls to communicate (entries of the compiler's
registry of callables, compiler/callables.py): each compiles to a call of the native runtime
(runtime/native/mpi.cpp) followed by a check of its status, so that a failed communication
raises a RuntimeError at the user's line when the compiled call returns. They have no
derivative of their own: the `@adjit.func` operations of _ops.py call them, and their
custom rules call them again on shadows and tangents.

An array goes to the runtime as a memref (MLIR's expanded descriptor: pointers, offset,
sizes, strides): a function without a body counts as writing every memref it is passed
(passes/written.py), which is what a halo exchange or a receive does, so the
autodiff pass keeps on the tape what it would otherwise read again after the write."""
from __future__ import annotations

from ..compiler import callables

# What each array operation is (mpi.cpp's ArrayOp and ScalarOp).
HALO, ALLREDUCE_SUM, BCAST, SEND, RECV, CHANNEL = range(6)
S_SUM, S_MAX, S_MIN, S_BCAST = range(4)
_ARRAY_NAMES = ("halo_exchange", "allreduce_array", "bcast_array", "send", "recv",
                "send/recv channel")
_SCALAR_NAMES = ("allreduce(op='sum')", "allreduce(op='max')", "allreduce(op='min')", "bcast")
_KINDS = {"f64": 0, "f32": 1, "i64": 2, "i32": 3}

# The exception class the checks name (adjit/mpi/__init__.py registers it with the runtime:
# a RuntimeError whose message adds adjit.mpi.last_error(), what the runtime found).
ERROR_NAME = "adjit.mpi.CommunicationError"
_FAILED = "adjit.mpi.{op} failed"


def _declare(gen, name: str, inputs: list, results: list) -> None:
    from mlir import ir
    from mlir.dialects import func
    module = gen.unit.module
    # (A scan, not ir.SymbolTable: while a function compiles, the module may hold two
    # functions of one name, the first pass of one that returns from inside a loop.)
    for op in module.body.operations:
        if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value == name:
            return
    with ir.InsertionPoint(module.body), ir.Location.unknown():
        func.FuncOp(name, ir.FunctionType.get(inputs, results), visibility="private")


def _i64(v):
    from ..core.types import i64
    from ..compiler import scalar_ops as S
    s = S.as_scalar(v, i64)
    if s.type.is_float or s.type.is_bool:
        raise _user_error(f"expected an integer, got {S.describe(v)}")
    return S.cast(s, i64).value if s.type != i64 else s.value


def _user_error(message: str):
    from ..core.errors import UserError
    return UserError(message)


def _literal(v, what: str) -> int:
    from ..compiler.values import Literal
    if not isinstance(v, Literal):
        raise _user_error(f"{what} must be a constant")
    return int(v.value)


def _check(status, op: str, located: bool = False) -> None:
    """A check that `status` is 0. Located at the current location (the user's call) when
    `located`, else at none: a check inside adjit.mpi's own code (a rule's) would name a line
    of adjit/mpi/, which tells the user nothing (the traceback has their call)."""
    from mlir import ir
    from mlir.dialects import arith
    from ..dialects import adj
    with ir.Location.current if located else ir.Location.unknown():
        zero = arith.constant(ir.IntegerType.get_signless(64), 0)
        adj.check(arith.cmpi(arith.CmpIPredicate.eq, status, zero), ERROR_NAME,
                  _FAILED.format(op=op))


def check_status(gen, op: str) -> None:
    """From a call's compile handler (adjit/mpi/__init__.py), in the caller's code at the
    user's line: raises if operation `op` (just called, unchecked) failed."""
    from mlir import ir
    from mlir.dialects import func
    i64 = ir.IntegerType.get_signless(64)
    _declare(gen, "adj_mpi_status", [], [i64])
    _check(func.CallOp([i64], ir.FlatSymbolRefAttr.get("adj_mpi_status"), []).result, op,
           located=True)


def array_call(array, opcode, comm, x, y, adjoint, checked=1):
    """From compiled code: runtime array operation `opcode` on `array` in place; its status
    checked unless `checked` is 0 (the primal bodies: their caller checks, at its line)."""
    raise RuntimeError("adjit.mpi's array primitive runs in compiled code only")


def _compile_array_call(gen, args: list, kwargs: dict):
    from mlir import ir
    from mlir.dialects import func

    from ..compiler.values import Array, ArrayExpr
    from ..dialects.mlir_types import mlir_type
    if kwargs or len(args) not in (6, 7):
        raise _user_error("array_call(array, opcode, comm, x, y, adjoint, checked=1)")
    array, opcode, comm, x, y, adjoint = args[:6]
    checked = _literal(args[6], "checked") if len(args) == 7 else 1
    code = _literal(opcode, "the operation")
    op = _ARRAY_NAMES[code]
    if isinstance(array, ArrayExpr) or not isinstance(array, Array):
        raise _user_error(f"adjit.mpi.{op} takes an array (a name bound to one), in which it "
                          "communicates in place")
    t = array.type
    if t.strided:
        raise _user_error(f"adjit.mpi.{op} takes a C-contiguous array (it communicates in "
                          "place; a strided view is refused rather than copied)")
    if t.dtype.name not in _KINDS:
        raise _user_error(f"adjit.mpi.{op} takes arrays of f64, f32, i64 or i32, not "
                          f"{t.dtype.name}")
    if not 1 <= t.ndim <= 4:
        raise _user_error(f"adjit.mpi.{op} takes arrays of 1 to 4 dimensions, not {t.ndim}")
    i64 = ir.IntegerType.get_signless(64)
    name = f"adj_mpi_array_{t.ndim}d"
    _declare(gen, name, [mlir_type(t)] + [i64] * 6, [i64])
    from mlir.dialects import arith
    status = func.CallOp([i64], ir.FlatSymbolRefAttr.get(name), [
        array.value, arith.constant(i64, code), _i64(comm),
        arith.constant(i64, _KINDS[t.dtype.name]), _i64(x), _i64(y),
        arith.constant(i64, _literal(adjoint, "adjoint"))]).result
    if code != CHANNEL and checked:   # (the channel's call does nothing: _ops.py says why)
        _check(status, op + (" (its adjoint)" if _literal(adjoint, "adjoint") else ""))
    return None


callables.register(array_call, _compile_array_call)


def scalar_call(x, opcode, comm, root, checked=1):
    """From compiled code: runtime scalar collective `opcode` of the float x (f64); its
    status checked unless `checked` is 0 (as array_call's)."""
    raise RuntimeError("adjit.mpi's scalar primitive runs in compiled code only")


def _compile_scalar_call(gen, args: list, kwargs: dict):
    from mlir import ir
    from mlir.dialects import func
    from ..core.types import f64
    from ..compiler import scalar_ops as S
    from ..compiler.values import Scalar
    if kwargs or len(args) not in (4, 5):
        raise _user_error("scalar_call(x, opcode, comm, root, checked=1)")
    x, opcode, comm, root = args[:4]
    checked = _literal(args[4], "checked") if len(args) == 5 else 1
    code = _literal(opcode, "the operation")
    v = S.as_scalar(x, f64)
    v = S.cast(v, f64) if v.type != f64 else v
    i64 = ir.IntegerType.get_signless(64)
    f64t = ir.F64Type.get()
    _declare(gen, "adj_mpi_scalar", [f64t, i64, i64, i64], [f64t])
    _declare(gen, "adj_mpi_status", [], [i64])
    from mlir.dialects import arith
    result = func.CallOp([f64t], ir.FlatSymbolRefAttr.get("adj_mpi_scalar"), [
        v.value, arith.constant(i64, code), _i64(comm), _i64(root)]).result
    if checked:
        status = func.CallOp([i64], ir.FlatSymbolRefAttr.get("adj_mpi_status"), []).result
        _check(status, _SCALAR_NAMES[code])
    return Scalar(result, f64)


callables.register(scalar_call, _compile_scalar_call)


def _i64_query(symbol: str, doc: str, arity: int):
    """A compiled-code primitive: the i64 that native `symbol` returns for `arity` i64
    arguments."""
    def primitive(*args):
        raise RuntimeError(f"adjit.mpi's {symbol} runs in compiled code only")

    def compile_call(gen, args: list, kwargs: dict):
        from mlir import ir
        from mlir.dialects import func
        from ..core.types import i64
        from ..compiler.values import Scalar
        if kwargs or len(args) != arity:
            raise _user_error(f"{symbol} takes {arity} arguments")
        t = ir.IntegerType.get_signless(64)
        _declare(gen, symbol, [t] * arity, [t])
        return Scalar(func.CallOp([t], ir.FlatSymbolRefAttr.get(symbol),
                                  [_i64(a) for a in args]).result, i64)

    primitive.__doc__ = doc
    callables.register(primitive, compile_call)
    return primitive


held_extreme = _i64_query("adj_mpi_held_extreme", "1 where this rank held the extreme of "
                          "the last max/min allreduce, else 0", 0)
comm_rank = _i64_query("adj_mpi_rank", "this rank's number in the communicator", 1)
