"""NumPy's functions that move elements without computing new ones: transpose(x, axes)
(and x.transpose(axes), x.transpose(*axes), np.permute_dims), swapaxes, moveaxis, roll and
pad. Each result is a lazy expression (values.ArrayExpr) whose element at a multi-index
reads the source at another one, so it fuses into the loop that uses it and copies nothing
unless it is stored (as x.T does). Their derivatives are the autodiff pass's: loads at
computed indices and selects. Registered with builtin_calls' table on import (codegen
imports this module)."""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf

import numpy as np

from ..core.errors import UserError
from ..core.types import bool_
from ..dialects import adj
from ..dialects.mlir_types import mlir_type
from ..lang.builtins import namespace
from . import arrays as A
from . import scalar_ops as S
from .builtin_calls import bind, numpy_typed, register_builtin
from .lazy import consumed
from .values import Array, ArrayExpr, Literal, PyObj, Scalar

_PAD_MODES = ("constant", "edge", "wrap", "reflect", "symmetric")


def _array(v, name: str) -> ArrayExpr:
    if not isinstance(v, (Array, ArrayExpr)):
        raise UserError(f"{name}() takes an array, got {S.describe(v)}")
    consumed(v)
    return A.as_expr(v)


def _int(v, what: str) -> int:
    if not (isinstance(v, Literal) and isinstance(v.value, int)
            and not isinstance(v.value, bool)):
        raise UserError(f"{what} must be a constant integer, got {S.describe(v)}")
    return v.value


def _axes(v, rank: int, what: str) -> list[int]:
    """A constant axis or tuple of axes, each in [-rank, rank), made non-negative."""
    items = list(v) if isinstance(v, tuple) else [v]
    out = []
    for item in items:
        a = _int(item, what)
        if not -rank <= a < rank:
            raise UserError(f"{what}: axis {a} is out of bounds for an array of {rank} "
                            "dimensions")
        out.append(a % rank)
    return out


def _none(v) -> bool:
    return v is None or isinstance(v, PyObj) and v.obj is None


def _take(args: list, kwargs: dict, names: tuple[str, ...], name: str,
          required: int) -> list:
    """`name`'s arguments by position or keyword, in the order of `names` (None where not
    given); an unknown keyword, a repeated one or a missing required one is refused."""
    got = bind(name, names, args, kwargs)
    out = [got.get(n) for n in names]
    for k in range(required):
        if out[k] is None:
            raise UserError(f"{name}() needs its argument {names[k]!r}")
    return out


# ---- transpose, swapaxes, moveaxis -------------------------------------------------------

def permuted(v, axes: list[int]):
    """`v` with its axes in the order `axes` (NumPy's transpose): result dimension k is
    dimension axes[k] of `v`."""
    if axes == list(range(len(axes))):
        return v
    e = _array(v, "transpose")
    shape = [e.shape[a] for a in axes]

    def at(ids):
        src = [None] * len(axes)
        for k, a in enumerate(axes):
            src[a] = ids[k]
        return A.element_at(e, src)
    return A.nd_expr(e.dtype, shape, at, A._shifted(e.reads))


def _transpose(gen, args, kwargs):
    """np.transpose(a, axes=None), a.transpose(axes), a.transpose(*axes): the axes reversed,
    or permuted as `axes` says."""
    kwargs = dict(kwargs)
    if not args:
        raise UserError("transpose(a, axes=None) takes an array")
    x, axes = args[0], list(args[1:])
    if "axes" in kwargs:
        if axes:
            raise UserError("transpose() got axes both by position and by keyword")
        axes = [kwargs.pop("axes")]
    if kwargs:
        raise UserError(f"transpose() has no argument {sorted(kwargs)[0]!r} in adjit")
    if len(axes) == 1 and (isinstance(axes[0], tuple) or _none(axes[0])):
        axes = [] if _none(axes[0]) else list(axes[0])
    if not isinstance(x, (Array, ArrayExpr)):
        if axes:
            raise UserError(f"transpose() of {S.describe(x)} takes no axes")
        return x
    rank = x.type.ndim
    if not axes:
        return permuted(x, list(range(rank))[::-1])
    order = _axes(tuple(axes), rank, "transpose()")
    if len(order) != rank or sorted(order) != list(range(rank)):
        raise UserError(f"transpose(): axes {tuple(order)} are not a permutation of the "
                        f"{rank} axes of the array")
    return permuted(x, order)


