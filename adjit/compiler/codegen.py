"""Python AST to `adj`-dialect MLIR: one visitor, one `visit_*` per Python construct.

`CodeGenerator` is the visitor: its state, the entry point (`compile`: parameters bound, the
body, the func.func), the dispatch that locates each op at the user's file:line:col and
turns any error into a `CompilationError` pointing there, statements' sequencing
(`visit_block`), names, constants, attributes, comprehensions and calls. The constructs are
its mixins, each a module of this package named for what it compiles:
- control_flow.py: `if`, `for`, `while`, `break`/`continue`, conditional expressions (SSA
  through scf: names rebound become results and iter_args);
- assignment.py: `=`, annotated and augmented assignment, tuple unpacking;
- lazy_names.py: names bound to element-wise expressions, kept lazy or computed;
- vector_names.py: vector variables as one variable per component;
- subscripts.py: element access and views (`x[i, j]`, `x[1:-1, ::2]`), write targets;
- operators.py: arithmetic, comparison and boolean operators;
- returns.py: `return`, the results and their types.
What a call compiles to is the registry of compile-time callables' answer (callables.py):
a builtin's, a NumPy function's or a derivative entry point's handler is builtin_calls.py's,
numpy_calls.py's or derivative_calls.py's; array and vector operations are arrays.py's and
vectors.py's.
"""
from __future__ import annotations

import ast
import contextlib
from typing import Callable, Sequence

from mlir import ir
from mlir.dialects import func

from . import arrays as A
from . import builtin_calls as B
from . import callables as C
from .callables import How
from . import fixed_point_calls, lang_calls  # noqa: F401 (register the language's callables)
from . import lazy as L
from . import linalg_calls  # noqa: F401 (registers np.linalg, np.outer, np.einsum)
from . import numpy_calls as NP  # (registers NumPy's array functions)
from . import fancy_indexing  # noqa: F401 (registers np.take, take_along_axis, np.add.at)
from . import sorting as SORT  # (registers np.sort, np.argsort)
from . import array_layout, scans, statistics  # (they register theirs, methods too)
from . import array_literals  # (registers np.array, np.asarray and x.astype)
from . import printing  # (registers print and adjit.debug.print_adjoint)
from . import arithmetic_ufuncs, log_sum_exp  # noqa: F401 (np.add, np.square, logaddexp...)
from . import scalar_ops as S
from . import vectors as V
from ..core.errors import CompilationError, UserError, located
from ..dialects import adj
from ..dialects.mlir_types import mlir_type
from ..lang.source import Name, SourceInfo, resolve_name
from ..core.types import ArrayType, ScalarType, VecType, as_scalar_type
from ..lang import pytrees
from ..lang.structs import StructType, flatten_params, struct_type
from . import trees as T
from .values import (Array, ArrayExpr, Literal, PyObj, RangeValue, Scalar, Shape,
                     StructValue, Vec, VecArray)
from .assignment import Assignment
from .control_flow import BRK, CONT, RET, ControlFlow, jumps_in
from .static_loops import static_items
from .lazy_names import LazyNames
from .operators import Operators
from .returns import Returns
from .subscripts import Subscripts
from . import struct_values as SV
from .struct_names import StructNames
from .vector_names import VectorNames


