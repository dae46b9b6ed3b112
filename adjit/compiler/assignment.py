"""Assignment and binding, the part of the code generator (`codegen.CodeGenerator`) that
compiles `=`, annotated and augmented assignment: a name bound (lazily for an element-wise
expression: lazy_names.py; per component for a vector: vector_names.py), a tuple unpacked, an
element or a view written (subscripts.py finds the target), `x += y` in place on an array.
"""
from __future__ import annotations

import ast

from . import arrays as A
from . import fancy_indexing as F
from . import lazy as L
from . import scalar_ops as S
from ..core.types import ScalarType
from .lazy_names import named_items
from .values import Array, ArrayExpr, Literal, Scalar, Shape, StructValue, Vec


class Assignment:
    """A mixin of `CodeGenerator`: it uses the generator's `vars`, `visit`, `error`,
    `force_lazy`, `bind_lazy`, the vector and struct names' and the subscripts' methods."""

    def visit_Assign(self, node: ast.Assign) -> None:
        value = self.visit(node.value)
        if (len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript)
                and _pure(node.targets[0])):
            # `un[1:-1, 1:-1] = u[2:, 1:-1] + ...`: nothing runs between the value and its
            # one store, so the value is not computed into memory before the target is
            # evaluated (force_lazy); store_into still copies it first where it reads the
            # target's memory other than element by element. (The slice-written heat step
            # stored each step into a temporary and copied that: its gradient 1.4x slower.
            # Several targets keep the copy: the second store must not see the first.)
            L.consumed(value)
        for target in node.targets:
            self.assign(target, value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            return
        if not isinstance(node.target, ast.Name):
            raise self.error(node, "annotated assignment must target a plain name")
        t = self._annotation(node.annotation)
        value = self.visit(node.value)
        if isinstance(t, ScalarType):
            value = S.cast(S.as_scalar(value, t), t)
        self.assign(node.target, value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        op = self._binop_symbol(node.op)
        if isinstance(node.target, ast.Name):
            current = self._lookup(node.target.id, node.target)
            if isinstance(current, L.NamedExpr):
                # In place, as on the array it stands for (aliases see the change).
                current, = self.force_lazy([current])
                self.vars[node.target.id] = current
            new = self._binary(op, current, self.visit(node.value))
            if isinstance(current, Array):
                # `x += y` on an array updates it in place, as in NumPy (the caller sees it).
                if not isinstance(new, ArrayExpr) and not (current.type.ndim == 0
                                                           and isinstance(new, Scalar)):
                    raise self.error(node, f"augmented assignment of {S.describe(new)} to "
                                           "an array")
                if isinstance(new, ArrayExpr) and new.type.ndim != current.type.ndim:
                    # NumPy too: the result's shape must be the array's own
                    raise self.error(node, f"augmented assignment of a {new.type.ndim}-D "
                                           f"result to a {current.type.ndim}-D array")
                self.force_lazy()   # lazy names that read the array keep its old values
                A.store_into(current, new)
                return
            self.assign(node.target, new)
        elif isinstance(node.target, (ast.Subscript, ast.Attribute)) and (
                self._vector_place(node.target) is not None
                or self._struct_field(node.target.value) or self._struct_field(node.target)):
            # `x[i] += v` (an array of vectors), `v[k] += s`, `v.x += s`, `y[i].x += s`
            current = self.visit(node.target)
            self.assign(node.target, self._binary(op, current, self.visit(node.value)))
        elif isinstance(node.target, ast.Subscript):
            arr, subs = self._subscript_target(node.target)
            if isinstance(subs, F.Fancy):      # x[idx] += v: x[idx] + v, then written
                current = F.gather(self, arr, subs.sub)
                new = self._binary(op, current, self.visit(node.value))
                F.scatter(self, arr, subs.sub, new, False, "x[indices] op= v")
                return
            if isinstance(subs, Array):        # a view: `u[1:-1] += ...`, in place
                value = self.visit(node.value)
                self._assigning_a_view(arr, subs)
                A.assign(subs, self._binary(op, subs, value))
                return
            current = A.load(arr, subs, self.debug)
            new = self._binary(op, current, self.visit(node.value))
            A.store(arr, subs, new, self.debug)
        else:
            raise self.error(node, "augmented assignment must target a name or an element")

    def assign(self, target: ast.expr, value) -> None:
        if isinstance(target, ast.Name):
            self.struct_params_unwritten.discard(target.id)
        if isinstance(target, ast.Name) and isinstance(value, Vec):
            self._bind_vector(target.id, value)
            return
        if isinstance(target, ast.Name) and target.id in self.vec_names:
            self._unbind_vector(target.id)
        if isinstance(target, ast.Name) and isinstance(value, StructValue):
            self._bind_struct(target.id, value)
            return
        if isinstance(target, ast.Name) and target.id in self.struct_names:
            self._unbind_struct(target.id)
        if self._assign_struct_field(target, value) or self._assign_vector_item(target, value):
            return
        if isinstance(target, ast.Name):
            if isinstance(value, ArrayExpr):
                value = self.bind_lazy(target.id, value)
            elif isinstance(value, (tuple, dict)):
                value = named_items(value)   # (so that a write computes them first)
            if value is None:
                raise self.error(target, "this call returns nothing; there is no value to assign")
            self.vars[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = self._unpack(value, len(target.elts), target)
            for t, v in zip(target.elts, items):
                self.assign(t, v)
        elif isinstance(target, ast.Subscript):
            arr, subs = self._subscript_target(target)
            if isinstance(subs, F.Fancy):      # x[idx] = v: NumPy's order, the last one stays
                F.scatter(self, arr, subs.sub, value, False, "x[indices] = v")
                return
            if isinstance(subs, Array):        # a view: `v[1:-1] = expr`, NumPy's assignment
                if not isinstance(value, (Array, ArrayExpr, Scalar, Literal)):
                    raise self.error(target, f"cannot assign {S.describe(value)} into an array")
                self._assigning_a_view(arr, subs)
                A.assign(subs, value)
                return
            if isinstance(value, (Array, ArrayExpr)):
                raise self.error(target, "assigning an array into an element")
            A.store(arr, subs, value, self.debug)
        else:
            raise self.error(target, f"cannot assign to {type(target).__name__}")

    def _unpack(self, value, n: int, node: ast.AST) -> list:
        if isinstance(value, Shape):
            value = tuple(S.from_index(d) for d in value.dims)
        if not isinstance(value, tuple):
            raise self.error(node, f"cannot unpack {S.describe(value)} into {n} names")
        if len(value) != n:
            raise self.error(node, f"cannot unpack {len(value)} values into {n} names")
        return list(value)


_IMPURE = (ast.Call, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)


def _pure(node: ast.AST) -> bool:
    """Whether evaluating `node` runs no call and binds no name (so writes nothing)."""
    return not any(isinstance(n, _IMPURE) for n in ast.walk(node))
