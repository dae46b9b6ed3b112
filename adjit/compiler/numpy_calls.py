"""NumPy's array functions in compiled code that are not element-wise or plain reductions:
prod, argmax/argmin, linspace, concatenate, stack, reshape/ravel, diff (and the methods
x.reshape(...), x.ravel(), x.flatten(), x.prod(), x.argmax(), x.argmin()), with NumPy's
names, arguments and results. Registered with builtin_calls' table on import (codegen
imports this module). Their derivatives are the autodiff pass's: they are loads, stores,
views and arithmetic."""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref, scf

import numpy as np

from ..core.errors import UserError
from ..core.types import ArrayType, ScalarType, bool_, f64, i64, index, promote
from ..dialects import adj
from ..dialects.mlir_types import mlir_type
from . import arrays as A
from . import scalar_ops as S
from .builtin_calls import bind, creation_args, reduction_handler, register_builtin, namespace
from .values import Array, ArrayExpr, Literal, PyObj, Scalar, Shape, SliceValue


def _const_int(v, what: str) -> int:
    if not (isinstance(v, Literal) and isinstance(v.value, int)
            and not isinstance(v.value, bool)):
        raise UserError(f"{what} must be a constant integer")
    return v.value


def _axis(kwargs: dict, args: list, at: int, name: str, default: int | None = 0):
    axis = args[at] if len(args) > at else kwargs.pop("axis", None)
    if axis is None or isinstance(axis, PyObj) and axis.obj is None:
        return default
    return _const_int(axis, f"{name}(): axis")


def _no_more(kwargs: dict, name: str) -> None:
    if kwargs:
        raise UserError(f"{name}() has no argument {sorted(kwargs)[0]!r} in adjit")


# ---- argmax / argmin ---------------------------------------------------------------------

def _arg_extremum(op: str):
    """argmax/argmin of all elements (the flat C-order index, an int64), as NumPy's: the
    first of equal extremes, and the first NaN where there is one."""
    name = f"arg{op}"

    def handler(gen, args, kwargs):
        kwargs = dict(kwargs)
        if len(args) != 1:
            raise UserError(f"{name}(x) takes one array")
        if _axis(kwargs, list(args), 1, name, None) is not None:
            raise UserError(f"{name}(..., axis=...) is not supported in adjit: only the flat "
                            "index of all elements")
        _no_more(kwargs, name)
        x = args[0]
        if not isinstance(x, (Array, ArrayExpr)):
            raise UserError(f"{name}() takes an array, got {S.describe(x)}")
        e = A.as_expr(A.contiguous(x))
        t = e.dtype
        n = A.numel(e.shape)
        adj.check(arith.cmpi(arith.CmpIPredicate.ugt, n, A.idx(0)), "ValueError",
                  f"attempt to get {name} of an empty sequence")
        first = e.element(A.idx(0))
        loop = scf.ForOp(A.idx(1), n, A.idx(1), [first.value, A.idx(0)])
        with ir.InsertionPoint(loop.body):
            i = loop.induction_variable
            best, at = Scalar(loop.inner_iter_args[0], t), loop.inner_iter_args[1]
            v = e.element(i)
            better = S.compare(">" if op == "max" else "<", v, best).value
            if t.is_float:   # a NaN wins, once: the first NaN stays
                nan_v, nan_best = S.classify("isnan", v).value, S.classify("isnan", best).value
                true = arith.constant(ir.IntegerType.get_signless(1), 1)
                better = arith.ori(better, arith.andi(nan_v, arith.xori(nan_best, true)))
            scf.YieldOp([arith.select(better, v.value, best.value), arith.select(better, i, at)])
        return S.cast(Scalar(loop.results[1], index), i64)
    return handler


# ---- linspace -----------------------------------------------------------------------------

