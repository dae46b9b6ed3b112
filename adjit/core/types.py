"""adjit's types: scalars, arrays and the promotion rules between them.

These are the frontend's view; `mlir()` gives the MLIR type each one lowers to (importing MLIR
only then: types are part of the API, which works without MLIR). Arrays are
C-contiguous `memref<?x...xT>` (dynamic sizes, identity layout) so that one specialisation
serves every shape of a given rank; a strided array (a NumPy view, Fortran order, a slice
in compiled code) is `memref<?x...xT, strided<[?, ...], offset: ?>>`, a specialisation of
its own, so that contiguous arrays keep the code LLVM vectorises best.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from mlir import ir


@dataclass(frozen=True)
class ScalarType:
    name: str            # 'f32', 'f64', 'i32', 'i64', 'bool', 'index'
    np_dtype: np.dtype | None

    @property
    def is_float(self) -> bool:
        return self.name in ("f32", "f64")

    @property
    def is_int(self) -> bool:
        return self.name in ("i32", "i64", "index")

    @property
    def is_bool(self) -> bool:
        return self.name == "bool"

    @property
    def bits(self) -> int:
        return {"f32": 32, "f64": 64, "i32": 32, "i64": 64, "bool": 1, "index": 64}[self.name]

    def mlir(self) -> ir.Type:
        from mlir import ir
        if self.name == "f32":
            return ir.F32Type.get()
        if self.name == "f64":
            return ir.F64Type.get()
        if self.name == "index":
            return ir.IndexType.get()
        return ir.IntegerType.get_signless(self.bits)

    def __repr__(self) -> str:
        return f"adjit.{'bool_' if self.name == 'bool' else self.name}"

    # Used as a cast in Python code run outside adjit (`adjit.f32(1.5)`), like NumPy's.
    def __call__(self, value):
        if self.np_dtype is None:
            return int(value)
        return self.np_dtype.type(value)


f32 = ScalarType("f32", np.dtype(np.float32))
f64 = ScalarType("f64", np.dtype(np.float64))
i32 = ScalarType("i32", np.dtype(np.int32))
i64 = ScalarType("i64", np.dtype(np.int64))
bool_ = ScalarType("bool", np.dtype(np.bool_))
index = ScalarType("index", None)   # loop counters and array indices, never user-visible

SCALARS = (f32, f64, i32, i64, bool_)
_BY_DTYPE = {t.np_dtype: t for t in SCALARS}


@dataclass(frozen=True)
class ArrayType:
    dtype: ScalarType
    ndim: int
    # Any strides and offset (in elements, negative ones too), not only C order.
    strided: bool = False

    def mlir(self) -> ir.MemRefType:
        from mlir import ir
        dyn = ir.ShapedType.get_dynamic_size()
        if not self.strided:
            return ir.MemRefType.get([dyn] * self.ndim, self.dtype.mlir())
        layout = ir.StridedLayoutAttr.get(dyn, [dyn] * self.ndim)
        return ir.MemRefType.get([dyn] * self.ndim, self.dtype.mlir(), layout)

    def contiguous(self) -> ArrayType:
        """The C-contiguous array type of this dtype and rank."""
        return ArrayType(self.dtype, self.ndim) if self.strided else self

    def strided_too(self) -> ArrayType:
        """The strided array type of this dtype and rank (it takes contiguous arrays too)."""
        return self if self.strided else ArrayType(self.dtype, self.ndim, True)

    def __repr__(self) -> str:
        return f"adjit.Array[{self.dtype!r}, {self.ndim}{', strided' if self.strided else ''}]"


class _ArrayAnnotation:
    """`adjit.Array[adjit.f32, 2]`: the annotation form of an array type."""

    def __getitem__(self, key) -> ArrayType:
        if not (isinstance(key, tuple) and len(key) == 2):
            raise TypeError("adjit.Array takes [dtype, ndim], e.g. adjit.Array[adjit.f32, 2]")
        dtype, ndim = key
        if not isinstance(ndim, int) or ndim < 0:
            raise TypeError(f"adjit.Array ndim must be a non-negative int, got {ndim!r}")
        return ArrayType(as_scalar_type(dtype), ndim)


Array = _ArrayAnnotation()


def as_scalar_type(obj) -> ScalarType:
    """adjit scalar type from an adjit type, a NumPy dtype or scalar type, or Python's
    float/int/bool; TypeError otherwise."""
    if isinstance(obj, ScalarType) and obj is not index:
        return obj
    if obj is float:
        return f64
    if obj is int:
        return i64
    if obj is bool:
        return bool_
    try:
        dt = np.dtype(obj)
    except TypeError:
        raise TypeError(f"{obj!r} is not a type adjit takes (f32, f64, i32, i64, bool_)") from None
    if dt not in _BY_DTYPE:
        raise TypeError(f"dtype {dt} is not supported by adjit (f32, f64, i32, i64, bool_)")
    return _BY_DTYPE[dt]


def promote(a: ScalarType, b: ScalarType) -> ScalarType:
    """NumPy's promotion between two typed scalars (bool < ints < floats; wider wins)."""
    if a == b:
        return a
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            return f64 if f64 in (a, b) else f32
        fl, other = (a, b) if a.is_float else (b, a)
        # NumPy: int32 with float32 gives float64; int64 with float32 gives float64.
        return fl if other.is_bool else f64
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if index in (a, b):
        return i64 if (a if b is index else b) == i64 else index
    return i64


