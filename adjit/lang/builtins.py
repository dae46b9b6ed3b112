"""The functions of the adjit namespace (``adjit.sin``, ``adjit.index``, ``adjit.zeros``, ...).

They are called inside ``@adjit.kernel``, ``@adjit.func`` and ``@adjit.jit`` code, where
they compile (compiler/builtin_calls.py and its neighbours compile each call; this module
only names them, so that ``import adjit`` needs no MLIR). Outside compiled code the math,
array and vector functions run on NumPy (so custom-rule bodies and tests can call them
from Python); the kernel-only ones (``index``, ``index_nd``, ``ndrange``, ``atomic_add``,
``synchronize``) raise RuntimeError there ("adjit.index() can only be called inside
@adjit.kernel, @adjit.func or @adjit.jit code"), except in the interpreter mode
(lang/interpreter.py gives them their meaning over the work item it runs). Math functions of an integer give an f64,
as Python's math module; of an f32, an f32. Every one is differentiable where its
mathematical function is.

Example:
    ::

        import numpy as np
        import adjit
        from adjit import Array, f64

        @adjit.kernel
        def histogram(x: Array[f64, 1], bins: Array[f64, 1]):
            i = adjit.index()
            b = adjit.floor(x[i] * 4.0)
            adjit.atomic_add(bins, int(b), 1.0)   # several items add into one bin

        @adjit.jit
        def stats(x: Array[f64, 1]) -> tuple:
            bins = adjit.zeros(4)
            histogram(x, bins, ndrange=x.shape[0])
            return bins, adjit.mean(adjit.sin(x)), adjit.max(x)

        x = np.linspace(0.0, 0.99, 8)
        bins, mean_sin, top = stats(x)
        print(bins)   # [2. 2. 2. 2.]
        assert np.isclose(mean_sin, np.mean(np.sin(x))) and top == 0.99
        print(adjit.sin(0.5), adjit.cross([1.0, 0, 0], [0, 1.0, 0]))   # NumPy from Python
        try:
            adjit.index()
        except RuntimeError as e:
            print(e)

    ``adjit.atomic_add`` takes the array, one index per dimension and the value: Warp's
    ``atomic_add(grid, i, j, v)``, or the indices as a tuple, ``atomic_add(grid, (i, j), v)``::

        import numpy as np
        import adjit
        from adjit import Array, f64

        @adjit.kernel
        def splat(grid: Array[f64, 2], xs: Array[f64, 1]):
            i = adjit.index()
            adjit.atomic_add(grid, (0, i % 2), xs[i])
            adjit.atomic_add(grid, 0, i % 2, xs[i])

        grid = np.zeros((1, 2))
        splat(grid, np.arange(4.0), ndrange=4)
        print(grid)   # [[4. 8.]]
        assert np.array_equal(grid, [[4.0, 8.0]])
"""
from __future__ import annotations

import functools
import math as pymath
from typing import Callable

import numpy as np

from .interpreter import WORK_ITEM_BUILTINS
from .vector_values import VECTOR_FUNCTIONS

# Unary math functions (scalar_ops.math_unary compiles them); integer arguments become f64
# as in Python's math module, f32 stays f32.
UNARY_MATH = ("sin", "cos", "tan", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
              "sqrt", "tanh", "sinh", "cosh", "asin", "acos", "atan", "erf", "rsqrt", "cbrt",
              "asinh", "acosh", "atanh")
# Work-item queries, atomics and sync: kernels only, with no meaning in plain Python.
KERNEL_ONLY = ("index", "index_nd", "ndrange", "atomic_add", "atomic_sub", "synchronize")
# Float classification, with Python's and NumPy's names: bool results.
PREDICATES = ("isnan", "isinf", "isfinite")
# Element-wise binary functions with NumPy's names (scalar_ops compiles them).
BINARY_MATH = ("pow", "atan2", "hypot", "copysign", "maximum", "minimum")
# Array creation and reductions with NumPy's names and signatures (compiled functions only).
ARRAY_FUNCTIONS = ("sum", "dot", "zeros", "ones", "empty", "zeros_like", "ones_like",
                   "empty_like", "copy", "full", "full_like", "arange")
