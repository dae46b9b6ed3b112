"""Python AST to `adj`-dialect MLIR: one visitor, one `visit_*` per Python construct.

Python locals live in `self.vars` (name -> frontend value). Structured control flow (`if`,
loops, `break`/`continue`/`return` inside them, conditional expressions) turns them into SSA
in `control_flow.py`, a part of this visitor kept in its own module; expressions, calls,
element access and returns are here.
"""
from __future__ import annotations

import ast
import contextlib
import functools
from typing import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, func, memref

from . import arrays as A
from .matmul import matmul
from . import builtin_calls as B
from . import lazy as L
from . import numpy_calls as NP  # (registers NumPy's array functions)
from . import scalar_ops as S
from . import vectors as V
from ..core.errors import CompilationError, UserError, located
from ..dialects import adj
from ..dialects.mlir_types import mlir_type
from ..lang.source import Name, SourceInfo, resolve_name
from ..core.types import ArrayType, ScalarType, VecType, as_scalar_type, index, promote
from ..lang.structs import StructType, flatten_params
from .values import (Array, ArrayExpr, Literal, PyObj, RangeValue, Scalar, Shape,
                     SliceValue, StructValue, Vec, VecArray)
from .control_flow import BRK, CONT, RET, ControlFlow, computed, jumps_in


