"""Pytrees: nested tuples, lists, dicts and NamedTuples of arrays, scalars and structs, as
arguments and results of compiled functions and of every derivative entry point (JAX's
habit: `params = {"W1": W1, "b1": b1}`, `adjit.grad(loss)(params, x)` a dict of the same
keys).

A tree is its leaves to everything below the declarations, as a struct is its fields
(structs.py): a call whose arguments hold trees goes to the declaration's *variant* for
their structure (`TreeDef`s, one per parameter: `Function.with_trees`), a declaration of
its own whose parameters are the leaves (named by their paths, `params['W1']`), so that
the compile service, caches, derivative ABI and launchers see the arrays and scalars they
already take. The structure is part of the variant's fingerprint (`text`), and so of its
disk-cache key; the leaves' types are its specialisation's. In the body the code
generator gathers the leaves again into Python containers of code values
(compiler/trees.py). Results that are trees come back regrouped (`unflatten`).

MLIR-free: the declarations (functions.py) import this module.
"""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .structs import StructType, struct_type


@dataclass(frozen=True)
class TreeDef:
    """The structure of a tree, without its leaves: `kind` is "leaf", "tuple", "list",
    "dict" or "namedtuple"; `node` a dict's keys (in order), a NamedTuple's class, or a
    leaf's StructType (a struct leaf, which structs.py expands in turn) or None."""
    kind: str
    node: Any = None
    children: tuple[TreeDef, ...] = ()

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    def __repr__(self) -> str:
        return text(self)


LEAF = TreeDef("leaf")


@dataclass(frozen=True)
class TreeAnnotation:
    """A parameter annotated `tuple`, `list`, `dict` or a NamedTuple class (`dict[str,
    np.ndarray]` too): it takes a tree of that kind; its leaves' types are the argument's."""
    cls: type

    def __repr__(self) -> str:
        return self.cls.__name__

    def accepts(self, x) -> bool:
        return type(x) is self.cls if is_namedtuple_class(self.cls) else isinstance(x, self.cls)


def is_namedtuple_class(cls) -> bool:
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")


def tree_annotation(ann) -> TreeAnnotation | None:
    """The TreeAnnotation an annotation is, else None."""
    import typing
    cls = typing.get_origin(ann) or ann
    if cls in (tuple, list, dict) or is_namedtuple_class(cls):
        return TreeAnnotation(cls)
    return None


def is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


_CONTAINERS = frozenset((tuple, list, dict))


def is_tree(x) -> bool:
    """Whether `x` is a container a tree is made of (a tuple, list, dict or NamedTuple)."""
    return type(x) in _CONTAINERS or is_namedtuple(x)


def has_tree(values, annotated: bool = False) -> bool:
    """Whether any of `values` is a tree (`annotated`: or the value of an activity
    annotation, Duplicated(tree, ...)). A loop, not a generator: every call asks."""
    for x in values:
        if annotated:
            x = getattr(x, "val", x)
        if type(x) in _CONTAINERS or (isinstance(x, tuple) and hasattr(type(x), "_fields")):
            return True
    return False


def child_items(kind: str, node, x) -> list[tuple[Any, Any]]:
    """(key, child) pairs of container `x`: indices, or a dict's keys, or a NamedTuple's
    field names."""
    if kind == "dict":
        return [(k, x[k]) for k in node]
    if kind == "namedtuple":
        return list(zip(type(x)._fields, x))
    return list(enumerate(x))


def structure(x, is_container: Callable[[Any], bool] = is_tree,
              leaf_node: Callable[[Any], Any] = lambda v: None) -> TreeDef:
    """The TreeDef of `x`. `is_container`: what counts as a container (the code generator's
    values differ from Python's); `leaf_node`: a leaf's `node` (a struct's StructType)."""
    if not is_container(x):
        return TreeDef("leaf", leaf_node(x))
    if isinstance(x, dict):
        for k in x:
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"a dict of arguments has keys that are strings or ints, got "
                                f"{k!r}")
        kind, node = "dict", tuple(x)
    elif is_namedtuple(x):
        kind, node = "namedtuple", type(x)
    else:     # (compiled code holds a list argument as a tuple that knows: is_list)
        kind = "list" if isinstance(x, list) or getattr(x, "is_list", False) else "tuple"
        node = None
    return TreeDef(kind, node, tuple(structure(c, is_container, leaf_node)
                                     for _, c in child_items(kind, node, x)))


def python_structure(x) -> TreeDef:
    """The TreeDef of a Python value (struct leaves carry their StructType)."""
    return structure(x, leaf_node=struct_type)


def _key_text(kind: str, key) -> str:
    return f".{key}" if kind == "namedtuple" else f"[{key!r}]"


def leaves(tree: TreeDef, x, path: str = "") -> list[tuple[str, Any]]:
    """(path, leaf) of each leaf of `x` (of structure `tree`), in order: the path as the
    user would write it, `params['W1']`, `p.W1[0]`."""
    if tree.kind == "leaf":
        return [(path, x)]
    out = []
    for c, (k, v) in zip(tree.children, child_items(tree.kind, tree.node, x)):
        out.extend(leaves(c, v, path + _key_text(tree.kind, k)))
    return out


def paths(tree: TreeDef, path: str = "") -> list[str]:
    """The path of each leaf of a tree of structure `tree`, in order."""
    if tree.kind == "leaf":
        return [path]
    keys = (tree.node if tree.kind == "dict" else tree.node._fields
            if tree.kind == "namedtuple" else range(len(tree.children)))
    return [p for c, k in zip(tree.children, keys)
            for p in paths(c, path + _key_text(tree.kind, k))]


