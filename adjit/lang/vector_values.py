"""Small vectors, matrices, quaternions and transforms as Python sees them: the NumPy
meanings of the vector builtins (``adjit.cross``, ``adjit.quat_rotate``, ...: Warp's, on
NumPy arrays of their shapes), and, in the interpreter mode (lang/interpreter.py), the value
that behaves as compiled code's (`Vector`).

Outside compiled code a vector is a NumPy array of its shape (``adjit.vec3(1, 2, 3)``), a
quaternion one of 4 (x, y, z, w), a transform one of 7 (p, q). Compiled code gives some
operators Warp's meanings, which NumPy's arrays do not have: ``a * b`` of two vectors or
matrices is ``adjit.mul`` (a matrix product, a quaternion product, a transform after
another), ``==`` compares whole values, ``v.x`` ... ``v.w`` are components and ``t.p``,
``t.q`` a transform's parts. While interpreting, vectors are `Vector`s, an ndarray subclass
with those meanings: made by calling a vector type, converted from a vector argument, read
from an array of vectors (a view of its element, as ``y[i].x = s`` writes it), or returned
by a vector builtin.
"""
from __future__ import annotations

import functools

import numpy as np

from ..core.types import ScalarType, VecArrayType, VecType
from . import interpreter
from .structs import StructType, struct_type


def _normalize(v):
    v = np.asarray(v)
    n = np.sqrt(np.dot(v, v))
    return v / n if n > 0 else np.zeros_like(v)


def _length(v):
    v = np.asarray(v)
    return np.sqrt(np.dot(v, v))


def _inverse(m):
    m = np.asarray(m)
    d = np.linalg.det(m)
    return np.linalg.inv(m).astype(m.dtype) if d != 0 else np.zeros_like(m)


def _quat_mul(a, b):
    x1, y1, z1, w1 = a
    x2, y2, z2, w2 = b
    return np.array([w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2, w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                     w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2, w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2],
                    dtype=np.result_type(a, b))


def _mul(a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return np.multiply(a, b)
    if np.ndim(a) == 1 and np.ndim(b) == 1:
        if len(a) == len(b) == 7:
            return _transform_multiply(a, b)   # two transforms
        if len(a) == len(b) == 4:
            return _quat_mul(a, b)   # the only mul of two 1-D values Warp has
        raise TypeError("mul() of two vectors: use dot() or cw_mul()")
    return np.matmul(a, b)


def _quat_rotate(q, v):
    q, v = np.asarray(q), np.asarray(v)
    qv, w = q[:3], q[3]
    return v * (2 * w * w - 1) + np.cross(qv, v) * w * 2 + qv * np.dot(qv, v) * 2


def _quat_inverse(q):
    q = np.array(q)
    q[:3] = -q[:3]
    return q


def _quat_from_axis_angle(axis, angle):
    axis = np.asarray(axis)
    return np.array([*(axis * np.sin(angle / 2)), np.cos(angle / 2)], dtype=axis.dtype)


def _quat_to_matrix(q):
    q = np.asarray(q)
    return np.stack([_quat_rotate(q, e) for e in np.eye(3, dtype=q.dtype)], axis=1)


def _quat_to_axis_angle(q):
    q = np.asarray(q)
    v = -q[:3] if q[3] < 0 else q[:3]
    n = np.sqrt(np.dot(v, v))
    axis = v / n if n > 0 else np.zeros_like(v)
    return axis, (2 * np.arctan2(n, abs(q[3]))).astype(q.dtype)


def _quat_slerp(q0, q1, t):
    q0, q1 = np.asarray(q0), np.asarray(q1)
    axis, angle = _quat_to_axis_angle(_quat_mul(_quat_inverse(q0), q1))
    return _quat_mul(q0, _quat_from_axis_angle(axis, t * angle))


def _transform(m, p, w):
    m, p = np.asarray(m), np.asarray(p)
    if m.shape == (7,):     # a transform (p, q)
        return _quat_rotate(m[3:], p) + (m[:3] if w else 0)
    return m[:3, :3] @ p + (m[:3, 3] if w else 0)


def _transform_multiply(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.concatenate([_quat_rotate(a[3:], b[:3]) + a[:3], _quat_mul(a[3:], b[3:])])


def _transform_inverse(t):
    t = np.asarray(t)
    qi = _quat_inverse(t[3:])
    return np.concatenate([-_quat_rotate(qi, t[:3]), qi])


def _skew(v):
    x, y, z = v
    return np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]], dtype=np.asarray(v).dtype)


def _identity(n, dtype=np.float32):
    return np.eye(n, dtype=getattr(dtype, "np_dtype", dtype))


_NUMPY = {
    "cross": np.cross, "length": _length, "length_sq": lambda v: np.dot(v, v),
    "normalize": _normalize, "outer": np.outer, "determinant": np.linalg.det,
    "inverse": _inverse, "mul": _mul, "diag": np.diag, "get_diag": np.diag, "identity": _identity,
    "trace": np.trace, "skew": _skew, "cw_mul": np.multiply, "cw_div": np.divide,
    "quat_from_axis_angle": _quat_from_axis_angle, "quat_rotate": _quat_rotate,
    "quat_rotate_inv": lambda q, v: _quat_rotate(_quat_inverse(q), v),
    "quat_inverse": _quat_inverse, "quat_to_matrix": _quat_to_matrix,
    "matrix_from_rows": lambda *r: np.stack(r), "matrix_from_cols": lambda *c: np.stack(c, 1),
    "vector": lambda *a: np.array(a),
    "quat_to_axis_angle": _quat_to_axis_angle, "quat_slerp": _quat_slerp,
    "lerp": lambda a, b, t: np.asarray(a) * (1 - t) + np.asarray(b) * t,
    "ddot": lambda a, b: np.sum(np.multiply(a, b)),
    "transform_point": lambda m, p: _transform(m, p, True),
    "transform_vector": lambda m, v: _transform(m, v, False),
    "transform_get_translation": lambda t: np.array(t)[:3],
    "transform_get_rotation": lambda t: np.array(t)[3:],
    "transform_multiply": _transform_multiply, "transform_inverse": _transform_inverse,
    "transform_identity": lambda dtype=np.float32: np.array(
        [0, 0, 0, 0, 0, 0, 1], getattr(dtype, "np_dtype", dtype)),
}