class CodeGenerator(Assignment, LazyNames, VectorNames, StructNames, Subscripts, Operators,
                    Returns, ControlFlow, ast.NodeVisitor):
    """Compiles one Python function, specialised to argument types, into a func.func.

    kind: "kernel" (runs per work item over an `ndim`-D ndrange, returns nothing), "func"
    (a device function: callable from kernels) or "jit" (host code: may allocate arrays
    and launch kernels)."""

    def __init__(self, unit, pyfn: Callable, source: SourceInfo, kind: str,
                 arg_types: Sequence, symbol: str, ndim: int = 0, debug: bool = False,
                 bound: dict | None = None, trees: tuple | None = None):
        self.unit, self.pyfn, self.src, self.kind = unit, pyfn, source, kind
        # per Python parameter, its tree structure (lang/pytrees.py) or None; None: no trees
        self.trees = trees
        self.arg_types, self.symbol, self.ndim, self.debug = list(arg_types), symbol, ndim, debug
        self.bound = bound or {}   # compile-time Python values bound to names (rules' config)
        self._reset()

    def _reset(self) -> None:
        """The state of one pass over the body."""
        self.vars: dict[str, object] = {}
        # Variables holding a vector: name -> its type; its components are the variables
        # `name[0]`, `name[1]`, ... (vectors.py: control flow merges and carries them).
        self.vec_names: dict[str, VecType] = {}
        # Variables holding a struct: name -> its StructType; its fields are the variables
        # `name.field` (struct_names.py), a vector field's its components.
        self.struct_names: dict[str, StructType] = {}
        # The struct parameters whose fields are read-only (struct_names._check_writable)
        # until the name is rebound.
        self.struct_params_unwritten: set[str] = set()
        # Per result of the Python function, its VecType, StructType or None (the IR's
        # results are the scalars of each vector and the leaves of each struct:
        # struct_values.regroup gathers them at a call).
        self.result_layout: list | None = None
        # The structure of a tree result (lang/pytrees.py), whose leaves are the results
        self.result_tree = None
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
        tail_only = (bool(body) and isinstance(body[-1], ast.Return)
                     and RET not in jumps_in(body[:-1], False))
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

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant):
            return   # docstring or bare constant
        self.visit(node.value)

    def visit_Pass(self, node: ast.Pass) -> None:
        pass

    # ---- parameters ---------------------------------------------------------------------
    def bind_params(self, args: list[ir.Value]) -> dict:
        """Python parameter names -> values of the function's arguments (custom-rule
        compilation overrides this to bind annotated arguments): a struct parameter gathered
        from its fields, a tree from its leaves (compiler/trees.py)."""
        names, anns, layout = self._flat_params()
        kind = "kernel" if self.kind == "kernel" else "function"
        values = V.bind(names, self.arg_types, args, anns, f"{kind} {self.pyfn.__name__}")
        params = [a.arg for a in self.src.tree.args.args]
        leaf_names = self._leaf_names(params)
        leaf = {name: values[name] if st is None else _gather_struct(st, name, values)
                for name, st in zip(leaf_names, layout)}
        out = {}
        for name, tree in zip(params, self.trees or [None] * len(params)):
            v = (leaf[name] if tree is None else
                 T.rebuild(tree, [leaf[p] for p in pytrees.paths(tree, name)]))
            if isinstance(v, StructValue):
                # (into self.vars, one variable per field: struct_names.py)
                out.update({n: self.vars[n] for n in self._bind_struct(name, v)})
                self.struct_params_unwritten.add(name)
            elif isinstance(v, Vec):
                self._bind_vector(name, v)   # (into self.vars, with its components)
                out.update({f"{name}[{k}]": x for k, x in enumerate(v.items)})
            else:
                out[name] = v
        return out

    def _leaf_names(self, params: list[str]) -> list[str]:
        """The parameters with each tree parameter replaced by its leaves' paths."""
        if self.trees is None:
            return params
        return [n for p, tree in zip(params, self.trees)
                for n in ([p] if tree is None else pytrees.paths(tree, p))]

    def _flat_params(self) -> tuple[list, list, list]:
        """(names, annotations, layout) of the IR's parameters: a tree parameter is its
        leaves, `params['W1']`, ... and a struct parameter its fields, `s.mass`, ...
        (structs.flatten_params; `layout` per tree leaf, its StructType or None)."""
        params = [a.arg for a in self.src.tree.args.args]
        anns = list(V.annotations(self.pyfn))
        anns += [None] * (len(params) - len(anns))
        if self.trees is not None:
            anns = [a for tree, ann in zip(self.trees, anns)
                    for a in ([ann] if tree is None else
                              [t.node for t in _tree_leaves(tree)])]
        return flatten_params(self._leaf_names(params), anns)

    # ---- expressions ------------------------------------------------------------------------
    def visit_Constant(self, node: ast.Constant):
        if isinstance(node.value, (bool, int, float)):
            return Literal(node.value)
        if node.value is None or node.value is Ellipsis:
            return PyObj(node.value)
        if isinstance(node.value, str):
            return PyObj(node.value)
        raise self.error(node, f"unsupported constant {node.value!r}")

    def visit_JoinedStr(self, node: ast.JoinedStr):
        return printing.fstring(self, node, self._stmt)     # (print takes it: printing.py)

    def visit_Name(self, node: ast.Name):
        return self._lookup(node.id, node)

    def _lookup(self, name: str, node: ast.AST):
        if name in self.vars:
            return self.vars[name]
        if name in self.vec_names:
            v = self._vector_in(name, node)
            if v is not None:
                return v
        if name in self.struct_names:
            v = self._struct_in(name, node)
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
        # (a tree's items, a dict's keys: trees.py; a sequence named: static_loops.py)
        items = T.iterate(seq)
        items = static_items(self, seq, g.iter) if items is None else items
        seq = seq if items is None else items
        if not isinstance(seq, tuple):
            what = "range(...)" if isinstance(seq, RangeValue) else S.describe(seq)
            raise self.error(node, f"unsupported Python construct: {type(node).__name__} over "
                                   f"{what}: compiled code unrolls comprehensions over tuples "
                                   "and dicts only (write a for loop)")
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
                    out.append(self.visit(node.elt) if not isinstance(node, ast.DictComp)
                               else (T.key_of(self.visit(node.key), "a dict comprehension's "
                                              "key"), self.visit(node.value)))
        finally:
            for n in names:
                self.vars.pop(n, None)
            self.vars.update(saved)
        return dict(out) if isinstance(node, ast.DictComp) else tuple(out)

    visit_GeneratorExp = visit_ListComp
    visit_DictComp = visit_ListComp

    def visit_Dict(self, node: ast.Dict):
        """`{"W1": w, "b1": b}`: a dict of the code's values, its keys constants (a tree:
        compiler/trees.py)."""
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise self.error(node, "**d in a dict display is not supported in compiled "
                                       "code")
            out[T.key_of(self.visit(k), "a dict in compiled code")] = self.visit(v)
        return out

    def visit_Attribute(self, node: ast.Attribute):
        base = self.visit(node.value)
        attr = node.attr
        if isinstance(base, PyObj):
            try:
                return self._from_python(getattr(base.obj, attr), attr, node)
            except AttributeError:
                raise self.error(node, f"{ast.unparse(node.value)} has no attribute "
                                       f"{attr!r}") from None
        if isinstance(base, dict) or pytrees.is_namedtuple(base):
            return T.attribute(base, attr)
        if isinstance(base, StructValue):
            if attr not in base.fields:
                raise self.error(node, f"struct {base.type.name} has no field {attr!r} (its "
                                       f"fields: {', '.join(base.fields)})")
            if base.fields[attr] is SV.UNSET:
                raise self.error(node, f"field {attr!r} of this {base.type.name} is not set: "
                                       f"assign it first ({ast.unparse(node)} = ...)")
            return base.fields[attr]
        if isinstance(base, Vec):
            return V.attribute(base, attr)
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
            if attr in ("copy", "sum", "max", "min", "mean", *_METHODS):
                return PyObj(_Method(attr, base))
        raise self.error(node, f"unsupported attribute .{attr} of {S.describe(base)}")

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
        if isinstance(obj, (_Method, T.DictMethod)):
            return obj.call(self, args, kwargs)
        entry = C.lookup(obj)
        if entry is not None and entry.how is How.EVALUATED:
            # A transformation or annotation evaluated while compiling (`adjit.grad(f)`,
            # `adjit.Active(x)`): its result is an object of the compiler's, which a call or a
            # derivative (derivative_calls.py) then uses.
            return PyObj(obj(*map(_python, args), **{k: _python(v) for k, v in kwargs.items()}))
        if entry is not None and entry.how is How.VALUES:
            if (any(obj is a for a in _ATOMICS)
                    or not any(isinstance(a, VecArray) for a in args)):
                return entry.handler(self, args, kwargs)
            # An array of vectors is its array to the array functions; `zeros_like(x)`
            # and the like of one is an array of the same vectors.
            like = args[0] if isinstance(args[0], VecArray) and obj in _LIKE else None
            out = entry.handler(self, [a.array if isinstance(a, VecArray) else a
                                       for a in args], kwargs)
            if like is not None and isinstance(out, Array) and out.type.ndim == like.type.ndim:
                return VecArray(out, like.vec)
            return out
        if pytrees.is_namedtuple_class(obj) or obj is dict:
            # A tree's container made in compiled code (trees.py): `Params(W=w, b=b)`,
            # `dict(W=w, b=b)`
            try:
                return obj(*args, **kwargs)
            except TypeError as e:
                raise self.error(node, str(e)) from None
        if isinstance(obj, VecType):
            return V.construct(obj, args, kwargs)
        st = struct_type(obj) if isinstance(obj, type) else None
        if st is not None:      # `Particle(pos, vel, mass=1.0)`: struct_values.py
            return SV.construct(st, args, kwargs)
        if isinstance(obj, ScalarType):
            if len(args) != 1 or kwargs:
                raise self.error(node, f"{obj!r}(x) takes one argument")
            return B.lift(lambda x: S.cast(S.as_scalar(x, obj), obj), args)
        if entry is not None:
            # A compiled function or a kernel may write any array it is given (or an alias
            # of one): lazy names are computed first, and a lazy name passed is its array.
            keys = list(kwargs)
            forced = self.force_lazy(args + [kwargs[k] for k in keys],
                                     also=[self._stmt or self.src.tree])
            args, kwargs = forced[:len(args)], dict(zip(keys, forced[len(args):]))
            return entry.handler(self, args, kwargs)
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


