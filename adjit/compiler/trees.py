"""Pytrees in compiled code (lang/pytrees.py): a tree is a Python container of the code's
values, known while compiling: a tuple (a list is one too, as a list display is), a dict
with constant keys, a NamedTuple instance. Indexing with a constant key, `p.W1`,
`d.items()`, unpacking, comprehensions and `for` over them are unrolled while compiling;
what crosses a call (arguments of an `@adjit.func`, a kernel, a derivative; results) is the
tree's leaves, with the callee's variant for the structure (`Function.with_trees`).
"""
from __future__ import annotations

from typing import Callable

from ..core.errors import UserError
from ..lang import pytrees
from .values import Literal, PyObj, StructValue


class ListValue(tuple):
    """A list argument in compiled code: a tuple (indexed, unpacked, iterated as one) that
    remembers it was a list, so that returning it gives a list back."""
    is_list = True


def is_container(v) -> bool:
    """Whether code value `v` is a tree's container (a tuple, dict or NamedTuple)."""
    return type(v) in (tuple, dict, ListValue) or pytrees.is_namedtuple(v)


def structure(v) -> pytrees.TreeDef:
    """The TreeDef of a code value (a struct value's leaf carries its StructType)."""
    return pytrees.structure(v, is_container,
                             lambda x: x.type if isinstance(x, StructValue) else None)


def leaves(tree: pytrees.TreeDef, v) -> list:
    return [x for _, x in pytrees.leaves(tree, v)]


def rebuild(tree: pytrees.TreeDef, items) -> object:
    """A code value of structure `tree` from its leaves (a list as a ListValue)."""
    return pytrees.unflatten(tree, list(items), list_type=ListValue)


def map_items(fn: Callable, v):
    """`v` with each item of its containers mapped by `fn` (its kind kept: a NamedTuple
    stays one, a dict keeps its keys); `fn` of a non-container is `fn(v)`."""
    if isinstance(v, dict):
        return {k: fn(x) for k, x in v.items()}
    if pytrees.is_namedtuple(v):
        return type(v)(*map(fn, v))
    if isinstance(v, tuple):
        return (ListValue if isinstance(v, ListValue) else tuple)(map(fn, v))
    return fn(v)


def key_of(sub, what: str):
    """A dict key from a subscript's value: a constant string or integer."""
    if isinstance(sub, PyObj) and isinstance(sub.obj, str):
        return sub.obj
    if isinstance(sub, Literal) and isinstance(sub.value, int) and not isinstance(sub.value,
                                                                                   bool):
        return sub.value
    raise UserError(f"{what} is indexed with constant keys (a string or an int known while "
                    "compiling)")


def key_value(k):
    """A dict key as a code value (what `for k in d` binds)."""
    return PyObj(k) if isinstance(k, str) else Literal(k)


def subscript(d: dict, sub, what: str):
    key = key_of(sub, what)
    if key not in d:
        raise UserError(f"{what} has no key {key!r} (its keys: "
                        f"{', '.join(map(repr, d))})")
    return d[key]


def attribute(base, attr: str):
    """`p.W1` of a NamedTuple; `d.items` (and keys, values) of a dict, as methods."""
    if isinstance(base, dict):
        if attr in ("items", "keys", "values"):
            return PyObj(DictMethod(attr, base))
        raise UserError(f"a dict in compiled code has .items(), .keys() and .values(), not "
                        f".{attr}")
    if attr in type(base)._fields:
        return getattr(base, attr)
    raise UserError(f"{type(base).__name__} has no field {attr!r} (its fields: "
                    f"{', '.join(type(base)._fields)})")


class DictMethod:
    """`d.items`, `d.keys`, `d.values` of a dict in compiled code: called, a tuple."""

    def __init__(self, name: str, d: dict):
        self.name, self.d = name, d

    def call(self, gen, args, kwargs):
        if args or kwargs:
            raise UserError(f".{self.name}() takes no arguments")
        if self.name == "keys":
            return tuple(key_value(k) for k in self.d)
        if self.name == "values":
            return tuple(self.d.values())
        return tuple((key_value(k), v) for k, v in self.d.items())


def iterate(v) -> tuple | None:
    """The items a `for` or a comprehension over `v` unrolls over: a tuple's items, a
    dict's keys; None for anything else."""
    if isinstance(v, dict):
        return tuple(key_value(k) for k in v)
    if isinstance(v, tuple):
        return v
    return None


def variant_call(target, args: list, what: str) -> tuple:
    """(the declaration to call, its arguments): where trees are among `args`, the
    target's variant for their structures and the trees' leaves in their places."""
    if getattr(target, "tree_layout", None) is not None:
        return target, args
    ok = target._tree_ok
    if len(args) != len(ok) or not any(k and is_container(a) for k, a in zip(ok, args)):
        return target, args
    layout, flat = [], []
    for p, k, a in zip(target.struct_params, ok, args):
        if not (k and is_container(a)):
            layout.append(None)
            flat.append(a)
            continue
        try:
            tree = structure(a)
        except TypeError as e:
            raise UserError(f"{what}: argument {p!r}: {e}") from None
        layout.append(tree)
        flat.extend(leaves(tree, a))
    return target.with_trees(tuple(layout)), flat
