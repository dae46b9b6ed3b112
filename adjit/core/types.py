"""adjit's types: scalars, arrays and the promotion rules between them.

These are the frontend's view, MLIR-free (types are part of the API, which works without
MLIR); dialects/mlir_types.py gives the MLIR type each one lowers to.
"""
from __future__ import annotations

import ctypes
import functools
import re
from dataclasses import dataclass
from typing import Callable, ClassVar

import numpy as np


@dataclass(frozen=True)
class _Machine:
    """How the machine holds a scalar type, as each part of adjit that handles its bits
    needs it (the one table of these facts: the runtime, the lowerings and the native
    dispatcher derive theirs from it)."""
    bits: int           # 1 for bool (i1 in the IR; a byte in memory)
    mlir: str           # MLIR's spelling, as the IR and GPU kernels' parameters name it
    llvm: str           # LLVM IR's
    memory: np.dtype    # the NumPy dtype of its bytes in memory (index: int64)
    ctype: type         # ctypes' type, to pass it to or return it from compiled code
    struct: str         # the struct module's format character (standard sizes, "<")


_MACHINE = {
    "f32": _Machine(32, "f32", "float", np.dtype(np.float32), ctypes.c_float, "f"),
    "f64": _Machine(64, "f64", "double", np.dtype(np.float64), ctypes.c_double, "d"),
    "i32": _Machine(32, "i32", "i32", np.dtype(np.int32), ctypes.c_int32, "i"),
    "i64": _Machine(64, "i64", "i64", np.dtype(np.int64), ctypes.c_int64, "q"),
    "bool": _Machine(1, "i1", "i1", np.dtype(np.bool_), ctypes.c_bool, "?"),
    "index": _Machine(64, "index", "i64", np.dtype(np.int64), ctypes.c_int64, "q"),
}


@dataclass(frozen=True)
class ScalarType:
    """A scalar type: ``adjit.f32``, ``f64``, ``i32``, ``i64``, ``bool_``, each with its
    NumPy dtype (``np_dtype``). Used as annotations (``x: adjit.f32``) and dtypes
    (``adjit.zeros(n, dtype=adjit.f32)``); calling one converts a value to it.

    Example:
        ::

            import numpy as np
            import adjit

            print(adjit.f32.np_dtype, adjit.i64.np_dtype, isinstance(adjit.f64, adjit.ScalarType))
            print(adjit.f32(1.5))   # 1.5, a float32
    """
    name: str            # 'f32', 'f64', 'i32', 'i64', 'bool', 'index'
    np_dtype: np.dtype | None
    # A Python scalar's type (NEP 50's "weak" scalars, JAX's weak_type): a Python float or
    # int (a literal, an unannotated or `float`/`int`-annotated argument, an int from
    # range/len/shape) is an f64 or i64 that takes the type of a typed operand of its kind
    # or above (`promote`), so `x_f32 * lr` stays f32 as in NumPy 2. Only scalars are weak
    # (an array's dtype never is); weak and strong f64 are different specialisations.
    weak: bool = False

    @property
    def strong(self) -> ScalarType:
        """The type itself, not weak (what an array of such values, or NumPy, holds)."""
        return _STRONG[self.name] if self.weak else self

    @property
    def dtype(self) -> np.dtype | None:
        """Its NumPy dtype, so that NumPy takes it where it takes one
        (``np.zeros(3, dtype=adjit.f32)``, ``x.astype(adjit.f64)``: interpreted code's)."""
        return self.np_dtype

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
        return _MACHINE[self.name].bits

    @property
    def mlir_name(self) -> str:
        """How MLIR spells it: 'f32', 'i1' (bool), 'index'."""
        return _MACHINE[self.name].mlir

    @property
    def llvm_name(self) -> str:
        """How LLVM IR spells it: 'float', 'double', 'i32', 'i64', 'i1'."""
        return _MACHINE[self.name].llvm

    @property
    def memory_dtype(self) -> np.dtype:
        """The NumPy dtype of its bytes in memory (`np_dtype`, and int64 for index)."""
        return _MACHINE[self.name].memory

    @property
    def ctype(self) -> type:
        """Its ctypes type."""
        return _MACHINE[self.name].ctype

    @property
    def struct_code(self) -> str:
        """Its struct module format character, in standard sizes ("<")."""
        return _MACHINE[self.name].struct

    def __repr__(self) -> str:
        if self.weak:
            return f"Python {'float' if self.is_float else 'int'} (weak adjit.{self.name})"
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
# Python's float and int in compiled code (NEP 50: weak; see ScalarType.weak).
weak_f64 = ScalarType("f64", np.dtype(np.float64), True)
weak_i64 = ScalarType("i64", np.dtype(np.int64), True)
_STRONG = {"f64": f64, "i64": i64}
_WEAK = {"f64": weak_f64, "i64": weak_i64}

