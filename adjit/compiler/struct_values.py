"""`@adjit.struct` values in compiled code (lang/structs.py): constructing one
(`Particle(pos, vel, mass=1.0)`), converting a value to a field's type (construction and
field assignment), and a struct as results: its leaf fields' values in order (a vector's
as its scalars, as vectors.py returns vectors), gathered again at the call.

A struct is a compile-time collection of its fields (values.StructValue), as a vector is of
its components: a function's struct parameter or result is its leaves, a struct variable
one variable per leaf (struct_names.py), so the autodiff pass and both lowerings see only
the scalars, vectors' scalars and arrays they already take.
"""
from __future__ import annotations

from typing import Sequence

from . import arrays as A
from . import scalar_ops as S
from . import vectors as V
from ..core.errors import UserError
from ..core.types import ArrayType, ScalarType, VecArrayType, VecType
from ..lang.structs import StructType, leaves
from .values import Array, ArrayExpr, Literal, PyObj, Scalar, StructValue, Vec, VecArray

# An array field not set yet (`p = Particle()` before `p.x = xs`): reading or passing the
# struct's field is an error naming it.
UNSET = PyObj(None)


def construct(st: StructType, args: list, kwargs: dict) -> StructValue:
    """`Particle(pos, vel, mass=1.0)` in compiled code: fields by position (declaration
    order) or keyword; one not given is the class's default, else zero (scalars, vectors;
    a quaternion's identity), a default struct (nested), or unset (arrays)."""
    names = [n for n, _ in st.fields]
    if len(args) > len(names):
        raise UserError(f"{st.name}() takes {len(names)} fields ({', '.join(names)}), got "
                        f"{len(args)} positional arguments")
    given = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise UserError(f"{st.name}() got an unexpected keyword argument {k!r} (its "
                            f"fields: {', '.join(names)})")
        if k in given:
            raise UserError(f"{st.name}() got multiple values for field {k!r}")
        given[k] = v
    defaults = dict(st.defaults)
    fields = {}
    for n, t in st.fields:
        if n in given:
            fields[n] = convert(st, n, t, given[n])
        elif n in defaults:
            fields[n] = convert(st, n, t, _constant(st, n, defaults[n]))
        else:
            fields[n] = zero(t)
    return StructValue(st, fields)


def zero(t):
    """A field's value when its construction leaves it out and the class has no default."""
    if isinstance(t, ScalarType):
        return S.as_scalar(Literal(0), t)
    if isinstance(t, VecType):
        return V.construct(t, [], {})
    if isinstance(t, StructType):
        return construct(t, [], {})
    return UNSET


def _constant(st: StructType, name: str, value):
    """A class-level default (a Python number or a vector's numbers) as a code value."""
    import numpy as np
    if isinstance(value, (bool, int, float, np.generic)) and not isinstance(value, np.ndarray):
        return Literal(value.item() if isinstance(value, np.generic) else value)
    if isinstance(value, np.ndarray) and value.ndim <= 2 and value.dtype.kind == "f":
        return tuple(Literal(float(x)) for x in value.ravel())
    raise UserError(f"{st.name}.{name}: its default {type(value).__name__} cannot be made "
                    "in compiled code (give the field a value in the constructor)")


def convert(st: StructType, name: str, t, v):
    """`v` as field `name` (of type `t`) of a `st` struct holds it; UserError naming the
    field for a value of another kind."""
    what = f"{st.name}.{name} ({t!r})"
    if isinstance(t, StructType):
        if not (isinstance(v, StructValue) and v.type is t):
            raise UserError(f"{what}: needs a {t.name} struct, got {S.describe(v)}")
        return v
    if isinstance(t, ScalarType):
        if not isinstance(v, (Scalar, Literal)):
            raise UserError(f"{what}: needs a scalar, got {S.describe(v)}")
        if t.is_float and (isinstance(v, Literal) and isinstance(v.value, bool)
                           or isinstance(v, Scalar) and v.type.is_bool):
            raise UserError(f"{what}: needs a float, got a bool")
        if not t.is_float and (isinstance(v, Scalar) and v.type.is_float or isinstance(
                v, Literal) and isinstance(v.value, float) and v.value != int(v.value)):
            raise UserError(f"{what}: needs an integer, got {S.describe(v)}")
        return S.cast(S.as_scalar(v, t), t)
    if isinstance(t, VecType):
        if isinstance(v, tuple) and len(v) == t.size:
            return V.of_type(t, list(v))
        if not (isinstance(v, Vec) and v.type.shape == t.shape and v.type.kind == t.kind):
            raise UserError(f"{what}: needs {t!r}, got {S.describe(v)}")
        return V.of_type(t, v.items)
    if isinstance(t, VecArrayType):
        if not (isinstance(v, VecArray) and v.vec == t.vec and
                v.type.ndim == t.array.ndim):
            raise UserError(f"{what}: needs {t!r}, got {S.describe(v)}")
        return v
    if isinstance(v, ArrayExpr):
        v = A.materialize(v)
    if not (isinstance(v, Array) and isinstance(t, ArrayType) and v.type.dtype == t.dtype
            and v.type.ndim == t.ndim):
        raise UserError(f"{what}: needs {t!r}, got {S.describe(v)}")
    return v


def leaf_values(v: StructValue, what: str) -> list:
    """The struct's leaf fields' values in `structs.leaves` order (UserError for an array
    field not set)."""
    out = []
    for name, t, path in leaves(v.type, ""):
        x = v
        for n in path:
            x = x.fields[n]
        if x is UNSET:
            raise UserError(f"{what}: field {name[1:]!r} ({t!r}) of the {v.type.name} is not "
                            f"set (assign it: s.{name[1:]} = ...)")
        out.append(x)
    return out


def from_leaves(st: StructType, items: Sequence):
    """A StructValue of `st` from its leaves' values in order (what `leaf_values` gives);
    (the struct, how many items it took). Vector leaves are taken as their scalars."""
    fields, pos = {}, 0
    for n, t in st.fields:
        if isinstance(t, StructType):
            fields[n], k = from_leaves(t, items[pos:])
            pos += k
        elif isinstance(t, VecType):
            fields[n] = V.of_type(t, items[pos:pos + t.size])
            pos += t.size
        else:
            x = items[pos]
            if isinstance(t, VecArrayType) and isinstance(x, Array):
                x = VecArray(x, t.vec)
            fields[n] = x
            pos += 1
    return StructValue(st, fields), pos


def flat_size(t) -> int:
    """How many IR results a result of type `t` (None: one value) is."""
    if isinstance(t, StructType):
        return sum(flat_size(ft) for _, ft, _ in leaves(t, ""))
    return t.size if isinstance(t, VecType) else 1


def regroup(outs: list, layout: Sequence) -> list:
    """Results of a call, each vector's scalars and each struct's leaves gathered
    (`layout`: per result of the Python function, its VecType, StructType or None)."""
    out, pos = [], 0
    for t in layout:
        n = flat_size(t)
        if isinstance(t, StructType):
            out.append(from_leaves(t, outs[pos:pos + n])[0])
        elif isinstance(t, VecType):
            out.append(V.of_type(t, outs[pos:pos + n]))
        else:
            out.append(outs[pos])
        pos += n
    return out