def _interpreted_result(fn):
    """`fn` (a vector builtin) whose array results are `Vector`s while interpreting."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        out = fn(*args, **kwargs)
        if not interpreter.interpreting():
            return out
        if isinstance(out, tuple):
            return tuple(_vector(o) for o in out)
        return _vector(out)
    return wrapped


VECTOR_FUNCTIONS = {name: _interpreted_result(fn) for name, fn in _NUMPY.items()}


def _vector(a):
    """`a` as a Vector if it is an array of a vector's or matrix's rank, else itself."""
    if isinstance(a, np.ndarray) and not isinstance(a, Vector) and a.ndim in (1, 2):
        return a.view(Vector)
    return a


_COMPONENTS = {"x": 0, "y": 1, "z": 2, "w": 3}


class Vector(np.ndarray):
    """A vector, matrix, quaternion or transform of interpreted code: a NumPy array of its
    shape whose ``*`` and ``@`` are Warp's ``mul``, ``==``/``!=`` compare the whole value,
    ``.x``/``.y``/``.z``/``.w`` are components and ``.p``/``.q`` a transform's position and
    rotation, as in compiled code."""

    def __mul__(self, other):
        if np.ndim(other) == 0:
            return np.multiply(self, other)
        return _vector(_mul(self, other))

    def __rmul__(self, other):
        if np.ndim(other) == 0:
            return np.multiply(other, self)
        return _vector(_mul(other, self))

    __matmul__ = __mul__

    def __rmatmul__(self, other):
        return _vector(_mul(other, self))

    def __eq__(self, other):
        return np.bool_(np.array_equal(np.asarray(self), np.asarray(other)))

    def __ne__(self, other):
        return np.bool_(not np.array_equal(np.asarray(self), np.asarray(other)))

    __hash__ = None

    # A vector is a value in compiled code: `f += g` rebinds f to a new vector (NumPy's
    # in-place operators would write into the array f was read from); `y[i] += g` still
    # writes the element back (Python's augmented subscript assignment).
    def __iadd__(self, other):
        return self + other

    def __isub__(self, other):
        return self - other

    def __imul__(self, other):
        return self * other

    def __itruediv__(self, other):
        return self / other

    def __getattr__(self, name: str):
        k = _COMPONENTS.get(name)
        if k is not None and self.ndim == 1 and k < self.shape[0]:
            return self[k]
        if name in ("p", "q") and self.shape == (7,):
            return Vector.__getitem__(self, slice(0, 3) if name == "p" else slice(3, 7)).copy()
        raise AttributeError(f"a {self.shape} vector value has no attribute {name!r}")

    def __setattr__(self, name: str, value) -> None:
        k = _COMPONENTS.get(name)
        if k is not None and self.ndim == 1 and k < self.shape[0]:
            self[k] = value
        elif name in ("p", "q") and self.shape == (7,):
            self[slice(0, 3) if name == "p" else slice(3, 7)] = value
        else:
            super().__setattr__(name, value)


class VectorArray(np.ndarray):
    """An array of vectors (``adjit.Array[adjit.vec3, 1]``) of interpreted code: indexing
    it down to one element gives a `Vector`, a view of it."""
    vec_ndim = 1    # (the rank of its elements: set per argument by `interpreted`)

    def __getitem__(self, sub):
        out = super().__getitem__(sub)
        if isinstance(out, np.ndarray) and out.ndim == self.vec_ndim:
            return out.view(Vector)
        return out

    def __array_finalize__(self, obj) -> None:
        self.vec_ndim = getattr(obj, "vec_ndim", 1)


def interpreted(ann, t, value):
    """An argument for a parameter annotated `ann`, of type `t` (as lang/functions.specialise
    converted it), as interpreted code sees it: a Python float or int for a weak scalar (a
    ``float`` or ``int`` annotation), a `Vector` for a vector, a `VectorArray` for an array
    of them, else the value itself."""
    if isinstance(t, ScalarType) and t.weak and isinstance(value, np.generic):
        return value.item()
    if isinstance(ann, VecType):
        return np.array(value).view(Vector)
    if isinstance(ann, VecArrayType):
        out = value.view(VectorArray)
        out.vec_ndim = len(ann.vec.shape)
        return out
    return value


def interpreted_struct(s):
    """A struct argument as interpreted code sees it: a copy of the instance (a struct is
    passed by value: compiled code's writes to its scalar fields stay in the callee) whose
    fields are `interpreted`, so that its vectors are Vectors and its arrays of vectors
    VectorArrays (views: writes through them reach the caller's arrays)."""
    st = struct_type(s)
    out = object.__new__(st.cls)
    for name, t in st.fields:
        v = getattr(s, name)
        if isinstance(t, StructType):
            v = interpreted_struct(v)
        elif v is not None:
            v = interpreted(t, t, v)
        object.__setattr__(out, name, v)
    return out


def _made(a: np.ndarray):
    """What calling a vector type makes (core/types.py's VecType.made): a Vector while
    interpreting, else NumPy's array."""
    return a.view(Vector) if interpreter.interpreting() else a


VecType.made = staticmethod(_made)