def _linspace(gen, args, kwargs):
    """linspace(start, stop, num=50, endpoint=True, dtype=None), lazily: element i is
    start + i * step (the last one stop exactly, with endpoint), computed in float64."""
    kwargs = dict(kwargs)
    args = list(args)
    names = ("start", "stop", "num", "endpoint")
    for k, nm in enumerate(names):
        if len(args) <= k and nm in kwargs:
            args.append(kwargs.pop(nm))
    if len(args) < 2:
        raise UserError("linspace(start, stop, num=50, endpoint=True, dtype=None)")
    start, stop = args[0], args[1]
    num = args[2] if len(args) > 2 else Literal(50)
    endpoint = args[3] if len(args) > 3 else Literal(True)
    dtype = None
    if "dtype" in kwargs:
        _, dtype = creation_args("linspace(start, stop, num, dtype=None)", [],
                                  {"dtype": kwargs.pop("dtype")}, 0)
    _no_more(kwargs, "linspace")
    if not (isinstance(endpoint, Literal) and isinstance(endpoint.value, bool)):
        raise UserError("linspace(): endpoint must be True or False")
    for v in (start, stop):
        if not isinstance(v, (Scalar, Literal)):
            raise UserError(f"linspace(): start and stop must be scalars, got {S.describe(v)}")
    if not (isinstance(num, Literal) and isinstance(num.value, int)
            or isinstance(num, Scalar) and num.type.is_int):
        raise UserError(f"linspace(): num must be an integer, got {S.describe(num)}")
    if isinstance(num, Literal) and num.value < 0:
        raise UserError("linspace(): num must be non-negative")
    lo, hi = S.convert(start, f64), S.convert(stop, f64)
    count = S.to_index(num)
    adj.check(arith.cmpi(arith.CmpIPredicate.sge, count, A.idx(0)), "ValueError",
              "linspace(): num must be non-negative")
    count = arith.maxsi(count, A.idx(0))
    div = arith.subi(count, A.idx(1)) if endpoint.value else count
    div_f = S.cast(Scalar(arith.maxsi(div, A.idx(1)), index), f64)
    step = S.binary("/", S.binary("-", hi, lo), div_f)
    out_t = dtype or f64
    last = arith.subi(count, A.idx(1))

    def element(i: ir.Value) -> Scalar:
        v = S.binary("+", lo, S.binary("*", S.cast(Scalar(i, index), f64), step))
        if endpoint.value:     # NumPy sets the last one to stop (of two or more)
            is_last = arith.andi(arith.cmpi(arith.CmpIPredicate.eq, i, last),
                                 arith.cmpi(arith.CmpIPredicate.ugt, count, A.idx(1)))
            v = S.select(Scalar(is_last, bool_), hi, v)
        return S.cast(v, out_t)

    return ArrayExpr(out_t, [count], element, reads=())


# ---- concatenate / stack --------------------------------------------------------------------

def _arrays(seq, name: str) -> list:
    if not isinstance(seq, tuple) or not seq:
        raise UserError(f"{name}() takes a tuple or list of arrays, e.g. {name}((a, b))")
    for v in seq:
        if not isinstance(v, (Array, ArrayExpr)):
            raise UserError(f"{name}(): every item must be an array, got {S.describe(v)}")
    return list(seq)


def _shape(v) -> list[ir.Value]:
    return A.dims(v) if isinstance(v, Array) else list(v.shape)


def _joined(name: str, gen, args, kwargs) -> tuple[list, int, ScalarType]:
    """(the arrays, the axis, their promoted dtype) of `name((a, b, ...), axis=0)`."""
    kwargs = dict(kwargs)
    if not args:
        raise UserError(f"{name}((a, b, ...), axis=0)")
    items = _arrays(args[0], name)
    axis = _axis(kwargs, list(args), 1, name)
    _no_more(kwargs, name)
    gen.require_host(f"{name} (a new array)")
    dtype = items[0].type.dtype
    for v in items[1:]:
        dtype = promote(dtype, v.type.dtype)
    return items, axis, dtype


