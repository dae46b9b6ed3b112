"""How calls compile when user code calls a builtin: adjit's own (builtins.py), the `math`
module's, and Python's `abs min max float int bool len range`. Each is an entry of the
registry of compile-time callables (callables.py), which the code generator asks by
identity; `lookup` gives a builtin's handler.
"""
from __future__ import annotations

import builtins as py
import functools
import math as pymath
from typing import Callable

import numpy as np

from mlir import ir
from mlir.dialects import memref

from ..dialects import adj
from ..dialects.mlir_types import mlir_type
from . import arrays as A
from . import callables
from .callables import Handler, How
from .matmul import matmul
from . import scalar_ops as S
from ..lang.builtins import PREDICATES, UNARY_MATH, namespace
from ..core.errors import UserError
from ..passes.ir_util import for_each_index
from ..core.types import (ArrayType, ScalarType, as_scalar_type, bool_, f32, f64, i32, i64,
                          weak_f64, weak_i64)
from .values import Array, ArrayExpr, Literal, PyObj, RangeValue, Scalar, Shape


def register_builtin(objs, handler: Handler) -> None:
    """Calls of each of `objs` compile to `handler(gen, args, kwargs)`: entries of the one
    registry (callables.py) that take the code's values as they are."""
    for o in objs:
        callables.register(o, handler, How.VALUES)


def lookup(obj) -> Handler | None:
    """The handler of the builtin `obj` (its registry entry's); None if it is no builtin."""
    entry = callables.lookup(obj)
    return entry.handler if entry is not None and entry.how is How.VALUES else None


def _expect(args, n: int, name: str, kwargs=None) -> None:
    if kwargs:
        raise UserError(f"{name}() takes no keyword arguments here")
    if len(args) != n:
        raise UserError(f"{name}() takes {n} argument{'s' if n != 1 else ''}, got {len(args)}")


def lift(fn: Callable, args: list):
    """Applies a scalar function element-wise when any argument is an array."""
    if any(isinstance(a, (Array, ArrayExpr)) for a in args):
        return A.elementwise(fn, args)
    return fn(*args)


# ---- math --------------------------------------------------------------------------
def _math(name: str, scalar_fn: Callable, arity: int, py_names=()) -> None:
    def handler(gen, args, kwargs):
        _expect(args, arity, name, kwargs)
        return lift(scalar_fn, list(args))

    register_builtin([namespace[name], *[getattr(pymath, n) for n in py_names]], handler)


for _n in UNARY_MATH:
    _math(_n, functools.partial(S.math_unary, _n), 1,
          [_n] if hasattr(pymath, _n) else [])
_math("floor", lambda a: S.floor_ceil("floor", a), 1, ["floor"])
_math("ceil", lambda a: S.floor_ceil("ceil", a), 1, ["ceil"])
_math("abs", S.absolute, 1, ["fabs"])
_math("pow", lambda a, b: S.binary("**", a, b), 2, ["pow"])
_math("atan2", S.atan2, 2, ["atan2"])
_math("copysign", S.copysign, 2, ["copysign"])
_math("hypot", S.hypot, 2)
for _n in PREDICATES:
    _math(_n, functools.partial(S.classify, _n), 1, [_n])
for _n in ("maximum", "minimum"):
    _math(_n, functools.partial(S.extremum, _n), 2)


_DEGREES = 180.0 / pymath.pi
_math("degrees", lambda a: S.binary("*", S.to_float(a), Literal(_DEGREES)), 1, ["degrees"])
_math("radians", lambda a: S.binary("*", S.to_float(a), Literal(1.0 / _DEGREES)), 1,
      ["radians"])


def _math_hypot(gen, args, kwargs):
    """math.hypot(*coordinates): the Euclidean norm, one scaled pair at a time (so it cannot
    overflow either); hypot(x) is |x| as a float, hypot() is 0.0."""
    if kwargs:
        raise UserError("hypot() takes no keyword arguments")
    coords = [Literal(0.0), *args] if len(args) < 2 else list(args)
    out = coords[0]
    for a in coords[1:]:
        out = lift(S.hypot, [out, a])
    return out


