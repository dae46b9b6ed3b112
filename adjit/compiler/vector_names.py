"""Vector variables, the part of the code generator (`codegen.CodeGenerator`) that binds a
name holding a vector as one variable per component (`v[0]`, `v[1]`, ...: the generator's
`vec_names` records its type), so that ifs and loops merge and carry them as scalars, and
that compiles writes of a component (`v[k] = s`, `v.x = s`) or of an element of an array of
vectors (`x[i] = v`). The vectors' operations are vectors.py's.
"""
from __future__ import annotations

import ast

from . import vectors as V
from ..core.types import VecType
from .values import Literal, Vec, VecArray


class VectorNames:
    """A mixin of `CodeGenerator`: it uses the generator's `vars`, `vec_names`,
    `_one_branch`, `visit`, `error`, `_lookup` and the struct names' `_struct_path`."""

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
        """`x[i] = v` into an array of vectors; a component or row of an element of one
        (`y[i].x = s`, `y[i][k] = s`, `y[i][r, c] = s`, `y[i][r][c] = s`: only those
        components are written); `v[k] = s`, `m[i, j] = s`, `m[i][j] = s`, `v.x = s` into a
        vector variable (rebinding its components). False for any other target."""
        place = self._vector_place(target)
        if place is None:
            return False
        root_node, root, path = place
        if isinstance(root, VecArray):
            if not isinstance(path[0], ast.Subscript):
                raise self.error(target, f"cannot assign to {ast.unparse(target)}: index the "
                                         f"array of vectors first ({ast.unparse(root_node)}[i])")
            sub = self.visit(path[0].slice)
            part = V.transform_part(root.vec, path[1:])
            if len(path) == 1:
                V.store(self, root, sub, value)
            elif part is not None:          # `xf[i].p = v`, `xf[i].q.w = s`
                offset, t, rest = part
                V.store_part(self, root, sub, offset, t, self._components(rest, t), value)
            else:
                V.store_component(self, root, sub, self._components(path[1:], root.vec), value)
            return True
        name = root_node.id if isinstance(root_node, ast.Name) else self._struct_path(
            root_node)
        if not isinstance(root_node, ast.Name):
            # a struct variable's vector field (`p.pos.x = s`): its variable rebound
            # (struct_names.py), unless the struct is an argument
            self._check_writable(target)
        part = V.transform_part(root.type, path)
        if part is not None:                # `t.p = v`, `t.q.w = s`: the transform remade
            attr = path[0].attr
            old = V.attribute(root, attr)
            rest = part[2]
            new_part = (V.with_item(old, tuple(self._components(rest, old.type)), value)
                        if rest else value)
            new = V.with_part(root, attr, new_part)
        else:
            new = V.with_item(root, tuple(self._components(path, root.type)), value)
        self._bind_vector(name, new)
        return True

    def _vector_place(self, target: ast.expr):
        """For a target inside a vector variable or an array of vectors (`v.x`, `m[i][j]`,
        `y[i]`, `y[i].x`, `s.points[i][0]`): (the root's node, its Vec or VecArray, the
        subscripts and attributes from the root out to the target); None for any other
        target. Reading the root emits nothing (a name, a struct's field)."""
        path = []
        node = target
        while isinstance(node, (ast.Subscript, ast.Attribute)) and not self._struct_field(node):
            path.append(node)
            node = node.value
        if not path:
            return None
        if isinstance(node, ast.Name):
            root = self._lookup(node.id, node)
        elif self._struct_field(node):
            root = self.visit(node)
        else:
            return None
        if not isinstance(root, (Vec, VecArray)):
            return None
        return node, root, path[::-1]

    def _components(self, path: list, t) -> list:
        """The indices into a vector of type `t` that the subscripts and attributes of
        `path` name, in order (`.x` is component 0; `m[r][c]` and `m[r, c]` are [r, c])."""
        out = []
        for node in path:
            if len(out) >= len(t.shape):
                raise self.error(node, f"{ast.unparse(node)}: a {t!r} value has "
                                       f"{len(t.shape)} ind{'ex' if len(t.shape) == 1 else 'ices'}")
            if isinstance(node, ast.Attribute):
                if t.kind == "mat" and not out:
                    V.axis_index(t, node.attr)          # (raises: a matrix has no .x)
                n = t.shape[len(out)]
                out.append(Literal(V.axis_index(VecType("vec" if t.kind == "mat" else t.kind,
                                                        (n,), t.dtype), node.attr)))
            else:
                sub = self.visit(node.slice)
                out.extend(sub if isinstance(sub, tuple) else [sub])
        return out

    def _struct_field(self, node: ast.AST) -> bool:
        """Whether `node` is a field of a struct variable (`s.pos`, `s.inner.x`): read
        without emitting anything."""
        return self._struct_path(node) is not None
