"""`@adjit.struct` (Warp's `@wp.struct`): a class with typed fields whose instances are made
in Python and passed to kernels, `@adjit.func` and `@adjit.jit` functions.

A struct is its fields to the compiler, as a vector is its components: a declaration with a
struct parameter has one parameter per field (`s.mass`, `s.pos`, nested structs'
`s.inner.x`: its `params` and `annotations` are those), and every way in (a call or launch
from Python, `lower`, autodiff, a call in compiled code) expands a struct argument into its
fields first (`flatten_args`, `flatten_annotations`; compiler.py for compiled code). So the
compile service, the caches, the derivative ABI and the GPU launchers see only the scalars,
small vectors and arrays they already take; in the body the code generator gathers the
fields again into one compile-time value (values.StructValue) that `s.mass` and `s.pos[i]`
read. Array fields are passed by reference, so writes through them reach the caller's
arrays.

Derivatives: `Duplicated(s, ds)`, `ds` a struct of the same type, is each float field
Duplicated with its field of `ds` as shadow (an array's shadow array, a vector's shadow
vector, whose derivative accumulates into it in reverse mode), except float scalars in
reverse mode: they are Active and their derivative is added to the field of `ds`
afterwards (Enzyme's accumulating shadow). Integer and bool fields are Const.

MLIR-free: the declarations (functions.py) import this module.
"""
from __future__ import annotations

import inspect
import numbers
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..core.types import (ArrayType, ScalarType, VecArrayType, VecType, as_scalar_type)


@dataclass(frozen=True, eq=False)
class StructType:
    """The type of an `@adjit.struct` class: its fields, in declaration order, each a
    ScalarType, VecType, ArrayType, VecArrayType or StructType, and the class-level
    defaults, (name, value) pairs. One per class (compared by identity)."""
    cls: type
    fields: tuple[tuple[str, Any], ...]
    defaults: tuple[tuple[str, Any], ...] = ()

    @property
    def name(self) -> str:
        return self.cls.__name__

    def field(self, name: str):
        for n, t in self.fields:
            if n == name:
                return t
        raise AttributeError(f"struct {self.name} has no field {name!r} (its fields: "
                             f"{', '.join(n for n, _ in self.fields)})")

    def __repr__(self) -> str:
        return self.name


def struct_type(obj) -> StructType | None:
    """The StructType of an `@adjit.struct` class or of one of its instances, else None."""
    t = getattr(obj if isinstance(obj, type) else type(obj), "__adjit_struct__", None)
    return t if isinstance(t, StructType) else None


def _field_type(cls: type, name: str, ann):
    if isinstance(ann, (ScalarType, VecType, ArrayType, VecArrayType)):
        return ann
    nested = struct_type(ann) if isinstance(ann, type) else None
    if nested is not None:
        return nested
    try:
        return as_scalar_type(ann)
    except TypeError:
        raise TypeError(f"@adjit.struct {cls.__qualname__}: field {name!r} has annotation "
                        f"{ann!r}, which is not an adjit type (adjit.f32 or float, "
                        "adjit.vec3, adjit.Array[adjit.f32, 1], another @adjit.struct)"
                        ) from None


def _default(t):
    if isinstance(t, ScalarType):
        return t.np_dtype.type(0)
    if isinstance(t, VecType):
        return t()                   # zeros (the identity for a quaternion)
    if isinstance(t, StructType):
        return t.cls()
    return None                      # an array field is set before the struct is passed


