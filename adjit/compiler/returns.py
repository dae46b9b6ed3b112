"""Returns, the part of the code generator (`codegen.CodeGenerator`) that compiles `return`:
the returned values as results (a vector as its scalars, a lazy expression or a view as a
new array), their types agreed across returns, and a return from inside control flow as the
flag and result variables that `visit_block` and control_flow.py carry to the end.
"""
from __future__ import annotations

import ast

from mlir.dialects import arith, func

from . import arrays as A
from . import scalar_ops as S
from ..core.types import ArrayType, ScalarType, promote
from .control_flow import RET, computed
from . import struct_values as SV
from . import trees as T
from ..core.errors import UserError
from .values import Array, ArrayExpr, Literal, PyObj, Scalar, Shape, StructValue, Vec, VecArray


class Returns:
    """A mixin of `CodeGenerator`: it uses the generator's `vars`, `kind`, `result_types`,
    `result_layout`, `visit`, `error`, `_loc`, and control flow's `_coerce` and `_type_of`.
    Custom-rule compilation overrides `returned_items` (rule_compiler.py)."""

    def visit_Return(self, node: ast.Return) -> None:
        values = self._return_values(node)
        self._note_result_types(values, node)
        for k, v in enumerate(values):
            self.vars[f"%rv{k}"] = v
        self.vars[RET] = Literal(True)

    def returned_items(self, value, node: ast.Return) -> list:
        """The returned Python value as a list of results (overridden for custom rules)."""
        return list(value) if isinstance(value, tuple) else [value]

    def _return_values(self, node: ast.Return) -> list:
        if node.value is None:
            return self.returned_items(PyObj(None), node) if self.kind == "rule" else []
        v = self.visit(node.value)
        if self.kind == "kernel":
            raise self.error(node, "kernels return nothing: write results into an array")
        tree = None
        if self.kind != "rule" and T.is_container(v) and (
                type(v) is not tuple or not v or any(T.is_container(x) for x in v)):
            # A tree (a dict, a NamedTuple, nested tuples): its leaves are the results, which
            # a call gathers again (trees.py; compiled.py from Python).
            tree = T.structure(v)
            if any(t.node is not None for t in _leaf_defs(tree)):
                raise self.error(node, "cannot return a struct inside a tuple or dict")
            v = tuple(T.leaves(tree, v))
        if self.result_types is not None and tree != getattr(self, "result_tree", None):
            raise self.error(node, f"this return gives {tree or 'no tree'}, an earlier one "
                                   f"{getattr(self, 'result_tree', None) or 'no tree'}")
        self.result_tree = tree
        items = self.returned_items(v, node)
        # A vector result is its scalars, a struct result its leaf fields' values (a vector
        # field's scalars too): struct_values.regroup gathers them at a call.
        self.result_layout = [x.type if isinstance(x, (Vec, StructValue)) else None
                              for x in items]
        leaves = []
        for x in items:
            if isinstance(x, StructValue):
                try:
                    leaves.extend(SV.leaf_values(x, f"the returned {x.type.name}"))
                except UserError as e:
                    raise self.error(node, str(e)) from None
            else:
                leaves.append(x)
        items = [y for x in leaves for y in (x.items if isinstance(x, Vec) else
                                             [x.array] if isinstance(x, VecArray) else [x])]
        out = []
        memo: dict[int, Array] = {}   # (`return r, r` of a lazy r: one array, as in NumPy)
        for item in items:
            if isinstance(item, ArrayExpr):
                item = computed(item, memo)
            if isinstance(item, Shape):
                out.extend(S.from_index(d) for d in item.dims)
                continue
            if isinstance(item, Literal):
                item = S.as_scalar(item)
            if not isinstance(item, (Scalar, Array)):
                raise self.error(node, f"cannot return {S.describe(item)}: compiled code "
                                       "returns scalars, arrays, vectors, structs and tuples "
                                       "of them")
            # (a rule's tape may hold arrays: rules.py; returned_items checked the rest)
            if isinstance(item, Array) and self.kind not in ("jit", "rule"):
                raise self.error(node, "device functions return scalars only")
            if isinstance(item, Array) and item.type.strided:
                item = A.copy(item)   # (a view returns as a new C-contiguous array)
            out.append(item)
        self.tuple_result = isinstance(v, (tuple, Shape))
        return out

    def _note_result_types(self, values: list, node: ast.AST) -> None:
        types = [self._type_of(v) for v in values]
        if self.result_types is None:
            self.result_types = types
        elif [str(t) for t in types] != [str(t) for t in self.result_types]:
            if len(types) == len(self.result_types) and all(
                    isinstance(a, ScalarType) and isinstance(b, ScalarType)
                    for a, b in zip(types, self.result_types)):
                    self.result_types = [promote(a, b) for a, b in zip(types, self.result_types)]
            else:
                raise self.error(node, f"this return gives {types}, an earlier one "
                                       f"{self.result_types}")

    def _final_return(self, node: ast.Return) -> None:
        values = self._return_values(node)
        self._note_result_types(values, node)
        if RET in self.vars:   # earlier returns inside control flow: pick theirs if taken
            with self._loc(node):
                flag = S.truth(self.vars[RET]).value
                for k, v in enumerate(values):
                    t = self.result_types[k]
                    earlier = self.vars.get(f"%rv{k}")
                    if earlier is None or isinstance(t, ArrayType):
                        raise self.error(node, "an array returned from inside an if or loop "
                                               "must be the same on every return path")
                    values[k] = Scalar(arith.select(flag, self._coerce(earlier, t).value,
                                                    self._coerce(v, t).value), t)
        with self._loc(node):
            self._emit_return(values)

    def _emit_return(self, values: list) -> None:
        func.ReturnOp([self._coerce(v, t).value for v, t in zip(values, self.result_types)])


def _leaf_defs(tree) -> list:
    """The leaf TreeDefs of `tree`, in order."""
    if tree.kind == "leaf":
        return [tree]
    return [x for c in tree.children for x in _leaf_defs(c)]