def unflatten(tree: TreeDef, items: Sequence, list_type: Callable = list):
    """A tree of structure `tree` whose leaves are `items`, in order (`list_type` makes its
    lists: compiled code holds a list as a tuple)."""
    return _build(tree, iter(items), list_type)


def _build(tree: TreeDef, it, list_type):
    if tree.kind == "leaf":
        return next(it)
    kids = [_build(c, it, list_type) for c in tree.children]
    if tree.kind == "dict":
        return dict(zip(tree.node, kids))
    if tree.kind == "namedtuple":
        return tree.node(*kids)
    return list_type(kids) if tree.kind == "list" else tuple(kids)


def spans(layout: Sequence) -> list[tuple[int, int]]:
    """Per argument of a variant's call (`layout`: per argument its TreeDef or None), (the
    position of its first leaf among the flat arguments, how many it has)."""
    out, pos = [], 0
    for tree in layout:
        n = 1 if tree is None else tree.num_leaves
        out.append((pos, n))
        pos += n
    return out


def regroup(layout: Sequence, flat: Sequence, k: int, list_type: Callable = list):
    """Argument `k`'s part of per-flat-argument values `flat` (a variant's derivatives): a
    tree of its structure for a tree argument, else its one value."""
    pos, n = spans(layout)[k]
    tree = layout[k]
    return flat[pos] if tree is None else unflatten(tree, flat[pos:pos + n], list_type)


def flat_positions(layout: Sequence, nums: Sequence[int]) -> tuple[int, ...]:
    """The flat positions of the arguments `nums` (all their leaves)."""
    at = spans(layout)
    return tuple(j for k in nums for j in range(at[k][0], at[k][0] + at[k][1]))


def check_like(tree: TreeDef, x, what: str, path: str,
               lists_are_tuples: bool = False, root: str | None = None) -> None:
    """TypeError naming the path where `x` is not of structure `tree` (a shadow, a tangent,
    a cotangent given for a tree argument); `path` starts at the argument's name (`root`).
    `lists_are_tuples`: compiled code's (a list display there is a tuple)."""
    root = path if root is None else root
    where = f"{what} at {path}" if path != root else what
    if tree.kind == "leaf":
        if is_tree(x):
            raise TypeError(f"{where} is a {type(x).__name__} where the argument has a leaf")
        return
    kind = ("dict" if isinstance(x, dict) else "namedtuple" if is_namedtuple(x) else
            "list" if isinstance(x, list) else "tuple" if isinstance(x, tuple) else None)
    want = tree.node.__name__ if tree.kind == "namedtuple" else tree.kind
    if lists_are_tuples and {kind, tree.kind} == {"list", "tuple"}:
        kind = tree.kind
    if kind != tree.kind or (kind == "namedtuple" and type(x) is not tree.node):
        raise TypeError(f"{where} is {_a(x)} where the argument has a {want}")
    if kind == "dict" and tuple(x) != tree.node:
        missing = [k for k in tree.node if k not in x]
        extra = [k for k in x if k not in tree.node]
        detail = (f"missing {missing}" if missing else f"extra {extra}" if extra
                  else "in another order")
        raise TypeError(f"{where} has keys {list(x)}, the argument {list(tree.node)} "
                        f"({detail})")
    if len(x) != len(tree.children):
        raise TypeError(f"{where} has {len(x)} items where the argument has "
                        f"{len(tree.children)}")
    for c, (k, v) in zip(tree.children, child_items(tree.kind, tree.node, x)):
        check_like(c, v, what, path + _key_text(tree.kind, k), lists_are_tuples, root)


def _a(x) -> str:
    return f"a {type(x).__name__}"


def text(tree: TreeDef) -> str:
    """The structure as text that is the same in every process (the fingerprint's: code
    compiled for one structure reads its leaves by position); a NamedTuple by its module
    and qualified name and fields."""
    if tree.kind == "leaf":
        if isinstance(tree.node, StructType):
            from .structs import layout_text
            return layout_text(tree.node)
        return "*"
    kids = ", ".join(text(c) for c in tree.children)
    if tree.kind == "dict":
        return "{" + ", ".join(f"{k!r}: {text(c)}" for k, c in zip(tree.node, tree.children)) + "}"
    if tree.kind == "namedtuple":
        cls = tree.node
        return f"{cls.__module__}.{cls.__qualname__}{tuple(cls._fields)}({kids})"
    return f"[{kids}]" if tree.kind == "list" else f"({kids})"


# ---- a result's structure on disk ----------------------------------------------------------
def to_record(tree: TreeDef) -> list:
    """`tree` as JSON (the disk cache's record of a compiled function's results)."""
    if tree.kind == "leaf":
        return ["leaf"]
    node = (list(tree.node) if tree.kind == "dict" else
            [tree.node.__module__, tree.node.__qualname__] if tree.kind == "namedtuple"
            else None)
    return [tree.kind, node, [to_record(c) for c in tree.children]]


def from_record(record: list) -> TreeDef:
    """The TreeDef `to_record` wrote; a NamedTuple's class is found by its module and name
    (KeyError where it cannot be)."""
    if record[0] == "leaf":
        return LEAF
    kind, node, kids = record
    if kind == "dict":
        node = tuple(node)
    elif kind == "namedtuple":
        module, qualname = node
        try:
            node = sys.modules.get(module) or importlib.import_module(module)
            for part in qualname.split("."):
                node = getattr(node, part)
        except (ImportError, AttributeError):
            # (a class defined in a function, `<locals>`: the disk cache treats the
            # record as a miss and compiles)
            raise KeyError(f"NamedTuple {module}.{qualname} not found") from None
    return TreeDef(kind, node, tuple(from_record(c) for c in kids))
