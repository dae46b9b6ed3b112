"""Lazy names, the part of the code generator (`codegen.CodeGenerator`) that decides when a
name bound to an element-wise expression stays lazy and when it is computed into memory: at
its binding (`bind_lazy`), and before a write, a call or control flow (`force_lazy`). The
rules themselves (liveness, cost, recompute-or-store) are lazy.py's.
"""
from __future__ import annotations

import ast
from typing import Sequence

from . import arrays as A
from . import lazy as L
from . import trees as T
from .values import Array, ArrayExpr


class LazyNames:
    """A mixin of `CodeGenerator`: it uses the generator's `vars`, `_later` (the statements
    that may still run) and `_reads_memo`."""

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
            if isinstance(v, (tuple, dict)):     # (a tree's kind kept: trees.py)
                return T.map_items(computed, v)
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


def _lazy_in(v) -> list:
    """The lazy names' expressions in a variable's value (a tuple may hold some)."""
    if isinstance(v, L.NamedExpr):
        return [v]
    if isinstance(v, (tuple, dict)):
        return [e for x in (v.values() if isinstance(v, dict) else v) for e in _lazy_in(x)]
    return []


def named_items(t: tuple | dict) -> tuple | dict:
    """A tuple (or a dict, a NamedTuple: a tree, trees.py) bound to a name, its expressions
    lazy names (force_lazy finds them)."""
    return T.map_items(lambda v: L.NamedExpr(v) if isinstance(v, ArrayExpr) and
                       not isinstance(v, L.NamedExpr) else
                       named_items(v) if isinstance(v, (tuple, dict)) else v, t)
