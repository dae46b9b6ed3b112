"""Structured control flow to SSA, the part of the code generator (`codegen.CodeGenerator`)
that compiles `if`, `for`, `while`, `break`, `continue` and conditional expressions.

Python locals live in the generator's `vars` (name -> frontend value). A construct compiles
each of its bodies in a `scope` (a copy of the variables), then merges what the bodies left
bound: names rebound in an `if` become `scf.if` results, names rebound in a loop body and
live before it become `scf.for`/`scf.while` iter_args. `break`, `continue` and `return` set
flag variables (BRK, CONT, RET) and guard the statements after them (`visit_block`), so every
construct stays in scf, which the autodiff pass and the GPU lowering need.
"""
from __future__ import annotations

import ast
import contextlib
from typing import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, memref, scf

from ..dialects import adj
from ..dialects.mlir_types import mlir_type
from . import arrays as A
from . import trees as T
from . import scalar_ops as S
from ..core.errors import UserError
from ..core.types import ArrayType, ScalarType, bool_, index, promote
from ..lang.checkpointing import Checkpointed
from . import vectors as V
from .static_loops import MAX_UNROLL, indexes_a_sequence, static_items
from .values import Array, ArrayExpr, Literal, PyObj, RangeValue, Scalar, Shape, Vec

BRK, CONT, RET = "%brk", "%cont", "%ret"