class CodeGenerator(ControlFlow, ast.NodeVisitor):
    """Compiles one Python function, specialised to argument types, into a func.func.

    kind: "kernel" (runs per work item over an `ndim`-D ndrange, returns nothing), "func"
    (a device function: callable from kernels) or "jit" (host code: may allocate arrays
    and launch kernels)."""

    def __init__(self, unit, pyfn: Callable, source: SourceInfo, kind: str,
                 arg_types: Sequence, symbol: str, ndim: int = 0, debug: bool = False,
                 bound: dict | None = None):
        self.unit, self.pyfn, self.src, self.kind = unit, pyfn, source, kind
        self.arg_types, self.symbol, self.ndim, self.debug = list(arg_types), symbol, ndim, debug
        self.bound = bound or {}   # compile-time Python values bound to names (rules' config)
        self._reset()

    def _reset(self) -> None:
        """The state of one pass over the body."""
        self.vars: dict[str, object] = {}
        # Variables holding a vector: name -> its type; its components are the variables
        # `name[0]`, `name[1]`, ... (vectors.py: control flow merges and carries them).
        self.vec_names: dict[str, VecType] = {}
        # Per result of the Python function, its VecType or None (the IR's results are
        # the scalars of each vector: vectors.regroup gathers them at a call).
        self.result_layout: list | None = None
        self._one_branch: dict[str, int] = {}   # variables an if bound on one branch only
        self.result_types: list | None = None
        self._loop_depth = 0
        self._node: ast.AST | None = None
        # Statements that may still run after the one being compiled (innermost last): a
        # lazy name none of them reads is dead (lazy.py).
        self._later: list[Sequence[ast.stmt]] = []
        self._reads_memo: dict = {}
        self._stmt: ast.stmt | None = None   # the statement being compiled

    # ---- entry point ------------------------------------------------------------------
    def compile(self) -> func.FuncOp:
        body = self.src.tree.body
        tail_only = bool(body) and isinstance(body[-1], ast.Return) and \
            RET not in jumps_in(body[:-1], False)
        if tail_only or RET not in jumps_in(body, False):
            return self._compile_once(flagged=False)
        # Returns inside control flow: the result types must be known before the body is
        # compiled (the returned values are carried through loops and ifs), so a first pass
        # finds them and is thrown away.
        self._compile_once(flagged=True).operation.erase()
        types = self.result_types or []
        if any(isinstance(t, ArrayType) for t in types):
            raise self.error(self.src.tree, "a function that returns an array must return "
                                            "it once, at the end")
        self._reset()
        self.result_types = list(types)
        return self._compile_once(flagged=True)

    def _compile_once(self, flagged: bool) -> func.FuncOp:
        tree = self.src.tree
        with self._loc(tree):
            inputs = [mlir_type(t) for t in V.flat_types(self.arg_types)]
            fn = func.FuncOp(self.symbol, (inputs, []), visibility="private")
            entry = fn.add_entry_block()
            # The user's names, for messages about this function (passes/ndrange_bounds.py).
            fn.operation.attributes[adj.SOURCE_ATTR] = ir.DictAttr.get({
                "name": ir.StringAttr.get(self.pyfn.__name__),
                "args": ir.ArrayAttr.get([ir.StringAttr.get(a) for a in V.flat_names(
                    self._flat_params()[0], self.arg_types)])})
        self.entry_block = entry      # where a kernel's local arrays are allocated
        with ir.InsertionPoint(entry), self._loc(tree):   # (vector parameters emit code)
            self.vars.update(self.bind_params(list(entry.arguments)))
        self.vars.update(self.bound)
        body = tree.body
        with ir.InsertionPoint(entry):
            if not flagged and body and isinstance(body[-1], ast.Return):
                with self._then(body[-1:]):
                    self.visit_block(body[:-1])
                with self._loc(body[-1]), L.statement():
                    try:
                        self._final_return(body[-1])
                    except UserError as e:
                        raise self.error(body[-1], str(e)) from None
            elif not flagged:
                self.visit_block(body)
                with self._loc(tree):
                    self.result_types = []
                    func.ReturnOp([])
            else:
                known = self.result_types or []
                with self._loc(tree):
                    self.vars[RET] = Literal(False)
                    for k, t in enumerate(known):
                        self.vars[f"%rv{k}"] = S.as_scalar(Literal(0), t)
                self.visit_block(body)
                with self._loc(tree):
                    func.ReturnOp([self._coerce(self.vars.get(f"%rv{k}"), t).value
                                   for k, t in enumerate(known)])
        with self._loc(tree):
            fn.operation.attributes["function_type"] = ir.TypeAttr.get(
                ir.FunctionType.get(inputs, [mlir_type(t) for t in self.result_types or []]))
        return fn

    # ---- errors and locations ---------------------------------------------------------
    def _loc(self, node: ast.AST) -> ir.Location:
        line = self.src.first_line + getattr(node, "lineno", 1) - 1
        return ir.Location.file(self.src.filename, line, self.src.column(node) + 1)

    def error(self, node: ast.AST | None, message: str) -> CompilationError:
        node = node or self._node or self.src.tree
        rel = getattr(node, "lineno", 1)
        col = self.src.column(node)
        lines = self.src.lines
        line = lines[rel - 1] if 0 < rel <= len(lines) else None
        return CompilationError(message, self.src.filename, self.src.first_line + rel - 1,
                                col, line)

    def visit(self, node: ast.AST):
        prev, self._node = self._node, node
        try:
            with self._loc(node):
                return super().visit(node)
        except CompilationError as e:
            if isinstance(node, ast.Call) and not e.in_lines(
                    self.src.filename, self.src.first_line,
                    self.src.first_line + len(self.src.lines) - 1):
                # An error in a callee compiled for this call: name the call too.
                site = self.error(node, "")
                e.add_call_site(site.filename, site.lineno, site.col, site.source_line)
            raise
        except UserError as e:
            raise self.error(node, str(e)) from None
        except RecursionError as e:     # guard.compiling retries it on a deeper stack
            if "adjit_where" not in e.__dict__:       # (no call: the stack is full)
                e.adjit_where = (self.src, node)
            raise
        except Exception as e:          # a bug of adjit's, or a deliberate TypeError...
            raise located(e, self.error(node, ""))
        finally:
            self._node = prev

    def generic_visit(self, node: ast.AST):
        raise self.error(node, f"unsupported Python construct: {type(node).__name__}"
                               f" ({ast.unparse(node)[:60]!s})")

    def require_kernel(self, what: str) -> int:
        if self.kind != "kernel":
            raise UserError(f"{what} is only available inside an @adjit.kernel")
        return self.ndim

    def require_host(self, what: str) -> None:
        if self.kind == "kernel":
            raise UserError(f"{what} allocates an array: only @adjit.jit functions may (a "
                            "kernel may make local arrays of constant shapes, adjit.zeros(4), "
                            "and otherwise writes into arrays it is given)")
        if self.kind != "jit":
            raise UserError(f"{what} allocates an array: only @adjit.jit functions may "
                            "(kernels and device functions write into arrays they are given)")

    # ---- statements ---------------------------------------------------------------------
    def visit_block(self, stmts: Sequence[ast.stmt]) -> None:
        """Visits statements; after one that may break/continue/return, the rest run under
        `if not flag`."""
        for k, s in enumerate(stmts):
            if isinstance(s, (ast.Break, ast.Continue, ast.Return)):
                with L.statement():
                    self.visit(s)
                return   # what follows is unreachable
            rest = stmts[k + 1:]
            outer, self._stmt = self._stmt, s
            try:
                with self._then(rest), L.statement():
                    self.visit(s)
            finally:
                self._stmt = outer
            flags = [f for f in (BRK, CONT, RET) if f in self.vars]
            if rest and jumps_in([s], self._loop_depth > 0) and flags:
                with self._loc(rest[0]):
                    go = self._not_any(flags)
                    if isinstance(go, Literal):
                        if go.value:
                            continue
                        return
                    # The else side is the path that jumped: what the rest binds needs no
                    # value there (every later use is guarded by the same flags).
                    self._if(go.value, lambda: self.visit_block(rest), lambda: None, rest[0],
                             jumped=(False, True))
                return

    @contextlib.contextmanager
    def _then(self, later: Sequence[ast.stmt]):
        self._later.append(later)
        try:
            yield
        finally:
            self._later.pop()

    # ---- lazy names (lazy.py) -----------------------------------------------------------
    def _readers(self, name: str, also: Sequence[ast.AST] = ()) -> int:
        """In how many loops the statements that may still run (and `also`) read `name`
        (lazy.reads: 0 when it is dead)."""
        stmts = {id(s): s for seq in [*self._later, also] for s in seq}
        return sum(L.reads(s, self._reads_memo).get(name, 0) for s in stmts.values())

    def bind_lazy(self, name: str, value: ArrayExpr) -> ArrayExpr | Array:
        """What `name = <element-wise expression>` binds: the expression, lazily (fused
        into each loop that reads it), or an array (lazy.store_when_bound)."""
        if isinstance(value, L.NamedExpr):
            return value          # an alias of a lazy name: the same object
        if L.store_when_bound(value, self._readers(name)):
            return A.materialize(value)
        return L.NamedExpr(value)

    def force_lazy(self, values: Sequence = (), also: Sequence[ast.AST] = ()) -> list:
        """Before a write to arrays, a call or control flow: the lazy names still read later
        (or by `also`: the statement of a call, which may read them after it) are computed
        into arrays now (every name bound to one expression gets the same array), as are
        those among `values`, which come back with them replaced. Dead lazy names are left
        as they are (never computed)."""
        memo: dict[int, Array] = {}
        for e in L.take_pending():
            # An expression this statement made before the write and has not used yet
            # (`x*2 + g(x)`): computed now; whoever holds it reads the array from here on.
            memo[id(e)] = A.materialize(e)
            done = A.as_expr(memo[id(e)])
            e.element, e.at, e.linear, e.reads = done.element, done.at, done.linear, done.reads
        lazy = [(n, v) for n, v in self.vars.items() if _lazy_in(v)]
        if not lazy and not memo:
            return list(values)
        live = {id(e) for v in values for e in _lazy_in(v)}
        for n, v in lazy:
            if self._readers(n, also):
                live.update(id(e) for e in _lazy_in(v))

        def computed(v):
            if isinstance(v, ArrayExpr) and id(v) in memo:
                return memo[id(v)]
            if isinstance(v, L.NamedExpr) and id(v) in live:
                if id(v) not in memo:
                    memo[id(v)] = A.materialize(v)
                return memo[id(v)]
            if isinstance(v, tuple):
                return tuple(computed(x) for x in v)
            return v

        for n, v in lazy:
            self.vars[n] = computed(v)
        return [computed(v) for v in values]

    def _compute_named(self, e: ArrayExpr) -> Array:
        """Lazy name `e` computed into an array, which every name bound to it now holds
        (indexing it twice computes it once)."""
        out = A.materialize(e)
        for n, v in list(self.vars.items()):
            if v is e:
                self.vars[n] = out
        return out

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant):
            return   # docstring or bare constant
        self.visit(node.value)

    def visit_Pass(self, node: ast.Pass) -> None:
        pass

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
                isinstance(node.target.value, ast.Name) and isinstance(
                    self._lookup(node.target.value.id, node.target.value), (Vec, VecArray))
                or self._struct_field(node.target.value) or self._struct_field(node.target)):
            # `x[i] += v` (an array of vectors), `v[k] += s`, `v.x += s`
            current = self.visit(node.target)
            self.assign(node.target, self._binary(op, current, self.visit(node.value)))
        elif isinstance(node.target, ast.Subscript):
            arr, subs = self._subscript_target(node.target)
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
        if isinstance(target, ast.Name) and isinstance(value, Vec):
            self._bind_vector(target.id, value)
            return
        if isinstance(target, ast.Name) and target.id in self.vec_names:
            self._unbind_vector(target.id)
        if self._assign_vector_item(target, value):
            return
        if isinstance(target, ast.Name):
            if isinstance(value, ArrayExpr):
                value = self.bind_lazy(target.id, value)
            elif isinstance(value, tuple):
                value = _named_items(value)   # (so that a write computes them first)
            if value is None:
                raise self.error(target, "this call returns nothing; there is no value to assign")
            self.vars[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = self._unpack(value, len(target.elts), target)
            for t, v in zip(target.elts, items):
                self.assign(t, v)
        elif isinstance(target, ast.Subscript):
            arr, subs = self._subscript_target(target)
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

    def _unpack(self, value, n: int, node: ast.AST) -> list:
        if isinstance(value, Shape):
            value = tuple(S.from_index(d) for d in value.dims)
        if not isinstance(value, tuple):
            raise self.error(node, f"cannot unpack {S.describe(value)} into {n} names")
        if len(value) != n:
            raise self.error(node, f"cannot unpack {len(value)} values into {n} names")
        return list(value)

    def _subscript_target(self, node: ast.Subscript) -> tuple[Array, list[ir.Value] | Array]:
        """(the array, the element's indices), or (the array, the view) that `node` writes."""
        arr, = self.force_lazy([self.visit(node.value)])   # a write: lazy names first
        if not isinstance(arr, Array):
            raise self.error(node, f"cannot assign into an element of {S.describe(arr)}")
        sub = self.visit(node.slice)
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
        items = list(sub) if isinstance(sub, tuple) else \
            [S.from_index(d) for d in sub.dims] if isinstance(sub, Shape) else [sub]
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
        items = list(sub) if isinstance(sub, tuple) else \
            [S.from_index(d) for d in sub.dims] if isinstance(sub, Shape) else [sub]
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

    def visit_Return(self, node: ast.Return) -> None:
        values = self._return_values(node)
        self._note_result_types(values, node)
        for k, v in enumerate(values):
            self.vars[f"%rv{k}"] = v
        self.vars[RET] = Literal(True)

    def bind_params(self, args: list[ir.Value]) -> dict:
        """Python parameter names -> values of the function's arguments (custom-rule
        compilation overrides this to bind annotated arguments)."""
        names, anns, layout = self._flat_params()
        kind = "kernel" if self.kind == "kernel" else "function"
        values = V.bind(names, self.arg_types, args, anns, f"{kind} {self.pyfn.__name__}")
        out = {}
        for name, st in zip([a.arg for a in self.src.tree.args.args], layout):
            v = values[name] if st is None else _gather_struct(st, name, values)
            if isinstance(v, Vec):
                self._bind_vector(name, v)   # (into self.vars, with its components)
                out.update({f"{name}[{k}]": x for k, x in enumerate(v.items)})
            else:
                out[name] = v
        return out

    def _flat_params(self) -> tuple[list, list, list]:
        """(names, annotations, layout) of the IR's parameters: a struct parameter is its
        fields, `s.mass`, ... (structs.flatten_params)."""
        params = [a.arg for a in self.src.tree.args.args]
        anns = V.annotations(self.pyfn)
        return flatten_params(params, list(anns) + [None] * (len(params) - len(anns)))

    def returned_items(self, value, node: ast.Return) -> list:
        """The returned Python value as a list of results (overridden for custom rules)."""
        return list(value) if isinstance(value, tuple) else [value]

    def _return_values(self, node: ast.Return) -> list:
        if node.value is None:
            return self.returned_items(PyObj(None), node) if self.kind == "rule" else []
        v = self.visit(node.value)
        if self.kind == "kernel":
            raise self.error(node, "kernels return nothing: write results into an array")
        items = self.returned_items(v, node)
        # A vector result is its scalars (vectors.regroup gathers them at a call).
        self.result_layout = [x.type if isinstance(x, Vec) else None for x in items]
        items = [y for x in items for y in (x.items if isinstance(x, Vec) else [x])]
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
                raise self.error(node, f"cannot return {S.describe(item)}")
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

    # ---- expressions ------------------------------------------------------------------------
    def visit_Constant(self, node: ast.Constant):
        if isinstance(node.value, (bool, int, float)):
            return Literal(node.value)
        if node.value is None or node.value is Ellipsis:
            return PyObj(node.value)
        if isinstance(node.value, str):
            return PyObj(node.value)
        raise self.error(node, f"unsupported constant {node.value!r}")

    def visit_Name(self, node: ast.Name):
        return self._lookup(node.id, node)

    def _lookup(self, name: str, node: ast.AST):
        if name in self.vars:
            return self.vars[name]
        if name in self.vec_names:
            v = self._vector_in(name, node)
            if v is not None:
                return v
        if name in self._one_branch:
            raise self.error(node, f"variable {name!r} is assigned on only one branch of the "
                                   f"if at line {self._one_branch[name]}: give it a value "
                                   "before the if or on every branch")
        where, obj = resolve_name(self.pyfn, name)
        if where is Name.UNASSIGNED:
            raise self.error(node, f"name {name!r} is not defined yet")
        if where is Name.MISSING:
            raise self.error(node, f"name {name!r} is not defined (adjit only sees arguments,"
                                   " local variables and globals)")
        return self._from_python(obj, name, node)

    def _from_python(self, obj, name: str, node: ast.AST):
        if isinstance(obj, (Scalar, Array, Literal, Vec, VecArray)):  # fields of rule arguments
            return obj
        if isinstance(obj, tuple) and obj and all(isinstance(o, (Scalar, Array, Vec))
                                                  for o in obj):
            return obj                                  # batched tangents of rule arguments
        if isinstance(obj, (bool, int, float)):
            return Literal(obj)
        import numpy as np
        if isinstance(obj, np.generic) and not isinstance(obj, np.ndarray):
            return S.as_scalar(Literal(obj.item()), as_scalar_type(obj.dtype))
        if isinstance(obj, np.ndarray):
            raise self.error(node, f"global array {name!r}: pass arrays as arguments")
        return PyObj(obj)

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

    def visit_Tuple(self, node: ast.Tuple):
        return tuple(self.visit(e) for e in node.elts)

    visit_List = visit_Tuple

    def visit_ListComp(self, node: ast.ListComp | ast.GeneratorExp):
        """`[e for x in t]`, `(e for x in t)` over a tuple (a compile-time sequence, such as a
        batched argument's tangents in a custom rule of width N): unrolled while compiling,
        to a tuple. Its variable is local to it, as in Python."""
        if len(node.generators) != 1:
            raise self.error(node, "a comprehension in compiled code has one `for`")
        g = node.generators[0]
        seq = self.visit(g.iter)
        if not isinstance(seq, tuple):
            what = "range(...)" if isinstance(seq, RangeValue) else S.describe(seq)
            raise self.error(node, f"unsupported Python construct: {type(node).__name__} over "
                                   f"{what}: compiled code unrolls comprehensions over tuples "
                                   "only (write a for loop)")
        names = {n.id for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        saved = {n: self.vars[n] for n in names if n in self.vars}
        out = []
        try:
            for item in seq:
                self.assign(g.target, item)
                keep = True
                for cond in g.ifs:
                    c = self.visit(cond)
                    if not isinstance(c, Literal):
                        raise self.error(cond, "a comprehension's `if` must be known while "
                                               "compiling")
                    keep = keep and bool(c.value)
                if keep:
                    out.append(self.visit(node.elt))
        finally:
            for n in names:
                self.vars.pop(n, None)
            self.vars.update(saved)
        return tuple(out)

    visit_GeneratorExp = visit_ListComp

    def visit_Attribute(self, node: ast.Attribute):
        base = self.visit(node.value)
        attr = node.attr
        if isinstance(base, PyObj):
            try:
                return self._from_python(getattr(base.obj, attr), attr, node)
            except AttributeError:
                raise self.error(node, f"{ast.unparse(node.value)} has no attribute {attr!r}") \
                    from None
        if isinstance(base, StructValue):
            if attr not in base.fields:
                raise self.error(node, f"struct {base.type.name} has no field {attr!r} (its "
                                       f"fields: {', '.join(base.fields)})")
            return base.fields[attr]
        if isinstance(base, Vec):
            return base.items[V.axis(base, attr)]
        if isinstance(base, VecArray):
            if attr == "shape":     # (Warp's: the shape of the array of vectors)
                return Shape(A.dims(base.array)[:base.type.ndim - len(base.vec.shape)])
            if attr == "ndim":
                return Literal(base.type.ndim - len(base.vec.shape))
            if attr == "dtype":
                return PyObj(base.vec)
            base = base.array     # (its other attributes are its array's: x.copy(), x.T)
        if isinstance(base, (Array, ArrayExpr)):
            if attr == "shape":
                return Shape(A.dims(base) if isinstance(base, Array) else list(base.shape))
            if attr == "ndim":
                return Literal(base.type.ndim)
            if attr == "size":
                shape = A.dims(base) if isinstance(base, Array) else base.shape
                return S.from_index(A.numel(shape))
            if attr == "dtype":
                return PyObj(base.type.dtype)
            if attr == "T":
                return A.transpose(base)
            if attr in ("copy", "sum", "max", "min", "mean", "transpose", *NP.METHODS):
                return PyObj(_Method(attr, base))
        raise self.error(node, f"unsupported attribute .{attr} of {S.describe(base)}")

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
        if isinstance(base, tuple):
            if not (isinstance(sub, Literal) and isinstance(sub.value, int)):
                raise self.error(node, "tuples are indexed with constants")
            return base[sub.value]
        if isinstance(base, Vec):
            return V.subscript(base, sub)
        if isinstance(base, VecArray):
            return V.load(self, base, sub)
        if isinstance(base, L.NamedExpr):
            base = self._compute_named(base)
        elif isinstance(base, ArrayExpr):
            base = A.materialize(base)
        if isinstance(base, Array):
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

    @staticmethod
    def _binop_symbol(op: ast.operator) -> str:
        symbols = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/",
                   ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**", ast.BitAnd: "&",
                   ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
        if type(op) not in symbols:
            raise UserError(f"unsupported operator {type(op).__name__}")
        return symbols[type(op)]

    def _binary(self, op: str, a, b):
        if isinstance(a, Vec) or isinstance(b, Vec):
            return V.binary(op, a, b)
        for v in (a, b):
            if not isinstance(v, (Scalar, Literal, Array, ArrayExpr)):
                raise UserError(f"operator {op} on {S.describe(v)}")
        if isinstance(a, (Array, ArrayExpr)) or isinstance(b, (Array, ArrayExpr)):
            out = A.elementwise(lambda x, y: S.binary(op, x, y), [a, b])
            if isinstance(out, ArrayExpr):   # (0-d arrays alone give a scalar: no memory)
                self.require_host(f"array arithmetic ({op})")
            return out
        return S.binary(op, a, b)

    def visit_BinOp(self, node: ast.BinOp):
        if isinstance(node.op, ast.MatMult):
            left, right = self.visit(node.left), self.visit(node.right)
            if isinstance(left, Vec) or isinstance(right, Vec):
                return V.binary("@", left, right)
            if not all(isinstance(v, (Array, ArrayExpr)) for v in (left, right)):
                raise self.error(node, "unsupported operator MatMult (@) on "
                                       f"{S.describe(left)} and {S.describe(right)}: @ "
                                       "multiplies 1-D and 2-D arrays")
            self.require_host("@ (matmul: a new array)")
            return matmul(self, left, right)
        return self._binary(self._binop_symbol(node.op), self.visit(node.left),
                            self.visit(node.right))

    def visit_UnaryOp(self, node: ast.UnaryOp):
        v = self.visit(node.operand)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(v, Vec):
            if not isinstance(node.op, ast.USub):
                raise self.error(node, f"unsupported operator {type(node.op).__name__} on "
                                       f"{S.describe(v)}")
            return V.negate(v)
        fn = {ast.USub: S.negate, ast.Not: S.logical_not, ast.Invert: S.invert}[type(node.op)]
        if isinstance(v, (Array, ArrayExpr)):
            if isinstance(node.op, ast.Not):
                if isinstance(v, Array) and v.type.ndim == 0:
                    return fn(v)   # a 0-d array's truth is its element's, as in NumPy
                raise self.error(node, "'not' of an array is ambiguous")
            return A.elementwise(fn, [v])
        if isinstance(v, PyObj) and isinstance(node.op, ast.Not):
            return Literal(not v.obj)
        return fn(v)

    def visit_Compare(self, node: ast.Compare):
        ops = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
               ast.NotEq: "!="}
        left = self.visit(node.left)
        result = None
        for op, right_node in zip(node.ops, node.comparators):
            right = self.visit(right_node)
            if isinstance(op, (ast.Is, ast.IsNot)):
                # `x.dval is None` in rules: decided at compile time, so it compares only
                # Python objects (None, modules, ...), never runtime values.
                if not (isinstance(left, PyObj) or isinstance(right, PyObj)):
                    raise self.error(node, "'is' compares compile-time Python objects such "
                                           "as None; compare values with ==")
                same = isinstance(left, PyObj) and isinstance(right, PyObj) and \
                    left.obj is right.obj
                r = Literal(same if isinstance(op, ast.Is) else not same)
            elif type(op) not in ops:
                raise self.error(node, f"unsupported comparison {type(op).__name__}")
            elif isinstance(left, Vec) or isinstance(right, Vec):
                r = V.equal(ops[type(op)], left, right)
            elif isinstance(left, (Array, ArrayExpr)) or isinstance(right, (Array, ArrayExpr)):
                sym = ops[type(op)]
                r = A.elementwise(lambda x, y: S.compare(sym, x, y), [left, right])
            else:
                r = S.compare(ops[type(op)], left, right)
            result = r if result is None else S.binary("&", S.truth(result), S.truth(r))
            left = right
        return result

    def visit_BoolOp(self, node: ast.BoolOp):
        """`and`/`or` with Python's meaning: the result is the operand that decided it (of
        the operands' common type), and the right side runs only when needed (it may index
        or divide)."""
        is_and = isinstance(node.op, ast.And)
        acc = self.visit(node.values[0])
        for rhs in node.values[1:]:
            if isinstance(acc, Literal):
                if bool(acc.value) != is_and:
                    return acc   # decided: False and ... / True or ...
                acc = self.visit(rhs)
                continue
            left, rest = acc, functools.partial(self.visit, rhs)
            acc = self._choose(S.truth(left).value, rest if is_and else lambda: left,
                               (lambda: left) if is_and else rest, node)
        return acc

    def visit_IfExp(self, node: ast.IfExp):
        cond = self.visit(node.test)
        if isinstance(cond, Literal):
            return self.visit(node.body if cond.value else node.orelse)
        return self._choose(S.truth(cond).value, lambda: self.visit(node.body),
                            lambda: self.visit(node.orelse), node)

    # ---- calls ----------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call):
        callee = self.visit(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.visit(a.value)
                if not isinstance(v, (tuple, Shape)):
                    raise self.error(a, f"cannot unpack {S.describe(v)} with *")
                args.extend(v if isinstance(v, tuple) else [S.from_index(d) for d in v.dims])
            else:
                args.append(self.visit(a))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.error(node, "**kwargs calls are not supported")
            kwargs[kw.arg] = self.visit(kw.value)
        if not isinstance(callee, PyObj):
            raise self.error(node.func, f"{S.describe(callee)} is not callable")
        obj = callee.obj
        if isinstance(obj, _Method):
            return obj.call(self, args, kwargs)
        if getattr(obj, "_adjit_compile_time", False):
            # A transformation or annotation evaluated while compiling (`adjit.grad(f)`,
            # `adjit.Active(x)`): its result is an object of the compiler's, which a call or a
            # derivative (derivative_calls.py) then uses.
            return PyObj(obj(*map(_python, args), **{k: _python(v) for k, v in kwargs.items()}))
        handler = B.lookup(obj)
        if handler is not None:
            if obj is B.namespace["atomic_add"] or not any(isinstance(a, VecArray)
                                                           for a in args):
                return handler(self, args, kwargs)
            # An array of vectors is its array to the array functions; `zeros_like(x)`
            # and the like of one is an array of the same vectors.
            like = args[0] if isinstance(args[0], VecArray) and obj in _LIKE else None
            out = handler(self, [a.array if isinstance(a, VecArray) else a for a in args],
                          kwargs)
            if like is not None and isinstance(out, Array) and out.type.ndim == like.type.ndim:
                return VecArray(out, like.vec)
            return out
        if isinstance(obj, VecType):
            return V.construct(obj, args, kwargs)
        if isinstance(obj, ScalarType):
            if len(args) != 1 or kwargs:
                raise self.error(node, f"{obj!r}(x) takes one argument")
            return B.lift(lambda x: S.cast(S.as_scalar(x, obj), obj), args)
        hook = getattr(obj, "_adjit_compile_call", None)
        if hook is not None:
            # A compiled function or a kernel may write any array it is given (or an alias
            # of one): lazy names are computed first, and a lazy name passed is its array.
            keys = list(kwargs)
            forced = self.force_lazy(args + [kwargs[k] for k in keys],
                                     also=[self._stmt or self.src.tree])
            args, kwargs = forced[:len(args)], dict(zip(keys, forced[len(args):]))
            return hook(self, args, kwargs)
        name = getattr(obj, "__name__", repr(obj))
        raise self.error(node.func, f"call to {name!r}, which adjit cannot compile (it calls "
                                    "adjit/math builtins and @adjit.func/@adjit.jit functions)")

    def _annotation(self, node: ast.expr):
        v = self.visit(node)
        if not isinstance(v, PyObj):
            raise self.error(node, "an annotation must be a type")
        try:
            if isinstance(v.obj, ArrayType):
                return v.obj
            return as_scalar_type(v.obj)
        except TypeError as e:
            raise self.error(node, str(e)) from None


def _gather_struct(st: StructType, prefix: str, values: dict) -> StructValue:
    """The struct parameter `prefix` from its bound fields' values (named as
    structs.leaves names them)."""
    return StructValue(st, {n: _gather_struct(t, f"{prefix}.{n}", values)
                            if isinstance(t, StructType) else values[f"{prefix}.{n}"]
                            for n, t in st.fields})


# The array functions whose result is like their first argument (of its vectors, for an
# array of vectors).
_LIKE = tuple(B.namespace[n] for n in ("zeros_like", "ones_like", "empty_like", "full_like",
                                       "copy"))


def _lazy_in(v) -> list:
    """The lazy names' expressions in a variable's value (a tuple may hold some)."""
    if isinstance(v, L.NamedExpr):
        return [v]
    if isinstance(v, tuple):
        return [e for x in v for e in _lazy_in(x)]
    return []


def _named_items(t: tuple) -> tuple:
    """A tuple bound to a name, its expressions lazy names (codegen.force_lazy finds them)."""
    return tuple(L.NamedExpr(v) if isinstance(v, ArrayExpr) and not isinstance(v, L.NamedExpr)
                 else _named_items(v) if isinstance(v, tuple) else v for v in t)


def _python(v):
    """An argument of a compile-time call: a Python object or constant as itself, any other
    value (a scalar or array of the code) as the frontend's value."""
    if isinstance(v, PyObj):
        return v.obj
    if isinstance(v, Literal):
        return v.value
    if isinstance(v, tuple):
        return tuple(_python(x) for x in v)
    return v


class _Method:
    """A bound method of an array value (`x.copy()`, `x.sum()`)."""

    def __init__(self, name: str, base):
        self.name, self.base = name, base

    def call(self, gen: CodeGenerator, args, kwargs):
        if self.name == "copy":
            if args or kwargs:
                raise UserError(".copy() takes no arguments in adjit")
            gen.require_host("x.copy()")
            return A.copy(self.base)
        if self.name == "transpose":
            if args or kwargs:
                raise UserError(".transpose() takes no axes in adjit (it reverses them)")
            return A.transpose(self.base)
        if self.name in NP.METHODS:    # x.reshape(2, 3), x.ravel(), x.prod(), ...
            return NP.METHODS[self.name](gen, [self.base, *args], kwargs)
        # x.sum(axis=None, keepdims=False), x.mean(...), x.max(...), x.min(...): NumPy's
        return B.lookup(B.namespace[self.name])(gen, [self.base, *args], kwargs)


_IMPURE = (ast.Call, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)


def _pure(node: ast.AST) -> bool:
    """Whether evaluating `node` runs no call and binds no name (so writes nothing)."""
    return not any(isinstance(n, _IMPURE) for n in ast.walk(node))