def _concatenate(gen, args, kwargs):
    items, axis, dtype = _joined("concatenate", gen, args, kwargs)
    rank = items[0].type.ndim
    if rank == 0:
        raise UserError("concatenate(): zero-dimensional arrays cannot be concatenated")
    if any(v.type.ndim != rank for v in items):
        raise UserError("concatenate(): all the arrays must have the same number of "
                        f"dimensions, got {[v.type.ndim for v in items]}")
    if not -rank <= axis < rank:
        raise UserError(f"concatenate(): axis {axis} is out of bounds for {rank} dimensions")
    axis %= rank
    shapes = [_shape(v) for v in items]
    total = shapes[0][axis]
    for s in shapes[1:]:
        total = arith.addi(total, s[axis])
    for k in range(rank):
        if k != axis:
            for s in shapes[1:]:
                adj.check(arith.cmpi(arith.CmpIPredicate.eq, s[k], shapes[0][k]), "ValueError",
                          "concatenate(): the arrays' sizes differ along a dimension other "
                          "than the axis")
    out = A.alloc(dtype, [total if k == axis else shapes[0][k] for k in range(rank)])
    at = A.idx(0)
    for v, s in zip(items, shapes):
        end = arith.addi(at, s[axis])
        part = A.view(out, [SliceValue(Scalar(at, index), Scalar(end, index), None)
                            if k == axis else SliceValue(None, None, None)
                            for k in range(rank)], False)
        copy_into(part, v)
        at = end
    return out


def copy_into(part: Array, v) -> None:
    """part[...] = v for a view of a new array (nothing else reads it) whose sizes were
    checked against v's (their error is the one reported: iterate over the smaller)."""
    e = A.as_expr(v)
    if part.type.ndim == 0:
        memref.store(S.cast(e.element(A.idx(0)), part.type.dtype).value, part.value, [])
        return
    shape = [arith.minui(a, b) for a, b in zip(A.dims(part), e.shape)]
    A.for_each(shape, lambda ids: memref.store(
        S.cast(A.element_at(e, ids), part.type.dtype).value, part.value, ids))


def _stack(gen, args, kwargs):
    items, axis, dtype = _joined("stack", gen, args, kwargs)
    rank = items[0].type.ndim
    if any(v.type.ndim != rank for v in items):
        raise UserError("stack(): all input arrays must have the same shape")
    if not -(rank + 1) <= axis <= rank:
        raise UserError(f"stack(): axis {axis} is out of bounds for {rank + 1} dimensions")
    axis %= rank + 1
    shapes = [_shape(v) for v in items]
    for s in shapes[1:]:
        for k in range(rank):
            adj.check(arith.cmpi(arith.CmpIPredicate.eq, s[k], shapes[0][k]), "ValueError",
                      "stack(): all input arrays must have the same shape")
    shape = list(shapes[0])
    shape.insert(axis, A.idx(len(items)))
    out = A.alloc(dtype, shape)
    for k, v in enumerate(items):
        part = A.view(out, [Literal(k) if d == axis else SliceValue(None, None, None)
                            for d in range(rank + 1)], False)
        copy_into(part, v)
    return out


# ---- reshape ----------------------------------------------------------------------------------