register_builtin([pymath.hypot], _math_hypot)
register_builtin([py.abs], lambda gen, args, kw: (_expect(args, 1, "abs", kw), lift(S.absolute, args))[1])


def _minmax(name: str, python: bool):
    """max/min of one array (a reduction) or of several values, left to right. adjit.max
    and adjit.min are NumPy's (np.max, np.maximum: NaN propagates whatever its position);
    Python's builtins keep Python's meaning on scalars (`max(nan, 1.0)` is nan,
    `max(1.0, nan)` is 1.0, as in the interpreter) and NumPy's on arrays, where Python has
    none."""
    numpy_name = name + "imum"

    def pair(x, y):
        if python and not any(isinstance(v, (Array, ArrayExpr)) for v in (x, y)):
            return S.minmax(name, x, y)
        return lift(functools.partial(S.extremum, numpy_name), [x, y])

    def handler(gen, args, kwargs):
        if kwargs and not python and len(args) == 1:    # adjit.max(x, axis=..., ...)
            return reduction_handler(name)(gen, args, kwargs)
        if kwargs:
            raise UserError(f"{name}() takes no keyword arguments here")
        if len(args) == 1:
            return reduce(name, args[0])
        if len(args) < 2:
            raise UserError(f"{name}() needs at least 1 argument")
        out = args[0]
        for a in args[1:]:
            out = pair(out, a)
        return out
    return handler


register_builtin([py.min], _minmax("min", python=True))
register_builtin([py.max], _minmax("max", python=True))
register_builtin([namespace["min"]], _minmax("min", python=False))
register_builtin([namespace["max"]], _minmax("max", python=False))


def _scalar_cast(to: ScalarType, name: str):
    def handler(gen, args, kwargs):
        _expect(args, 1, name, kwargs)
        a = args[0]
        if isinstance(a, Literal):
            return Literal({"f64": float, "i64": int, "bool": py.bool}[to.name](a.value))
        return lift(lambda x: S.cast(S.as_scalar(x), to), [a])
    return handler


# Python's float() and int() make Python scalars: weak (NEP 50), as literals are.
register_builtin([py.float], _scalar_cast(weak_f64, "float"))
register_builtin([py.int], _scalar_cast(weak_i64, "int"))
register_builtin([py.bool], _scalar_cast(bool_, "bool"))


def _numpy_scalar(to: ScalarType, name: str):
    """np.float32(x) and its kin: a NumPy scalar of that type (strong, not weak as Python's
    float() is: `np.float32(0.1) * x` keeps x's float64 where x is one), or an array
    converted element by element (NumPy's `np.float32(a)` is an array too)."""
    def handler(gen, args, kwargs):
        _expect(args, 1, name, kwargs)
        a = args[0]
        if isinstance(a, Literal):       # (a Python number: NumPy's conversion of it)
            a = S.constant(a.value, S.literal_type(a.value).strong)
        return lift(lambda x: S.cast(S.as_scalar(x), to), [a])
    return handler


for _t in (f32, f64, i32, i64, bool_):
    register_builtin([_t.np_dtype.type], _numpy_scalar(_t, f"np.{_t.np_dtype.name}"))


def _range(gen, args, kwargs):
    if kwargs or not 1 <= len(args) <= 3:
        raise UserError("range() takes 1 to 3 positional arguments")
    for a in args:
        if isinstance(a, Literal) and not isinstance(a.value, int):
            raise UserError(f"range() bounds must be integers, got {a.value!r}")
        if isinstance(a, Scalar) and a.type.is_float:
            raise UserError(f"range() bounds must be integers, got a {a.type!r} value")
    start, stop, step = ((Literal(0), args[0], Literal(1)) if len(args) == 1 else
                         (args[0], args[1], Literal(1)) if len(args) == 2 else tuple(args))
    return RangeValue(start, stop, step)


