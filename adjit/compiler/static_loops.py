"""Loops over sequences known while compiling, unrolled (ControlFlow._unroll compiles the
body once per item): `for k in (k1, k2): k(x, y, ...)`,
`for f in FS: x = f(x)` (FS a module-level or closed-over tuple or list of kernels,
@adjit.func/@adjit.jit functions or constants), `for a in (x, y)` over arrays, and
`enumerate`/`zip` of such sequences, and `len()` of one. The body is compiled once per item
(straight-line code, which every mode differentiates as it is); a runtime loop (`scf.for`)
iterates over `range(...)` only (control_flow.py), as a sequence of functions has no runtime
value to index.
"""
from __future__ import annotations

import ast
import builtins as py

from ..core.errors import CompilationError, UserError
from .builtin_calls import register_builtin
from . import scalar_ops as S
from .values import Literal, PyObj


def static_items(gen, v, node: ast.AST) -> tuple | None:
    """`v` as a tuple of the code's values when it is a sequence known while compiling (a
    tuple the code built, or a Python tuple or list it names: each item as a name of it
    would be, nested sequences as tuples), else None."""
    if isinstance(v, tuple):
        return v
    if isinstance(v, PyObj) and isinstance(v.obj, (tuple, list)):
        return tuple(_item(gen, o, node) for o in v.obj)
    return None


def static_slice(items: tuple, sub) -> tuple:
    """`items[lo:hi:step]` (a SliceValue of constants) of a sequence known while compiling."""
    bounds = []
    for part in (sub.lower, sub.upper, sub.step):
        if part is not None and not isinstance(part, Literal):
            raise UserError("a tuple known while compiling is sliced with constants")
        bounds.append(None if part is None else part.value)
    return items[slice(*bounds)]


def _item(gen, obj, node: ast.AST):
    if isinstance(obj, (tuple, list)):
        return tuple(_item(gen, o, node) for o in obj)
    return gen._from_python(obj, "an item of the sequence", node)


# The most iterations a loop over (or indexing) a sequence known while compiling is unrolled
# to: its body is compiled once per iteration. Past it, a loop over the sequence is refused
# and a range loop indexing one has a runtime index, which the sequence refuses.
MAX_UNROLL = 256


def indexes_a_sequence(gen, node: ast.For, it) -> tuple | None:
    """`for i in range(len(FS)): x = FS[i](x)`: a range of constants whose variable indexes
    a sequence known while compiling (a tuple of functions has no runtime value to index),
    as the items to unroll the loop over (Literal ints); None for any other loop, which
    stays a runtime loop."""
    bounds = (it.start, it.stop, it.step)
    if not (isinstance(node.target, ast.Name) and all(
            isinstance(b, Literal) and type(b.value) is int for b in bounds)):
        return None
    var = node.target.id
    for sub in ast.walk(ast.Module(node.body, [])):
        if (isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Name)
                and sub.slice.id == var and isinstance(sub.value, ast.Name)):
            try:
                seq = gen._lookup(sub.value.id, sub.value)
            except (UserError, CompilationError):
                continue               # (a name the body binds first, say)
            steps = range(*(b.value for b in bounds))
            if (isinstance(seq, tuple) or isinstance(seq, PyObj)
                    and isinstance(seq.obj, (tuple, list))) and len(steps) <= MAX_UNROLL:
                return tuple(Literal(k) for k in steps)
    return None


def _sequences(args, name: str) -> list[tuple]:
    out = []
    for a in args:
        if isinstance(a, tuple):
            out.append(a)
        else:
            raise UserError(f"{name}() of {S.describe(a)}: in compiled code {name}() takes "
                            "tuples or lists known while compiling (of functions, kernels, "
                            "constants or arrays); loop over range(...) for the rest")
    return out


def _enumerate(gen, args, kwargs):
    start = kwargs.pop("start", Literal(0))
    if kwargs or len(args) != 1:
        raise UserError("enumerate() takes a sequence and start=")
    if not (isinstance(start, Literal) and isinstance(start.value, int)):
        raise UserError("enumerate(): start= must be an integer constant")
    seq, = _sequences([_static(gen, args[0])], "enumerate")
    return tuple((Literal(start.value + k), v) for k, v in enumerate(seq))


def _zip(gen, args, kwargs):
    strict = kwargs.pop("strict", Literal(False))
    if kwargs:
        raise UserError(f"zip() takes no keyword {sorted(kwargs)[0]}=")
    seqs = _sequences([_static(gen, a) for a in args], "zip")
    if isinstance(strict, Literal) and strict.value and len({len(s) for s in seqs}) > 1:
        raise UserError(f"zip(strict=True) of sequences of lengths {[len(s) for s in seqs]}")
    return tuple(zip(*seqs))


def _static(gen, v):
    items = static_items(gen, v, gen._stmt)
    return v if items is None else items


register_builtin([py.enumerate], _enumerate)
register_builtin([py.zip], _zip)