def reshape(v, sizes: list) -> Array | ArrayExpr:
    """NumPy's reshape (one size may be -1): a view of C-contiguous memory (a strided array
    is copied first, as NumPy does when it cannot view it); a lazy element-wise
    expression stays lazy. ValueError when the element counts differ."""
    shape = _shape(v)
    n = A.numel(shape)
    wanted = [S.to_index(s) for s in sizes]
    unknown = [k for k, s in enumerate(sizes) if isinstance(s, Literal) and s.value == -1]
    if len(unknown) > 1:
        raise UserError("reshape(): can only specify one unknown dimension (-1)")
    for s in sizes:
        if isinstance(s, Literal) and s.value < -1:
            raise UserError(f"reshape(): negative dimension {s.value}")
    # A size known only at run time may be the -1 too (`x.reshape(n, m)`, m = -1): each
    # such size is the unknown one where it is -1, checked as the literal ones are above.
    computed = [k for k, s in enumerate(sizes) if not isinstance(s, Literal)]
    if computed:
        minus_one = A.idx(-1)
        is_unknown = {k: arith.cmpi(arith.CmpIPredicate.eq, wanted[k], minus_one)
                      for k in computed}
        for k in computed:
            adj.check(arith.cmpi(arith.CmpIPredicate.sge, wanted[k], minus_one), "ValueError",
                      "reshape(): negative dimensions are not allowed (other than one -1)")
        count = A.idx(len(unknown))
        for k in computed:
            count = arith.addi(count, arith.select(is_unknown[k], A.idx(1), A.idx(0)))
        adj.check(arith.cmpi(arith.CmpIPredicate.ule, count, A.idx(1)), "ValueError",
                  "reshape(): can only specify one unknown dimension (-1)")
        candidates = {k: is_unknown[k] for k in computed}
        if unknown:
            candidates[unknown[0]] = None   # (the literal -1: surely the unknown one)
    else:
        candidates = {unknown[0]: None} if unknown else {}
    if candidates:
        known = A.idx(1)
        for k, w in enumerate(wanted):
            if k in candidates:
                w = (A.idx(1) if candidates[k] is None else
                     arith.select(candidates[k], A.idx(1), w))
            known = arith.muli(known, w)
        safe = arith.select(arith.cmpi(arith.CmpIPredicate.eq, known, A.idx(0)), A.idx(1), known)
        missing = arith.divui(n, safe)
        for k, flag in candidates.items():
            wanted[k] = missing if flag is None else arith.select(flag, missing, wanted[k])
    same = arith.cmpi(arith.CmpIPredicate.eq, A.numel(wanted), n)
    adj.check(same, "ValueError",
              "reshape(): cannot reshape the array into this shape (the element counts differ)")
    if computed and wanted:
        # A failed check does not stop the code after it (lower_cpu.py: the error is raised
        # when the call returns), so a shape the checks refused must still be one that
        # stays inside the array: (n, 1, ..., 1) then, never a size of -1 or a product that
        # wrapped around.
        # (each size in [0, n], or one of them 0: no product wrapped around to n)
        i1 = ir.IntegerType.get_signless(1)
        nonneg, small, some_zero = (arith.constant(i1, 1), arith.constant(i1, 1),
                                    arith.constant(i1, 0))
        for w in wanted:
            nonneg = arith.andi(nonneg, arith.cmpi(arith.CmpIPredicate.sge, w, A.idx(0)))
            small = arith.andi(small, arith.cmpi(arith.CmpIPredicate.ule, w, n))
            some_zero = arith.ori(some_zero, arith.cmpi(arith.CmpIPredicate.eq, w, A.idx(0)))
        ok = arith.andi(arith.andi(same, nonneg), arith.ori(small, some_zero))
        wanted = [arith.select(ok, w, n if k == 0 else A.idx(1)) for k, w in enumerate(wanted)]
    if isinstance(v, ArrayExpr) and v.linear:
        # (element i is the same in C order: the flat loop that computes it is unchanged)
        return ArrayExpr(v.dtype, wanted, v.element, None, True,
                         None if v.reads is None else tuple(
                             type(r)(r.array, False) for r in v.reads))
    a = A.contiguous(v)
    t = ArrayType(a.type.dtype, len(wanted))
    strides, step = [], A.idx(1)
    for w in reversed(wanted):
        strides.append(step)
        step = arith.muli(step, w)
    strides.reverse()
    dyn = ir.ShapedType.get_dynamic_size()
    static_strides = [dyn] * (len(wanted) - 1) + [1] if wanted else []
    m = memref.reinterpret_cast(mlir_type(t), a.value, [], wanted, strides[:-1] if wanted else [],
                                [0], [dyn] * len(wanted), static_strides)
    return Array(m, t, a.root, a.fresh)