register_builtin([py.range], _range)


def _len(gen, args, kwargs):
    _expect(args, 1, "len", kwargs)
    a = args[0]
    if isinstance(a, (Array, ArrayExpr)):
        if a.type.ndim == 0:
            raise UserError("len() of a 0-d array")
        d = A.dims(a)[0] if isinstance(a, Array) else a.shape[0]
        return S.from_index(d)
    if isinstance(a, (tuple, dict, Shape)):
        return Literal(len(a.dims) if isinstance(a, Shape) else len(a))
    if isinstance(a, PyObj) and isinstance(a.obj, (tuple, list)):
        return Literal(len(a.obj))   # (a module-level tuple of functions, of constants)
    raise UserError(f"len() of {S.describe(a)}")


register_builtin([py.len], _len)


def _tuple(gen, args, kwargs):
    """tuple() of a compile-time tuple (a comprehension's, a batched tangent's): itself."""
    _expect(args, 1, "tuple", kwargs)
    if not isinstance(args[0], tuple):
        raise UserError(f"tuple() of {S.describe(args[0])}: compiled code makes tuples of "
                        "tuples (and comprehensions over them) only")
    return args[0]


register_builtin([py.tuple], _tuple)


# ---- work-item indices, atomics, sync ---------------------------------------------------
def _index(gen, args, kwargs):
    _expect(args, 0, "adjit.index", kwargs)
    gen.require_kernel("adjit.index()")
    return S.from_index(adj.index())


def _index_nd(gen, args, kwargs):
    _expect(args, 0, "adjit.index_nd", kwargs)
    ndim = gen.require_kernel("adjit.index_nd()")
    return tuple(S.from_index(adj.global_id(d)) for d in range(ndim))


def _ndrange(gen, args, kwargs):
    _expect(args, 0, "adjit.ndrange", kwargs)
    ndim = gen.require_kernel("adjit.ndrange()")
    return tuple(S.from_index(adj.global_size(d)) for d in range(ndim))


def _atomic_add(gen, args, kwargs):
    _expect(args, 3, "adjit.atomic_add", kwargs)
    # a write: lazy names first (lazy_names.force_lazy), and a lazy `arr` becomes its array
    arr, sub, v = gen.force_lazy(list(args), also=[gen._stmt or gen.src.tree])
    if not isinstance(arr, Array):
        raise UserError("adjit.atomic_add(arr, idx, v): arr must be an array")
    return A.atomic_add(arr, gen.subscripts(arr, sub), v, gen.debug)


def _sync(gen, args, kwargs):
    _expect(args, 0, "adjit.synchronize", kwargs)
    adj.sync()
    return None


# ---- arrays (compiled functions only) --------------------------------------------------
def reduce(op: str, a):
    """A reduction of an array, or of a scalar as NumPy's (np.sum of an int32 or a bool is
    an int64)."""
    if isinstance(a, (Array, ArrayExpr, Scalar)):
        return A.reduce(op, a)
    if isinstance(a, Literal):
        return Literal(int(a.value)) if op == "sum" and isinstance(a.value, bool) else a
    raise UserError(f"{op}() of {S.describe(a)}")