def _converted(st: StructType, name: str, t, value):
    """`value` as field `name` of type `t` holds it, or TypeError/ValueError naming the
    field (so that the error is raised at the user's assignment)."""
    what = f"{st.name}.{name} ({t!r})"
    if isinstance(t, StructType):
        if struct_type(value) is not t:
            raise TypeError(f"{what}: needs a {t.name} struct, got {type(value).__name__}")
        return value
    if isinstance(t, ScalarType):
        if isinstance(value, np.ndarray) or not isinstance(value, (numbers.Number, np.generic)):
            raise TypeError(f"{what}: needs a scalar, got {type(value).__name__}")
        if t.is_float and isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{what}: needs a float, got a bool")
        if not t.is_float and isinstance(value, (float, np.floating)) and value != int(value):
            raise TypeError(f"{what}: needs an integer, got {value!r}")
        return t.np_dtype.type(value)
    if isinstance(t, VecType):
        # (a copy of the user's values: a shadow struct's vector accumulates in place)
        try:
            arr = np.asarray(value, dtype=t.dtype.np_dtype)
        except (TypeError, ValueError):
            raise TypeError(f"{what}: needs {t.size} numbers, got {type(value).__name__}"
                            ) from None
        if arr.shape != t.shape:
            raise ValueError(f"{what}: needs shape {t.shape}, got {arr.shape}")
        # (VecType.made: a Vector in the interpreter mode, lang/vector_values.py)
        return VecType.made(arr.copy() if arr is value else arr)
    # an array field: the user's array itself (kernels write through it)
    if value is None:
        return None
    arr_t = t.array if isinstance(t, VecArrayType) else t
    if isinstance(value, np.ndarray):
        if value.dtype != arr_t.dtype.np_dtype:
            raise TypeError(f"{what}: needs dtype {arr_t.dtype.np_dtype}, got {value.dtype}")
        if value.ndim != arr_t.ndim or (isinstance(t, VecArrayType) and
                                        value.shape[t.ndim:] != t.vec.shape):
            trailing = (f" whose trailing ones are {t.vec.shape}"
                        if isinstance(t, VecArrayType) else "")
            raise ValueError(f"{what}: needs an array of {arr_t.ndim} dimensions{trailing}, "
                             f"got shape {value.shape}")
    elif not (hasattr(value, "__cuda_array_interface__") or hasattr(value, "__array__")
              or hasattr(value, "__dlpack__")):
        raise TypeError(f"{what}: needs an array, got {type(value).__name__}")
    return value


def struct(cls: type) -> type:
    """`@adjit.struct`: makes `cls`, whose annotated class attributes are its fields, a
    struct. Instances take the fields by position (declaration order) or keyword
    (`Particle(mass=2.0, x=xs)`), in Python and in compiled code alike; unset fields are
    zero (scalars, vectors), a default struct (nested structs) or None (arrays, which must
    be set before the struct is passed). Assigning a field converts and checks the value;
    assigning a name that is no field is an AttributeError.

    Kernels and compiled functions take structs as arguments, read their fields and write
    through their array fields, make structs (``Spring(k, x)``, by position or keyword)
    and return them (to Python, an instance of the class); derivatives take
    ``Duplicated(s, ds)`` with ``ds = adjit.zeros_like_struct(s)`` (the derivatives of its
    float fields are added into ``ds``), and ``grad`` with respect to a struct returns a
    struct of the same class, from Python and inside compiled code.

    Args:
        cls: a class whose annotated attributes (adjit types, ``float``, arrays, vectors,
            other structs) are its fields; class-level values are their defaults.

    Returns:
        type: ``cls``, made a struct.

    Raises:
        TypeError: ``cls`` not a class, with no fields, or a field annotation that is not an
            adjit type.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import Array, f64

            @adjit.struct
            class Spring:
                k: f64
                x: Array[f64, 1]

            @adjit.jit
            def energy(s: Spring) -> f64:
                return 0.5 * s.k * adjit.sum(s.x * s.x)

            s = Spring(k=2.0, x=np.array([1.0, 2.0]))
            ds = adjit.zeros_like_struct(s)
            adjit.autodiff(adjit.Reverse, energy, adjit.Duplicated(s, ds))
            print(energy(s), ds.k, ds.x)   # 5.0 2.5 [2. 4.]

            @adjit.jit
            def stiffer(s: Spring):
                return Spring(2.0 * s.k, s.x)    # made in compiled code, returned
            print(stiffer(s).k, adjit.grad(energy)(s).k)   # 4.0 2.5
    """
    if not isinstance(cls, type):
        raise TypeError(f"@adjit.struct decorates a class, got {cls!r}")
    try:
        anns = inspect.get_annotations(cls, eval_str=True)
    except Exception as e:
        raise TypeError(f"@adjit.struct {cls.__qualname__}: cannot evaluate its annotations: "
                        f"{e}") from None
    if not anns:
        raise TypeError(f"@adjit.struct {cls.__qualname__} has no fields (annotate them: "
                        "`mass: adjit.f32`)")
    # Class-level defaults (`mass: float = 1.0`) are the instances' defaults (and those of
    # a construction in compiled code: compiler/struct_values.py).
    defaults = {n: getattr(cls, n) for n in anns if n in cls.__dict__}
    for n in defaults:
        delattr(cls, n)
    st = StructType(cls, tuple((n, _field_type(cls, n, a)) for n, a in anns.items()),
                    tuple(defaults.items()))

    def __init__(self, *args, **kwargs):
        # (positional arguments are the fields in declaration order, as in compiled code)
        if len(args) > len(st.fields):
            raise TypeError(f"{st.name}() takes {len(st.fields)} fields, got {len(args)} "
                            "positional arguments")
        for (n, _), v in zip(st.fields, args):
            if n in kwargs:
                raise TypeError(f"{st.name}() got multiple values for field {n!r}")
            kwargs[n] = v
        for n, t in st.fields:
            if n in kwargs:
                setattr(self, n, kwargs.pop(n))
            elif n in defaults:
                setattr(self, n, defaults[n])
            else:
                object.__setattr__(self, n, _default(t))
        if kwargs:
            name = sorted(kwargs)[0]
            raise TypeError(f"{st.name}() got an unexpected keyword argument {name!r} (its "
                            f"fields: {', '.join(n for n, _ in st.fields)})")

    def __setattr__(self, name, value):
        object.__setattr__(self, name, _converted(st, name, st.field(name), value))

    def __repr__(self):
        def show(v):
            if isinstance(v, np.ndarray) and v.size > 4:
                return f"<array {v.dtype} {v.shape}>"
            return repr(v.tolist() if isinstance(v, (np.ndarray, np.generic)) else v)
        return f"{st.name}({', '.join(f'{n}={show(getattr(self, n))}' for n, _ in st.fields)})"

    cls.__init__, cls.__setattr__, cls.__repr__ = __init__, __setattr__, __repr__
    cls.__adjit_struct__ = st
    _CLASSES[class_name(cls)] = cls
    return cls


