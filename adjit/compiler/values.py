"""What the code generator holds for a Python expression while compiling it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ..core.types import ArrayType, ScalarType, VecType

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
    """A memref SSA value (an array passed in or allocated, or a view of one)."""
    value: ir.Value
    type: ArrayType
    # The memory it is in, where the compiler knows it: the function argument or the
    # allocation it is (or views). Two arrays of different known roots share no memory
    # unless both roots are arguments (a caller may pass one array twice); None: unknown.
    root: ir.Value | None = None
    fresh: bool = False        # root is an allocation made in this function


@dataclass
class Read:
    """One array an expression reads: `pointwise` when element `ids` of the expression
    reads element `ids` of that array (the same memref value), not a shifted, transposed or
    broadcast element."""
    array: Array
    pointwise: bool


@dataclass
class ArrayExpr:
    """A lazy element-wise expression. `element(i)` emits element `i` of the C-order
    flattened result, `at(ids)` the element at a multi-index; it is materialised (one fused
    loop) only when bound to a name, passed on, returned or reduced, so
    `sin(exp(x))*z + 0.5*x*x` is one loop. `linear`: element(i) is the cheap one (arrays of
    one shape, C order, read at the same flat index), so a flat loop computes it; otherwise
    (views, transposes, broadcasting) a loop nest over the shape calls `at`. `reads`: the
    arrays it reads (None: not known), so that a store into an array it reads other than
    pointwise computes it first (NumPy's `u[1:] = u[:-1]`)."""
    dtype: ScalarType
    shape: list[ir.Value]          # index values
    element: Callable[[ir.Value], Scalar]
    at: Callable[[list], Scalar] | None = None
    linear: bool = True
    reads: tuple[Read, ...] | None = None

    @property
    def type(self) -> ArrayType:
        return ArrayType(self.dtype, len(self.shape))


@dataclass
class SliceValue:
    """`lo:hi:step` in a subscript (None where not given)."""
    lower: object
    upper: object
    step: object


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


@dataclass
class FString:
    """An f-string, an argument of print (compiler/printing.py): its parts, each text or a
    `Field`."""
    parts: list


@dataclass
class Field:
    """An f-string's replacement field `{value!conversion:spec}`."""
    value: object
    spec: str
    conversion: int        # ast.FormattedValue's: -1 none, ord('s'), ord('r'), ord('a')


@dataclass
class Vec:
    """A small vector, matrix or quaternion (compiler/vectors.py): its components, each a
    Scalar of `type.dtype`, in row-major order. Compiled code holds them as separate
    scalars (a function's parameter or result of this type is that many scalars), so the
    autodiff pass differentiates vector code as the scalar code it is."""
    type: VecType
    items: tuple[Scalar, ...]


@dataclass
class VecArray:
    """An array of small vectors: `array`, whose trailing dimensions are `vec.shape`,
    indexed by the leading ones (`x[i]` is a Vec, `x[i] = v` stores one)."""
    array: Array
    vec: VecType

    @property
    def type(self) -> ArrayType:
        return self.array.type


@dataclass
class StructValue:
    """An `@adjit.struct` value in compiled code (lang/structs.py): its fields' values
    (Scalar, Vec, Array, VecArray, StructValue) by name. Only a parameter is one (the
    function's arguments, which dominate its body), so its fields are read anywhere; they
    are not assigned (an array field is written through)."""
    type: object            # structs.StructType
    fields: dict