def _assigned_names(stmts: Sequence[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for s in stmts:
        for node in ast.walk(s):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names


def _path(node: ast.AST) -> str | None:
    """`p.inner.x` as its variable's name, "p.inner.x" (a vector's or struct's variables are
    named so: struct_names.py), None for a target of another form."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def jumps_in(stmts: Sequence[ast.stmt], loop_level: bool) -> set[str]:
    """Which of break/continue/return can leave `stmts` (break/continue only if they belong
    to the enclosing loop, i.e. are not inside a nested loop)."""
    found: set[str] = set()

    def walk(node: ast.AST, in_nested_loop: bool) -> None:
        if isinstance(node, ast.Return):
            found.add(RET)
        elif isinstance(node, ast.Break) and not in_nested_loop and loop_level:
            found.add(BRK)
        elif isinstance(node, ast.Continue) and not in_nested_loop and loop_level:
            found.add(CONT)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            walk(child, in_nested_loop or isinstance(node, (ast.For, ast.While)))

    for s in stmts:
        walk(s, False)
    return found


def computed(v, memo: dict):
    """`v`, an expression computed into an array (once per object in `memo`)."""
    if not isinstance(v, ArrayExpr):
        return v
    if id(v) not in memo:
        memo[id(v)] = (v, A.materialize(v))
    return memo[id(v)][1]


class _Scope:
    """What the body of a `CodeGenerator.scope` left bound, read after it."""
    vars: dict


class ControlFlow:
    """The control-flow constructs of `CodeGenerator` (a mixin: it uses the generator's
    `vars`, `visit`, `visit_block`, `error`, `force_lazy`, `_loc`, `_then`, `_loop_depth`)."""

    @contextlib.contextmanager
    def scope(self, start: dict | None = None):
        """Compiles the body of the `with` on its own copy of the variables (those of `start`,
        or the current ones), and gives the enclosing variables back after it, whatever the
        body rebinds or raises. Yields a record whose `.vars`, after the `with`, is what the
        body left bound: a branch's or a loop body's values, for the caller to merge."""
        outer = self.vars
        self.vars = dict(outer if start is None else start)
        inner = _Scope()
        try:
            yield inner
        finally:
            inner.vars = self.vars
            self.vars = outer

    def _not_any(self, flags: list[str]):
        out = None
        for f in flags:
            v = self.vars[f]
            out = v if out is None else S.binary("|", out, v)
        return S.logical_not(out)

    def visit_If(self, node: ast.If) -> None:
        cond = self.visit(node.test)
        if isinstance(cond, Literal) or isinstance(cond, PyObj):
            # Decided at compile time (e.g. `if config.needs_primal:` in a rule).
            taken = cond.value if isinstance(cond, Literal) else bool(cond.obj)
            self.visit_block(node.body if taken else node.orelse)
            return
        self._if(S.truth(cond).value, lambda: self.visit_block(node.body),
                 lambda: self.visit_block(node.orelse), node)

    def _if(self, cond: ir.Value, then_fn: Callable, else_fn: Callable, node: ast.AST,
            jumped: tuple[bool, bool] | None = None) -> None:
        """scf.if whose results are the variables either branch (re)binds. `jumped[k]`:
        branch k surely left by break/continue/return (found from the flags when not
        given). A variable bound only on the other branch is still defined wherever it can
        be used, as in Python (`if c: continue` / `else: t = ...`): the jumped branch
        yields a placeholder for it."""
        # The branches may write what a lazy name reads (node: the statement, which reads
        # the names its branches do).
        self.force_lazy(also=[node])
        before = self.vars
        probe = scf.IfOp(cond, [], has_else=True)
        outs = []
        for block, fn in ((probe.then_block, then_fn), (probe.else_block, else_fn)):
            with self.scope() as branch, ir.InsertionPoint(block):
                fn()
            outs.append(branch.vars)
        if jumped is None:
            jumped = tuple(self._surely_jumped(out) for out in outs)
        names = [n for n in outs[0].keys() | outs[1].keys()
                 if (outs[0].get(n) is not before.get(n) or outs[1].get(n) is not before.get(n))
                 and not isinstance(outs[0].get(n, before.get(n)), PyObj)]
        names.sort()
        merged, types, kept = [], [], {}
        for n in names:
            a, b = outs[0].get(n), outs[1].get(n)
            one = b if a is None else a if b is None else None
            if one is not None and jumped[0 if a is None else 1] and (
                    isinstance(one, Literal) or isinstance(one, (Scalar, Array))
                    and not self._defined_inside(one.value, probe)):
                # Bound on one branch, the other jumped away: every use sees this value,
                # which needs no merging (a constant stays weakly typed).
                kept[n] = one
                continue
            t = self._merge_type(n, a, b, node, jumped)
            if t is None:
                continue   # bound on one branch only: unusable after the if
            merged.append(n)
            types.append(t)
        final = scf.IfOp(cond, [mlir_type(t) for t in types], has_else=True)
        for k, (src, dst) in enumerate(((probe.then_block, final.then_block),
                                        (probe.else_block, final.else_block))):
            self._move_ops(src, dst)
            with ir.InsertionPoint(dst), self._loc(node):
                memo: dict[int, Array] = {}   # (aliases in a branch: one array)
                scf.YieldOp([self._branch_value(computed(outs[k].get(n), memo), t, node).value
                             for n, t in zip(merged, types)])
        probe.operation.erase()
        for n in names:
            self.vars.pop(n, None)
        for n, t, r in zip(merged, types, final.results):
            self.vars[n] = Array(r, t) if isinstance(t, ArrayType) else Scalar(r, t)
        self.vars.update(kept)

    @staticmethod
    def _move_ops(src: ir.Block, dst: ir.Block) -> None:
        ip = ir.InsertionPoint(dst)
        for op in list(src.operations):
            op.detach_from_parent()
            ip.insert(op)

    @staticmethod
    def _surely_jumped(out: dict) -> bool:
        """Whether a branch ends with break, continue or return taken for certain (a flag
        that is the constant True: the statements after the jump were not compiled)."""
        return any(isinstance(out.get(f), Literal) and out[f].value is True
                   for f in (BRK, CONT, RET))

    def _branch_value(self, v, t, node: ast.AST):
        """What a branch yields for a merged variable: its value, or a placeholder where
        it left it unbound (a jumped branch; the flags keep the placeholder from being
        read): zero, or an empty array of the right rank (an array made in the other
        branch: only @jit code makes arrays)."""
        if v is not None or not isinstance(t, ArrayType):
            return self._coerce(v, t)
        return A.alloc(t.dtype, [A.idx(0)] * t.ndim)

    @staticmethod
    def _defined_inside(value: ir.Value, region_op: scf.IfOp) -> bool:
        owner = value.owner if isinstance(value, ir.OpResult) else value.owner.owner
        op = owner.operation if owner is not None else None
        while op is not None:
            if op == region_op.operation:
                return True
            op = op.parent
        return False

    def _merge_type(self, name: str, a, b, node, jumped: tuple[bool, bool] = (False, False)):
        if a is None or b is None:
            one = a if a is not None else b
            if (jumped[0] if a is None else jumped[1]) and isinstance(one, (Scalar, Literal,
                                                                            Array, ArrayExpr)):
                # Unbound only where the branch jumped away: defined on every path that
                # reaches a use.
                return self._type_of(one)
            if not name.startswith("%"):
                # A user variable bound on one branch only: using it after the `if` is an
                # error (Python would raise UnboundLocalError when the other branch ran).
                self._one_branch[name] = getattr(node, "lineno", 0) + self.src.first_line - 1
                return None
            # Flags and return values of the compiler's own are zero where not set.
            if isinstance(one, (Scalar, Literal)):
                return S.as_scalar(one).type if isinstance(one, Scalar) else S.literal_type(one.value)
            return None
        for v in (a, b):
            if isinstance(v, (tuple, dict, Shape, RangeValue, PyObj)):
                raise self.error(node, f"variable {name!r} holds {S.describe(v)} and is "
                                       "assigned under a runtime condition; adjit cannot merge it")
        if isinstance(a, (Array, ArrayExpr)) or isinstance(b, (Array, ArrayExpr)):
            # (a lazy name bound in a branch is computed into an array at its end)
            if not (isinstance(a, (Array, ArrayExpr)) and isinstance(b, (Array, ArrayExpr))
                    and a.type.without_units() == b.type.without_units()):
                raise self.error(node, f"variable {name!r} is {S.describe(a)} on one branch "
                                       f"and {S.describe(b)} on the other")
            return a.type.without_units()   # (either array: its unit dimensions unknown)
        if isinstance(a, Literal) and isinstance(b, Literal):
            ta, tb = S.literal_type(a.value), S.literal_type(b.value)
            return promote(ta, tb)
        if isinstance(a, Literal):
            return self._literal_meets(a, b.type)
        if isinstance(b, Literal):
            return self._literal_meets(b, a.type)
        return promote(a.type, b.type)

    @staticmethod
    def _literal_meets(lit: Literal, t: ScalarType) -> ScalarType:
        """The type a literal merged with a `t` value takes (weak typing, as in unify)."""
        if isinstance(lit.value, float) and not t.is_float:
            return promote(t, S.literal_type(lit.value))
        if isinstance(lit.value, int) and not isinstance(lit.value, bool) and t.is_bool:
            return promote(t, S.literal_type(lit.value))
        return t

    def _coerce(self, v, t):
        """`v` as a value of type `t` (a placeholder zero if the branch left it undefined)."""
        if isinstance(t, ArrayType):
            return v
        if v is None:
            return S.as_scalar(Literal(0), t)
        return S.cast(S.as_scalar(v, t), t)

    # ---- loops ----------------------------------------------------------------------------
    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error(node, "for ... else is not supported")
        # The body may write what a lazy name reads, and it repeats (after its last
        # statement, the loop's first may run again).
        with self._then([node]):
            self.force_lazy()
            self._visit_for(node)

    def _visit_for(self, node: ast.For) -> None:
        it = self.visit(node.iter)
        items = T.iterate(it)     # (a tuple's items, a dict's keys: trees.py)
        if items is not None:
            self._unroll(node, items)
            return
        checkpoint = None
        if isinstance(it, Checkpointed):
            checkpoint, it = it, it.range
        items = static_items(self, it, node.iter) if checkpoint is None else None
        if items is not None:
            if len(items) > MAX_UNROLL:
                raise self.error(node.iter, f"a loop over a sequence known while compiling is "
                                            f"unrolled, at most {MAX_UNROLL} items; this one "
                                            f"has {len(items)}: pass the values as an array "
                                            "and loop over range(...)")
            self._unroll(node, items)
            return
        if isinstance(it, RangeValue) and checkpoint is None:
            items = indexes_a_sequence(self, node, it)
            if items is not None:
                self._unroll(node, items)
                return
        if not isinstance(it, RangeValue):
            raise self.error(node.iter, "adjit loops iterate over range(...), or over a tuple "
                                        "or list known while compiling (unrolled), not "
                                        f"over {S.describe(it)}")
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the loop variable must be a plain name")
        jumps = jumps_in(node.body, True)
        if BRK in jumps or RET in jumps:
            if checkpoint is not None:
                raise self.error(node, "a checkpointed loop runs all its steps: it cannot "
                                       "break or return")
            self._for_as_while(node, it, jumps)
        else:
            self._for(node, it, jumps, checkpoint)

    def _unroll(self, node: ast.For, items: tuple) -> None:
        """The for loop `node` over `items` (known while compiling: static_loops.py), its
        body compiled once per item in order; Python leaves the loop variable at the last
        item. `continue` skips the rest of an item's body; after a `break` or `return`
        (their flags, as in a runtime loop) the later items' bodies run under `if not
        flag`, so that a jump decided at run time is as in Python."""
        jumps, outer_brk = self._jump_flags(node.body)
        self._loop_depth += 1
        try:
            self._unroll_from(node, items, 0, jumps)
        finally:
            self._loop_depth -= 1
        self.vars.pop(CONT, None)
        self._restore_break_flag(outer_brk)

    def _unroll_from(self, node: ast.For, items: tuple, k: int, jumps: set[str]) -> None:
        while k < len(items):
            self.assign(node.target, items[k])
            if CONT in jumps:
                self.vars[CONT] = Literal(False)
            self.visit_block(node.body)
            self.vars.pop(CONT, None)
            k += 1
            flags = [f for f in (BRK, RET) if f in jumps and f in self.vars]
            if not flags or k == len(items):
                continue
            go = self._not_any(flags)
            if isinstance(go, Literal):
                if not go.value:
                    return                      # surely jumped: the later items never run
                continue
            later = k
            self._if(go.value, lambda: self._unroll_from(node, items, later, jumps),
                     lambda: None, node, jumped=(False, True))
            return

    def _trip(self, it: RangeValue) -> tuple[ir.Value, ir.Value, ir.Value, bool]:
        """(start, stop, step) as index values and whether the step is a known positive."""
        start, stop, step = (S.to_index(v) for v in (it.start, it.stop, it.step))
        positive = isinstance(it.step, Literal) and it.step.value > 0
        if isinstance(it.step, Literal) and it.step.value == 0:
            raise UserError("range() step must not be zero")
        return start, stop, step, positive

    def _carried(self, body: Sequence[ast.stmt], extra: Sequence[str] = ()) -> list[str]:
        extra = set(extra)
        if RET in extra:   # returned values leave the loop with the return flag
            extra |= {n for n in self.vars if n.startswith("%rv")}
        assigned = _assigned_names(body) | extra
        # A vector variable is its components `v[0]`, `v[1]`..., a struct variable its
        # fields `p.mass`, `p.pos[0]`... (vector_names.py, struct_names.py): carried when the
        # body rebinds the variable, or assigns into it (`v[k] = s`, `v.x = s`) or a field
        # of it (`p.mass = m`, `p.pos.x = s`).
        owners, fields = set(), set()
        for s in body:
            for n in ast.walk(s):
                if isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.ctx,
                                                                                ast.Store):
                    owner = _path(n.value)
                    if owner is not None:
                        owners.add(owner)             # its components `owner[k]`
                        if isinstance(n, ast.Attribute):
                            fields.add(f"{owner}.{n.attr}")

        def carried(n: str) -> bool:
            if n in assigned:
                return True
            cut = min((k for k in (n.find("["), n.find(".")) if k > 0), default=-1)
            if cut < 0:
                return False
            return (n[:cut] in assigned or any(n.startswith(f"{o}[") for o in owners)
                    or any(n == f or n.startswith((f"{f}.", f"{f}[")) for f in fields))
        names = sorted(n for n in self.vars
                       if carried(n) and not isinstance(self.vars[n], PyObj))
        for n in names:
            if isinstance(self.vars[n], ArrayExpr):
                self.vars[n] = A.materialize(self.vars[n])
            if isinstance(self.vars[n], (tuple, dict, Shape, RangeValue)):
                raise self.error(body[0], f"variable {n!r} holds {S.describe(self.vars[n])} "
                                          "and is reassigned in a loop; adjit cannot carry it "
                                          "(its arrays can be: assign into them, "
                                          "`params['W'][:] = ...`)")
        return names

    def _initial(self, names: list[str], types: dict[str, object]) -> list:
        out = []
        for n in names:
            v, t = self.vars[n], types.get(n)
            out.append(v if isinstance(v, Array) else self._coerce(v, t or self._type_of(v)))
        return out

    @staticmethod
    def _type_of(v):
        if isinstance(v, Array):     # (a loop may carry arrays of other shapes round)
            return v.type.without_units()
        return v.type if isinstance(v, (Scalar, ArrayExpr)) else S.literal_type(v.value)

    def _loop_with_retry(self, names: list[str], build: Callable[[dict], tuple]) -> None:
        """Builds a loop; if a carried variable's type changes in the body (`s = 0` then
        `s += x[i]`), rebuilds it with the promoted type, as Numba unifies them."""
        types: dict[str, object] = {}
        for _ in range(3):
            loop_op, result_vals, body_types = build(types)
            changed = {}
            for n in names:
                init_t = types.get(n) or self._type_of(self.vars[n])
                bt = body_types.get(n)
                # (scalars only: see _body_types) A body value the carried type holds
                # (x[i] of i32 into an f64 `s`, a Python float into an f32 one, NEP 50's
                # promotion) is converted to it; a wider one rebuilds the loop.
                if bt is not None and bt != init_t and promote(init_t, bt) != init_t:
                    changed[n] = promote(init_t, bt)
            if not changed:
                for n, r in zip(names, result_vals):
                    self.vars[n] = r
                return
            loop_op.erase()
            types.update(changed)
        raise UserError("cannot settle the types of loop variables "
                        f"{sorted(changed)}: initialise them with the type they will hold")

    def _typed(self, value: ir.Value, like) -> object:
        return Array(value, like) if isinstance(like, ArrayType) else Scalar(value, like)

    def _body_types(self, names: list[str], init_types: list) -> dict:
        """The types the loop body leaves its carried variables with. A scalar may change
        type (the loop is rebuilt with the promoted one); an array must stay the same."""
        out = {}
        memo: dict[int, Array] = {}
        for n, t in zip(names, init_types):
            v = self.vars.get(n)
            if isinstance(v, ArrayExpr):
                v = self.vars[n] = computed(v, memo)
            if v is None:
                continue
            bt = self._type_of(v) if isinstance(v, (Scalar, Array, Literal)) else None
            if (bt is None or isinstance(bt, ArrayType) != isinstance(t, ArrayType) or
                    (isinstance(t, ArrayType) and bt != t)):
                before = f"an array {t!r}" if isinstance(t, ArrayType) else f"a {t!r} value"
                raise UserError(f"variable {n!r} holds {before} before the loop and "
                                f"{S.describe(v)} inside it")
            out[n] = bt
        return out

    def _for(self, node: ast.For, it: RangeValue, jumps: set[str],
             checkpoint: Checkpointed | None = None) -> None:
        """`checkpoint`: the loop is adjit.checkpointed: its scf.for carries the schedule
        (adj.checkpoint), which the autodiff pass's reverse mode follows."""
        start, stop, step, positive = self._trip(it)
        names = self._carried(node.body)
        var = node.target.id

        def build(types):
            init = self._initial(names, types)
            init_types = [self._type_of(v) for v in init]
            if positive:
                loop = scf.ForOp(start, stop, step, [v.value for v in init])
            else:   # trip count of range(start, stop, step) for any step sign
                n = self._range_count(start, stop, step)
                loop = scf.ForOp(A.idx(0), n, A.idx(1), [v.value for v in init])
            if checkpoint is not None:
                _mark(loop, checkpoint)
            with self.scope(), ir.InsertionPoint(loop.body):
                for n_, t, a in zip(names, init_types, loop.inner_iter_args):
                    self.vars[n_] = self._typed(a, t)
                iv = loop.induction_variable
                if not positive:
                    iv = arith.addi(start, arith.muli(iv, step))
                self.vars[var] = S.from_index(iv)
                if CONT in jumps:
                    self.vars[CONT] = Literal(False)
                self._loop_depth += 1
                self.visit_block(node.body)
                self._loop_depth -= 1
                body_types = self._body_types(names, init_types)
                if checkpoint is not None:
                    self._into_carried(loop, names, init_types, list(loop.inner_iter_args), 3)
                scf.YieldOp([self._coerce(self.vars[n_], t).value
                             for n_, t in zip(names, init_types)])
            return loop, [self._typed(r, t) for r, t in zip(loop.results, init_types)], body_types

        self._loop_with_retry(names, build)
        if var not in names:
            self._leave_loop_var(var, start, step, self._range_count(start, stop, step))

    def _leave_loop_var(self, var: str, start, step, done: ir.Value) -> None:
        """Python leaves a for loop's variable at its last value, or unchanged if the loop
        did not run; `done` counts the iterations that started."""
        last = S.from_index(arith.addi(start, arith.muli(arith.subi(done, A.idx(1)), step)))
        prev = self.vars.get(var)
        if isinstance(prev, (Scalar, Literal)):
            ran = Scalar(arith.cmpi(arith.CmpIPredicate.sgt, done, A.idx(0)), bool_)
            last = S.select(ran, last, prev)
        self.vars[var] = last

    @staticmethod
    def _range_count(start, stop, step) -> ir.Value:
        zero = A.idx(0)
        nonzero = arith.cmpi(arith.CmpIPredicate.ne, step, zero)
        adj.check(nonzero, "ValueError", "range() arg 3 must not be zero")
        pos = arith.cmpi(arith.CmpIPredicate.sgt, step, zero)
        span = arith.select(pos, arith.subi(stop, start), arith.subi(start, stop))
        # A zero step divides by 1 instead (no trap); the check above raises after the call.
        mag = arith.select(pos, step, arith.select(nonzero, arith.subi(zero, step), A.idx(1)))
        count = arith.ceildivsi(span, mag)
        return arith.select(nonzero, arith.maxsi(count, zero), zero)

    def _for_as_while(self, node: ast.For, it: RangeValue, jumps: set[str]) -> None:
        """A for loop that can break or return: scf.while over (counter, flags, vars)."""
        start, stop, step, positive = self._trip(it)
        count = self._range_count(start, stop, step) if not positive else None
        outer_brk = self.vars.get(BRK)
        self.vars[BRK] = Literal(False)
        if RET in jumps and RET not in self.vars:
            self.vars[RET] = Literal(False)
        var = node.target.id
        counter = f"%k{self._loop_depth}"   # one per nesting level
        self.vars[counter] = Scalar(A.idx(0), index)
        names = self._carried(node.body, extra=[BRK, counter] + ([RET] if RET in jumps else []))

        def cond_fn():
            k = self.vars[counter].value
            if positive:
                i = arith.addi(start, arith.muli(k, step))
                more = arith.cmpi(arith.CmpIPredicate.slt, i, stop)
            else:
                more = arith.cmpi(arith.CmpIPredicate.slt, k, count)
            flags = [f for f in (BRK, RET) if f in names]
            return S.binary("&", Scalar(more, bool_), self._not_any(flags))

        def body_fn():
            k = self.vars[counter].value
            self.vars[var] = S.from_index(arith.addi(start, arith.muli(k, step)))
            if CONT in jumps:
                self.vars[CONT] = Literal(False)
            self.visit_block(node.body)
            self.vars[counter] = Scalar(arith.addi(self.vars[counter].value, A.idx(1)), index)

        self._while(names, cond_fn, body_fn, node)
        if var not in names:
            self._leave_loop_var(var, start, step, self.vars[counter].value)
        self.vars.pop(counter, None)
        self._restore_break_flag(outer_brk)

    def _restore_break_flag(self, outer) -> None:
        """After a loop, `break` means the enclosing loop's flag again (or none)."""
        if outer is None:
            self.vars.pop(BRK, None)
        else:
            self.vars[BRK] = outer

    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.error(node, "while ... else is not supported")
        with self._then([node]):   # (as in visit_For)
            self.force_lazy()
            self._visit_while(node)

    def _jump_flags(self, body: list) -> tuple[set, object]:
        """The jumps a loop's `body` makes (break, return) and their flags, set up: the loop's
        own break flag (the enclosing loop's put aside and returned, for the loop's end to
        restore), and the function's return flag if none is set yet."""
        jumps = jumps_in(body, True)
        outer_brk = self.vars.pop(BRK, None)
        if BRK in jumps:
            self.vars[BRK] = Literal(False)
        if RET in jumps and RET not in self.vars:
            self.vars[RET] = Literal(False)
        return jumps, outer_brk

    def _visit_while(self, node: ast.While) -> None:
        jumps, outer_brk = self._jump_flags(node.body)
        extra = [f for f in (BRK, RET) if f in jumps]
        names = self._carried(node.body, extra=extra)
        checkpoint: list[Checkpointed] = []

        def cond_fn():
            c = self.visit(node.test)
            if isinstance(c, Checkpointed):     # while adjit.checkpointed(cond, ...)
                if extra:
                    raise self.error(node, "a checkpointed loop runs all its steps: it "
                                           "cannot break or return")
                checkpoint[:] = [c]
                c = c.range
            if isinstance(c, (Array, ArrayExpr, tuple)):
                raise self.error(node.test, "a while condition must be a scalar")
            c = S.truth(c)
            flags = [f for f in (BRK, RET) if f in names]
            return S.binary("&", self._not_any(flags), c) if flags else c

        def body_fn():
            if CONT in jumps:
                self.vars[CONT] = Literal(False)
            self.visit_block(node.body)

        self._while(names, cond_fn, body_fn, node, checkpoint)
        self._restore_break_flag(outer_brk)

    def _while(self, names: list[str], cond_fn: Callable, body_fn: Callable, node,
               checkpoint: list | None = None) -> None:
        """`checkpoint`: set by cond_fn to the loop's adjit.checkpointed, which marks it."""
        def build(types):
            init = self._initial(names, types)
            init_types = [self._type_of(v) for v in init]
            mtypes = [mlir_type(t) for t in init_types]
            loop = scf.WhileOp(mtypes, [v.value for v in init])
            before = loop.regions[0].blocks.append(*mtypes)
            after = loop.regions[1].blocks.append(*mtypes)
            with self.scope(), ir.InsertionPoint(before):
                for n, t, a in zip(names, init_types, before.arguments):
                    self.vars[n] = self._typed(a, t)
                c = cond_fn()
                scf.ConditionOp(S.truth(c).value, list(before.arguments))
            if checkpoint:
                _mark(loop, checkpoint[0])
            with self.scope(), ir.InsertionPoint(after):
                for n, t, a in zip(names, init_types, after.arguments):
                    self.vars[n] = self._typed(a, t)
                self._loop_depth += 1
                body_fn()
                self._loop_depth -= 1
                body_types = self._body_types(names, init_types)
                if checkpoint:
                    self._into_carried(loop, names, init_types, list(after.arguments), 0)
                scf.YieldOp([self._coerce(self.vars[n], t).value
                             for n, t in zip(names, init_types)])
            return loop, [self._typed(r, t) for r, t in zip(loop.results, init_types)], body_types

        self._loop_with_retry(names, build)

    def _into_carried(self, loop, names: list[str], types: list, carried: list,
                      first: int) -> None:
        """In a checkpointed loop's body: a state the step made anew (`u = step(u)`, the
        functional habit) is copied into the array the loop carries, which the loop owns (a
        copy of the initial state, made before the loop: the caller's array is not
        written), so that the state lives in arrays made before the loop, as the reverse
        pass's snapshots need. `first`: the loop's operand of its first carried value."""
        for k, (n, t, arg) in enumerate(zip(names, types, carried)):
            v = self.vars.get(n)
            if (not isinstance(t, ArrayType) or not isinstance(v, Array)
                    or any(v.value == a for a in carried)
                    or not self._defined_inside(v.value, loop)
                    or isinstance(v.value, ir.OpResult) and v.value.owner.name in _MAY_SWAP):
                # A scalar, the carried array itself, a swap (`u, v = v, u`), or what an
                # inner loop or branch left (which may be a carried array, swapped: the
                # autodiff pass tells them apart by address, and refuses a new one)
                continue
            now = A.dims(v)
            before = A.dims(Array(arg, t))
            for d, (a, b) in enumerate(zip(now, before)):
                adj.check(arith.cmpi(arith.CmpIPredicate.eq, a, b), "ValueError",
                          f"a checkpointed loop's step made {n!r} of another shape than "
                          f"before the step (dimension {d}); its state keeps its shape")
            memref.copy(v.value, arg)
            self.vars[n] = Array(arg, t)
            with ir.InsertionPoint(loop.operation):
                init = loop.operation.operands[first + k]
                loop.operation.operands[first + k] = A.copy(Array(init, t)).value

    def visit_Break(self, node: ast.Break) -> None:
        if self._loop_depth == 0:
            raise self.error(node, "'break' outside a loop")
        self.vars[BRK] = Literal(True)

    def visit_Continue(self, node: ast.Continue) -> None:
        if self._loop_depth == 0:
            raise self.error(node, "'continue' outside a loop")
        self.vars[CONT] = Literal(True)

    def _choose(self, cond: ir.Value, then_fn: Callable, else_fn: Callable, node: ast.AST):
        """The scalar or vector `then_fn()` if `cond` else `else_fn()`, as an scf.if: only the chosen
        side's code runs (it may read an element that exists only on that side)."""
        if any(isinstance(n, ast.Call) for n in ast.walk(node)):
            # a call on one side may write what a lazy name reads
            self.force_lazy(also=[self._stmt or node])
        probe = scf.IfOp(cond, [], has_else=True)
        with self.scope(), ir.InsertionPoint(probe.then_block):
            a = then_fn()
        with self.scope(), ir.InsertionPoint(probe.else_block):
            b = else_fn()
        if isinstance(a, Vec) or isinstance(b, Vec):
            # `a if c else b` on vectors, matrices, quaternions: one scf.if yielding every
            # component (the value is a Vec of the results)
            if not (isinstance(a, Vec) and isinstance(b, Vec) and a.type.kind == b.type.kind
                    and a.type.shape == b.type.shape):
                raise self.error(node, f"{ast.unparse(node)[:40]!s} chooses between "
                                       f"{S.describe(a)} and {S.describe(b)}: give both "
                                       "sides one vector type")
            pairs = list(zip(a.items, b.items))
        else:
            for v in (a, b):
                if not isinstance(v, (Scalar, Literal)):
                    raise self.error(node, f"{ast.unparse(node)[:40]!s} chooses between "
                                           f"scalars or vectors, not {S.describe(v)}")
            pairs = [(a, b)]
        types = [self._merge_type("", x, y, node) for x, y in pairs]
        final = scf.IfOp(cond, [mlir_type(t) for t in types], has_else=True)
        for src, dst, side in ((probe.then_block, final.then_block, 0),
                               (probe.else_block, final.else_block, 1)):
            self._move_ops(src, dst)
            with ir.InsertionPoint(dst):
                scf.YieldOp([self._coerce(p[side], t).value for p, t in zip(pairs, types)])
        probe.operation.erase()
        out = [Scalar(r, t) for r, t in zip(final.results, types)]
        if isinstance(a, Vec):
            return V.make(a.type.kind, a.type.shape, out)
        return out[0]


# Ops whose array results may be arrays a loop carries, swapped (an inner loop's, a branch's)
_MAY_SWAP = ("scf.for", "scf.while", "scf.if", "scf.execute_region", "scf.index_switch")


def _mark(loop, checkpoint: Checkpointed) -> None:
    """Marks an scf.for or scf.while as checkpointed with its schedule (adj.checkpoint), and
    `spill = true` where its snapshots are spilled to host memory."""
    entries = {checkpoint.schedule: ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                       checkpoint.value)}
    if checkpoint.spill:
        entries["spill"] = ir.BoolAttr.get(True)
    loop.operation.attributes[adj.CHECKPOINT_ATTR] = ir.DictAttr.get(entries)