SCALARS = (f32, f64, i32, i64, bool_)
_BY_DTYPE = {t.np_dtype: t for t in SCALARS}
# The scalar types by MLIR's spelling ('i1' is bool_), as the IR and GPU kernels' parameters
# (core/kernel.py) name them.
BY_MLIR_NAME = {t.mlir_name: t for t in (*SCALARS, index)}


@dataclass(frozen=True)
class ArrayType:
    """The type of an array argument, ``adjit.Array[dtype, ndim]``: its element type
    (``dtype``, a :class:`ScalarType`) and number of dimensions (``ndim``).

    Example:
        ::

            import numpy as np
            import adjit

            t = adjit.Array[adjit.f64, 2]
            print(t, isinstance(t, adjit.ArrayType), t.dtype, t.ndim)
    """
    dtype: ScalarType
    ndim: int
    # Any strides and offset (in elements, negative ones too), not only C order.
    strided: bool = False
    # Dimensions that are 1 (an argument's, known when it is specialised): the compiler then
    # knows them to be 1, so they broadcast as NumPy's do ((n, m) + (1, m)) while arrays
    # of one rank otherwise keep one flat loop. The memref type is the same.
    units: tuple[int, ...] = ()

    def __post_init__(self):
        if self.dtype.weak:   # an array of Python floats is a float64 array, as in NumPy
            object.__setattr__(self, "dtype", self.dtype.strong)

    def contiguous(self) -> ArrayType:
        """The C-contiguous array type of this dtype and rank (no unit dimensions known)."""
        return ArrayType(self.dtype, self.ndim) if self.strided or self.units else self

    def strided_too(self) -> ArrayType:
        """The strided array type of this dtype and rank (it takes contiguous arrays too)."""
        return self if self.strided else ArrayType(self.dtype, self.ndim, True, self.units)

    def without_units(self) -> ArrayType:
        return ArrayType(self.dtype, self.ndim, self.strided) if self.units else self

    def __repr__(self) -> str:
        extra = ((", strided" if self.strided else "")
                 + (f", units={self.units}" if self.units else ""))
        return f"adjit.Array[{self.dtype!r}, {self.ndim}{extra}]"


@dataclass(frozen=True)
class VecType:
    """A small vector, matrix or quaternion of `dtype` (Warp's `vec3`, `mat33`, `quat`): a
    value of compiled code whose components are separate scalars (the autodiff pass sees
    only those), and, outside compiled code, a NumPy array of `shape`. An array of them is a
    NumPy array whose trailing dimensions are `shape` (`adjit.Array[adjit.vec3, 1]` takes
    an (n, 3) float32 array, zero copy). Calling it makes a value: ``adjit.vec3(1, 2, 3)``.

    Example:
        ::

            import numpy as np
            import adjit

            print(adjit.vec3.kind, adjit.vec3.shape, adjit.mat33d.shape, adjit.quat.dtype)
            print(adjit.vec3(1, 2, 3))   # [1. 2. 3.], float32
    """
    kind: str                # "vec", "mat", "quat" or "transform"
    shape: tuple[int, ...]   # (n,) for vec and quat, (n, m) for mat, (7,) for transform (p, q)
    dtype: ScalarType

    def __post_init__(self):
        if self.dtype.weak:   # (its components are stored: typed, as an array's)
            object.__setattr__(self, "dtype", self.dtype.strong)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def name(self) -> str:
        """How mangled symbol names and type codes spell it: 'v3f32', 'm33f64', 'q4f32'."""
        return f"{self.kind[0]}{''.join(map(str, self.shape))}{self.dtype.name}"

    def __repr__(self) -> str:
        suffix = {"f32": "", "f64": "d"}.get(self.dtype.name)
        if self.kind in ("quat", "transform") and suffix is not None:
            return f"adjit.{self.kind}{suffix}"
        if (suffix is not None and all(2 <= d <= 4 for d in self.shape)
                and (self.kind == "vec" or self.shape[0] == self.shape[1])):
            return f"adjit.{self.kind}{''.join(map(str, self.shape))}{suffix}"
        return f"adjit.{self.kind}({', '.join(map(str, self.shape))}, {self.dtype!r})"

    # Outside compiled code a value is a NumPy array (to pass to a kernel parameter
    # annotated with this type, or to hold in an array of them): `adjit.vec3(1, 2, 3)`,
    # `adjit.vec3()` (zeros), `adjit.vec3(s)` (every component s), a matrix from its
    # components in row-major order.
    def __call__(self, *args):
        return VecType.made(self._value(args))

    # What a value made from Python becomes: NumPy's array, or while the interpreter mode
    # runs, its value with compiled code's operators (lang/vector_values.py sets this).
    made: ClassVar[Callable] = staticmethod(lambda a: a)

    def _value(self, args: tuple) -> np.ndarray:
        out = np.zeros(self.shape, self.dtype.np_dtype)
        if self.kind in ("quat", "transform") and not args:
            out[-1] = 1     # the identity rotation, as Warp's quat() and transform()
        elif self.kind == "transform" and len(args) == 2:     # Warp's transform(p, q)
            out[:3], out[3:] = np.reshape(args[0], 3), np.reshape(args[1], 4)
        elif len(args) == 1 and np.ndim(args[0]) == 0:
            out[...] = args[0]
        elif len(args) == 1:
            out[...] = np.asarray(args[0]).reshape(self.shape)
        elif len(args) == self.size:
            out[...] = np.array(args, dtype=self.dtype.np_dtype).reshape(self.shape)
        elif args:
            raise TypeError(f"{self!r}() takes 0, 1 or {self.size} components, got {len(args)}")
        return out