def _reshape(gen, args, kwargs):
    kwargs = dict(kwargs)
    if len(args) < 2 and "newshape" not in kwargs and "shape" not in kwargs:
        raise UserError("reshape(a, shape)")
    x = args[0]
    rest = list(args[1:]) or [kwargs.pop("shape", None) or kwargs.pop("newshape")]
    _no_more(kwargs, "reshape")
    if not isinstance(x, (Array, ArrayExpr)):
        raise UserError(f"reshape() takes an array, got {S.describe(x)}")
    if len(rest) == 1 and isinstance(rest[0], (tuple, Shape)):
        sizes = (list(rest[0]) if isinstance(rest[0], tuple) else
                 [S.from_index(d) for d in rest[0].dims])
    else:
        sizes = rest         # x.reshape(2, 3)
    for s in sizes:
        if not (isinstance(s, Literal) and isinstance(s.value, int)
                or isinstance(s, Scalar) and (s.type.is_int or s.type == index)):
            raise UserError(f"reshape(): sizes must be integers, got {S.describe(s)}")
    return reshape(x, sizes)


def _ravel(gen, args, kwargs):
    if len(args) != 1 or kwargs:
        raise UserError("ravel(a) takes one array")
    if not isinstance(args[0], (Array, ArrayExpr)):
        # as reshape(): a scalar (np.ravel(0.5)) has no shape to flatten here (it reached
        # reshape's shape arithmetic: an internal error)
        raise UserError(f"ravel() takes an array, got {S.describe(args[0])}")
    return reshape(args[0], [Literal(-1)])


def _flatten(gen, args, kwargs):
    """x.flatten(): a copy, as NumPy's."""
    gen.require_host("x.flatten() (a new array)")
    flat = _ravel(gen, args, kwargs)
    return A.copy(flat) if isinstance(flat, Array) else A.materialize(flat)


# ---- diff --------------------------------------------------------------------------------

def _diff(gen, args, kwargs):
    """np.diff(a, n=1, axis=-1, prepend=, append=): a[1:] - a[:-1] along the axis, n times,
    as views and an element-wise difference (lazy: it fuses into what uses it); bools give
    a != b, as NumPy's. prepend/append (a number, or an array of a's number of dimensions)
    are joined to `a` along the axis first (concatenate)."""
    got = bind("diff", ("a", "n", "axis", "prepend", "append"), args, kwargs)
    x = got.get("a")
    if not isinstance(x, (Array, ArrayExpr)):
        raise UserError(f"diff() takes an array, got {S.describe(x)}")
    rank = x.type.ndim
    if rank == 0:
        raise UserError("diff requires input that is at least one dimensional")
    n = _const_int(got.get("n", Literal(1)), "diff(): n")
    if n < 0:
        raise UserError(f"diff(): order must be non-negative but got {n}")
    axis = _const_int(got.get("axis", Literal(-1)), "diff(): axis")
    if not -rank <= axis < rank:
        raise UserError(f"diff(): axis {axis} is out of bounds for {rank} dimensions")
    axis %= rank
    ends = [got.get("prepend"), got.get("append")]
    if any(e is not None for e in ends):
        gen.require_host("diff(..., prepend=/append=) (a new array)")
        parts = [_diff_end(e, x, axis) for e in ends[:1] if e is not None]
        parts += [x] + [_diff_end(e, x, axis) for e in ends[1:] if e is not None]
        x = _concatenate(gen, [tuple(parts)], {"axis": Literal(axis)})
    whole = SliceValue(None, None, None)
    for _ in range(n):
        if not isinstance(x, Array):
            gen.require_host("diff(..., n > 1) of an expression (a new array)")
            x = A.materialize(x)
        hi = A.view(x, [whole] * axis + [SliceValue(Literal(1), None, None)], False)
        lo = A.view(x, [whole] * axis + [SliceValue(None, Literal(-1), None)], False)
        step = (lambda a, b: S.compare("!=", a, b)) if x.type.dtype == bool_ else (
            lambda a, b: S.binary("-", a, b))
        x = A.elementwise(step, [hi, lo])
    return x