def _swapaxes(gen, args, kwargs):
    x, a1, a2 = _take(list(args), kwargs, ("a", "axis1", "axis2"), "swapaxes", 3)
    rank = _array(x, "swapaxes").type.ndim
    (i,), (j,) = _axes(a1, rank, "swapaxes()"), _axes(a2, rank, "swapaxes()")
    order = list(range(rank))
    order[i], order[j] = order[j], order[i]
    return permuted(x, order)


def _moveaxis(gen, args, kwargs):
    x, source, destination = _take(list(args), kwargs, ("a", "source", "destination"),
                                   "moveaxis", 3)
    rank = _array(x, "moveaxis").type.ndim
    src = _axes(source, rank, "moveaxis(): source")
    dst = _axes(destination, rank, "moveaxis(): destination")
    if len(src) != len(dst):
        raise UserError("moveaxis(): source and destination must have the same number of "
                        "elements")
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise UserError("moveaxis(): repeated axis")
    order = [k for k in range(rank) if k not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permuted(x, order)


# ---- roll -------------------------------------------------------------------------------

def _index_of(v, what: str) -> ir.Value:
    """An integer shift or width (a constant or an int computed at run time) as an index."""
    if isinstance(v, Literal) and isinstance(v.value, int) and not isinstance(v.value, bool):
        return A.idx(v.value)
    if isinstance(v, Scalar) and (v.type.is_int or v.type.name == "index"):
        return S.to_index(v)
    raise UserError(f"{what} must be an integer, got {S.describe(v)}")


def _modulo(i: ir.Value, n: ir.Value) -> ir.Value:
    """i mod n in [0, n) for any sign of i (0 where n is 0: nothing is read then)."""
    safe = arith.maxsi(n, A.idx(1))
    r = arith.remsi(i, safe)
    return arith.select(arith.cmpi(arith.CmpIPredicate.slt, r, A.idx(0)),
                        arith.addi(r, safe), r)


def _roll(gen, args, kwargs):
    """np.roll(a, shift, axis=None): element i moves to i + shift (mod the length), along
    each axis given, or over the flattened array (the result keeps a's shape)."""
    x, shift, axis = _take(list(args), kwargs, ("a", "shift", "axis"), "roll", 2)
    e = _array(x, "roll")
    rank = e.type.ndim
    shifts = list(shift) if isinstance(shift, tuple) else [shift]
    amounts = [_index_of(s, "roll(): shift") for s in shifts]
    if _none(axis):
        total = amounts[0]
        for a in amounts[1:]:
            total = arith.addi(total, a)
        n = A.numel(e.shape)
        r = _modulo(total, n)

        def at_flat(ids):
            j = arith.subi(A._ravel(list(ids), e.shape), r)
            j = arith.select(arith.cmpi(arith.CmpIPredicate.slt, j, A.idx(0)),
                             arith.addi(j, n), j)
            return e.element(j)
        return A.nd_expr(e.dtype, list(e.shape), at_flat, A._shifted(e.reads))
    axes = _axes(axis, rank, "roll()")
    if len(amounts) == 1:
        amounts = amounts * len(axes)
    elif len(axes) == 1:
        axes = axes * len(amounts)
    if len(amounts) != len(axes):
        raise UserError("roll(): shift and axis must be of one length (or one of them a "
                        "single value)")
    per_axis = {}
    for a, s in zip(axes, amounts):   # (shifts along one axis add up, as NumPy's)
        per_axis[a] = arith.addi(per_axis[a], s) if a in per_axis else s
    rolled = {a: _modulo(s, e.shape[a]) for a, s in per_axis.items()}

    def at(ids):
        src = list(ids)
        for a, r in rolled.items():
            j = arith.subi(ids[a], r)
            src[a] = arith.select(arith.cmpi(arith.CmpIPredicate.slt, j, A.idx(0)),
                                  arith.addi(j, e.shape[a]), j)
        return A.element_at(e, src)
    return A.nd_expr(e.dtype, list(e.shape), at, A._shifted(e.reads))


# ---- pad --------------------------------------------------------------------------------

def _pairs(v, rank: int, what: str, convert) -> list[tuple]:
    """NumPy's forms of a per-axis (before, after) argument: `x`, `(x,)`, `(before, after)`,
    `((before, after),)` or one pair per axis; each item converted by `convert`."""
    if not isinstance(v, tuple):
        pairs = [(v, v)] * rank
    elif len(v) == 1 and not isinstance(v[0], tuple):
        pairs = [(v[0], v[0])] * rank
    elif len(v) == 2 and not any(isinstance(p, tuple) for p in v):
        pairs = [(v[0], v[1])] * rank
    elif all(isinstance(p, tuple) for p in v) and len(v) in (1, rank):
        pairs = [p if len(p) == 2 else (p[0], p[0]) if len(p) == 1 else None
                 for p in (v * rank if len(v) == 1 else v)]
        if any(p is None for p in pairs):
            raise UserError(f"pad(): {what} takes (before, after) pairs")
    else:
        raise UserError(f"pad(): {what} must be a number, a (before, after) pair or one "
                        f"pair per axis (of {rank})")
    return [(convert(b), convert(a)) for b, a in pairs]


def _width(v) -> ir.Value:
    if isinstance(v, Literal) and isinstance(v.value, int) and v.value < 0:
        raise UserError("pad(): index can't contain negative values")
    w = _index_of(v, "pad(): pad_width")
    if not isinstance(v, Literal):
        adj.check(arith.cmpi(arith.CmpIPredicate.sge, w, A.idx(0)), "ValueError",
                  "pad(): index can't contain negative values")
        w = arith.maxsi(w, A.idx(0))
    return w


def _pad(gen, args, kwargs):
    """np.pad(array, pad_width, mode='constant', constant_values=0): modes constant, edge,
    wrap, reflect and symmetric, with NumPy's values (a constant corner takes the value of
    the last axis it is padded along, as NumPy pads one axis after the other)."""
    kwargs = dict(kwargs)
    values = kwargs.pop("constant_values", None)
    for k in ("stat_length", "end_values", "reflect_type"):
        if k in kwargs:
            raise UserError(f"pad(): {k}= is not supported in adjit")
    x, width, mode = _take(list(args), kwargs, ("array", "pad_width", "mode"), "pad", 2)
    e = _array(x, "pad")
    rank = e.type.ndim
    if mode is None:
        mode = "constant"
    elif isinstance(mode, PyObj) and isinstance(mode.obj, str):
        mode = mode.obj
    else:
        raise UserError("pad(): mode must be a string constant")
    if mode not in _PAD_MODES:
        raise UserError(f"pad(): mode {mode!r} is not supported in adjit (it has "
                        f"{', '.join(map(repr, _PAD_MODES))})")
    if values is not None and mode != "constant":
        raise UserError(f"pad(): constant_values= goes with mode='constant', not {mode!r}")
    if rank == 0:
        return x
    widths = _pairs(width, rank, "pad_width", _width)
    shape = [arith.addi(arith.addi(b, n), a) for (b, a), n in zip(widths, e.shape)]
    if mode == "constant":
        fills = _pairs(Literal(0) if values is None else values, rank, "constant_values",
                       lambda v: _fill(v, e.dtype))
        return _constant_pad(e, widths, fills, shape)
    for (b, a), n in zip(widths, e.shape):   # NumPy's error: nothing to repeat
        empty = arith.cmpi(arith.CmpIPredicate.eq, n, A.idx(0))
        padded = arith.cmpi(arith.CmpIPredicate.ne, arith.addi(b, a), A.idx(0))
        adj.check(arith.xori(arith.andi(empty, padded), _true()), "ValueError",
                  f"pad(): can't extend an empty axis with mode={mode!r}")
    fold = {"edge": _edge, "wrap": _modulo, "reflect": _reflect, "symmetric": _symmetric}[mode]

    def at(ids):
        return A.element_at(e, [fold(arith.subi(i, b), n)
                                for i, (b, _), n in zip(ids, widths, e.shape)])
    return A.nd_expr(e.dtype, shape, at, A._shifted(e.reads))


def _true() -> ir.Value:
    return arith.constant(ir.IntegerType.get_signless(1), 1)


def _fill(v, dtype) -> Scalar:
    if not isinstance(v, (Literal, Scalar)):
        raise UserError(f"pad(): constant_values must be scalars, got {S.describe(v)}")
    return S.cast(S.as_scalar(v, dtype if isinstance(v, Literal) else None), dtype)


def _edge(j: ir.Value, n: ir.Value) -> ir.Value:
    return arith.maxsi(arith.minsi(j, arith.subi(n, A.idx(1))), A.idx(0))


def _reflect(j: ir.Value, n: ir.Value) -> ir.Value:
    """j reflected about the first and last elements, which are not repeated (period
    2n - 2; a single element is its own reflection)."""
    period = arith.maxsi(arith.subi(arith.addi(n, n), A.idx(2)), A.idx(1))
    k = _modulo(j, period)
    return arith.select(arith.cmpi(arith.CmpIPredicate.sge, k, n), arith.subi(period, k), k)


def _symmetric(j: ir.Value, n: ir.Value) -> ir.Value:
    """j reflected about the array's edges, which are repeated (period 2n)."""
    k = _modulo(j, arith.addi(n, n))
    return arith.select(arith.cmpi(arith.CmpIPredicate.sge, k, n),
                        arith.subi(arith.subi(arith.addi(n, n), A.idx(1)), k), k)


def _constant_pad(e: ArrayExpr, widths, fills, shape) -> ArrayExpr:
    t = mlir_type(e.dtype)

    def at(ids):
        src, inside, value_of = [], None, []
        for i, (b, _), n in zip(ids, widths, e.shape):
            j = arith.subi(i, b)
            before = arith.cmpi(arith.CmpIPredicate.slt, j, A.idx(0))
            after = arith.cmpi(arith.CmpIPredicate.sge, j, n)
            ok = arith.andi(arith.xori(before, _true()), arith.xori(after, _true()))
            inside = ok if inside is None else arith.andi(inside, ok)
            src.append(j)
            value_of.append((before, after))
        # (the source is read only inside it: an empty axis has no element to read)
        branch = scf.IfOp(inside, [t], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            scf.YieldOp([A.element_at(e, src).value])
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp([S.as_scalar(Literal(0), e.dtype).value])
        v = Scalar(branch.result, e.dtype)
        for (before, after), (lo, hi) in zip(value_of, fills):   # later axes win
            v = S.select(Scalar(before, bool_), lo, v)
            v = S.select(Scalar(after, bool_), hi, v)
        return v
    return A.nd_expr(e.dtype, shape, at, A._shifted(e.reads))


_HANDLERS = {"pad": _pad, "roll": _roll, "swapaxes": _swapaxes, "moveaxis": _moveaxis,
             "transpose": _transpose}
for _name, _h in _HANDLERS.items():
    register_builtin([namespace[_name]], _h)
    register_builtin([getattr(np, _name)], numpy_typed(_h))
if hasattr(np, "permute_dims"):     # (NumPy 2's array-API spelling of transpose)
    register_builtin([np.permute_dims], _transpose)
# the methods x.transpose(...) and x.swapaxes(...)
METHODS = {"transpose": _transpose, "swapaxes": _swapaxes}