# Struct classes by `class_name`: a compiled function that returns a struct records its
# class's name with the compiled code (compiler/compiled.py), whose new process finds the
# class here (defined again when the user's module is imported).
_CLASSES: dict[str, type] = {}


def class_name(cls: type) -> str:
    """The name a compiled result's record gives a struct class."""
    return f"{cls.__module__}:{cls.__qualname__}"


def class_named(name: str) -> StructType:
    """The StructType of the struct class `class_name` gave `name` (KeyError if no such
    class was defined in this process)."""
    return _CLASSES[name].__adjit_struct__


def from_leaf_values(st: StructType, values):
    """A new `st` struct whose leaf fields are `values` (an iterator, in `leaves` order; a
    scalar field's value converted to its NumPy scalar type): a compiled function's struct
    result as Python gets it."""
    out = object.__new__(st.cls)
    for n, t in st.fields:
        if isinstance(t, StructType):
            v = from_leaf_values(t, values)
        else:
            v = next(values)
            if isinstance(t, ScalarType):
                v = t.np_dtype.type(v)
        object.__setattr__(out, n, v)
    return out


def layout_text(st: StructType) -> str:
    """The layout as text, for the disk cache's fingerprint (source.py): code compiled for
    one layout reads its fields by position."""
    defaults = dict(st.defaults)
    return f"struct {st.name}(" + ", ".join(
        f"{n}: {layout_text(t) if isinstance(t, StructType) else repr(t)}"
        + (f" = {_default_text(defaults[n])}" if n in defaults else "")
        for n, t in st.fields) + ")"


def _default_text(v) -> str:
    """A class-level default as text that is the same in every process (a construction in
    compiled code uses it)."""
    if isinstance(v, np.ndarray):
        return f"{v.dtype.str}{v.tolist()!r}"
    if isinstance(v, (bool, int, float, np.generic)):
        return repr(v.item() if isinstance(v, np.generic) else v)
    return type(v).__name__


