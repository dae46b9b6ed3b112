"""`adj-expand-log1p-expm1`: math.log1p and math.expm1 in arith on the CPU (math_approx.py).

`convert-math-to-llvm` lowers math.log1p to log(1 + x) and math.expm1 to exp(x) - 1 (LLVM
has no intrinsic for either), which cancel near 0, the inputs these functions exist for:
log1p(1e-17) was 0 in f64, log1p(1e-6) 4.6% off in f32, a stable softplus
log1p(exp(-50)) 0. This pass expands both first, with the GPU's expansions (within 3 ulp,
the same bits on both targets). Calls of libm's log1p/expm1 would be as accurate, but LLVM's
vectoriser leaves them scalar (its libmvec table has no entry for them: 10-20x slower on a
1024x256 array), while the expansion is plain arithmetic that it vectorises (within 2x of
the old, wrong, log(1 + x)).

float32 cbrt is computed as the float64 cbrt of the widened argument, rounded: libmvec's
float32 cbrt (2 ulp) made the derivative 1/(3 cbrt(x)^2) 8 ulp off, beyond docs/accuracy.md's
bound of 6, where the float64 call (vectorised too, 4 lanes) rounds to within 1 ulp.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, math

from .math_approx import _Emit, expm1, log1p
from .registry import AdjPass
from .walk import walk

_EXPANSIONS = {"math.log1p": log1p, "math.expm1": expm1}


def expand_log1p_expm1(root: ir.Operation) -> None:
    """Rewrites each scalar f32/f64 math.log1p and math.expm1 under `root` into arith, and
    each f32 math.cbrt into the f64 one (the module docstring)."""
    found: list[ir.Operation] = []
    widen: list[ir.Operation] = []

    def collect(op: ir.Operation) -> ir.WalkResult:
        if (op.name in _EXPANSIONS
                and isinstance(op.results[0].type, (ir.F32Type, ir.F64Type))):
            found.append(op)
        elif op.name == "math.cbrt" and isinstance(op.results[0].type, ir.F32Type):
            widen.append(op)
        return ir.WalkResult.ADVANCE

    walk(root, collect)
    for op in widen:
        with ir.InsertionPoint(op), op.location:
            value = arith.truncf(op.results[0].type,
                                 math.cbrt(arith.extf(ir.F64Type.get(), op.operands[0])))
        op.results[0].replace_all_uses_with(value)
        op.erase()
    for op in found:
        with ir.InsertionPoint(op), op.location:
            value = _EXPANSIONS[op.name](_Emit(op.results[0].type), op.operands[0])
        op.results[0].replace_all_uses_with(value)
        op.erase()


class ExpandLog1pExpm1(AdjPass):
    """--adj-expand-log1p-expm1: expand_log1p_expm1 (the module docstring)."""
    name = "adj-expand-log1p-expm1"

    def apply(self, module: ir.Operation) -> None:
        expand_log1p_expm1(module)
