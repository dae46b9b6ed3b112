"""The MLIR type each of adjit's types lowers to (core/types.py holds the types themselves,
MLIR-free: they are part of the API, which works without MLIR).

Arrays are C-contiguous `memref<?x...xT>` (dynamic sizes, identity layout) so that one
specialisation serves every shape of a given rank; a strided array (a NumPy view, Fortran
order, a slice in compiled code) is `memref<?x...xT, strided<[?, ...], offset: ?>>`, a
specialisation of its own, so that contiguous arrays keep the code LLVM vectorises best.
"""
from __future__ import annotations

from mlir import ir

from ..core.types import ArrayType, ScalarType


def mlir_type(t: ScalarType | ArrayType) -> ir.Type:
    """The MLIR type of `t` in the current context."""
    if isinstance(t, ArrayType):
        dyn = ir.ShapedType.get_dynamic_size()
        if not t.strided:
            return ir.MemRefType.get([dyn] * t.ndim, mlir_type(t.dtype))
        layout = ir.StridedLayoutAttr.get(dyn, [dyn] * t.ndim)
        return ir.MemRefType.get([dyn] * t.ndim, mlir_type(t.dtype), layout)
    if t.name == "f32":
        return ir.F32Type.get()
    if t.name == "f64":
        return ir.F64Type.get()
    if t.name == "index":
        return ir.IndexType.get()
    return ir.IntegerType.get_signless(t.bits)
