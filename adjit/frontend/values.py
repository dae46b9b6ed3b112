"""What the code generator holds for a Python expression while compiling it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ..core.types import ArrayType, ScalarType

if TYPE_CHECKING:     # the API imports this module without MLIR
    from mlir import ir


@dataclass
class Scalar:
    """A typed scalar SSA value."""
    value: ir.Value
    type: ScalarType


@dataclass
class Literal:
    """A Python constant not yet given a type: it takes the type of what it meets, so that
    `0.5 * x[i]` stays f32 for f32 `x` (JAX's weak types)."""
    value: int | float | bool


@dataclass
class Array:
    """A memref SSA value (an array passed in or allocated)."""
    value: ir.Value
    type: ArrayType


@dataclass
class ArrayExpr:
    """A lazy element-wise expression over arrays of one shape. `element(i)` emits element
    `i` of the C-order flattened result; it is materialised (one fused loop) only when bound
    to a name, passed on, returned or reduced, so `sin(exp(x))*z + 0.5*x*x` is one loop."""
    dtype: ScalarType
    shape: list[ir.Value]          # index values
    element: Callable[[ir.Value], Scalar]

    @property
    def type(self) -> ArrayType:
        return ArrayType(self.dtype, len(self.shape))


@dataclass
class Shape:
    """`x.shape`: a tuple of index values."""
    dims: list[ir.Value]


@dataclass
class RangeValue:
    start: object
    stop: object
    step: object


@dataclass
class PyObj:
    """A Python object named in user code (a module, a dtype, a function to call), known
    at compile time."""
    obj: object