def _axis_arguments(name: str, args: list, kwargs: dict) -> tuple:
    """(x, axis or None, keepdims) of a reduction `name(x, axis=None, keepdims=False)`, the
    axis and keepdims constants."""
    kwargs = dict(kwargs)
    if not 1 <= len(args) <= 2:
        raise UserError(f"{name}(x, axis=None, keepdims=False) takes one array")
    axis = args[1] if len(args) == 2 else kwargs.pop("axis", None)
    keepdims = kwargs.pop("keepdims", Literal(False))
    if kwargs:
        raise UserError(f"{name}() has no argument {sorted(kwargs)[0]!r}")
    if isinstance(axis, PyObj) and axis.obj is None:
        axis = None
    if axis is not None and (not isinstance(axis, Literal) or isinstance(axis.value, bool)
                             or not isinstance(axis.value, int)):
        raise UserError(f"{name}(): axis must be a constant integer (or None)")
    if not isinstance(keepdims, Literal) or not isinstance(keepdims.value, bool):
        raise UserError(f"{name}(): keepdims must be True or False")
    return args[0], None if axis is None else axis.value, keepdims.value


def reduction_handler(op: str):
    def handler(gen, args, kwargs):
        x, axis, keepdims = _axis_arguments(op, list(args), kwargs)
        if (axis is None and not keepdims) or not isinstance(x, (Array, ArrayExpr)):
            return reduce(op, x)
        gen.require_host(f"{op}(..., axis=...) (a new array)")
        return A.reduce_axis(op, x, axis, keepdims)
    return handler


def _mean(gen, args, kwargs):
    """NumPy's mean (of all elements, or along an axis): the sum over the count, in the
    sum's float type (integers and bools: float64; float32 stays float32)."""
    x, axis, keepdims = _axis_arguments("mean", list(args), kwargs)
    if not isinstance(x, (Array, ArrayExpr)):
        return S.to_float(x)
    shape = A.dims(x) if isinstance(x, Array) else x.shape
    if axis is None:
        count = S.from_index(A.numel(shape))
    else:
        if not -len(shape) <= axis < len(shape):
            raise UserError(f"axis {axis} is out of bounds for an array of {len(shape)} "
                            "dimensions")
        count = S.from_index(shape[axis])
    if axis is None and not keepdims:
        total = reduce("sum", x)
    else:
        gen.require_host("mean(..., axis=...) (a new array)")
        total = A.reduce_axis("sum", x, axis, keepdims)
    if isinstance(total, Scalar):
        total = S.to_float(total)
        return S.binary("/", total, S.cast(S.to_float(count), total.type))
    dtype = total.type.dtype if total.type.dtype.is_float else f64
    return A.elementwise(lambda t: S.binary("/", S.cast(t, dtype), S.cast(S.to_float(count),
                                                                         dtype)), [total])


def _where(gen, args, kwargs):
    """np.where(cond, a, b): a where cond holds, else b, element-wise (a derivative goes to
    the side chosen)."""
    _expect(args, 3, "where", kwargs)
    return lift(S.select, list(args))


def _clip(gen, args, kwargs):
    """np.clip(x, lo, hi) = minimum(maximum(x, lo), hi), NaN propagating as NumPy's."""
    _expect(args, 3, "clip", kwargs)
    x, lo, hi = args
    return lift(lambda a, b, c: S.extremum("minimum", S.extremum("maximum", a, b), c),
                [x, lo, hi])


def _dot(gen, args, kwargs):
    """dot of two 1-D arrays (a sum of products, adjit.sum's accumulation), or NumPy's dot
    of 1-D and 2-D arrays otherwise (matmul)."""
    _expect(args, 2, "adjit.dot", kwargs)
    a, b = args
    if all(isinstance(x, (Array, ArrayExpr)) and x.type.ndim == 1 for x in (a, b)):
        return A.reduce("sum", A.elementwise(lambda x, y: S.binary("*", x, y), [a, b]))
    return _matmul(gen, args, kwargs)


def _matmul(gen, args, kwargs):
    _expect(args, 2, "matmul", kwargs)
    gen.require_host("matmul (a new array)")
    return matmul(gen, *args)


