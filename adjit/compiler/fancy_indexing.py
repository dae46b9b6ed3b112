"""Indexing with arrays of integers (NumPy's advanced, "fancy" indexing) in @adjit.jit code:
`x[idx]`, `x[idx, j]`, `x[:, idx]`, `x[i1, i2]` read as NumPy reads them, `x[idx] = v` and
`x[idx] += v` write as NumPy writes them, and `np.add.at`, `np.take`, `np.take_along_axis`.

One plan serves reads and writes (`_plan`): for each dimension of `x`, a slice (first index,
length, step) or an advanced index (an integer array, or an integer scalar once any array is
present, as NumPy counts them). The advanced indices broadcast together to one shape B; the
result's shape is B in place of the advanced dimensions when they are adjacent, else B
first, then the sliced dimensions (NumPy's rule). `locate(ids)` maps a multi-index of the
result to the element of `x` it reads or writes, and whether that element exists.

Reads are lazy (an `ArrayExpr` whose element loads `x` at the located index), so
`sum(x[idx] * w)` allocates nothing; their derivatives are the autodiff pass's: the load's
tangent is the tangent array read at the same index (forward), and its adjoint an add into
the shadow at that index, which the pass runs as a serial loop because other iterations may
add into the same element (a duplicate index accumulates, a scatter-add). Writes are serial
loops in the index array's C order, so with duplicate indices the last assignment wins
(NumPy's documented order), `x[idx] += v` computes all of `x[idx] + v` before writing (so it
does not accumulate duplicates, as in NumPy), and `np.add.at` accumulates them.

An index outside its dimension (after a negative one is counted from the end) raises NumPy's
IndexError when the call returns (`adj.check`, in every build, not only ADJIT_DEBUG): the
read or write of that element does not happen (a read gives 0 until the error is raised),
so nothing outside the array is ever touched. np.take's mode='wrap' and mode='clip' map
every index into the dimension instead (an empty dimension is still an IndexError).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable

from mlir import ir
from mlir.dialects import arith, memref, scf

import numpy as np

from ..core.errors import UserError
from ..core.types import i64, index
from ..dialects import adj
from ..dialects.mlir_types import mlir_type
from . import arrays as A
from . import callables
from . import scalar_ops as S
from .builtin_calls import namespace, register_builtin
from .lazy import consumed, created
from .values import Array, ArrayExpr, Literal, PyObj, Read, Scalar, Shape, SliceValue

MODES = ("raise", "wrap", "clip")


def is_fancy(sub) -> bool:
    """Whether subscript `sub` has an array among its items (advanced indexing)."""
    items = sub if isinstance(sub, tuple) else (sub,)
    return any(isinstance(s, (Array, ArrayExpr)) for s in items)


def index_lists(node: ast.expr, sub):
    """`sub` with each list literal of the subscript's source (`x[[0, 2]]`, `x[[0, 1], 2]`)
    an index array: the code generator reads a list as it reads a tuple, and `x[[0, 2]]` of
    a 2-D array would otherwise mean x[0, 2]."""
    if isinstance(node, ast.List):
        return _constant_indices(sub)
    if isinstance(node, ast.Tuple) and isinstance(sub, tuple):
        return tuple(_constant_indices(s) if isinstance(n, ast.List) else s
                     for n, s in zip(node.elts, sub))
    return sub


def _constant_indices(items) -> ArrayExpr:
    """A 1-D int64 index array of a list of integers (literals or scalars), lazily: element
    i is a chain of selects over the items (such lists are short), so it needs no memory
    and works where arrays cannot be allocated."""
    items = list(items) if isinstance(items, tuple) else [items]
    for s in items:
        if isinstance(s, tuple):
            raise UserError("indexing with a nested list is not supported: use an integer "
                            "array of that shape")
        if not (isinstance(s, Literal) and isinstance(s.value, int)
                and not isinstance(s.value, bool) or isinstance(s, Scalar) and s.type.is_int):
            raise UserError(f"an index list holds integers, got {S.describe(s)}")
    values = [S.cast(S.as_scalar(s, i64), i64) for s in items]

    def element(i: ir.Value) -> Scalar:
        out = S.as_scalar(Literal(0), i64)
        for k, v in enumerate(values):
            hit = arith.cmpi(arith.CmpIPredicate.eq, i, A.idx(k))
            out = Scalar(arith.select(hit, v.value, out.value), i64)
        return out

    return ArrayExpr(i64, [A.idx(len(values))], element, lambda ids: element(ids[0]), True, ())


# ---- the plan -------------------------------------------------------------------------------

@dataclass
class Plan:
    """Where each element of `x[sub]` is: the result's shape, and locate(ids) -> (x's
    indices, whether every one is inside x, an i1 value or None when surely inside)."""
    x: Array
    shape: list[ir.Value]
    locate: Callable[[list], tuple[list[ir.Value], ir.Value | None]]
    reads: tuple[Read, ...] | None


def _items(x: Array, sub) -> list:
    """The subscript's items, one per dimension of x (`...` and missing trailing dimensions
    made full slices)."""
    items = list(sub) if isinstance(sub, tuple) else (
        [S.from_index(d) for d in sub.dims] if isinstance(sub, Shape) else [sub])
    ellipses = [k for k, s in enumerate(items) if isinstance(s, PyObj) and s.obj is Ellipsis]
    if len(ellipses) > 1:
        raise UserError("an index can only have a single ellipsis ('...')")
    for s in items:
        if s is None or isinstance(s, PyObj) and s.obj is None:
            raise UserError("np.newaxis (None) together with an index array is not supported "
                            "in adjit: index first, then add the axis (y = x[idx]; y[:, None])")
        if isinstance(s, PyObj) and s.obj is not Ellipsis:
            raise UserError(f"cannot index an array with {S.describe(s)}")
    used = len(items) - len(ellipses)
    ndim = x.type.ndim
    if used > ndim:
        raise UserError(f"too many indices for the array: it is {ndim}-dimensional, but "
                        f"{used} were indexed")
    full = SliceValue(None, None, None)
    if ellipses:
        k = ellipses[0]
        items[k:k + 1] = [full] * (ndim - used)
    return items + [full] * (ndim - len(items))


def _index_expr(s) -> ArrayExpr:
    e = A.as_expr(s)
    if e.dtype.is_bool:
        raise UserError("indexing with a boolean array (a mask) makes an array whose size "
                        "depends on the data, which adjit does not compile: use "
                        "np.where(mask, x, 0) or a loop")
    if not e.dtype.is_int:
        raise UserError("arrays used as indices must be of integer type, got an array of "
                        f"{e.dtype!r}")
    return e


def position(i: Scalar, n: ir.Value, mode: str, axis: int) -> tuple[ir.Value, ir.Value | None]:
    """(the index into a dimension of n elements, whether it is inside) of integer `i`, by
    np.take's `mode`: 'raise' counts a negative index from the end and reports one still
    outside as NumPy's IndexError (when the call returns); 'wrap' takes it modulo n and
    'clip' clips it into [0, n - 1], where only an empty dimension is an error."""
    j = S.to_index(i)
    if mode == "raise":
        j = A.wrapped(j, n)
        known_n = A.static_size(n)
        known_j = A.static_size(j)
        if known_j is not None and known_n is not None and 0 <= known_j < known_n:
            return j, None
        ok = arith.cmpi(arith.CmpIPredicate.ult, j, n)
        adj.check(ok, "IndexError", f"index out of bounds for axis {axis} (an index is "
                                    "outside its dimension)")
        return j, ok
    ok = arith.cmpi(arith.CmpIPredicate.ugt, n, A.idx(0))
    adj.check(ok, "IndexError", "cannot do a non-empty take from an empty axis")
    if mode == "clip":
        return arith.minsi(arith.maxsi(j, A.idx(0)), arith.subi(n, A.idx(1))), ok
    safe = arith.select(ok, n, A.idx(1))
    r = arith.remsi(j, safe)
    return arith.select(arith.cmpi(arith.CmpIPredicate.slt, r, A.idx(0)),
                        arith.addi(r, safe), r), ok


def _plan(x: Array, sub, mode: str = "raise") -> Plan:
    items = _items(x, sub)
    sizes = A.dims(x)
    # per dimension: ("slice", first, length, step) or ("adv", k) into `adv`
    kinds, adv = [], []
    arrays = [s for s in items if isinstance(s, (Array, ArrayExpr))]
    for d, s in enumerate(items):
        if isinstance(s, SliceValue):
            first, length, step = A.slice_bounds(s.lower, s.upper, s.step, sizes[d])
            kinds.append(("slice", first, length, step))
            continue
        if isinstance(s, (Array, ArrayExpr)):
            adv.append(_index_expr(s))
        elif (isinstance(s, Literal) and isinstance(s.value, int)
              and not isinstance(s.value, bool) or isinstance(s, Scalar) and s.type.is_int):
            adv.append(s)
        else:
            raise UserError("only integers, slices (`:`), ellipsis (`...`) and integer "
                            f"arrays are valid indices, got {S.describe(s)}")
        kinds.append(("adv", len(adv) - 1))
    shaped = [e for e in adv if isinstance(e, ArrayExpr) and e.shape]
    if shaped:
        b_shape, maps = A.broadcast(shaped)
        mapped = dict(zip(map(id, shaped), maps))
    else:
        b_shape, mapped = [], {}
    adv_dims = [d for d, k in enumerate(kinds) if k[0] == "adv"]
    adjacent = bool(adv_dims) and adv_dims == list(range(adv_dims[0], adv_dims[-1] + 1))
    slices = [d for d, k in enumerate(kinds) if k[0] == "slice"]
    # the result's dimensions: ("b", k) the k-th of B, ("s", d) the slice of dimension d
    if adjacent:
        order = ([("s", d) for d in slices if d < adv_dims[0]]
                 + [("b", k) for k in range(len(b_shape))]
                 + [("s", d) for d in slices if d > adv_dims[-1]])
    else:
        order = [("b", k) for k in range(len(b_shape))] + [("s", d) for d in slices]
    shape = [b_shape[k] if w == "b" else kinds[k][2] for w, k in order]

    def locate(ids):
        where = dict(zip(order, ids))
        b_ids = [where[("b", k)] for k in range(len(b_shape))]
        out, ok = [], None
        for d, kind in enumerate(kinds):
            if kind[0] == "slice":
                _, first, _, step = kind
                out.append(arith.addi(first, arith.muli(where[("s", d)], step)))
                continue
            e = adv[kind[1]]
            if isinstance(e, ArrayExpr):
                value = (A.element_at(e, mapped[id(e)](b_ids)) if e.shape
                         else e.element(A.idx(0)))
            else:
                value = e
            j, inside = position(value, sizes[d], mode, d)
            out.append(j)
            if inside is not None:
                ok = inside if ok is None else arith.andi(ok, inside)
        return out, ok

    reads = (Read(x, False),)
    for e in arrays:
        e = A.as_expr(e)
        reads = None if reads is None or e.reads is None else reads + tuple(
            Read(r.array, False) for r in e.reads)
    return Plan(x, shape, locate, reads)


def _guarded_load(x: Array, ids: list[ir.Value], ok: ir.Value | None) -> Scalar:
    t = x.type.dtype
    if ok is None:
        return Scalar(memref.load(x.value, ids), t)
    branch = scf.IfOp(ok, [mlir_type(t)], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        scf.YieldOp([memref.load(x.value, ids)])
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp([S.as_scalar(Literal(0), t).value])
    return Scalar(branch.result, t)


def _host_only(gen, what: str) -> None:
    if gen.kind != "jit":
        raise UserError(f"{what} with an array of indices makes or writes many elements: only "
                        "@adjit.jit functions do (a kernel reads one element at a time: "
                        "x[idx[i]])")


# ---- reads ------------------------------------------------------------------------------------

@dataclass
class Fancy:
    """The target of `x[indices] = v` / `x[indices] += v` (Subscripts._subscript_target)."""
    sub: object


def gather(gen, x: Array, sub, mode: str = "raise") -> ArrayExpr | Scalar:
    """`x[sub]` with advanced indices, lazily (a scalar where the result is 0-d)."""
    _host_only(gen, "indexing")
    items = sub if isinstance(sub, tuple) else (sub,)
    consumed(*items)
    plan = _plan(x, sub, mode)

    def at(ids) -> Scalar:
        where, ok = plan.locate(list(ids))
        return _guarded_load(x, where, ok)

    if not plan.shape:
        return at([])
    return created(A.nd_expr(x.type.dtype, plan.shape, at, plan.reads))


# ---- writes -----------------------------------------------------------------------------------

def _serial(shape: list[ir.Value], body: Callable[[list], None]) -> None:
    """body(ids) at every multi-index of `shape` in C order, one after another (so a later
    write of a duplicate index is the one that stays, as NumPy's)."""
    ids: list[ir.Value] = []

    def nest(d: int) -> None:
        if d == len(shape):
            body(list(ids))
            return
        loop = scf.ForOp(A.idx(0), shape[d], A.idx(1), [])
        with ir.InsertionPoint(loop.body):
            ids.append(loop.induction_variable)
            nest(d + 1)
            ids.pop()
            scf.YieldOp([])

    nest(0)


def _broadcast_to(value, shape: list[ir.Value], what: str) -> Callable[[list], Scalar]:
    """The value's element at a multi-index of `shape` (NumPy's broadcasting of the right
    side of an assignment: its dimensions match the trailing ones or are 1, checked)."""
    if not isinstance(value, (Array, ArrayExpr)):
        if not isinstance(value, (Scalar, Literal)):
            raise UserError(f"{what}: cannot write {S.describe(value)} into an array")
        return lambda ids: value
    e = A.as_expr(value)
    if len(e.shape) > len(shape):
        raise UserError(f"{what}: cannot write a {len(e.shape)}-D array into {len(shape)} "
                        "indexed dimensions")
    lead = len(shape) - len(e.shape)
    units = []
    for k, v in enumerate(e.shape):
        target = shape[lead + k]
        one = arith.cmpi(arith.CmpIPredicate.eq, v, A.idx(1))
        adj.check(arith.ori(one, arith.cmpi(arith.CmpIPredicate.eq, v, target)), "ValueError",
                  f"{what}: the value's shape does not broadcast to the indexed shape")
        units.append(one)

    def at(ids):
        # (a size that is neither 1 nor the target's raised above; reads stay inside: min)
        own = [arith.select(units[k], A.idx(0),
                            arith.minui(ids[lead + k], arith.subi(e.shape[k], A.idx(1))))
               for k in range(len(e.shape))]
        return A.element_at(e, own)
    return at


def scatter(gen, x: Array, sub, value, accumulate: bool, what: str) -> None:
    """`x[sub] = value` (accumulate False: in C order, a duplicate's last write stays) or
    np.add.at(x, sub, value) (accumulate True: every duplicate adds)."""
    _host_only(gen, what)
    if isinstance(value, ArrayExpr):
        # (it may read x: all of it is computed before the first write, as NumPy's
        # x[idx] += v computes x[idx] + v first)
        value = A.materialize(value)
    plan = _plan(x, sub)
    t = x.type.dtype
    if accumulate and t.is_bool:
        raise UserError(f"{what} needs a numeric array, not bool")
    get = _broadcast_to(value, plan.shape, what)

    def body(ids):
        v = get(ids)
        where, ok = plan.locate(ids)

        def write():
            new = S.cast(S.as_scalar(v, t), t)
            if accumulate:
                old = Scalar(memref.load(x.value, where), t)
                new = S.cast(S.binary("+", old, new), t)
            memref.store(new.value, x.value, where)

        if ok is None:
            write()
            return
        branch = scf.IfOp(ok)
        with ir.InsertionPoint(branch.then_block):
            write()
            scf.YieldOp([])

    _serial(plan.shape, body)


# ---- NumPy's functions ------------------------------------------------------------------------

def _array_arg(v, what: str) -> Array:
    if isinstance(v, ArrayExpr):
        v = A.materialize(v)
    if not isinstance(v, Array):
        raise UserError(f"{what} takes an array, got {S.describe(v)}")
    return v


def _add_at(gen, args, kwargs):
    """np.add.at(x, indices, values): x[indices] += values, every duplicate adding."""
    if kwargs or len(args) != 3:
        raise UserError("np.add.at(x, indices, values) takes three arguments")
    x, indices = args[0], args[1]
    if not isinstance(x, Array):
        raise UserError(f"np.add.at writes into an array, got {S.describe(x)}")
    if isinstance(indices, tuple) and not is_fancy(indices):
        # (a list of integers and a tuple of them are one value here; NumPy reads the
        # first as an index array and the second as one index per dimension)
        raise UserError("np.add.at(x, indices, values): give the indices as an integer array "
                        "(or a tuple of arrays, one per dimension), not a list or tuple of "
                        "integers")
    scatter(gen, x, indices, args[2], True, "np.add.at")
    return None


def _mode(kwargs: dict, args: list, at: int, name: str) -> str:
    m = args[at] if len(args) > at else kwargs.pop("mode", Literal("raise"))
    m = m.obj if isinstance(m, PyObj) else getattr(m, "value", m)
    if m not in MODES:
        raise UserError(f"{name}(): mode must be one of {', '.join(map(repr, MODES))}")
    return m


def _axis_of(v, ndim: int, name: str) -> int | None:
    if v is None or isinstance(v, PyObj) and v.obj is None:
        return None
    if not (isinstance(v, Literal) and isinstance(v.value, int)
            and not isinstance(v.value, bool)):
        raise UserError(f"{name}(): axis must be a constant integer or None")
    if not -ndim <= v.value < ndim:
        raise UserError(f"{name}(): axis {v.value} is out of bounds for an array of "
                        f"dimension {ndim}")
    return v.value % ndim


def flat_view(x) -> Array:
    from .numpy_calls import reshape     # (numpy_calls imports builtin_calls, as this does)
    return A.materialize(reshape(A.contiguous(x), [Literal(-1)]))


def _take(gen, args, kwargs):
    """np.take(x, indices, axis=None, mode='raise')."""
    kwargs = dict(kwargs)
    args = list(args)
    if len(args) < 2 and "indices" not in kwargs:
        raise UserError("take(a, indices, axis=None, out=None, mode='raise')")
    x = _array_arg(args[0], "take()")
    indices = args[1] if len(args) > 1 else kwargs.pop("indices")
    axis = _axis_of(args[2] if len(args) > 2 else kwargs.pop("axis", None), x.type.ndim or 1,
                    "take")
    if len(args) > 3 or kwargs.get("out") is not None:
        raise UserError("take(): out= is not supported in adjit (it returns a new array)")
    kwargs.pop("out", None)
    mode = _mode(kwargs, args, 4, "take")
    if kwargs:
        raise UserError(f"take() has no argument {sorted(kwargs)[0]!r} in adjit")
    if isinstance(indices, tuple):
        indices = _constant_indices(indices)
    if axis is None:
        x = flat_view(x)
        axis = 0
    full = SliceValue(None, None, None)
    return gather(gen, x, tuple([full] * axis + [indices]), mode)


def _take_along_axis(gen, args, kwargs):
    """np.take_along_axis(arr, indices, axis): out[..., j, ...] = arr[..., indices[..., j,
    ...], ...] (the other dimensions broadcast between arr and indices)."""
    kwargs = dict(kwargs)
    args = list(args)
    names = ("arr", "indices", "axis")
    for k, nm in enumerate(names):
        if len(args) <= k and nm in kwargs:
            args.append(kwargs.pop(nm))
    if len(args) != 3 or kwargs:
        raise UserError("take_along_axis(arr, indices, axis)")
    x = _array_arg(args[0], "take_along_axis()")
    indices = args[1]
    if not isinstance(indices, (Array, ArrayExpr)):
        raise UserError(f"take_along_axis(): indices must be an array, got "
                        f"{S.describe(indices)}")
    axis_v = args[2]
    if axis_v is None or isinstance(axis_v, PyObj) and axis_v.obj is None:
        if indices.type.ndim != 1:
            raise UserError("take_along_axis(): with axis=None, indices must be 1-D")
        return gather(gen, flat_view(x), (indices,))
    axis = _axis_of(axis_v, x.type.ndim, "take_along_axis")
    if indices.type.ndim != x.type.ndim:
        raise UserError("take_along_axis(): indices and arr must have the same number of "
                        f"dimensions, got {indices.type.ndim} and {x.type.ndim}")
    return along_axis(gen, x, indices, axis)


def along_axis(gen, x: Array, indices, axis: int):
    """take_along_axis as advanced indexing: dimension d != axis indexed by an arange of
    its size shaped to broadcast along d only (NumPy builds the same index)."""
    nd = x.type.ndim
    sizes = A.dims(x)
    items = []
    for d in range(nd):
        if d == axis:
            items.append(indices)
            continue
        shape = [A.idx(1)] * nd
        shape[d] = sizes[d]
        items.append(A.nd_expr(index, shape, lambda ids, d=d: Scalar(ids[d], index), ()))
    return gather(gen, x, tuple(items))


register_builtin([namespace["take"], np.take], _take)
register_builtin([namespace["take_along_axis"], np.take_along_axis], _take_along_axis)
callables.register_method(np.add, "at", _add_at)