def _diff_end(v, x, axis: int):
    """A prepend/append value as an array to join to `x` along `axis`: a number fills x's
    shape with 1 along the axis."""
    if isinstance(v, (Array, ArrayExpr)):
        if v.type.ndim != x.type.ndim:
            raise UserError("diff(): prepend/append arrays must have the array's number of "
                            "dimensions (or be numbers)")
        return v
    if not isinstance(v, (Scalar, Literal)):
        raise UserError(f"diff(): prepend/append must be a number or an array, got "
                        f"{S.describe(v)}")
    shape = [A.idx(1) if k == axis else d for k, d in enumerate(_shape(x))]
    # (NumPy makes a number an array first: a Python int is int64 there, not weak)
    t = v.type.strong if isinstance(v, Scalar) else S.literal_type(v.value).strong
    out = A.alloc(t, shape)
    A.fill(out, v)
    return out


# ---- eye / identity --------------------------------------------------------------------------

def _eye(gen, args, kwargs):
    """np.eye(N, M=None, k=0, dtype=float), lazily: element (i, j) is 1 where j - i == k. A
    constant shape and diagonal, as NumPy's (an identity matrix is mostly made once, so a
    run-time size buys little)."""
    return _diagonal_ones(bind("eye", ("N", "M", "k", "dtype"), args, kwargs), "eye")


def _np_identity(gen, args, kwargs):
    """np.identity(n, dtype=float): np.eye(n)."""
    got = bind("identity", ("n", "dtype"), args, kwargs)
    if "n" in got:
        got["N"] = got.pop("n")
    return _diagonal_ones(got, "identity")


def _diagonal_ones(got: dict, name: str) -> ArrayExpr:
    if "N" not in got:
        raise UserError(f"{name}() needs the number of rows")
    n = _const_int(got["N"], f"{name}(): the number of rows")
    m_arg = got.get("M")
    m = n if m_arg is None or isinstance(m_arg, PyObj) and m_arg.obj is None else (
        _const_int(m_arg, f"{name}(): M"))
    k = _const_int(got.get("k", Literal(0)), f"{name}(): k")
    if n < 0 or m < 0:
        raise UserError(f"negative dimensions are not allowed: {name}() of shape ({n}, {m})")
    _, dtype = creation_args(f"{name}(N, dtype=None)", [], {"dtype": got.get("dtype")}, 0)
    dtype = dtype or f64

    def at(ids: list) -> Scalar:
        i, j = ids
        on = arith.cmpi(arith.CmpIPredicate.eq, arith.subi(j, i), A.idx(k))
        return S.cast(Scalar(on, bool_), dtype)

    def element(flat: ir.Value) -> Scalar:
        cols = A.idx(max(m, 1))
        return at([arith.divui(flat, cols), arith.remui(flat, cols)])

    return ArrayExpr(dtype, [A.idx(n), A.idx(m)], element, at=at, reads=())


HANDLERS = {"prod": reduction_handler("prod"), "argmax": _arg_extremum("max"),
            "argmin": _arg_extremum("min"), "linspace": _linspace,
            "concatenate": _concatenate, "stack": _stack, "reshape": _reshape,
            "ravel": _ravel, "diff": _diff, "eye": _eye}
METHODS = {"reshape": _reshape, "ravel": _ravel, "flatten": _flatten,
           "prod": HANDLERS["prod"], "argmax": HANDLERS["argmax"],
           "argmin": HANDLERS["argmin"]}
for _name, _h in HANDLERS.items():
    register_builtin([namespace[_name], getattr(np, _name)], _h)
# (np.product was NumPy's older spelling of prod; np.row_stack etc. are not compiled)
# (adjit.identity is the vector types' identity matrix, Warp's; NumPy's is np.identity)
register_builtin([np.identity], _np_identity)
if hasattr(np, "concat"):
    register_builtin([np.concat], _concatenate)
