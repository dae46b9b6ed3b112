"""Names bound to element-wise array expressions (`r = a*x + b - y`) stay lazy
(values.ArrayExpr), so `adjit.sum(r * r)` is the same one fused loop, forward and reverse,
as `adjit.sum((a*x + b - y)**2)`. The code generator (lazy_names.py) computes a lazy name into
memory only where its value could otherwise change or be needed as memory: before any write
to an array (an element store, an in-place `x += ...`, a call of a compiled function or a
kernel launch, atomic_add), before `if`, `for` and `while` (whose bodies may write or repeat),
when it is indexed, passed on or returned, or when an `if` or loop carries it.

This module holds what that needs and nothing of the visitor: which names a statement reads
(liveness: a dead lazy name is never computed), the cost of one element of an expression,
the recompute-or-store rule, and a per-element cache so that a name used twice in one loop
(`r * r`) is computed once there.
"""
from __future__ import annotations

import ast
import contextlib
from typing import Iterator

from mlir import ir
from mlir.dialects import scf

from .values import ArrayExpr

# math-dialect ops that are one or a few instructions; every other math op (exp, log, sin,
# tanh, pow, ...) is a libm/libmvec call of tens of instructions per element.
_CHEAP_MATH = {"math.absf", "math.absi", "math.copysign", "math.fma", "math.sqrt",
               "math.floor", "math.ceil", "math.round", "math.roundeven", "math.trunc"}
# Above this many ops per element, recomputing an expression in a second loop costs more
# than the one extra store and loads of keeping it in memory (a 4-byte element moves through
# memory in ~0.1-0.4 ns; ~24 vector arithmetic ops take about as long).
STORE_ABOVE_OPS = 24


# Calls that read their array argument in a loop of their own (a reduction, a copy).
_LOOPS = {"sum", "max", "min", "dot", "copy", "mean"}


def reads(node: ast.AST, memo: dict) -> dict[str, int]:
    """Names `node` reads (loaded names and augmented-assignment targets), each with the
    number of loops it reads them in, as far as the syntax shows: a reduction or copy call
    and an index are loops of their own, the rest of a statement one more; so
    `sum(r) + sum(r * r)` reads r in 2 loops, `sum(r * r)` in 1."""
    key = id(node)
    hit = memo.get(key)
    if hit is not None and hit[0] is node:
        return hit[1]
    seen: set[tuple[str, int]] = set()

    def walk(n: ast.AST, loop: int) -> None:
        if isinstance(n, ast.stmt):
            loop = id(n)
        elif isinstance(n, ast.Subscript) or isinstance(n, ast.Call) and (
                getattr(n.func, "attr", None) in _LOOPS or getattr(n.func, "id", None) in _LOOPS):
            loop = id(n)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            seen.add((n.id, loop))
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            seen.add((n.target.id, loop))
        for child in ast.iter_child_nodes(n):
            walk(child, loop)

    walk(node, id(node))
    out: dict[str, int] = {}
    for name, _ in seen:
        out[name] = out.get(name, 0) + 1
    memo[key] = (node, out)   # (the node is kept alive, so its id is not reused)
    return out


def element_cost(e: ArrayExpr) -> tuple[int, int]:
    """(ops, expensive math ops) of one element of `e`, counted by emitting it into a
    scratch region that is then erased (as arrays._result_dtype does)."""
    region_op = scf.ExecuteRegionOp([])
    block = region_op.regions[0].blocks.append(ir.IndexType.get())
    with ir.InsertionPoint(block):
        e.element(block.arguments[0])
    ops = expensive = 0

    def count(op) -> None:
        nonlocal ops, expensive
        for region in op.regions:
            for b in region.blocks:
                for o in b.operations:
                    name = o.operation.name
                    if name == "arith.constant":
                        continue
                    ops += 1
                    if (name.startswith("math.") and name not in _CHEAP_MATH
                            or name == "func.call"):
                        expensive += 1
                    count(o.operation)

    count(region_op.operation)
    region_op.operation.erase()
    return ops, expensive


def store_when_bound(e: ArrayExpr, loops: int) -> bool:
    """The recompute-or-store rule: a lazy name is recomputed in every loop that reads it,
    unless it is read by two or more later loops (`reads`) and one element of it costs a
    transcendental call or more than STORE_ABOVE_OPS ops; then it is stored once when
    bound. Read by one loop (the common `r = ...; sum(r*r)`), it is always fused."""
    if loops < 2:
        return False
    ops, expensive = element_cost(e)
    return expensive > 0 or ops > STORE_ABOVE_OPS


# ---- one computation per element within a loop -------------------------------------------
_scopes: list[dict] = []


@contextlib.contextmanager
def element_scope() -> Iterator[None]:
    """Emitting one element of an expression (arrays.elementwise opens this around the
    outermost element call): inside it, a lazy name's element at index value `i` is emitted
    once and then reused. The scope ends with the element, so a cached value is only reused
    in the straight-line code that element emits, where it dominates its uses."""
    if _scopes:
        yield
        return
    _scopes.append({})
    try:
        yield
    finally:
        _scopes.pop()


class NamedExpr(ArrayExpr):
    """The value of a lazy name (aliases `s = r` share the object, so they are computed
    into one array). Its element at one index is computed once per element scope however
    often the name is read there (`r * r`)."""

    def __init__(self, e: ArrayExpr):
        inner, inner_at = e.element, e.at

        def element(i: ir.Value):
            if not _scopes:
                return inner(i)
            memo = _scopes[-1]
            key = (id(self), i)
            hit = memo.get(key)
            if hit is None:
                hit = memo[key] = (self, inner(i))
            return hit[1]

        def at(ids: list):
            if not _scopes or inner_at is None:
                return inner_at(ids) if inner_at is not None else None
            memo = _scopes[-1]
            key = (id(self), *ids)
            hit = memo.get(key)
            if hit is None:
                hit = memo[key] = (self, inner_at(ids))
            return hit[1]

        super().__init__(e.dtype, e.shape, element, at if inner_at is not None else None,
                         e.linear, e.reads)
        consumed(e)

    __eq__ = object.__eq__      # identity, not the dataclass's field comparison
    __hash__ = object.__hash__


# ---- expressions pending inside one statement -----------------------------------------------
# `y = x*2 + g(x)`: Python computes x*2 before g runs. An unnamed element-wise expression
# that is made but not yet used by another (elementwise, a reduction, a store) when a call
# or write runs in the same statement is computed into memory first (lazy_names.force_lazy);
# the statement's expressions are tracked here, one frame per statement being compiled.
_pending: list[dict[int, ArrayExpr]] = []


@contextlib.contextmanager
def statement() -> Iterator[None]:
    _pending.append({})
    try:
        yield
    finally:
        _pending.pop()


def created(e: ArrayExpr) -> ArrayExpr:
    if _pending:
        _pending[-1][id(e)] = e
    return e


def consumed(*values) -> None:
    if _pending:
        for v in values:
            _pending[-1].pop(id(v), None)


def take_pending() -> list[ArrayExpr]:
    """The current statement's expressions made and not yet used, forgotten here."""
    if not _pending:
        return []
    out = list(_pending[-1].values())
    _pending[-1].clear()
    return out