# ---- the flat view ------------------------------------------------------------------------
def leaves(st: StructType, prefix: str) -> list[tuple[str, Any, tuple[str, ...]]]:
    """(flat parameter name, field type, attribute path) of each leaf field, in order."""
    out = []
    for n, t in st.fields:
        if isinstance(t, StructType):
            out.extend((name, ft, (n, *path)) for name, ft, path in leaves(t, f"{prefix}.{n}"))
        else:
            out.append((f"{prefix}.{n}", t, (n,)))
    return out


def flatten_params(params: Sequence[str], anns: Sequence) -> tuple[list, list, list]:
    """(flat names, flat annotations, layout): a struct parameter's leaves in its place;
    `layout` per parameter, its StructType or None."""
    names, flat, layout = [], [], []
    for p, a in zip(params, anns):
        if isinstance(a, StructType):
            for name, t, _ in leaves(a, p):
                names.append(name)
                flat.append(t)
            layout.append(a)
        else:
            names.append(p)
            flat.append(a)
            layout.append(None)
    return names, flat, layout


def field_at(obj, path: tuple[str, ...]):
    """The field of struct `obj` at attribute `path` (a leaf's, from `leaves`)."""
    for n in path:
        obj = getattr(obj, n)
    return obj


def _struct_arg(st: StructType, a, what: str):
    if struct_type(a) is not st:
        raise TypeError(f"{what} must be a {st.name} struct (@adjit.struct), got "
                        f"{type(a).__name__}")
    return a


def _leaf_values(st: StructType, s, what: str) -> list:
    out = []
    for name, t, path in leaves(st, ""):
        v = field_at(s, path)
        if v is None:
            raise TypeError(f"{what}: field {name[1:]!r} ({t!r}) of the {st.name} is not set")
        out.append(v)
    return out


def struct_leaf_values(st: StructType, s, what: str) -> list:
    """The values of struct `s`'s leaf fields, in `leaves` order (TypeError naming the field
    unset, or `s` of another type)."""
    return _leaf_values(st, _struct_arg(st, s, what), what)


def flatten_args(target, args: Sequence) -> tuple:
    """A call's arguments with each struct argument replaced by its leaf fields' values
    (`target`: a declaration with struct parameters)."""
    layout = target.struct_layout
    if len(args) != len(layout):
        raise TypeError(f"{target.__name__}() takes {len(layout)} arguments, got {len(args)}")
    out = []
    for p, st, a in zip(target.struct_params, layout, args):
        if st is None:
            out.append(a)
            continue
        what = f"{target.__name__}(): argument {p!r}"
        out.extend(_leaf_values(st, _struct_arg(st, a, what), what))
    return tuple(out)