def vec(n: int, dtype=None) -> VecType:
    """``adjit.vec(n, dtype)``: the type of n-component vectors (f32 by default, as Warp's).

    Args:
        n: the number of components (a positive int).
        dtype: the components' scalar type.

    Returns:
        VecType: ``vec(3, adjit.f32)`` is ``adjit.vec3``.

    Raises:
        TypeError: ``n`` not a positive int.

    Example:
        ::

            import numpy as np
            import adjit

            vec5 = adjit.vec(5, adjit.f64)
            print(vec5.shape, adjit.vec(3) == adjit.vec3)   # (5,) True
    """
    if not isinstance(n, int) or n < 1:
        raise TypeError(f"adjit.vec(n, dtype): n must be a positive int, got {n!r}")
    return VecType("vec", (n,), f32 if dtype is None else as_scalar_type(dtype))


def mat(n: int, m: int, dtype=None) -> VecType:
    """``adjit.mat(n, m, dtype)``: the type of n-by-m matrices (f32 by default).

    Args:
        n: rows (a positive int).
        m: columns (a positive int).
        dtype: the entries' scalar type.

    Returns:
        VecType: ``mat(3, 3, adjit.f64)`` is ``adjit.mat33d``.

    Raises:
        TypeError: ``n`` or ``m`` not a positive int.

    Example:
        ::

            import numpy as np
            import adjit

            mat23 = adjit.mat(2, 3)
            print(mat23.shape, adjit.mat(3, 3, adjit.f64) == adjit.mat33d)   # (2, 3) True
    """
    if not all(isinstance(d, int) and d >= 1 for d in (n, m)):
        raise TypeError(f"adjit.mat(n, m, dtype): n and m must be positive ints, got {n!r}, {m!r}")
    return VecType("mat", (n, m), f32 if dtype is None else as_scalar_type(dtype))


def quat_type(dtype=None) -> VecType:
    return VecType("quat", (4,), f32 if dtype is None else as_scalar_type(dtype))


@dataclass(frozen=True)
class VecArrayType:
    """`adjit.Array[adjit.vec3, 1]`: the annotation of an array of small vectors, which is
    an array of `vec.dtype` with `ndim + len(vec.shape)` dimensions, the trailing ones
    `vec.shape` (checked when called, and in the compiled code).

    Example:
        ::

            import numpy as np
            import adjit

            t = adjit.Array[adjit.vec3, 1]
            print(isinstance(t, adjit.VecArrayType), t.vec, t.ndim)

            @adjit.kernel
            def norms(p: adjit.Array[adjit.vec3, 1], out: adjit.Array[adjit.f32, 1]):
                i = adjit.index()
                out[i] = adjit.length(p[i])

            out = np.zeros(2, np.float32)
            norms(np.array([[3, 4, 0], [0, 0, 2]], np.float32), out, ndrange=2)
            print(out)   # [5. 2.]
    """
    vec: VecType
    ndim: int

    @property
    def array(self) -> ArrayType:
        return ArrayType(self.vec.dtype, self.ndim + len(self.vec.shape))

    @property
    def name(self) -> str:
        """How mangled symbol names spell it (a device function's parameter type)."""
        return f"va{self.ndim}{self.vec.name}"

    def __repr__(self) -> str:
        return f"adjit.Array[{self.vec!r}, {self.ndim}]"