# NumPy's, with NumPy's names and meanings (compiler/numpy_calls.py and the modules beside it
# compile them)
NUMPY_ARRAY_FUNCTIONS = ("prod", "argmax", "argmin", "linspace", "concatenate", "stack",
                         "reshape", "ravel", "take", "take_along_axis", "sort", "argsort",
                         "diff", "pad", "roll", "swapaxes", "moveaxis", "cumsum", "cumprod",
                         "var", "std", "logaddexp", "logaddexp2", "eye")

# What each builtin is, as the API reference's table shows it (reference_table): the call's
# spelling, then its meaning. Every entry of `namespace` has one (Builtin reads it).
DOCS = {
    "index": "index(): the flat index of this work item, 0 to prod(ndrange) - 1 (kernels)",
    "index_nd": "index_nd(): the work item's indices, one per dimension of ndrange (kernels)",
    "ndrange": "ndrange(): the launch's ndrange, a tuple of ints (kernels)",
    "atomic_add": "atomic_add(arr, i, v): arr[i] += v, safe when several work items add "
                  "into one element; an n-D array takes n indices, atomic_add(arr, i, j, v) "
                  "or atomic_add(arr, (i, j), v); the value is the element before (kernels)",
    "atomic_sub": "atomic_sub(arr, i, v): arr[i] -= v atomically, as atomic_add (kernels)",
    "synchronize": "synchronize(): a barrier of the work items of a workgroup (kernels)",
    **{n: f"{n}(x): the element-wise {n} of a scalar, vector or array (NumPy's "
          f"{ {'asin': 'arcsin', 'acos': 'arccos', 'atan': 'arctan', 'asinh': 'arcsinh', 'acosh': 'arccosh', 'atanh': 'arctanh', 'rsqrt': '1/sqrt', 'erf': 'the error function'}.get(n, n)})"
       for n in UNARY_MATH},
    "floor": "floor(x): the largest integer not above x (a float)",
    "ceil": "ceil(x): the smallest integer not below x (a float)",
    "abs": "abs(x): the absolute value of x",
    "isnan": "isnan(x): whether x is NaN",
    "isinf": "isinf(x): whether x is infinite",
    "isfinite": "isfinite(x): whether x is neither infinite nor NaN",
    "pow": "pow(x, y): x ** y",
    "atan2": "atan2(y, x): the angle of (x, y), as NumPy's arctan2",
    "hypot": "hypot(x, y): sqrt(x*x + y*y)",
    "copysign": "copysign(x, y): the absolute value of x with the sign of y",
    "maximum": "maximum(x, y): the element-wise maximum",
    "minimum": "minimum(x, y): the element-wise minimum",
    "sum": "sum(a, axis=None): the sum of an array's elements (NumPy's)",
    "dot": "dot(a, b): NumPy's dot product of arrays, or a vector dot product",
    "zeros": "zeros(shape, dtype=f64): a new array of zeros (compiled functions)",
    "ones": "ones(shape, dtype=f64): a new array of ones (compiled functions)",
    "empty": "empty(shape, dtype=f64): a new uninitialised array (compiled functions)",
    "zeros_like": "zeros_like(a): zeros of a's shape and dtype",
    "ones_like": "ones_like(a): ones of a's shape and dtype",
    "empty_like": "empty_like(a): an uninitialised array of a's shape and dtype",
    "copy": "copy(a): a copy of an array",
    "full": "full(shape, value, dtype=f64): a new array filled with value",
    "full_like": "full_like(a, value): an array of a's shape and dtype filled with value",
    "arange": "arange(start, stop, step): NumPy's arange",
    "max": "max(a) the largest element of an array; max(x, y, ...) the largest argument",
    "min": "min(a) the smallest element of an array; min(x, y, ...) the smallest argument",
    "degrees": "degrees(x): radians to degrees",
    "radians": "radians(x): degrees to radians",
    "where": "where(c, x, y): x where c holds, else y (element-wise)",
    "clip": "clip(x, lo, hi): x limited to [lo, hi]",
    "mean": "mean(a): the mean of an array's elements",
    "transpose": "transpose(a, axes=None): the axes reversed, or permuted (NumPy's)",
    "matmul": "matmul(a, b): the matrix product (a @ b)",
    "prod": "prod(a): the product of an array's elements (NumPy's)",
    "argmax": "argmax(a): the flat index of the largest element (NumPy's)",
    "argmin": "argmin(a): the flat index of the smallest element (NumPy's)",
    "linspace": "linspace(start, stop, num): num evenly spaced values (NumPy's)",
    "eye": "eye(N, M=None, k=0, dtype=f64): ones on diagonal k, zeros elsewhere (NumPy's)",
    "concatenate": "concatenate(arrays, axis=0): NumPy's concatenate",
    "stack": "stack(arrays, axis=0): NumPy's stack",
    "reshape": "reshape(a, shape): NumPy's reshape",
    "ravel": "ravel(a): the array flattened (NumPy's)",
    "take": "take(a, indices, axis=None, mode='raise'): elements at integer indices (NumPy's)",
    "take_along_axis": "take_along_axis(a, indices, axis): NumPy's take_along_axis",
    "sort": "sort(a, axis=-1): a sorted copy (NumPy's values; NaNs last)",
    "argsort": "argsort(a, axis=-1): the indices that sort a, in a stable order (int64)",
    "diff": "diff(a, n=1, axis=-1, prepend=, append=): differences of neighbours (NumPy's)",
    "pad": "pad(a, pad_width, mode='constant', constant_values=0): NumPy's pad (modes "
           "constant, edge, wrap, reflect, symmetric)",
    "roll": "roll(a, shift, axis=None): elements shifted cyclically (NumPy's)",
    "swapaxes": "swapaxes(a, axis1, axis2): two axes interchanged (NumPy's)",
    "moveaxis": "moveaxis(a, source, destination): axes moved (NumPy's)",
    "cumsum": "cumsum(a, axis=None, dtype=None): the running sum (NumPy's)",
    "cumprod": "cumprod(a, axis=None, dtype=None): the running product (NumPy's)",
    "var": "var(a, axis=None, ddof=0, keepdims=False): the variance (NumPy's)",
    "std": "std(a, axis=None, ddof=0, keepdims=False): the standard deviation (NumPy's)",
    "logaddexp": "logaddexp(x, y): log(exp(x) + exp(y)), without overflow (NumPy's)",
    "logaddexp2": "logaddexp2(x, y): log2(2**x + 2**y), without overflow (NumPy's)",
    "cross": "cross(a, b): the cross product of two 3-vectors",
    "length": "length(v): the Euclidean length of a vector",
    "length_sq": "length_sq(v): the squared length of a vector, dot(v, v)",
    "normalize": "normalize(v): v / length(v) (zero for a zero vector)",
    "outer": "outer(a, b): the outer product of two vectors, a matrix",
    "determinant": "determinant(m): the determinant of a square matrix",
    "inverse": "inverse(m): the inverse of a square matrix (zero where it is singular)",
    "mul": "mul(a, b): matrix-matrix, matrix-vector or quaternion product, or scaling by a "
           "scalar (Warp's mul)",
    "diag": "diag(v): the diagonal matrix of a vector",
    "get_diag": "get_diag(m): the diagonal of a square matrix, a vector",
    "identity": "identity(n, dtype=f32): the n-by-n identity matrix",
    "trace": "trace(m): the sum of a matrix's diagonal",
    "skew": "skew(v): the cross-product matrix of a 3-vector (skew(a) @ b == cross(a, b))",
    "cw_mul": "cw_mul(a, b): the component-wise product of vectors or matrices",
    "cw_div": "cw_div(a, b): the component-wise quotient of vectors or matrices",
    "quat_from_axis_angle": "quat_from_axis_angle(axis, angle): the rotation quaternion "
                            "(x, y, z, w)",
    "quat_rotate": "quat_rotate(q, v): v rotated by the unit quaternion q",
    "quat_rotate_inv": "quat_rotate_inv(q, v): v rotated by the inverse of q",
    "quat_inverse": "quat_inverse(q): the conjugate of a unit quaternion",
    "quat_to_matrix": "quat_to_matrix(q): the 3-by-3 rotation matrix of q",
    "matrix_from_rows": "matrix_from_rows(r0, r1, ...): the matrix with these rows",
    "matrix_from_cols": "matrix_from_cols(c0, c1, ...): the matrix with these columns",
    "vector": "vector(x, y, ...): a vector of these components",
    "quat_to_axis_angle": "quat_to_axis_angle(q): (axis, angle), the rotation q is: a unit "
                          "axis and an angle in [0, pi] (the zero axis at angle 0)",
    "quat_slerp": "quat_slerp(q0, q1, t): the rotation a fraction t of the way from q0 to "
                  "q1, the shorter way (spherical linear interpolation)",
    "lerp": "lerp(a, b, t): a * (1 - t) + b * t, of scalars, vectors, matrices or quaternions",
    "ddot": "ddot(a, b): the double dot product of two matrices, sum of a[i, j] * b[i, j]",
    "transform_point": "transform_point(t, p): the transform t (or a 4x4 matrix) applied "
                       "to the point p: quat_rotate(t.q, p) + t.p, (m @ (p, 1))[:3]",
    "transform_vector": "transform_vector(t, v): the transform t (or a 4x4 matrix) applied "
                        "to the direction v: quat_rotate(t.q, v), (m @ (v, 0))[:3]",
    "transform_get_translation": "transform_get_translation(t): a transform's position, t.p",
    "transform_get_rotation": "transform_get_rotation(t): a transform's rotation, t.q",
    "transform_multiply": "transform_multiply(a, b): the transform a after b (also a * b)",
    "transform_inverse": "transform_inverse(t): the inverse of a transform (of a unit "
                         "rotation)",
    "transform_identity": "transform_identity(dtype=f32): the identity transform",
}