def flatten_annotations(target, anns: Sequence, reverse: bool) -> tuple[list, Callable]:
    """Activity annotations (modes.py) with each struct argument's replaced by its leaf
    fields' (module docstring), and `finish(per_flat_grads)`: the per-argument derivatives
    reverse mode returns (None for a struct), after adding the derivatives of a Duplicated
    struct's float scalars to its shadow's fields."""
    from .modes import Active, Annotation, BatchDuplicated, Const, Duplicated
    layout = target.struct_layout
    if len(anns) != len(layout):
        raise TypeError(f"{target.__name__}() takes {len(layout)} arguments, got {len(anns)}")
    out, spans, adds = [], [], []
    for p, st, a in zip(target.struct_params, layout, anns):
        start = len(out)
        if st is None:
            out.append(a if isinstance(a, Annotation) else Const(a))
            spans.append((start, False))
            continue
        what = f"{target.__name__}(): argument {p!r}"
        if isinstance(a, Active):
            raise TypeError(f"{what} is a {st.name} struct marked Active: a struct is "
                            "Duplicated(s, ds), ds a struct of the same type that receives "
                            "its fields' derivatives")
        ann = a if isinstance(a, Annotation) else Const(a)
        s = _struct_arg(st, ann.val, what)
        values = _leaf_values(st, s, what)
        batched = isinstance(ann, BatchDuplicated)
        shadows = None
        if isinstance(ann, Duplicated):
            ds = ann.dval if batched else (ann.dval,)
            if batched and not isinstance(ds, tuple):
                raise TypeError(f"{what}: BatchDuplicated(s, (ds1, ..., dsN)) takes a tuple of "
                                f"{st.name} structs")
            for d in ds:
                _struct_arg(st, d, f"{what}: the shadow")
            shadows = [[field_at(d, path) for d in ds] for _, _, path in leaves(st, "")]
        for k, ((name, t, path), v) in enumerate(zip(leaves(st, ""), values)):
            dtype = (t if isinstance(t, ScalarType) else t.vec.dtype
                     if isinstance(t, VecArrayType) else t.dtype)
            if shadows is None or not dtype.is_float:
                out.append(Const(v))
                continue
            sh = shadows[k]
            if any(d is None for d in sh):
                raise TypeError(f"{what}: field {name[1:]!r} of the shadow {st.name} is not "
                                "set (a shadow struct's arrays are the arrays' shadows)")
            if isinstance(t, ScalarType) and reverse:
                out.append(Active(v))
                adds.append((len(out) - 1, ann.dval, path))
            elif batched:
                out.append(BatchDuplicated(v, tuple(sh)))
            else:
                out.append(type(ann)(v, sh[0]))
        spans.append((start, True))

    def finish(grads: Sequence) -> tuple:
        for pos, ds, path in adds:
            if grads[pos] is not None:
                owner = field_at(ds, path[:-1])
                setattr(owner, path[-1], getattr(owner, path[-1]) + grads[pos])
        return tuple(None if is_struct else grads[start] for start, is_struct in spans)
    return out, finish


def zeros_like(s):
    """``adjit.zeros_like_struct(s)``: a struct of the same type as ``s`` whose fields are
    zeros (arrays: NumPy arrays of the same shapes and dtypes), a shadow for
    ``Duplicated(s, ds)``.

    Args:
        s: an ``@adjit.struct`` instance.

    Returns:
        A new instance of ``s``'s class, all zeros.

    Raises:
        TypeError: ``s`` is not a struct instance ("zeros_like_struct takes an
            @adjit.struct instance, got float").

    Example:
        ::

            import numpy as np
            import adjit

            @adjit.struct
            class Particle:
                mass: adjit.f64
                pos: adjit.vec3d

            p = Particle(mass=2.0, pos=adjit.vec3d(1.0, 2.0, 3.0))
            dp = adjit.zeros_like_struct(p)
            print(dp.mass, dp.pos)   # 0.0 [0. 0. 0.]
    """
    st = struct_type(s)
    if st is None:
        raise TypeError(f"zeros_like_struct takes an @adjit.struct instance, got "
                        f"{type(s).__name__}")
    # Every field is set here, none left to the constructor: its values are the class's
    # defaults (`mass: f32 = 1.0`) and a quaternion's identity, which in a shadow would be
    # added to the derivatives.
    out = object.__new__(st.cls)
    for n, t in st.fields:
        v = getattr(s, n)
        if isinstance(t, StructType):
            z = zeros_like(v)
        elif isinstance(t, (ArrayType, VecArrayType)):
            z = None if v is None else np.zeros_like(v)
        elif isinstance(t, VecType):
            z = np.zeros(t.shape, dtype=t.dtype.np_dtype)
        else:
            z = t.np_dtype.type(0)
        object.__setattr__(out, n, z)
    return out


def map_fields(fn: Callable, s, *others):
    """A new struct of `s`'s class whose each leaf field is `fn(type, s's value, others'
    values...)` (`others`: structs of the same class), nested structs made likewise."""
    st = struct_type(s)
    out = object.__new__(st.cls)
    for n, t in st.fields:
        vs = [getattr(x, n) for x in (s, *others)]
        object.__setattr__(out, n, map_fields(fn, *vs) if isinstance(t, StructType)
                           else fn(t, *vs))
    return out


def is_float_field(t) -> bool:
    """Whether a leaf field of type `t` has derivatives (a float scalar, vector or array)."""
    dtype = (t.vec.dtype if isinstance(t, VecArrayType) else t.dtype
             if isinstance(t, (ArrayType, VecType)) else t)
    return dtype.is_float