class _ArrayAnnotation:
    """`adjit.Array[adjit.f32, 2]`: the annotation form of an array type."""

    def __getitem__(self, key) -> ArrayType:
        if not (isinstance(key, tuple) and len(key) == 2):
            raise TypeError("adjit.Array takes [dtype, ndim], e.g. adjit.Array[adjit.f32, 2]")
        dtype, ndim = key
        if not isinstance(ndim, int) or ndim < 0:
            raise TypeError(f"adjit.Array ndim must be a non-negative int, got {ndim!r}")
        if isinstance(dtype, VecType):
            return VecArrayType(dtype, ndim)
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
        native = dt.newbyteorder("=")
        if native in _BY_DTYPE:
            raise TypeError(f"dtype {dt} is byte-swapped (not this machine's byte order): "
                            f"adjit takes {native} in native order; convert with "
                            "a.astype(a.dtype.newbyteorder('='))")
        raise TypeError(f"dtype {dt} is not supported by adjit (f32, f64, i32, i64, bool_)")
    return _BY_DTYPE[dt]


def promote(a: ScalarType, b: ScalarType) -> ScalarType:
    """NumPy 2's promotion between two scalar types (bool < ints < floats; wider wins), with
    NEP 50's weak Python scalars: a weak operand takes the other's type where that is of its
    kind or above (Python float with f32: f32; Python int with i32: i32), and is its own
    default type (f64, i64), now typed, where the other is of a lower kind (Python float with
    i32: f64, as `np.int32(1) * 2.0` is an np.float64). Two weak operands give a weak one."""
    if a == b:
        return a
    if a.weak and b.weak:
        return _WEAK[_promote(a.strong, b.strong).name]
    if a.weak or b.weak:
        weak, other = (a, b) if a.weak else (b, a)
        if other is index:      # (the compiler's loop counters: as the int they count)
            other = i64
        if _KIND_ORDER[other.name] >= _KIND_ORDER[weak.name]:
            return other
        return weak.strong
    return _promote(a, b)


def _promote(a: ScalarType, b: ScalarType) -> ScalarType:
    """Promotion of two typed (strong) scalar types."""
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


_KIND_ORDER = {"bool": 0, "i32": 1, "i64": 1, "index": 1, "f32": 2, "f64": 2}


@functools.cache
def _array_type(dtype: np.dtype, ndim: int, strided: bool = False,
                units: tuple[int, ...] = ()) -> ArrayType:
    return ArrayType(as_scalar_type(dtype), ndim, strided, units)


def unit_dims(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The dimensions of `shape` that are 1."""
    return tuple(k for k, n in enumerate(shape) if n == 1) if 1 in shape else ()


def type_of_value(value, device: str = "cpu") -> ScalarType | ArrayType:
    """The adjit type of a Python argument (specialisation key), or TypeError. Arrays in GPU
    memory (`__cuda_array_interface__`) are arguments of `device="cuda"` launches only."""
    if isinstance(value, np.ndarray):
        return _array_type(value.dtype, value.ndim, not value.flags.c_contiguous,
                           unit_dims(value.shape))
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
    if isinstance(value, int):       # Python's: weak (NEP 50), unlike NumPy's scalars
        return weak_i64
    if isinstance(value, float):
        return weak_f64
    raise TypeError(f"adjit cannot take an argument of type {type(value).__name__}: "
                    "it takes NumPy arrays, Python or NumPy scalars of f32/f64/i32/i64/bool"
                    + (", and GPU arrays" if device == "cuda" else ""))


def type_code(t: ScalarType | ArrayType | VecType) -> str:
    """'f32' for a scalar type, 'a2f32' for a 2-D array of f32 ('s2f32' strided), 'v3f32'
    for a vec3: how the JSON spells types."""
    if isinstance(t, ArrayType):
        units = f"u{''.join(map(str, t.units))}" if t.units else ""
        return f"{'s' if t.strided else 'a'}{t.ndim}{t.dtype.name}{units}"
    return f"w{t.name}" if getattr(t, "weak", False) else t.name


def parse_type(code: str) -> ScalarType | ArrayType:
    """The type that type_code spelled `code`; ValueError for anything else."""
    by_name = {t.name: t for t in (*SCALARS, index)}
    by_name.update({type_code(t): t for t in (weak_f64, weak_i64)})
    match = re.fullmatch(r"([as])(\d+)(bool|index|[fi]\d\d)(?:u(\d+))?", code)
    dtype = by_name.get(match.group(3) if match else code)
    if dtype is None:
        raise ValueError(f"{code!r} is not an adjit type code")
    if not match:
        return dtype
    units = tuple(int(c) for c in match.group(4)) if match.group(4) else ()
    return ArrayType(dtype, int(match.group(2)), match.group(1) == "s", units)
