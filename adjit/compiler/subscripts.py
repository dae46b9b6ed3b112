"""Subscripts, the part of the code generator (`codegen.CodeGenerator`) that compiles `x[...]`:
an element's indices (negative ones counted from the end where Python's rule applies), a
view (slices, `...`, np.newaxis, fewer integers than dimensions: arrays.view builds the
subview), a shape's or a tuple's item, a vector's component, and the target of a write into
an element or a view.
"""
from __future__ import annotations

import ast

from mlir import ir
from mlir.dialects import memref

from . import arrays as A
from . import fancy_indexing as F
from . import lazy as L
from . import scalar_ops as S
from . import trees as T
from . import vectors as V
from .static_loops import static_items, static_slice
from ..core.errors import UserError
from ..core.types import index
from .values import (Array, ArrayExpr, Literal, PyObj, RangeValue, Scalar, Shape, SliceValue,
                     Vec, VecArray)


class Subscripts:
    """A mixin of `CodeGenerator`: it uses the generator's `kind`, `debug`, `visit`, `error`,
    `force_lazy`, `_compute_named` and `_from_python`."""

    def visit_Subscript(self, node: ast.Subscript):
        base = self.visit(node.value)
        sub = self.visit(node.slice)
        if isinstance(base, Shape):
            if not (isinstance(sub, Literal) and isinstance(sub.value, int)):
                raise self.error(node, "x.shape[k] needs a constant k")
            k = sub.value
            if not -len(base.dims) <= k < len(base.dims):
                raise self.error(node, f"shape index {k} out of range for a "
                                       f"{len(base.dims)}-D array")
            return S.from_index(base.dims[k])
        if isinstance(sub, SliceValue):
            items = static_items(self, base, node)
            if items is not None:
                return static_slice(items, sub)
        if isinstance(base, tuple):
            if not (isinstance(sub, Literal) and isinstance(sub.value, int)):
                raise self.error(node, "tuples are indexed with constants")
            if not -len(base) <= sub.value < len(base):
                raise self.error(node, f"index {sub.value} out of range for "
                                       f"{ast.unparse(node.value)}, a tuple of {len(base)}")
            return base[sub.value]
        if isinstance(base, dict):
            return T.subscript(base, sub, ast.unparse(node.value))
        if isinstance(base, Vec):
            return V.subscript(base, sub)
        if isinstance(base, VecArray):
            return V.load(self, base, sub)
        if isinstance(base, L.NamedExpr):
            base = self._compute_named(base)
        elif isinstance(base, ArrayExpr):
            base = A.materialize(base)
        if isinstance(base, Array):
            sub = F.index_lists(node.slice, sub)
            if F.is_fancy(sub):
                return F.gather(self, base, sub)
            items = self._view_items(base, sub)
            if items is not None:
                return A.view(base, items, self.debug, self.kind == "jit")
            return A.load(base, self.subscripts(base, sub), self.debug)
        if isinstance(base, PyObj) and isinstance(sub, (PyObj, Literal)):
            # A compile-time Python object (a global tuple of constants, say).
            key = sub.obj if isinstance(sub, PyObj) else sub.value
            try:
                return self._from_python(base.obj[key], "", node)
            except (KeyError, IndexError, TypeError) as e:
                raise self.error(node, f"cannot index {ast.unparse(node.value)}: {e}") from None
        raise self.error(node, f"cannot index {S.describe(base)}")

    def visit_Slice(self, node: ast.Slice):
        parts = []
        for part in (node.lower, node.upper, node.step):
            v = None if part is None else self.visit(part)
            if isinstance(v, PyObj) and v.obj is None:
                v = None
            if v is not None and not (isinstance(v, Literal) and isinstance(v.value, int)
                                      and not isinstance(v.value, bool)
                                      or isinstance(v, Scalar) and v.type.is_int):
                raise self.error(node, f"slice bounds must be integers, got {S.describe(v)}")
            parts.append(v)
        return SliceValue(*parts)

    def _subscript_target(self, node: ast.Subscript
                          ) -> tuple[Array, list[ir.Value] | Array | F.Fancy]:
        """(the array, the element's indices), (the array, the view), or (the array, its
        advanced indices) that `node` writes."""
        arr, = self.force_lazy([self.visit(node.value)])   # a write: lazy names first
        if not isinstance(arr, Array):
            raise self.error(node, f"cannot assign into an element of {S.describe(arr)}")
        sub = F.index_lists(node.slice, self.visit(node.slice))
        if F.is_fancy(sub):
            return arr, F.Fancy(sub)
        items = self._view_items(arr, sub)
        if items is None:
            return arr, self.subscripts(arr, sub)
        target = A.view(arr, items, self.debug, self.kind == "jit")
        if not isinstance(target, Array):
            raise self.error(node, "cannot assign through a new axis (np.newaxis / None)")
        return arr, target

    def _assigning_a_view(self, arr: Array, view: Array) -> None:
        """Refuses a write into a view outside @adjit.jit code: a loop over its elements,
        which a kernel's work item or a device function does not run."""
        if self.kind != "jit":
            raise UserError(f"assigning into a view of a {arr.type.ndim}-D array (a slice, or "
                            f"{arr.type.ndim - view.type.ndim} indices) writes many elements: "
                            "only @adjit.jit functions do; a kernel writes single elements "
                            "(give one index per dimension)")

    def _view_items(self, arr: Array, sub) -> list | None:
        """The items of `arr[sub]` as arrays.view takes them when it is a view (a slice,
        `...`, a new axis, or fewer integers than dimensions), else None (one element)."""
        items = (list(sub) if isinstance(sub, tuple) else
                 [S.from_index(d) for d in sub.dims] if isinstance(sub, Shape) else [sub])
        basic = all(isinstance(s, (Scalar, Literal)) for s in items)
        if basic and len(items) == arr.type.ndim:
            return None
        for s in items:
            if isinstance(s, (RangeValue, Array, ArrayExpr)):
                raise UserError("adjit indexes with integers, slices, ... and np.newaxis "
                                "(fancy indexing with arrays is not supported)")
            if isinstance(s, Scalar) and not (s.type.is_int or s.type == index):
                raise UserError(f"an index must be an integer, got {S.describe(s)}")
        ellipses = [k for k, s in enumerate(items) if isinstance(s, PyObj) and s.obj is Ellipsis]
        if len(ellipses) > 1:
            raise UserError("an index can only have a single ellipsis ('...')")
        out = [None if isinstance(s, PyObj) and s.obj is None else s for s in items]
        for s in out:
            if isinstance(s, PyObj) and s.obj is not Ellipsis:
                raise UserError(f"cannot index an array with {S.describe(s)}")
        used = sum(1 for s in out if s is not None and not isinstance(s, PyObj))
        if used > arr.type.ndim:
            raise UserError(f"indexing a {arr.type.ndim}-D array with {used} indices: too many")
        if ellipses:
            k = ellipses[0]
            out[k:k + 1] = [SliceValue(None, None, None)] * (arr.type.ndim - used)
        return out

    def subscripts(self, arr: Array, sub) -> list[ir.Value]:
        """The index values of element `arr[sub]`. A negative literal counts from the end,
        as in Python, everywhere; a negative index known only at run time does too in @jit
        code (NumPy's rule, arrays.wrapped), while kernels and @func device functions use
        it as it is, as Warp's do (their index analyses, gather.py and ndrange_bounds.py,
        read `u[i - 1, j]` as the item's id less one). An index still outside is out of
        bounds (checked in debug mode)."""
        items = (list(sub) if isinstance(sub, tuple) else
                 [S.from_index(d) for d in sub.dims] if isinstance(sub, Shape) else [sub])
        out = []
        for d, s in enumerate(items):
            if isinstance(s, (RangeValue, Array, ArrayExpr)) or s is None:
                raise UserError("adjit indexes single elements: slices and fancy indexing "
                                "are not supported")
            if d < arr.type.ndim and (self.kind == "jit" or isinstance(s, Literal)):
                out.append(A.wrapped(S.to_index(s),
                                     lambda d=d: memref.dim(arr.value, A.idx(d))))
            else:
                out.append(S.to_index(s))
        return out