def reference_table() -> str:
    """The builtins as an rST list-table, by name (the API reference shows it)."""
    rows = [f"   * - ``adjit.{name}``\n     - {DOCS[name]}" for name in sorted(DOCS)]
    return ("\n.. list-table::\n   :header-rows: 1\n   :widths: 20 80\n\n"
            "   * - Name\n     - What it computes\n" + "\n".join(rows) + "\n")


class Builtin:
    """A function of the adjit namespace. Calling it from Python runs `py_impl` (NumPy; the
    interpreter mode's, for the kernel ones)."""

    def __init__(self, name: str, py_impl: Callable):
        self.__name__ = name
        self._py_impl = py_impl
        self.__doc__ = DOCS[name]

    def __call__(self, *args, **kwargs):
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
                     *[(n, WORK_ITEM_BUILTINS[n]) for n in KERNEL_ONLY],
                     *[(n, getattr(np, n)) for n in ARRAY_FUNCTIONS],
                     ("max", _numpy_minmax("max")), ("min", _numpy_minmax("min")),
                     ("degrees", np.degrees), ("radians", np.radians),
                     ("where", np.where), ("clip", np.clip), ("mean", np.mean),
                     ("transpose", np.transpose), ("matmul", np.matmul),
                     *[(n, getattr(np, n)) for n in NUMPY_ARRAY_FUNCTIONS]]:
    namespace[_name] = Builtin(_name, _impl)


# ---- small vectors, matrices and quaternions: their NumPy meanings are vector_values.py's
for _name, _impl in VECTOR_FUNCTIONS.items():
    namespace[_name] = Builtin(_name, _impl)

__doc__ += "\nAll of them:\n" + reference_table()
