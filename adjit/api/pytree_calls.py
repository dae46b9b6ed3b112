"""Derivatives of functions called with trees (lang/pytrees.py), from Python: each entry
point (`grad`, `value_and_grad`, `jvp`, `vjp`, `hvp`, `autodiff`) differentiates the
function's variant for the trees' structures, whose parameters are their leaves, and gives
back per tree argument a tree of the same structure (JAX's habit: the gradient of a dict of
parameters is a dict of the same keys).

Activities of a tree argument to `autodiff`: `Const(tree)` (or the tree bare) is each leaf
Const; `Duplicated(tree, shadow)`, `shadow` a tree of the same structure, is each float
leaf Duplicated with its shadow's leaf (an array's derivative accumulates into the shadow
array; a float scalar's, in reverse mode, is added to the shadow's entry, which must then
be in a dict or a list); `Active(tree)` (reverse mode), a tree of float scalars, gives back
a tree of their derivatives. Integer and bool leaves are Const.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..lang import pytrees
from ..lang.functions import Function, Kernel
from ..lang.modes import Active, Annotation, BatchDuplicated, Const, Duplicated, Mode
from ..lang.structs import struct_type


@dataclass
class Route:
    """A call of `f` with trees: its variant, the flat arguments, per argument its
    structure (or None) and the span of its leaves among the flat arguments."""
    variant: Any
    flat: list
    layout: tuple
    spans: list

    def regroup(self, flat_out: Sequence, k: int):
        """Argument `k`'s part of per-flat-argument results (`flat_out`): a tree for a tree
        argument."""
        return pytrees.regroup(self.layout, flat_out, k)

    def flat_nums(self, nums: Sequence[int]) -> tuple[int, ...]:
        return pytrees.flat_positions(self.layout, nums)


def route(f, args: Sequence) -> Route | None:
    """The Route of a call of `f` with `args` (plain values), or None where none is a tree
    (or `f` is not a declaration that takes them)."""
    if not pytrees.has_tree(args) or not isinstance(f, (Function, Kernel)):
        return None
    call = f._tree_call(tuple(args))
    if call is None:
        return None
    variant, flat = call
    return Route(variant, list(flat), variant.tree_layout, pytrees.spans(variant.tree_layout))


def like(tree: pytrees.TreeDef, x, what: str, name: str = "") -> list:
    """The leaves of `x` (a shadow, tangent or cotangent), checked to be of structure
    `tree` (TypeError naming the path where it is not, from the argument's `name`)."""
    pytrees.check_like(tree, x, what, name)
    return [v for _, v in pytrees.leaves(tree, x)]


def _is_float(x) -> bool:
    """Whether leaf `x` has derivatives: a float array or scalar, or a struct (whose float
    fields do: structs.py)."""
    if isinstance(x, np.ndarray):
        return x.dtype.kind == "f"
    if isinstance(x, (bool, np.bool_)):
        return False
    return isinstance(x, (float, np.floating)) or not isinstance(x, numbers.Number)


def annotations(f, args: Sequence, mode: Mode) -> tuple | None:
    """(the variant, its flat annotations, `finish(out)`: autodiff's result with each tree
    argument's derivatives as a tree), or None where no argument holds a tree."""
    if not isinstance(f, (Function, Kernel)) or f.tree_layout is not None:
        return None
    values = [a.val if isinstance(a, Annotation) else a for a in args]
    if not pytrees.has_tree(values):
        return None
    r = route(f, values)
    if r is None:
        return None
    out: list[Annotation] = []
    active_trees, adds = set(), []
    names = f.struct_params
    for k, (a, tree) in enumerate(zip(args, r.layout)):
        pos, n = r.spans[k]
        leaves = r.flat[pos:pos + n]
        if tree is None:
            out.append(a)
            continue
        what = f"{f.__name__}(): argument {names[k]!r}"
        paths = pytrees.paths(tree, names[k])
        if not isinstance(a, Annotation) or isinstance(a, Const):
            out.extend(Const(x) for x in leaves)
        elif isinstance(a, Active):
            if not mode.reverse:
                raise TypeError(f"{what} is a tree marked Active: forward mode takes "
                                "Duplicated(tree, tangents), tangents a tree of the same "
                                "structure")
            for p, x in zip(paths, leaves):
                if isinstance(x, np.ndarray) or struct_type(x) is not None:
                    raise TypeError(f"{what}: Active(tree) takes a tree of float scalars; "
                                    f"{p} is {'an array' if isinstance(x, np.ndarray) else 'a struct'}"
                                    f": pass Duplicated({names[k]}, shadow), shadow a tree "
                                    "of the same structure that receives the derivatives")
                out.append(Active(x) if _is_float(x) else Const(x))
            active_trees.add(k)
        elif isinstance(a, BatchDuplicated):
            if not isinstance(a.dval, tuple):
                raise TypeError(f"{what}: BatchDuplicated(tree, (t1, ..., tN)) takes a tuple "
                                "of trees of the argument's structure")
            lanes = [like(tree, d, f"{what}: tangent {j}", names[k])
                     for j, d in enumerate(a.dval)]
            for j, (p, x) in enumerate(zip(paths, leaves)):
                if not _is_float(x):
                    out.append(Const(x))
                elif mode.reverse and not isinstance(x, np.ndarray):
                    raise TypeError(f"{what}: {p} is a scalar: reverse mode with "
                                    "BatchDuplicated takes trees of arrays")
                else:
                    out.append(BatchDuplicated(x, tuple(lane[j] for lane in lanes)))
        elif isinstance(a, Duplicated):
            shadow = like(tree, a.dval, f"{what}: the shadow", names[k])
            parents = _parents(tree, a.dval)
            for j, (p, x, d) in enumerate(zip(paths, leaves, shadow)):
                if not _is_float(x):
                    out.append(Const(x))
                elif mode.reverse and not isinstance(x, np.ndarray) and (
                        struct_type(x) is None):
                    owner, key = parents[j]
                    if not isinstance(owner, (dict, list)):
                        raise TypeError(
                            f"{what}: {p} is a float scalar, whose derivative reverse mode "
                            f"adds to the shadow's entry, but that is in a "
                            f"{type(owner).__name__}, which cannot change: make the shadow's "
                            "container a dict or a list, or the scalar a 0-d array")
                    out.append(Active(x))
                    adds.append((len(out) - 1, owner, key))
                else:
                    out.append(type(a)(x, d))
        else:
            raise TypeError(f"{what}: {type(a).__name__} of a tree is not taken")

    def finish(result):
        if not mode.reverse:
            return result
        grads, value = result if mode.with_primal else (result, None)
        for pos, owner, key in adds:
            if grads[pos] is not None:
                owner[key] = owner[key] + grads[pos]
        grouped = tuple(r.regroup(grads, k) if k in active_trees else
                        None if r.layout[k] is not None else grads[r.spans[k][0]]
                        for k in range(len(r.layout)))
        return (grouped, value) if mode.with_primal else grouped
    return r.variant, out, finish


def _parents(tree: pytrees.TreeDef, x) -> list:
    """Per leaf of `x` (of structure `tree`), (its container, its key there)."""
    out = []
    for c, (k, v) in zip(tree.children, pytrees.child_items(tree.kind, tree.node, x)):
        if c.kind == "leaf":
            out.append((x, k))
        else:
            out.extend(_parents(c, v))
    return out
