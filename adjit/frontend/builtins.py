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
              "sqrt", "tanh", "sinh", "cosh", "asin", "acos", "atan", "erf", "rsqrt", "cbrt")
# Work-item queries, atomics and sync: kernels only, with no meaning in plain Python.
KERNEL_ONLY = ("index", "index_nd", "ndrange", "atomic_add", "synchronize")
# Float classification, with Python's and NumPy's names: bool results.
PREDICATES = ("isnan", "isinf", "isfinite")
# Element-wise binary functions with NumPy's names (scalar_ops compiles them).
BINARY_MATH = ("pow", "atan2", "hypot", "copysign", "maximum", "minimum")
# Array creation and reductions with NumPy's names and signatures (compiled functions only).
ARRAY_FUNCTIONS = ("sum", "dot", "zeros", "ones", "empty", "zeros_like", "ones_like",
                   "empty_like", "copy", "full", "full_like", "arange")
# NumPy's, with NumPy's names and meanings (frontend/numpy_calls.py compiles them)
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
    numpy_names = {"asin": "arcsin", "acos": "arccos", "atan": "arctan"}
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