def _shape_arg(gen, shape) -> list[ir.Value]:
    if isinstance(shape, Shape):
        return list(shape.dims)
    sizes = shape if isinstance(shape, tuple) else (shape,)
    for s in sizes:     # a constant known negative now is refused now, at its line
        if (isinstance(s, Literal) and not isinstance(s.value, bool)
                and isinstance(s.value, int) and s.value < 0):
            raise UserError(f"negative dimensions are not allowed: an array of shape "
                            f"{tuple(x.value if isinstance(x, Literal) else '?' for x in sizes)}")
    return [S.to_index(s) for s in sizes]


def bind(name: str, names: tuple[str, ...], args: list, kwargs: dict) -> dict:
    """NumPy function `name`'s arguments by parameter name (those given), from positions and
    keywords as Python binds them: too many positions, one parameter given both ways or an
    unknown keyword is a UserError naming it."""
    if len(args) > len(names):
        raise UserError(f"{name}() takes at most {len(names)} arguments, got {len(args)}")
    got = dict(zip(names, args))
    unknown = sorted(set(kwargs) - set(names))
    if unknown:
        raise UserError(f"{name}() has no argument {unknown[0]!r} in adjit")
    for k, v in kwargs.items():
        if k in got:
            raise UserError(f"{name}() got {k!r} both by position and by keyword")
        got[k] = v
    return got


def creation_args(signature: str, args: list, kwargs: dict, n: int, optional: int = 0):
    """The arguments of a NumPy creation function `adjit.<signature>`: `n` positional ones
    (and up to `optional` more), then the dtype, by position or by keyword. Returns
    (arguments, dtype or None)."""
    most = n + optional
    kwargs = dict(kwargs)
    if len(args) == most + 1:
        if "dtype" in kwargs:
            raise UserError(f"adjit.{signature} got dtype both by position and by keyword")
        kwargs["dtype"] = args[most]
        args = args[:most]
    if not n <= len(args) <= most:
        count = f"{n}" if not optional else f"{n} to {most}"
        raise UserError(f"adjit.{signature} takes {count} argument{'s' if most != 1 else ''} "
                        f"before dtype, got {len(args)}")
    extra = sorted(set(kwargs) - {"dtype"})
    if extra:
        raise UserError(f"adjit.{signature} got unexpected keyword(s) {extra}")
    return list(args), _dtype(kwargs.get("dtype"))


def _dtype(d) -> ScalarType | None:
    """A dtype= argument; None when absent or None (np.dtype(None) would be float64)."""
    if d is None or isinstance(d, PyObj) and d.obj is None:
        return None
    if not isinstance(d, PyObj):
        raise UserError(f"dtype=: expected a type such as adjit.f32, got {S.describe(d)}")
    try:
        return as_scalar_type(d.obj)
    except TypeError as e:
        raise UserError(f"dtype=: {e}") from None


def _array_arg(signature: str, a) -> Array | ArrayExpr:
    if not isinstance(a, (Array, ArrayExpr)):
        raise UserError(f"adjit.{signature}: expected an array, got {S.describe(a)}")
    return a


def _fill_arg(signature: str, v) -> Scalar | Literal:
    if not isinstance(v, (Scalar, Literal)):
        raise UserError(f"adjit.{signature}: fill_value must be a scalar, got {S.describe(v)}")
    return v


def _new_array(dtype: ScalarType, shape: list[ir.Value], fill) -> Array:
    out = A.alloc(dtype, shape)
    if fill is not None:
        A.fill(out, fill)
    return out


def _creator(name: str, fill_value):
    """zeros, ones, empty: (shape, dtype=f64)."""
    signature = f"{name}(shape, dtype=None)"

    def handler(gen, args, kwargs):
        if gen.kind == "kernel":
            (shape,), dtype = creation_args(signature, args, kwargs, 1)
            return _local_array(gen, name, shape, dtype or f64, fill_value)
        gen.require_host(f"adjit.{name}()")
        (shape,), dtype = creation_args(signature, args, kwargs, 1)
        fill = None if fill_value is None else Literal(fill_value)
        return _new_array(dtype or f64, _shape_arg(gen, shape), fill)
    return handler