@functools.cache
def _array_type(dtype: np.dtype, ndim: int, strided: bool = False) -> ArrayType:
    return ArrayType(as_scalar_type(dtype), ndim, strided)


def type_of_value(value, device: str = "cpu") -> ScalarType | ArrayType:
    """The adjit type of a Python argument (specialisation key), or TypeError. Arrays in GPU
    memory (`__cuda_array_interface__`) are arguments of `device="cuda"` launches only."""
    if isinstance(value, np.ndarray):
        return _array_type(value.dtype, value.ndim, not value.flags.c_contiguous)
    if getattr(type(value), "is_adjit_device_array", False) and device == "cuda":
        return _array_type(value.dtype, value.ndim)   # (its __cuda_array_interface__ is slower)
    interface = getattr(value, "__cuda_array_interface__", None)
    if interface is not None:
        if device != "cuda":
            raise TypeError(f"a {type(value).__name__} is in GPU memory: pass it to kernels "
                            "launched with device='cuda'")
        return ArrayType(as_scalar_type(np.dtype(interface["typestr"])), len(interface["shape"]))
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, np.generic):
        return as_scalar_type(value.dtype)
    if isinstance(value, int):
        return i64
    if isinstance(value, float):
        return f64
    raise TypeError(f"adjit cannot take an argument of type {type(value).__name__}: "
                    "it takes NumPy arrays, Python or NumPy scalars of f32/f64/i32/i64/bool"
                    + (", and GPU arrays" if device == "cuda" else ""))


def type_code(t: ScalarType | ArrayType) -> str:
    """'f32' for a scalar type, 'a2f32' for a 2-D array of f32 ('s2f32' strided): how the
    JSON spells types."""
    if isinstance(t, ArrayType):
        return f"{'s' if t.strided else 'a'}{t.ndim}{t.dtype.name}"
    return t.name


def parse_type(code: str) -> ScalarType | ArrayType:
    """The type that type_code spelled `code`; ValueError for anything else."""
    by_name = {t.name: t for t in (*SCALARS, index)}
    match = re.fullmatch(r"([as])(\d+)(\w+)", code)
    dtype = by_name.get(match.group(3) if match else code)
    if dtype is None:
        raise ValueError(f"{code!r} is not an adjit type code")
    return ArrayType(dtype, int(match.group(2)), match.group(1) == "s") if match else dtype
