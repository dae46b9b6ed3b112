"""The functions of the adjit namespace (`adjit.sin`, `adjit.index`, `adjit.zeros`, ...) as
Python objects. How a call of each compiles is builtin_calls.py's business: this module
only names them, so that `import adjit` needs no MLIR.

Outside compiled code the math and array functions run on NumPy (so custom-rule bodies and
tests can call them from Python); the others say where they belong.
"""
from __future__ import annotations

import functools
import math as pymath
from typing import Callable

import numpy as np

# Unary math functions (scalar_ops.math_unary compiles them); integer arguments become f64
# as in Python's math module, f32 stays f32.
UNARY_MATH = ("sin", "cos", "tan", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
              "sqrt", "tanh", "sinh", "cosh", "asin", "acos", "atan", "erf", "rsqrt", "cbrt",
              "asinh", "acosh", "atanh")
# Work-item queries, atomics and sync: kernels only, with no meaning in plain Python.
KERNEL_ONLY = ("index", "index_nd", "ndrange", "atomic_add", "synchronize")
# Float classification, with Python's and NumPy's names: bool results.
PREDICATES = ("isnan", "isinf", "isfinite")
# Element-wise binary functions with NumPy's names (scalar_ops compiles them).
BINARY_MATH = ("pow", "atan2", "hypot", "copysign", "maximum", "minimum")
# Array creation and reductions with NumPy's names and signatures (compiled functions only).
ARRAY_FUNCTIONS = ("sum", "dot", "zeros", "ones", "empty", "zeros_like", "ones_like",
                   "empty_like", "copy", "full", "full_like", "arange")
# NumPy's, with NumPy's names and meanings (compiler/numpy_calls.py compiles them)
NUMPY_ARRAY_FUNCTIONS = ("prod", "argmax", "argmin", "linspace", "concatenate", "stack",
                         "reshape", "ravel")


class Builtin:
    """A function of the adjit namespace. Calling it from Python runs `py_impl` (NumPy)
    if it has one."""

    def __init__(self, name: str, py_impl: Callable | None = None):
        self.__name__ = name
        self._py_impl = py_impl

    def __call__(self, *args, **kwargs):
        if self._py_impl is None:
            raise RuntimeError(f"adjit.{self.__name__}() can only be called inside "
                               "@adjit.kernel, @adjit.func or @adjit.jit code")
        return self._py_impl(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<adjit builtin {self.__name__}>"


def _numpy_unary(name: str) -> Callable:
    special = {"rsqrt": lambda x: 1 / np.sqrt(x), "erf": np.vectorize(pymath.erf)}
    numpy_names = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
                   "acosh": "arccosh", "atanh": "arctanh"}
    return special.get(name) or getattr(np, numpy_names.get(name, name))


def _numpy_minmax(name: str) -> Callable:
    """adjit.max / adjit.min: the reduction of one array, or the element-wise max/min of
    several."""
    reduction, pairwise = getattr(np, name), getattr(np, name + "imum")
    return lambda *a: reduction(a[0]) if len(a) == 1 else functools.reduce(pairwise, a)


_NUMPY_BINARY = {"pow": "power", "atan2": "arctan2"}
namespace: dict[str, Builtin] = {}
for _name, _impl in [*[(n, _numpy_unary(n)) for n in UNARY_MATH],
                     ("floor", np.floor), ("ceil", np.ceil), ("abs", np.abs),
                     *[(n, getattr(np, n)) for n in PREDICATES],
                     *[(n, getattr(np, _NUMPY_BINARY.get(n, n))) for n in BINARY_MATH],
                     *[(n, None) for n in KERNEL_ONLY],
                     *[(n, getattr(np, n)) for n in ARRAY_FUNCTIONS],
                     ("max", _numpy_minmax("max")), ("min", _numpy_minmax("min")),
                     ("degrees", np.degrees), ("radians", np.radians),
                     ("where", np.where), ("clip", np.clip), ("mean", np.mean),
                     ("transpose", np.transpose), ("matmul", np.matmul),
                     *[(n, getattr(np, n)) for n in NUMPY_ARRAY_FUNCTIONS]]:
    namespace[_name] = Builtin(_name, _impl)


# ---- small vectors, matrices and quaternions (compiler/vectors.py compiles them) -----------
# Outside compiled code a vector is a NumPy array of its shape (adjit.vec3(1, 2, 3)), a
# quaternion one of 4 (x, y, z, w), and these are Warp's builtins on them, in NumPy.
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


def _skew(v):
    x, y, z = v
    return np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]], dtype=np.asarray(v).dtype)


def _identity(n, dtype=np.float32):
    return np.eye(n, dtype=getattr(dtype, "np_dtype", dtype))


VECTOR_FUNCTIONS = {
    "cross": np.cross, "length": _length, "length_sq": lambda v: np.dot(v, v),
    "normalize": _normalize, "outer": np.outer, "determinant": np.linalg.det,
    "inverse": _inverse, "mul": _mul, "diag": np.diag, "identity": _identity,
    "trace": np.trace, "skew": _skew, "cw_mul": np.multiply, "cw_div": np.divide,
    "quat_from_axis_angle": _quat_from_axis_angle, "quat_rotate": _quat_rotate,
    "quat_rotate_inv": lambda q, v: _quat_rotate(_quat_inverse(q), v),
    "quat_inverse": _quat_inverse, "quat_to_matrix": _quat_to_matrix,
    "matrix_from_rows": lambda *r: np.stack(r), "matrix_from_cols": lambda *c: np.stack(c, 1),
    "vector": lambda *a: np.array(a),
}
for _name, _impl in VECTOR_FUNCTIONS.items():
    namespace[_name] = Builtin(_name, _impl)
