"""Struct variables, the part of the code generator (`codegen.CodeGenerator`) that binds a
name holding an `@adjit.struct` value as one variable per field (`p.mass`, `p.pos`, a
nested struct's `p.inner.x`; a vector field further as its components `p.pos[0]`...: the
generator's `struct_names` records the struct's type), so that ifs and loops merge and carry
a struct's fields as they do any scalar, and that compiles a field's assignment
(`p.mass = m`, `p.pos.x = s`, `p.inner = q`) as the rebinding of its variable. Values and
construction are struct_values.py's.
"""
from __future__ import annotations

import ast

from . import struct_values as SV
from ..lang.structs import StructType
from .values import StructValue, Vec


class StructNames:
    """A mixin of `CodeGenerator`: it uses the generator's `vars`, `struct_names`,
    `struct_params_unwritten` (the struct parameters not rebound yet), `vec_names`, `_one_branch`, `error`, and the vector names' `_bind_vector`,
    `_unbind_vector` and `_vector_in`."""

    def _bind_struct(self, name: str, v: StructValue) -> list[str]:
        """`name = v`: one variable per field; the names of the variables bound."""
        self._unbind_struct(name)
        self._unbind_vector(name)
        self.vars.pop(name, None)
        self.struct_names[name] = v.type
        bound = []
        for n, t in v.type.fields:
            path, x = f"{name}.{n}", v.fields[n]
            if isinstance(x, StructValue):
                bound.extend(self._bind_struct(path, x))
            elif isinstance(x, Vec):
                self._bind_vector(path, x)
                bound.extend(f"{path}[{k}]" for k in range(x.type.size))
            else:
                self._unbind_struct(path)
                self._unbind_vector(path)
                self.vars[path] = x
                bound.append(path)
        return bound

    def _unbind_struct(self, name: str) -> None:
        st = self.struct_names.pop(name, None)
        for n, _ in st.fields if st is not None else ():
            path = f"{name}.{n}"
            self._unbind_struct(path)
            self._unbind_vector(path)
            self.vars.pop(path, None)

    def _struct_in(self, name: str, node: ast.AST) -> StructValue | None:
        """The struct variable `name` holds (its fields gathered), or None."""
        st: StructType | None = self.struct_names.get(name)
        if st is None or name in self.vars:
            return None
        fields = {}
        for n, t in st.fields:
            path = f"{name}.{n}"
            if path in self.struct_names:
                x = self._struct_in(path, node)
            elif path in self.vec_names:
                x = self._vector_in(path, node)
            else:
                x = self.vars.get(path)
            if x is None:
                where = self._one_branch.get(path) or next(
                    (line for leaf, line in self._one_branch.items()
                     if leaf.startswith((f"{path}.", f"{path}["))), None)
                if where is not None:
                    raise self.error(node, f"variable {name.split('.')[0]!r} is assigned on "
                                           f"only one branch of the if at line {where}: give "
                                           "it a value before the if or on every branch")
                return None
            fields[n] = x
        return StructValue(st, fields)

    def _struct_path(self, node: ast.AST) -> str | None:
        """`p.inner.x` as the name of the variable holding that field of a struct variable
        (`"p.inner.x"`), or None when `node` is no field of one."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not (isinstance(node, ast.Name) and parts):
            return None
        path = node.id
        for attr in reversed(parts):
            st = self.struct_names.get(path)
            if st is None:
                return None
            if attr not in dict(st.fields):
                return None
            path = f"{path}.{attr}"
        return path

    def _assign_struct_field(self, target: ast.expr, value) -> bool:
        """`p.mass = m`, `p.inner = q`, `p.pos = v` (a field of a struct variable, rebinding
        its variable); False for any other target."""
        if not isinstance(target, ast.Attribute):
            return False
        owner = self._struct_path(target.value) if isinstance(
            target.value, ast.Attribute) else (target.value.id if isinstance(
                target.value, ast.Name) else None)
        st = self.struct_names.get(owner) if owner is not None else None
        if st is None or self._struct_in(owner, target) is None:
            return False
        fields = dict(st.fields)
        if target.attr not in fields:
            raise self.error(target, f"struct {st.name} has no field {target.attr!r} (its "
                                     f"fields: {', '.join(fields)})")
        self._check_writable(target)
        t = fields[target.attr]
        path = f"{owner}.{target.attr}"
        new = SV.convert(st, target.attr, t, value)
        if isinstance(new, StructValue):
            self._bind_struct(path, new)
        elif isinstance(new, Vec):
            self._bind_vector(path, new)
        else:
            self.vars[path] = new
        return True

    def _check_writable(self, target: ast.expr) -> None:
        """Refuses a write of a field of a struct argument (`p.mass = m` where p is a
        parameter): in Python it would change the caller's struct, which compiled code,
        holding a copy of its fields, would not (an array field is written through:
        `p.x[i] = ...`; a struct made in the code, or a copy `q = p`, is written freely)."""
        root = target
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        if isinstance(root, ast.Name) and root.id in self.struct_params_unwritten:
            raise self.error(target, f"cannot assign to {ast.unparse(target)}: the fields of a "
                                     "struct argument are read-only in compiled code (the "
                                     "caller's struct would not change; an array field's "
                                     "elements are written through; copy the struct to "
                                     f"change it: q = {root.id}, then q."
                                     f"{ast.unparse(target).split('.', 1)[1]} = ...)")