LOCAL_LIMIT = 1024     # elements of one local array of a kernel (a work item's own memory)


def _local_array(gen, name: str, shape, dtype: ScalarType, fill_value) -> Array:
    """A kernel's local array (`buf = adjit.zeros(4)`): the work item's own memory, of a
    shape known when the kernel is compiled, allocated once at the kernel's entry (an
    alloca inside a loop would grow the stack every iteration); zeroes or ones are stored
    where the call is."""
    dims_ = shape if isinstance(shape, tuple) else (shape,)
    if not all(isinstance(d, Literal) and isinstance(d.value, int) and not
               isinstance(d.value, bool) and d.value >= 0 for d in dims_):
        raise UserError(f"adjit.{name}() in a kernel makes a local array of the work item, "
                        "whose shape must be integer constants (adjit.zeros(4), "
                        "adjit.zeros((3, 3))): its memory is sized when the kernel compiles")
    sizes = [d.value for d in dims_]
    if pymath.prod(sizes) > LOCAL_LIMIT:
        raise UserError(f"adjit.{name}() in a kernel: a local array of {pymath.prod(sizes)} "
                        f"elements is over the {LOCAL_LIMIT} a work item may keep (each "
                        "item's local arrays live in its registers or stack); pass a larger "
                        "array as an argument")
    t = ArrayType(dtype, len(sizes))
    with ir.InsertionPoint.at_block_begin(gen.entry_block):
        value = memref.alloca(mlir_type(t), [A.idx(n) for n in sizes], [])
    out = Array(value, t)
    if fill_value is not None:
        fill = S.convert(Literal(fill_value), dtype).value
        for_each_index([A.idx(n) for n in sizes], lambda at: memref.store(fill, value, at))
    return out


def _like(name: str, fill_value):
    """zeros_like, ones_like, empty_like: (a, dtype=a.dtype)."""
    signature = f"{name}(a, dtype=None)"

    def handler(gen, args, kwargs):
        gen.require_host(f"adjit.{name}()")
        (a,), dtype = creation_args(signature, args, kwargs, 1)
        a = _array_arg(signature, a)
        fill = None if fill_value is None else Literal(fill_value)
        return _new_array(dtype or a.type.dtype, _shape_of(a), fill)
    return handler


def _shape_of(a: Array | ArrayExpr) -> list[ir.Value]:
    return A.dims(a) if isinstance(a, Array) else a.shape


def _full(gen, args, kwargs):
    """full(shape, fill_value, dtype=None): the dtype defaults to fill_value's, as NumPy's."""
    gen.require_host("adjit.full()")
    signature = "full(shape, fill_value, dtype=None)"
    (shape, v), dtype = creation_args(signature, args, kwargs, 2)
    v = _fill_arg(signature, v)
    default = S.literal_type(v.value) if isinstance(v, Literal) else v.type
    return _new_array(dtype or default, _shape_arg(gen, shape), v)


def _full_like(gen, args, kwargs):
    gen.require_host("adjit.full_like()")
    signature = "full_like(a, fill_value, dtype=None)"
    (a, v), dtype = creation_args(signature, args, kwargs, 2)
    a = _array_arg(signature, a)
    return _new_array(dtype or a.type.dtype, _shape_of(a), _fill_arg(signature, v))


def _arange(gen, args, kwargs):
    """arange(stop), arange(start, stop[, step]), dtype= (or a 4th positional): NumPy's."""
    gen.require_host("adjit.arange()")
    signature = "arange([start, ]stop[, step], dtype=None)"
    args, dtype = creation_args(signature, args, kwargs, 1, optional=2)
    for a in args:
        if not isinstance(a, (Scalar, Literal)):
            raise UserError(f"adjit.arange() bounds must be scalars, got {S.describe(a)}")
    start, stop, step = ((Literal(0), args[0], Literal(1)) if len(args) == 1 else
                         (args[0], args[1], Literal(1)) if len(args) == 2 else args)
    return A.arange(start, stop, step, dtype)


