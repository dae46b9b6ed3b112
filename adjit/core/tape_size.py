"""Integer expressions of a kernel's arguments, in pure Python: the per-item tape sizes of
reverse-mode kernels whose loops run a number of times given by the kernel's arguments.

passes/autodiff/analysis/uniform.py builds them from IR and emits them as IR (the kernels and the
launch rule compute them from the launch's operands); this module builds them with folding,
evaluates them (folding needs it) and prints them, without MLIR.

An expression (`Expr`) is an int, or a tuple (op, operand...):
    ("arg", k)                 scalar argument k of the kernel, as an integer
    ("dim", k, d)              size d of array argument k
    ("trip", lb, ub, step)     trip count of an scf.for: max(0, ceil((ub - lb) / step))
    (op, a, b)                 op in BINARY: arith's signed integer ops
    ("cmpi", pred, a, b)       pred in PREDICATES; 1 or 0
    ("select", c, a, b)        a if c else b
    ("iv", d)                  the iteration variable of the d-th loop around (outermost 0)
    ("sum", d, lb, ub, step, body)
                               the sum of body over ("iv", d) in range(lb, ub, step): the
                               slots of a loop whose bounds depend on an enclosing loop's
                               variable (a triangular `for k2 in range(k, n)`)
Operations on ints fold, so an expression without arguments is an int. Its text form is an
s-expression, `(muli 2 (trip 0 (arg 2) 1))`, which the `adj.tape` attribute shows.
"""
from __future__ import annotations

from typing import Callable, Union


def _divsi(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


BINARY: dict[str, Callable[[int, int], int]] = {
    "addi": lambda a, b: a + b,
    "subi": lambda a, b: a - b,
    "muli": lambda a, b: a * b,
    "divsi": _divsi,
    "ceildivsi": lambda a, b: -(-a // b),
    "floordivsi": lambda a, b: a // b,
    "remsi": lambda a, b: a - b * _divsi(a, b),
    "maxsi": max,
    "minsi": min,
}
PREDICATES: dict[str, Callable[[int, int], bool]] = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "slt": lambda a, b: a < b, "sle": lambda a, b: a <= b,
    "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b,
}
Expr = Union[int, tuple]


# -- building, with folding ------------------------------------------------------------------
def node(op: str, *operands) -> Expr:
    """(op, *operands), or its value when no operand is an expression."""
    e = (op, *operands)
    if op not in ("arg", "dim", "iv") and not any(isinstance(o, tuple) for o in operands):
        return evaluate(e, _no_args, _no_args)
    return e


def _no_args(*_):
    raise AssertionError("folding an expression of the kernel's arguments")


def add(a: Expr, b: Expr) -> Expr:
    """a + b; adding c*X to a sum ending in d*X gives one term (c+d)*X, so that a layout's
    size reads as a sum of products of trip counts: (addi 1 (muli 2 (trip ...)))."""
    if a == 0 or b == 0:
        return b if a == 0 else a
    head, last = (a[1], a[2]) if isinstance(a, tuple) and a[0] == "addi" else (0, a)
    (ca, xa), (cb, xb) = _term(last), _term(b)
    if xa == xb and isinstance(xa, tuple):
        merged = mul(ca + cb, xa)
        return merged if head == 0 else node("addi", head, merged)
    return node("addi", a, b)


def mul(a: Expr, b: Expr) -> Expr:
    """a * b, an int factor first."""
    if a == 0 or b == 0:
        return 0
    if isinstance(b, int) and not isinstance(a, int):
        a, b = b, a
    return b if a == 1 else a if b == 1 else node("muli", a, b)


def _term(e: Expr) -> tuple[int, Expr]:
    """(c, X) with e == c * X."""
    if isinstance(e, tuple) and e[0] == "muli" and isinstance(e[1], int):
        return e[1], e[2]
    return (e, 1) if isinstance(e, int) else (1, e)


def trip(lb: Expr, ub: Expr, step: Expr) -> Expr:
    return node("trip", lb, ub, step)


def mentions(e: Expr, d: int) -> bool:
    """Whether `e` reads ("iv", d) (not bound by a ("sum", d, ...) inside it)."""
    if not isinstance(e, tuple):
        return False
    if e[0] == "iv":
        return e[1] == d
    if e[0] == "sum":
        _, dd, lb, ub, step, body = e
        return any(mentions(o, d) for o in (lb, ub, step)) or (dd != d and mentions(body, d))
    return any(mentions(o, d) for o in e[1:])


def summation(d: int, lb: Expr, ub: Expr, step: Expr, body: Expr) -> Expr:
    """The sum of `body` over ("iv", d) in range(lb, ub, step): trip * body when body does
    not depend on it; a number when nothing in it depends on the kernel's arguments."""
    if not mentions(body, d):
        return mul(trip(lb, ub, step), body)
    e = ("sum", d, lb, ub, step, body)
    return evaluate(e, _no_args, _no_args) if _constant(e) else e


def _constant(e: Expr, bound: frozenset = frozenset()) -> bool:
    """Whether `e` reads no argument, size, or loop variable but those bound inside it."""
    if not isinstance(e, tuple):
        return True
    if e[0] in ("arg", "dim"):
        return False
    if e[0] == "iv":
        return e[1] in bound
    if e[0] == "sum":
        _, d, lb, ub, step, body = e
        return (all(_constant(o, bound) for o in (lb, ub, step))
                and _constant(body, bound | {d}))
    return all(_constant(o, bound) for o in e[1:])


# -- in Python -------------------------------------------------------------------------------
def evaluate(e: Expr, scalar: Callable[[int], int], dim: Callable[[int, int], int],
             ivs: dict[int, int] | None = None) -> int:
    """The value of `e`, given the kernel's scalar arguments and array sizes (and the
    iteration variables `ivs` that ("iv", d) reads, bound by ("sum", d, ...))."""
    if isinstance(e, int):
        return e
    op, *operands = e
    if op == "arg":
        return int(scalar(operands[0]))
    if op == "dim":
        return int(dim(operands[0], operands[1]))
    if op == "iv":
        return (ivs or {})[operands[0]]
    ev = lambda o: evaluate(o, scalar, dim, ivs)   # noqa: E731
    if op == "sum":
        d, lb, ub, step, body = operands
        return sum(evaluate(body, scalar, dim, {**(ivs or {}), d: k})
                   for k in range(ev(lb), ev(ub), ev(step)))
    if op == "select":   # lazily: the branch not taken may divide by zero
        c, a, b = operands
        return ev(a) if ev(c) else ev(b)
    if op == "cmpi":
        pred, a, b = operands
        return int(PREDICATES[pred](ev(a), ev(b)))
    if op == "trip":
        lb, ub, step = map(ev, operands)
        return max(0, -(-(ub - lb) // step))
    return BINARY[op](*map(ev, operands))


# -- text ------------------------------------------------------------------------------------
def to_text(e: Expr) -> str:
    if isinstance(e, (int, str)):
        return str(e)
    return "(" + " ".join(to_text(o) for o in e) + ")"
