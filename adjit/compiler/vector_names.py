"""Vector variables, the part of the code generator (`codegen.CodeGenerator`) that binds a
name holding a vector as one variable per component (`v[0]`, `v[1]`, ...: the generator's
`vec_names` records its type), so that ifs and loops merge and carry them as scalars, and
that compiles writes of a component (`v[k] = s`, `v.x = s`) or of an element of an array of
vectors (`x[i] = v`). The vectors' operations are vectors.py's.
"""
from __future__ import annotations

import ast

from . import vectors as V
from .values import Literal, StructValue, Vec, VecArray


class VectorNames:
    """A mixin of `CodeGenerator`: it uses the generator's `vars`, `vec_names`,
    `_one_branch`, `visit`, `error` and `_lookup`."""

    def _bind_vector(self, name: str, v: Vec) -> None:
        """`name = v`: one variable per component (vectors.py), so that ifs and loops merge
        and carry them as scalars."""
        self._unbind_vector(name)
        self.vars.pop(name, None)
        self.vec_names[name] = v.type
        for k, x in enumerate(v.items):
            self.vars[f"{name}[{k}]"] = x

    def _unbind_vector(self, name: str) -> None:
        t = self.vec_names.pop(name, None)
        for k in range(t.size if t is not None else 0):
            self.vars.pop(f"{name}[{k}]", None)

    def _vector_in(self, name: str, node: ast.AST) -> Vec | None:
        """The vector variable `name` holds (its components gathered), or None."""
        t = self.vec_names.get(name)
        if t is None or name in self.vars:
            return None
        items = []
        for k in range(t.size):
            x = self.vars.get(f"{name}[{k}]")
            if x is None:
                if f"{name}[{k}]" in self._one_branch:
                    raise self.error(node, f"variable {name!r} is assigned on only one branch "
                                           f"of the if at line {self._one_branch[f'{name}[{k}]']}"
                                           ": give it a value before the if or on every branch")
                return None
            items.append(x)
        # (a merge may have promoted some components: an if that gives f32 on one branch
        # and f64 on the other)
        return V.make(t.kind, t.shape, items)

    def _assign_vector_item(self, target: ast.expr, value) -> bool:
        """`x[i] = v` into an array of vectors, `v[k] = s`, `m[i, j] = s`, `v.x = s` into a
        vector variable (rebinding its components). False for any other target."""
        if not isinstance(target, (ast.Subscript, ast.Attribute)):
            return False
        if self._struct_field(target) and isinstance(target, ast.Attribute):
            raise self.error(target, f"cannot assign to {ast.unparse(target)}: a struct's "
                                     "fields are read-only in compiled code (an array field "
                                     f"is written through: {ast.unparse(target)}[i] = ...)")
        base_node = target.value
        if self._struct_field(base_node) and isinstance(target, ast.Subscript):
            base = self.visit(base_node)        # `s.pos[i] = v`: an array field
            if isinstance(base, VecArray):
                V.store(self, base, self.visit(target.slice), value)
                return True
            return False
        if not isinstance(base_node, ast.Name):
            return False
        base = self._lookup(base_node.id, base_node)
        if isinstance(base, VecArray) and isinstance(target, ast.Subscript):
            V.store(self, base, self.visit(target.slice), value)
            return True
        if not isinstance(base, Vec):
            return False
        if isinstance(target, ast.Attribute):
            new = V.with_item(base, Literal(V.axis(base, target.attr)), value)
        else:
            new = V.with_item(base, self.visit(target.slice), value)
        self._bind_vector(base_node.id, new)
        return True

    def _struct_field(self, node: ast.AST) -> bool:
        """Whether `node` is a field of a struct variable (`s.pos`, `s.inner.x`): read
        without emitting anything."""
        if not isinstance(node, ast.Attribute):
            return False
        root = node.value
        while isinstance(root, ast.Attribute):
            root = root.value
        return isinstance(root, ast.Name) and isinstance(self.vars.get(root.id), StructValue)