def _tree_leaves(tree) -> list:
    """The leaf TreeDefs of `tree`, in order."""
    if tree.kind == "leaf":
        return [tree]
    return [x for c in tree.children for x in _tree_leaves(c)]


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
# (their handlers take an array of vectors as it is: vectors.py)
_ATOMICS = (B.namespace["atomic_add"], B.namespace["atomic_sub"])


def _python(v):
    """An argument of a compile-time call: a Python object or constant as itself, any other
    value (a scalar or array of the code) as the frontend's value."""
    if isinstance(v, PyObj):
        return v.obj
    if isinstance(v, Literal):
        return v.value
    if isinstance(v, (tuple, dict)):     # (a tree's kind kept: a NamedTuple, a dict)
        return T.map_items(_python, v)
    return v


# NumPy's array methods with handlers of their own (the rest are builtins': x.sum(), ...)
_METHODS = {**NP.METHODS, **SORT.METHODS, **array_layout.METHODS, **scans.METHODS,
            **statistics.METHODS, **array_literals.METHODS}


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
        if self.name in _METHODS:    # x.reshape(2, 3), x.ravel(), x.transpose(1, 0), ...
            return _METHODS[self.name](gen, [self.base, *args], kwargs)
        # x.sum(axis=None, keepdims=False), x.mean(...), x.max(...), x.min(...): NumPy's
        return B.lookup(B.namespace[self.name])(gen, [self.base, *args], kwargs)
