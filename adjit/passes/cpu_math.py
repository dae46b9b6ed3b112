"""`adj-expand-log1p-expm1`: math.log1p and math.expm1 computed accurately on the CPU.

`convert-math-to-llvm` lowers math.log1p to log(1 + x) and math.expm1 to exp(x) - 1 (LLVM
has no intrinsic for either), which cancel near 0, the inputs these functions exist for:
log1p(1e-17) was 0 in f64, log1p(1e-6) 4.6% off in f32, a stable softplus
log1p(exp(-50)) 0. This pass replaces both first. Where glibc's libmvec has them (x86-64,
glibc 2.35+), by calls of libm's log1p/expm1, which runtime/vector_math.py offers to LLVM's
vectoriser with libmvec's variants (its own table has neither): on a 1024x256 float32 array,
one core, paired: expm1 0.214 -> 0.089 ms, log1p 0.217 -> 0.117 ms, in float64 0.62 -> 0.23
and 0.51 -> 0.26 ms (libmvec: 1-2 ulp). Elsewhere by the
GPU's arith expansions (math_approx.py, within 3 ulp), which any vectoriser vectorises,
where a libm call would stay scalar.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import platform

from mlir import ir
from mlir.dialects import func

from .math_approx import Emit, expm1, log1p
from .registry import AdjPass
from .walk import walk

_EXPANSIONS = {"math.log1p": log1p, "math.expm1": expm1}


def expand_log1p_expm1(root: ir.Operation) -> None:
    """Rewrites each scalar f32/f64 math.log1p and math.expm1 under `root` (a module) into
    libm calls or arith (the module docstring)."""
    found: list[ir.Operation] = []

    def collect(op: ir.Operation) -> ir.WalkResult:
        if (op.name in _EXPANSIONS
                and isinstance(op.results[0].type, (ir.F32Type, ir.F64Type))):
            found.append(op)
        return ir.WalkResult.ADVANCE

    walk(root, collect)
    if found and libmvec_has_log1p_expm1():
        _call_libm(root, found)
        return
    for op in found:
        with ir.InsertionPoint(op), op.location:
            value = _EXPANSIONS[op.name](Emit(op.results[0].type), op.operands[0])
        op.results[0].replace_all_uses_with(value)
        op.erase()


@functools.cache
def libmvec_has_log1p_expm1() -> bool:
    """Whether this machine's libmvec has log1p and expm1 (x86-64 glibc 2.35+): the runtime then
    builds modules with math calls by opt/llc with its variants (runtime/cpu_cache.py)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    path = ctypes.util.find_library("mvec")
    if path is None:
        return False
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return False
    return all(hasattr(lib, f"_ZGVbN{n}v_{name}") for n, name in
               ((4, "log1pf"), (4, "expm1f"), (2, "log1p"), (2, "expm1")))


def _call_libm(module: ir.Operation, ops: list[ir.Operation]) -> None:
    """Each of `ops` (math.log1p, math.expm1) as a call of libm's function of its type,
    declared in `module` as math-to-libm declares its calls (no memory effects: LLVM may
    vectorise them)."""
    declared = {ir.StringAttr(op.attributes["sym_name"]).value
                for op in module.regions[0].blocks[0].operations
                if op.operation.name == "func.func"}
    for op in ops:
        t = op.results[0].type
        name = op.name.removeprefix("math.") + ("f" if isinstance(t, ir.F32Type) else "")
        if name not in declared:
            with ir.InsertionPoint.at_block_begin(module.regions[0].blocks[0]), op.location:
                decl = func.FuncOp(name, ([t], [t]), visibility="private")
                decl.attributes["llvm.readnone"] = ir.UnitAttr.get()
            declared.add(name)
        with ir.InsertionPoint(op), op.location:
            call = func.CallOp([t], ir.FlatSymbolRefAttr.get(name), [op.operands[0]])
        op.results[0].replace_all_uses_with(call.result)
        op.erase()


class ExpandLog1pExpm1(AdjPass):
    """--adj-expand-log1p-expm1: expand_log1p_expm1 (the module docstring)."""
    name = "adj-expand-log1p-expm1"

    def apply(self, module: ir.Operation) -> None:
        expand_log1p_expm1(module)