def _copy(gen, args, kwargs):
    gen.require_host("adjit.copy()")
    _expect(args, 1, "adjit.copy", kwargs)
    if not isinstance(args[0], (Array, ArrayExpr)):
        raise UserError("adjit.copy() takes an array")
    return A.copy(args[0])


_NAMED_HANDLERS = {
    "index": _index, "index_nd": _index_nd, "ndrange": _ndrange, "atomic_add": _atomic_add,
    "synchronize": _sync, "sum": reduction_handler("sum"), "dot": _dot,
    "zeros": _creator("zeros", 0), "ones": _creator("ones", 1), "empty": _creator("empty", None),
    "zeros_like": _like("zeros_like", 0), "ones_like": _like("ones_like", 1),
    "empty_like": _like("empty_like", None), "copy": _copy, "full": _full,
    "full_like": _full_like, "arange": _arange, "mean": _mean, "where": _where,
    "clip": _clip, "matmul": _matmul}
for _name, _h in _NAMED_HANDLERS.items():
    register_builtin([namespace[_name]], _h)


# NumPy's spellings of the same functions (`np.sin(x)`, `np.sum(x)`, `np.zeros(n)`): NumPy
# code compiles as written where adjit has the function, whose semantics are NumPy's.
_NUMPY_SPELLINGS = {
    **{n: n for n in ("sin", "cos", "tan", "exp", "exp2", "expm1", "log", "log2", "log10",
                      "log1p", "sqrt", "tanh", "sinh", "cosh", "cbrt", "floor", "ceil", "abs",
                      "isnan", "isinf", "isfinite", "hypot", "copysign", "maximum",
                      "minimum", "sum", "dot", "zeros", "ones", "empty", "zeros_like",
                      "ones_like", "empty_like", "copy", "full", "full_like", "arange", "max",
                      "min", "degrees", "radians", "where", "clip", "mean", "matmul")},
    "arcsin": "asin", "arccos": "acos", "arctan": "atan", "arctan2": "atan2",
    "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh",
    "power": "pow", "absolute": "abs", "amax": "max", "amin": "min"}


def numpy_typed(handler: Handler) -> Handler:
    """A NumPy function's handler: NumPy returns a NumPy scalar (typed, not weak) for Python
    scalars, so `np.sin(lr)` with a Python float `lr` is an np.float64 that makes an f32
    array f64, as in NumPy 2 (adjit.sin and math.sin keep a Python float weak, as JAX and
    the math module do)."""
    def typed(gen, args, kwargs):
        if "out" in kwargs:    # (a ufunc's or a reduction's out=: the one refusal for all)
            if not (isinstance(kwargs["out"], PyObj) and kwargs["out"].obj is None):
                raise UserError("out= is not supported in adjit: assign the result instead, "
                                "y[...] = np.<function>(...)")
            kwargs = {k: v for k, v in kwargs.items() if k != "out"}
        out = handler(gen, args, kwargs)
        if isinstance(out, Literal) and not isinstance(out.value, py.bool):
            return S.as_scalar(out, S.literal_type(out.value).strong)
        if isinstance(out, Scalar) and out.type.weak:
            return S.cast(out, out.type.strong)
        return out
    return typed


for _np_name, _name in _NUMPY_SPELLINGS.items():
    if hasattr(np, _np_name):
        register_builtin([getattr(np, _np_name)], numpy_typed(lookup(namespace[_name])))
# np.max(x, 1) reduces along axis 1 (adjit.max(a, b) is the element-wise maximum)
for _np_name, _op in (("max", "max"), ("amax", "max"), ("min", "min"), ("amin", "min")):
    if hasattr(np, _np_name):
        register_builtin([getattr(np, _np_name)], numpy_typed(reduction_handler(_op)))
