"""Arrays in compiled code: element access, fused element-wise expressions, reductions and
array creation. Element-wise expressions stay lazy (values.ArrayExpr) until something needs
memory, so a whole expression becomes one parallel loop over the flattened elements."""
from __future__ import annotations

from typing import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, math, memref, scf

from ..dialects import adj
from ..dialects.mlir_types import mlir_type
from ..passes.summation import CHUNK, LANES as SUM_LANES, pairwise_sum
from . import scalar_ops as S
from ..core.errors import InternalCompilerError, UserError
from .lazy import consumed, created, element_scope
from ..core.types import ArrayType, ScalarType, f32, f64, i64, index
from .values import Array, ArrayExpr, Literal, Read, Scalar, SliceValue

# CHUNK elements per partial result, SUM_LANES accumulators per chunk: the launch rule's sums
# of per-item adjoints (passes/summation.py) are built the same way (but with
# interleaved lanes; here lane k sums the k-th quarter of a chunk: reduce() says why). A chunk's sum is a loop over SUM_LANES accumulators whose adds
# may be reassociated, so LLVM vectorises it (calls of vector math included) with more
# accumulators of its own; SUM_LANES > 1 because the reverse pass gives each use site of an
# Active scalar its own adjoint accumulator (4 sites: gradient/primal 2.6x on
# sum((a*x+b-y)**2), 1 site: 5x). Max and min keep LANES accumulators, which LLVM packs into
# vectors (it does not see NumPy's NaN-propagating select as a reduction of its own): 32
# make 4 independent AVX-512 chains (max of 60,000 f64: 28 us with 8, 16 us with 32; the
# gradient unchanged). Partial sums are then added pairwise (an error growing with log2 of
# their number, as NumPy's pairwise sum), partial maxima in order.
LANES = 32


def idx(v: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), v)


def dims(a: Array) -> list[ir.Value]:
    """The sizes of `a`; those of an allocation are the values it was made with, so that a
    size known when compiling (keepdims=True's 1) stays known for broadcasting."""
    owner = a.value.owner if isinstance(a.value, ir.OpResult) else None
    if (owner is not None and owner.name == "memref.alloc" and
            len(owner.operands) == a.type.ndim):
        return list(owner.operands)
    if (owner is not None and owner.name == "memref.reinterpret_cast" and
            len(owner.operands) >= 1 + a.type.ndim and not a.type.strided):
        # (alloc's checked view, reshape's: their sizes are operands 1..ndim)
        return list(owner.operands)[1:1 + a.type.ndim]
    units = a.type.units      # (dimensions of an argument known to be 1: core/types.py)
    return [idx(1) if d in units else memref.dim(a.value, idx(d)) for d in range(a.type.ndim)]


def numel(shape: Sequence[ir.Value]) -> ir.Value:
    n = idx(1)
    for d in shape:
        n = arith.muli(n, d)
    return n


def flat(a: Array) -> ir.Value:
    """A 1-D view of a C-contiguous array, of a 0-d one too (its one element: the
    Jacobians of derivative_calls.py walk any argument and result flat). A
    reinterpret_cast, as reshape's views: a collapse_shape of an array whose sizes
    canonicalisation makes static (an empty slice's (0, 4)) failed to verify, and there is
    no collapse_shape of a 0-d memref to 1-D."""
    if a.type.strided:
        raise InternalCompilerError("arrays.flat of a strided array")
    if a.type.ndim == 1:
        return a.value
    dyn = ir.ShapedType.get_dynamic_size()
    t = ir.MemRefType.get([dyn], mlir_type(a.type.dtype))
    return memref.reinterpret_cast(t, a.value, [], [numel(dims(a))], [], [0], [dyn], [1])


def _guard(branch: scf.IfOp) -> scf.IfOp:
    """Marks a debug-mode bounds check's if (passes/ndrange_bounds.py: its access still
    counts as one every work item makes)."""
    branch.operation.attributes[adj.GUARD_ATTR] = ir.UnitAttr.get()
    return branch


def load(a: Array, subs: list[ir.Value], debug: bool) -> Scalar:
    if len(subs) != a.type.ndim:
        raise UserError(f"indexing a {a.type.ndim}-D array with {len(subs)} indices "
                        "(adjit reads single elements: give one index per dimension)")
    if debug and subs:   # (a 0-d array's one element is always inside)
        ok = _bounds_check(a, subs)
        branch = _guard(scf.IfOp(ok, [mlir_type(a.type.dtype)], has_else=True))
        with ir.InsertionPoint(branch.then_block):
            scf.YieldOp([memref.load(a.value, subs)])
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp([S.as_scalar(Literal(0), a.type.dtype).value])
        return Scalar(branch.result, a.type.dtype)
    return Scalar(memref.load(a.value, subs), a.type.dtype)


def store(a: Array, subs: list[ir.Value], v, debug: bool) -> None:
    if len(subs) != a.type.ndim:
        raise UserError(f"assigning into a {a.type.ndim}-D array with {len(subs)} indices "
                        "(give one index per dimension)")
    value = S.cast(S.as_scalar(v, a.type.dtype), a.type.dtype).value
    if debug and subs:   # (a 0-d array's one element is always inside)
        branch = _guard(scf.IfOp(_bounds_check(a, subs)))
        with ir.InsertionPoint(branch.then_block):
            memref.store(value, a.value, subs)
            scf.YieldOp([])
        return
    memref.store(value, a.value, subs)


def atomic_add(a: Array, subs: list[ir.Value], v, debug: bool) -> Scalar:
    """Adds `v` to the element atomically; the value is the element before."""
    if len(subs) != a.type.ndim:
        raise UserError(f"atomic_add into a {a.type.ndim}-D array with {len(subs)} indices")
    t = a.type.dtype
    if t.is_bool:
        raise UserError("atomic_add needs a numeric array, not bool")
    value = S.cast(S.as_scalar(v, t), t).value
    kind = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0 if t.is_float else 1)
    if debug and subs:   # (a 0-d array's one element is always inside)
        branch = _guard(scf.IfOp(_bounds_check(a, subs), [mlir_type(t)], has_else=True))
        with ir.InsertionPoint(branch.then_block):
            scf.YieldOp([memref.atomic_rmw(kind, value, a.value, subs)])
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp([S.as_scalar(Literal(0), t).value])
        return Scalar(branch.result, t)
    return Scalar(memref.atomic_rmw(kind, value, a.value, subs), t)


def wrapped(i: ir.Value, n: ir.Value | Callable[[], ir.Value]) -> ir.Value:
    """Index `i` (an index value) into a dimension of `n` elements with Python's meaning: a
    negative one counts from the end (`w[k]`, k = -1). One compare and select, left out
    where `i` is known not to be negative (a constant, a work item's id, the counter of a
    loop from a non-negative start, such a counter less a constant no larger than the
    start), so that the loops LLVM vectorises stay as they were."""
    if _non_negative(i):
        return i
    n = n() if callable(n) else n
    return arith.select(arith.cmpi(arith.CmpIPredicate.slt, i, idx(0)), arith.addi(i, n), i)


def _non_negative(v: ir.Value) -> bool:
    """Whether index `v` is surely >= 0, by its definition (through casts)."""
    while isinstance(v, ir.OpResult) and v.owner.name in (
            "arith.index_cast", "arith.index_castui", "arith.extui", "arith.extsi"):
        if v.owner.name in ("arith.extui", "arith.index_castui"):
            return True     # (an unsigned integer)
        v = v.owner.operands[0]
    if isinstance(v, ir.BlockArgument):
        # the counter of an scf.for (its first block argument): lower bound and step known
        # and not negative
        owner = v.owner.owner
        if v.arg_number == 0 and owner is not None and owner.name == "scf.for":
            lo, step = (static_size(owner.operands[0]), static_size(owner.operands[2]))
            return lo is not None and lo >= 0 and step is not None and step > 0
        return False
    if not isinstance(v, ir.OpResult):
        return False
    op = v.owner
    if op.name in ("arith.addi", "arith.subi"):
        c = static_size(op.operands[1])
        if c is None:
            return False
        if op.name == "arith.addi":
            return c >= 0 and _non_negative(op.operands[0])
        return c <= _lowest(op.operands[0])
    if op.name == "arith.constant":
        known = static_size(v)
        return known is not None and known >= 0
    return op.name in ("adj.global_id", "adj.index", "memref.dim")


def _lowest(v: ir.Value) -> int:
    """A lower bound of index `v` known from its definition (a loop counter's constant
    start, through casts), else 0 where it is surely not negative, else -1."""
    while isinstance(v, ir.OpResult) and v.owner.name in ("arith.index_cast", "arith.extsi"):
        v = v.owner.operands[0]
    if (isinstance(v, ir.BlockArgument) and v.arg_number == 0 and
            v.owner.owner is not None and v.owner.owner.name == "scf.for"):
        lo, step = static_size(v.owner.owner.operands[0]), static_size(v.owner.owner.operands[2])
        if lo is not None and step is not None and step > 0:
            return lo
    return 0 if _non_negative(v) else -1


def _bounds_check(a: Array, subs: list[ir.Value]) -> ir.Value:
    """Debug mode: whether every index is inside its dimension (unsigned, so negative ones
    are out), reported as an IndexError naming the user's line when it is not."""
    ok = None
    for d, s in enumerate(subs):
        inside = arith.cmpi(arith.CmpIPredicate.ult, s, memref.dim(a.value, idx(d)))
        ok = inside if ok is None else arith.andi(ok, inside)
    adj.check(ok, "IndexError", f"index out of bounds for a {a.type.ndim}-D array")
    return ok


# ---- element-wise expressions --------------------------------------------------------

def as_expr(a: Array | ArrayExpr) -> ArrayExpr:
    if isinstance(a, ArrayExpr):
        return a
    t = a.type.dtype
    reads = (Read(a, True),)
    if a.type.ndim == 0:
        # One element, with no index (collapse_shape cannot make a 1-D view of a 0-d
        # memref): element i of it is the element, for any i.
        return ArrayExpr(t, [], lambda i: Scalar(memref.load(a.value, []), t),
                         lambda ids: Scalar(memref.load(a.value, []), t), True, reads)

    def at(ids) -> Scalar:
        return Scalar(memref.load(a.value, list(ids)), t)

    if a.type.strided:
        return nd_expr(t, dims(a), at, reads)
    view = flat(a)
    return ArrayExpr(t, dims(a), lambda i: Scalar(memref.load(view, [i]), t), at, True, reads)


def nd_expr(dtype: ScalarType, shape: list[ir.Value], at: Callable[[list], Scalar],
            reads: tuple[Read, ...] | None) -> ArrayExpr:
    """An expression whose elements are computed at a multi-index (a view's, a broadcast
    one's): a loop nest over its shape computes it; its flat element i, which only a 1-D
    one has cheaply, is at(unravel(i))."""
    if len(shape) <= 1:
        return ArrayExpr(dtype, shape, lambda i: at([i] if shape else []), at, True, reads)
    return ArrayExpr(dtype, shape, lambda i: at(_unravel(i, shape)), at, False, reads)


def element_at(e: ArrayExpr, ids: Sequence[ir.Value]) -> Scalar:
    """Element `ids` of `e` (a multi-index of its rank)."""
    if e.at is not None:
        return e.at(list(ids))
    return e.element(_ravel(list(ids), e.shape))


def _ravel(ids: list[ir.Value], shape: Sequence[ir.Value]) -> ir.Value:
    if not ids:
        return idx(0)
    linear = ids[0]
    for k in range(1, len(ids)):
        linear = arith.addi(arith.muli(linear, shape[k]), ids[k])
    return linear


def _shifted(reads: tuple[Read, ...] | None) -> tuple[Read, ...] | None:
    """The reads of an expression whose elements are read at other indices than their own."""
    return None if reads is None else tuple(Read(r.array, False) for r in reads)


def transpose(v: Array | ArrayExpr) -> ArrayExpr:
    """NumPy's `x.T` (the axes reversed), lazily: element (i, j) of the result is element
    (j, i) of `v`, so a transpose fuses into the loop that uses it and copies nothing
    unless it is stored."""
    e = as_expr(v)
    if len(e.shape) < 2:
        return e
    return nd_expr(e.dtype, list(reversed(e.shape)),
                   lambda ids: element_at(e, list(reversed(ids))), _shifted(e.reads))


# ---- views --------------------------------------------------------------------------------

def static_size(v: ir.Value) -> int | None:
    """The value of an index known at compile time (an arith.constant), else None."""
    owner = v.owner if isinstance(v, ir.OpResult) else None
    if owner is not None and owner.name == "arith.constant":
        attr = owner.attributes["value"]
        if isinstance(attr, ir.IntegerAttr):
            return attr.value
    return None


def slice_bounds(lower, upper, step, n: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(first index, length, step) of Python's slice `lower:upper:step` of a dimension of
    `n` elements, as slice.indices computes them: negative bounds count from the end and
    bounds are clipped, so an empty or reversed slice has length 0. Each of lower, upper,
    step is None or an integer Scalar/Literal; a step known to be 0 is refused, a computed
    one raises ValueError."""
    i64t = ir.IndexType.get()
    zero, one = idx(0), idx(1)
    if step is None:
        by, sign = one, 1
    else:
        by = S.to_index(step)
        known = static_size(by)
        sign = None if known is None else (1 if known > 0 else -1 if known < 0 else 0)
        if sign == 0:
            raise UserError("slice step cannot be zero")
        if sign is None:
            adj.check(arith.cmpi(arith.CmpIPredicate.ne, by, zero), "ValueError",
                      "slice step cannot be zero")
    negative = (arith.cmpi(arith.CmpIPredicate.slt, by, zero) if sign is None
                else arith.constant(ir.IntegerType.get_signless(1), int(sign < 0)))
    minus_one = arith.constant(i64t, -1)
    lo_bound = arith.select(negative, minus_one, zero)     # the bounds clip to [lo, hi]
    hi_bound = arith.select(negative, arith.subi(n, one), n)

    def clip(v, default: ir.Value) -> ir.Value:
        if v is None:
            return default
        x = S.to_index(v)
        x = arith.select(arith.cmpi(arith.CmpIPredicate.slt, x, zero), arith.addi(x, n), x)
        x = arith.maxsi(x, lo_bound)
        return arith.minsi(x, hi_bound)

    start = clip(lower, arith.select(negative, hi_bound, lo_bound))
    stop = clip(upper, arith.select(negative, lo_bound, hi_bound))
    # length = ceil((stop - start) / step) when positive, else 0
    span = arith.subi(stop, start)
    by_safe = arith.select(arith.cmpi(arith.CmpIPredicate.eq, by, zero), one, by)
    adjust = arith.select(negative, arith.addi(span, one), arith.subi(span, one))
    length = arith.addi(arith.divsi(adjust, by_safe), one)
    empty = arith.select(negative, arith.cmpi(arith.CmpIPredicate.sge, stop, start),
                         arith.cmpi(arith.CmpIPredicate.sle, stop, start))
    length = arith.select(empty, zero, length)
    # (an empty slice's first index may be n, one past the end: nothing is read there, but
    # the view's offset must stay inside for the pass's views; clamp it)
    start = arith.select(empty, zero, start)
    return start, length, by


def _subview(source: ir.Value, offsets: list, sizes: list, strides: list) -> ir.Value:
    """memref.subview with the result type MLIR infers (static strides where the source's
    and the step are known; the verifier takes no other), then the dimensions whose size
    is given as the constant 1 (those an integer index dropped) collapsed away. Not a
    rank-reducing subview: which dimensions one drops is read back from the types, and once
    canonicalisation has made kept sizes static 1 too (`x[None, :, None][0, ::2]` of an
    array of a static (1, n, 1) shape) MLIR could not tell and aborted on an assertion.
    The caller casts the result to the fully dynamic strided type (arrays of one rank are
    one type to the compiler)."""
    dyn = ir.ShapedType.get_dynamic_size()
    src = ir.MemRefType(source.type)
    src_strides, _ = src.get_strides_and_offset()
    out_sizes, out_strides, kept = [], [], []
    for d, (size, step, stride) in enumerate(zip(sizes, strides, src_strides)):
        dropped = isinstance(size, int)
        out_sizes.append(1 if dropped else dyn)
        known = 1 if dropped else step if isinstance(step, int) else static_size(step)
        out_strides.append(stride * known if known is not None and stride != dyn else dyn)
        if not dropped:
            kept.append(d)
    layout = ir.StridedLayoutAttr.get(dyn, out_strides)
    result = ir.MemRefType.get(out_sizes, src.element_type, layout)
    steps = [s if isinstance(s, int) or static_size(s) is None else static_size(s)
             for s in strides]
    view = memref.subview(source, offsets, sizes, steps, result_type=result)
    if len(kept) == len(sizes):
        return view
    # Collapse each dropped (unit) dimension into a neighbouring kept one, from a view of
    # fully dynamic strides (whose collapsed strides are then dynamic too: no layout rule
    # to reproduce here; canonicalisation refines them).
    loose = ir.MemRefType.get(out_sizes, src.element_type,
                              ir.StridedLayoutAttr.get(dyn, [dyn] * len(sizes)))
    view = memref.cast(loose, view)
    groups: list[list[int]] = [[] for _ in kept]
    k = 0
    for d in range(len(sizes)):
        if k + 1 < len(kept) and d >= kept[k + 1]:
            k += 1
        if kept:
            groups[k].append(d)
    reassoc = ir.ArrayAttr.get([ir.ArrayAttr.get(
        [ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d) for d in g]) for g in groups])
    collapsed = ir.MemRefType.get([dyn] * len(kept), src.element_type,
                                  ir.StridedLayoutAttr.get(dyn, [dyn] * len(kept)))
    return memref.collapse_shape(collapsed, view, reassoc)


def view(a: Array, items: list, debug: bool, wrap: bool = True) -> Array | ArrayExpr:
    """`a[items]` for basic indexing: per item an integer (a dimension dropped), a
    SliceValue, or None (np.newaxis: a new dimension of size 1); an Ellipsis has been
    expanded and missing trailing items are whole slices. A `memref.subview` (no copy:
    writes through it reach `a`); with a new axis, a lazy expression over that view,
    which reads it (new axes are for broadcasting). `wrap`: whether an integer known only
    at run time counts from the end when negative (subscripts.py says where)."""
    offsets, sizes, strides, kept, new_axes = [], [], [], [], []
    d = 0
    for item in items:
        if item is None:
            new_axes.append(len(kept) + len(new_axes))
            continue
        if d >= a.type.ndim:
            raise UserError(f"too many indices for a {a.type.ndim}-D array")
        n = memref.dim(a.value, idx(d))
        if isinstance(item, SliceValue):
            start, length, by = slice_bounds(item.lower, item.upper, item.step, n)
            offsets.append(start)
            sizes.append(length)
            strides.append(by)
            kept.append(length)
        else:
            i = S.to_index(item)
            if wrap or isinstance(item, Literal):
                i = wrapped(i, n)
            if debug:
                inside = arith.cmpi(arith.CmpIPredicate.ult, i, n)
                adj.check(inside, "IndexError", f"index out of bounds for a "
                                                f"{a.type.ndim}-D array")
            offsets.append(i)
            sizes.append(1)
            strides.append(1)
        d += 1
    for k in range(d, a.type.ndim):
        n = memref.dim(a.value, idx(k))
        offsets.append(0)
        sizes.append(n)
        strides.append(1)
        kept.append(n)
    whole = all(isinstance(item, SliceValue) and item.lower is None and item.upper is None
                and item.step is None for item in items if item is not None)
    if whole:
        # (`u[...]`, `u[:]`, `b[None, :]`: the array itself, under any new axes; a whole
        # view of it would only hide its layout from the loops that read or write it)
        sub = a
    else:
        t = ArrayType(a.type.dtype, len(kept), True)
        sub = Array(memref.cast(mlir_type(t), _subview(a.value, offsets, sizes, strides)), t,
                    a.root, a.fresh)
    if not new_axes:
        return sub
    inner = as_expr(sub)
    shape = list(kept)
    for p in new_axes:
        shape.insert(p, idx(1))

    def at(ids):
        return element_at(inner, [i for k, i in enumerate(ids) if k not in new_axes])
    return nd_expr(sub.type.dtype, shape, at, _shifted(inner.reads))


def same_shape(x: ArrayExpr, y: ArrayExpr) -> list[ir.Value]:
    """x's shape, with a runtime check that y has it too (shapes are dynamic)."""
    if len(x.shape) != len(y.shape):
        raise UserError(f"element-wise operation between a {len(x.shape)}-D and a "
                        f"{len(y.shape)}-D array")
    return _checked_sizes([list(x.shape), list(y.shape)])


def _checked_sizes(sizes: list[list[ir.Value]]) -> list[ir.Value]:
    """Per dimension, the one size all of `sizes` have, checked at run time; the smallest,
    so that a mismatch (reported when the call returns) never reads out of bounds."""
    out = []
    for ds in zip(*sizes):
        size = ds[0]
        for d in ds[1:]:
            if d == size:
                continue
            adj.check(arith.cmpi(arith.CmpIPredicate.eq, size, d), "ValueError",
                      "element-wise operation (which broadcasts along missing leading "
                      "dimensions and along dimensions known to be 1 when compiling: a new "
                      "axis, keepdims=True) on arrays of different shapes")
            size = arith.minui(size, d)
        out.append(size)
    return out


def broadcast(exprs: list[ArrayExpr]) -> tuple[list[ir.Value], list[Callable]]:
    """NumPy's broadcasting of `exprs`: (the result's shape, per expression a map from the
    result's multi-index to its own). Missing leading dimensions broadcast, and so do
    dimensions of size 1: known when compiling (np.newaxis, keepdims=True), or at run time,
    where an index is then 0 if its dimension is 1 (a select LLVM hoists out of the loop).
    Sizes that are neither equal nor 1 raise ValueError when the call returns."""
    rank = max(len(e.shape) for e in exprs)
    shape = []
    for d in range(rank):
        sizes = [e.shape[d - rank + len(e.shape)] for e in exprs if d - rank + len(e.shape) >= 0]
        dynamic = []
        for v in sizes:
            if static_size(v) != 1 and not any(v == w for w in dynamic):
                dynamic.append(v)
        if not dynamic:
            shape.append(idx(1))
            continue
        size = dynamic[0]
        for v in dynamic[1:]:
            one_a = arith.cmpi(arith.CmpIPredicate.eq, size, idx(1))
            one_b = arith.cmpi(arith.CmpIPredicate.eq, v, idx(1))
            ok = arith.ori(arith.ori(one_a, one_b), arith.cmpi(arith.CmpIPredicate.eq, size, v))
            adj.check(ok, "ValueError", "element-wise operation on arrays of different "
                                        "shapes that do not broadcast")
            # (a mismatch is reported when the call returns: iterate over the smaller, so
            # that nothing is read out of bounds before)
            size = arith.select(one_a, v, arith.select(one_b, size, arith.minui(size, v)))
        shape.append(size)

    def mapping(e: ArrayExpr) -> Callable:
        lead = rank - len(e.shape)
        ones = {k for k, v in enumerate(e.shape) if static_size(v) == 1}
        # dimensions whose size is not the result's own value: 1 at run time, perhaps
        maybe = {k for k, v in enumerate(e.shape)
                 if k not in ones and not v == shape[lead + k]}
        units = {k: arith.cmpi(arith.CmpIPredicate.eq, e.shape[k], idx(1)) for k in maybe}

        def at(ids):
            out = []
            for k in range(len(e.shape)):
                i = ids[lead + k]
                if k in maybe and _UNITS and any(units[k] == c for c in _UNITS[-1][1]):
                    out.append(i)       # the version of the loop where no size is 1
                    continue
                if k in maybe and _UNITS:
                    _UNITS[-1][0].append(units[k])
                out.append(idx(0) if k in ones else
                           arith.select(units[k], idx(0), i) if k in maybe else i)
            return out
        return at

    return shape, [mapping(e) for e in exprs]


def _broadcasts(exprs: list[ArrayExpr]) -> bool:
    """Whether the expressions have different ranks or a dimension known to be 1 where
    another's is not."""
    if len({len(e.shape) for e in exprs}) > 1:
        return True
    for ds in zip(*(e.shape for e in exprs)):
        ones = [static_size(v) == 1 for v in ds]
        if any(ones) and not all(ones):
            return True
    return False


def elementwise(fn: Callable[..., Scalar | Literal], operands: list) -> ArrayExpr | Scalar:
    """Lifts a scalar function over operands of which at least one is an array, with NumPy's
    broadcasting (`broadcast`). 0-d arrays broadcast as NumPy's do, like scalars; when every
    array operand is 0-d the result is a scalar, as a NumPy ufunc's is (`np.array(2.0) *
    3.0` is a float64). Arrays of one shape read in C order combine at a flat index (one
    flat loop); otherwise at a multi-index (a loop nest)."""
    consumed(*operands)   # (lazy.py: no longer pending on its own)
    exprs = [as_expr(o) if isinstance(o, (Array, ArrayExpr)) else None for o in operands]
    if all(e is None or not e.shape for e in exprs):
        zero = idx(0)
        with element_scope():
            return S.as_scalar(fn(*[e.element(zero) if e is not None else o
                                    for e, o in zip(exprs, operands)]))
    shaped = [e for e in exprs if e is not None and e.shape]
    reads = (None if any(e.reads is None for e in exprs if e is not None)
             else tuple(r for e in exprs if e is not None for r in e.reads))
    dtype = _result_dtype(fn, exprs, operands)
    if dtype.is_int and dtype.bits < 64:
        # A Python int operand of an i32 expression: converted to i32 (checked to fit, as
        # NumPy 2 requires: S.at_type) once here, where the expression is, not per element.
        operands = [S.at_type(o, dtype) if isinstance(o, Scalar) and o.type.weak and
                    o.type.is_int else o for o in operands]
    zero = idx(0)

    def scalar_of(e, o, get):
        if e is None:
            return o
        return e.element(zero) if not e.shape else get(e)

    if not _broadcasts(shaped) and all(e.linear for e in shaped):
        # Arrays of one rank in C order: one flat loop, their sizes checked equal (one
        # that is 1 only at run time does not broadcast here: ValueError, documented).
        shape = _checked_sizes([list(e.shape) for e in shaped])

        def element(i: ir.Value):
            # One scope per element: a lazy name read twice here (`r * r`) is emitted once.
            with element_scope():
                return S.as_scalar(fn(*[scalar_of(e, o, lambda e: e.element(i))
                                        for e, o in zip(exprs, operands)]))

        def at(ids):
            with element_scope():
                return S.as_scalar(fn(*[scalar_of(e, o, lambda e: element_at(e, ids))
                                        for e, o in zip(exprs, operands)]))

        return created(ArrayExpr(dtype, shape, element, at, True, reads))

    shape, maps = broadcast(shaped)
    mapped = dict(zip(map(id, shaped), maps))

    def at_b(ids):
        with element_scope():
            return S.as_scalar(fn(*[scalar_of(e, o, lambda e: element_at(e, mapped[id(e)](ids)))
                                    for e, o in zip(exprs, operands)]))

    # (an operand read along a broadcast dimension reads one element many times: not
    # pointwise; views of one shape are read pointwise)
    return created(nd_expr(dtype, shape, at_b, reads if not _broadcasts(shaped)
                           else _shifted(reads)))


def _result_dtype(fn, exprs, operands) -> ScalarType:
    """Result dtype of `fn` on one element, found by running it on typed placeholders in a
    scratch block that is then discarded."""
    region_op = scf.ExecuteRegionOp([])
    block = region_op.regions[0].blocks.append()
    with ir.InsertionPoint(block):
        args = []
        for e, o in zip(exprs, operands):
            if e is None:
                args.append(o)
            else:
                args.append(S.as_scalar(Literal(0), e.dtype))
        out = S.as_scalar(fn(*args))
    region_op.operation.erase()
    return out.type


def materialize(v) -> Array:
    if isinstance(v, Array):
        return v
    consumed(v)
    out = alloc(v.dtype, v.shape)
    store_into(out, v, new=True)
    return out


def contiguous(v) -> Array:
    """`v` in C-contiguous memory: itself if it is, else a copy."""
    a = materialize(v)
    return copy(a) if a.type.strided else a


def _disjoint(a: Array, b: Array) -> bool:
    """Whether the compiler knows two arrays share no memory: different known roots, one
    of them an allocation of this function."""
    return (a.root is not None and b.root is not None and a.root != b.root
            and (a.fresh or b.fresh))


def _safe_in_place(out: Array, e: ArrayExpr) -> bool:
    """Whether `e` may be written into `out` element by element: each array it reads is
    read at the element's own index of `out` itself (`x += y`: NumPy's in-place updates),
    a whole array read pointwise (as adjit always took them: arguments that are not
    strided views do not overlap in part), or memory `out` cannot be in."""
    if e.reads is None:
        return False
    for r in e.reads:
        if _disjoint(r.array, out):
            continue
        if r.pointwise and (r.array.value == out.value
                            or not (r.array.type.strided or out.type.strided)):
            continue
        return False
    return True


def store_into(out: Array, e: ArrayExpr | Scalar, new: bool = False) -> None:
    """Writes expression `e` (of `out`'s shape) into `out`, element by element. Where `e`
    reads memory of `out` other than element by element (`u[1:] = u[:-1]`), it is computed
    into a new array first, as NumPy's assignment does. A 0-d `out` takes its one element
    (`e` may then be a scalar: what an expression of 0-d arrays gives). `new`: `out` was
    just allocated for it (nothing in `e` reads it)."""
    consumed(e)
    if out.type.ndim == 0:
        v = e if isinstance(e, Scalar) else e.element(idx(0))
        memref.store(S.cast(v, out.type.dtype).value, out.value, [])
        return
    if not new and not _safe_in_place(out, e):
        e = as_expr(materialize(e))
    # (a new array's own sizes bound the loops: they are 0 where its allocation failed)
    shape = dims(out) if new else e.shape
    if e.linear and not out.type.strided:
        view = flat(out)

        def emit():
            loop = scf.ParallelOp([], [idx(0)], [numel(shape)], [idx(1)], [])
            body = loop.regions[0].blocks.append(ir.IndexType.get())
            with ir.InsertionPoint(body):
                i = body.arguments[0]
                memref.store(S.cast(e.element(i), out.type.dtype).value, view, [i])
                scf.ReduceOp([], 0)
            return loop
        _unit_versions(emit)
        return
    _unit_versions(lambda: for_each(shape, lambda ids: memref.store(
        S.cast(element_at(e, ids), out.type.dtype).value, out.value, ids)))


# Per loop being emitted by _unit_versions: (the broadcast conditions `size == 1` its
# indices select on, those it assumes false).
_UNITS: list[tuple[list, list]] = []


def _unit_versions(emit: Callable[[], ir.Operation]) -> None:
    """The loop `emit()` makes, twice where its indices select on a dimension being 1 at
    run time (broadcast: `select(size == 1, 0, i)`): `if any size is 1 {that loop} else
    {the loop with plain indices}`. Why: a select per index kept LLVM from vectorising the
    common case, where nothing broadcasts (a stencil written with slices, whose views'
    sizes the compiler cannot prove equal, ran one element at a time)."""
    seen: list[ir.Value] = []
    _UNITS.append((seen, []))
    try:
        loop = emit()
    finally:
        _UNITS.pop()
    conds = []
    for c in seen:
        if not any(c == d for d in conds):
            conds.append(c)
    if not conds or any(_within(c, loop) for c in conds):
        return
    with ir.InsertionPoint(loop), loop.location:
        some = conds[0]
        for c in conds[1:]:
            some = arith.ori(some, c)
        branch = scf.IfOp(some, [], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            done = scf.YieldOp([])
        loop.operation.move_before(done)
        with ir.InsertionPoint(branch.else_block):
            _UNITS.append(([], conds))
            try:
                emit()
            finally:
                _UNITS.pop()
            scf.YieldOp([])


def _within(v: ir.Value, op) -> bool:
    """Whether `v` is defined inside `op`."""
    op = op.operation
    owner = v.owner.operation if isinstance(v, ir.OpResult) else v.owner.owner
    while owner is not None:
        owner = owner.operation
        if owner == op:
            return True
        owner = owner.parent
    return False


def for_each(shape: Sequence[ir.Value], body_fn: Callable[[list], None]) -> ir.Operation:
    """body_fn(ids) at every multi-index of `shape`: a loop nest, parallel over the first
    dimension (as the runtime splits any parallel loop), serial scf.for inside. (A
    multi-dimensional scf.parallel whose iterations add into shared adjoints, a stencil's
    or a broadcast operand's, reverses as one serial loop over the linearised space, two
    divisions per element to unravel it; this nest reverses as nested loops.)"""
    loop = scf.ParallelOp([], [idx(0)], [shape[0]], [idx(1)], [])
    body = loop.regions[0].blocks.append(ir.IndexType.get())
    with ir.InsertionPoint(body):
        ids = [body.arguments[0]]

        def nest(d: int) -> None:
            if d == len(shape):
                body_fn(list(ids))
                return
            inner = scf.ForOp(idx(0), shape[d], idx(1), [])
            with ir.InsertionPoint(inner.body):
                ids.append(inner.induction_variable)
                nest(d + 1)
                ids.pop()
                scf.YieldOp([])

        nest(1)
        scf.ReduceOp([], 0)
    return loop


def assign(out: Array, value) -> None:
    """`out[...] = value` (NumPy's assignment into a view): a scalar fills it, an array
    broadcasts to its shape."""
    if not isinstance(value, (Array, ArrayExpr)):
        fill(out, value)
        return
    e = as_expr(value)
    target = dims(out)
    if len(e.shape) > len(target):
        raise UserError(f"cannot assign a {len(e.shape)}-D array into a {len(target)}-D view")
    if not _broadcasts([e, ArrayExpr(e.dtype, target, e.element)]) and e.linear:
        e = ArrayExpr(e.dtype, _checked_sizes([list(e.shape), target]), e.element, e.at,
                      True, e.reads)
    else:
        probe = ArrayExpr(e.dtype, target, e.element)
        shape, maps = broadcast([e, probe])
        shape = _checked_sizes([shape, target])
        inner = e
        e = nd_expr(e.dtype, shape, lambda ids: element_at(inner, maps[0](ids)),
                    _shifted(e.reads))
    store_into(out, e)


# An array whose size is known when compiling and at most this many bytes is allocated
# without the run-time checks below.
SMALL_BYTES = 1 << 30


def alloc(dtype: ScalarType, shape: Sequence[ir.Value]) -> Array:
    """A new C-contiguous array. Where its size is not known small, NumPy's errors come
    from the sizes and the allocator: a negative size is a ValueError, a size in bytes past
    2**62 (or one whose product wrapped around) and an allocation the allocator could not
    make (a null pointer) MemoryErrors, at the user's line. A failed check does not stop
    the code after it (lower_cpu.py), so the array is then one of no elements: its first
    size not known when compiling (every one not known to be >= 0, for a bad size) is made
    0, and whatever loops over its sizes (dims()) does nothing until the call returns and
    raises."""
    t = ArrayType(dtype, len(shape))
    shape = list(shape)
    known = [static_size(s) for s in shape]
    itemsize = max(dtype.bits // 8, 1)
    if all(k is not None and k >= 0 for k in known):
        total = itemsize
        for k in known:
            total *= k
        if total <= SMALL_BYTES:
            m = memref.alloc(mlir_type(t), shape, [])
            return Array(m, t, m, True)
    i1, i64t = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(64)
    false = arith.constant(i1, 0)
    negative, overflow = false, false
    nbytes = arith.constant(i64t, itemsize)
    for s in shape:
        negative = arith.ori(negative, arith.cmpi(arith.CmpIPredicate.slt, s, idx(0)))
        low, high = arith.mului_extended(nbytes, arith.index_cast(i64t, s))
        overflow = arith.ori(overflow, arith.cmpi(arith.CmpIPredicate.ne, high,
                                                  arith.constant(i64t, 0)))
        nbytes = low
    overflow = arith.ori(overflow, arith.cmpi(arith.CmpIPredicate.ugt, nbytes,
                                              arith.constant(i64t, 1 << 62)))
    adj.check(arith.xori(negative, arith.constant(i1, 1)), "ValueError",
              "negative dimensions are not allowed")
    bad = arith.ori(negative, overflow)
    adj.check(arith.xori(bad, arith.constant(i1, 1)), "MemoryError",
              "cannot allocate an array of this shape: its size in bytes is past 2**62")
    # (sizes known and not negative stay constants: a keepdims 1 stays known to be 1)
    shape = [s if c is not None and c >= 0 else arith.select(bad, idx(0), s)
             for s, c in zip(shape, known)]
    k = next((d for d, c in enumerate(known) if c is None or c < 0), 0)
    m = memref.alloc(mlir_type(t), shape, [])
    if not shape:
        return Array(m, t, m, True)
    pointer = memref.extract_aligned_pointer_as_index(m)
    failed = arith.andi(arith.cmpi(arith.CmpIPredicate.eq, pointer, idx(0)),
                        arith.cmpi(arith.CmpIPredicate.ne, nbytes, arith.constant(i64t, 0)))
    failed = arith.andi(failed, arith.xori(bad, arith.constant(i1, 1)))
    adj.check(arith.xori(failed, arith.constant(i1, 1)), "MemoryError",
              "out of memory: the array could not be allocated")
    shape[k] = arith.select(failed, idx(0), shape[k])
    return Array(_contiguous_view(m, t, shape), t, m, True)


def _contiguous_view(m: ir.Value, t: ArrayType, shape: list[ir.Value]) -> ir.Value:
    """`m` seen with sizes `shape` (C order), as reshape's views are made."""
    dyn = ir.ShapedType.get_dynamic_size()
    strides, step = [], idx(1)
    for w in reversed(shape):
        strides.append(step)
        step = arith.muli(step, w)
    strides.reverse()
    return memref.reinterpret_cast(mlir_type(t), m, [], shape, strides[:-1], [0],
                                   [dyn] * len(shape), [dyn] * (len(shape) - 1) + [1])


def fill(a: Array, v) -> None:
    value = S.convert(v, a.type.dtype).value
    if a.type.ndim == 0:
        memref.store(value, a.value, [])
        return
    if a.type.strided:
        for_each(dims(a), lambda ids: memref.store(value, a.value, ids))
        return
    view = flat(a)
    loop = scf.ParallelOp([], [idx(0)], [numel(dims(a))], [idx(1)], [])
    body = loop.regions[0].blocks.append(ir.IndexType.get())
    with ir.InsertionPoint(body):
        memref.store(value, view, [body.arguments[0]])
        scf.ReduceOp([], 0)


def arange(start, stop, step, dtype: ScalarType | None) -> ArrayExpr:
    """NumPy's arange, lazily (`sum(arange(n) * x)` needs no array). As NumPy does: the length
    is computed at the bounds' type (f64 if any is a float, else i64), which is the default
    dtype; element i is first + i*delta in the result dtype, where first = start and
    delta = (start + step) - start are converted to it first (so arange(0.5, 5, 1.5, dtype=int)
    is [0, 2, 4], as NumPy's)."""
    bounds_t = f64 if any(_is_float(v) for v in (start, stop, step)) else i64
    dtype = dtype or bounds_t
    if dtype.is_bool:
        raise UserError("adjit.arange() cannot make a bool array (NumPy allows 2 elements at most)")
    lo, hi, by = (S.convert(v, bounds_t) for v in (start, stop, step))
    first = S.cast(lo, dtype)
    delta = S.binary("-", S.cast(S.binary("+", lo, by), dtype), first)

    def element(i: ir.Value) -> Scalar:
        return S.binary("+", first, S.binary("*", S.cast(Scalar(i, index), dtype), delta))

    return created(ArrayExpr(dtype, [_arange_length(lo, hi, by)], element, reads=()))


def _is_float(v) -> bool:
    return isinstance(v.value, float) if isinstance(v, Literal) else v.type.is_float


def _arange_length(lo: Scalar, hi: Scalar, by: Scalar) -> ir.Value:
    """max(ceil((hi - lo) / by), 0) as an index; a zero step raises ZeroDivisionError and a
    NaN, infinite or huge float length ValueError, as in NumPy."""
    t = lo.type
    zero = S.constant(0, t)
    nonzero = S.compare("!=", by, zero)
    adj.check(nonzero.value, "ZeroDivisionError", "adjit.arange(): the step is zero")
    # The code after a failed check still runs: an integer division by zero would trap, and
    # a float one would raise the wrong error below.
    by = S.select(nonzero, by, Literal(1))
    span = S.binary("-", hi, lo)
    if t.is_float:
        q = S.binary("/", span, by)
        fits = S.compare("<", S.absolute(q), Literal(2.0 ** 62))
        adj.check(fits.value, "ValueError", "adjit.arange(): cannot compute the length "
                                            "(NaN, infinite or too large)")
        q = S.select(fits, q, zero)     # fptosi of NaN or inf would be poison
        n = S.cast(Scalar(math.ceil(q.value), t), i64)
    else:
        n = Scalar(arith.ceildivsi(span.value, by.value), t)
    return S.to_index(S.extremum("maximum", n, Literal(0)))


def copy(a: Array | ArrayExpr) -> Array:
    if isinstance(a, ArrayExpr):
        return materialize(a)
    out = alloc(a.type.dtype, dims(a))
    if a.type.strided:
        store_into(out, as_expr(a), new=True)   # (a loop LLVM vectorises, not memrefCopy's)
    else:
        memref.copy(a.value, out.value)
    return out


# ---- reductions ----------------------------------------------------------------------

def _accumulator_type(t: ScalarType, op: str) -> ScalarType:
    if op not in ("sum", "prod"):
        return t
    if t == f32:
        return f64      # f32 sums accumulate in f64: more accurate than NumPy's pairwise sum
    return t if t.is_float else i64


def _combine(op: str, acc: Scalar, x: Scalar) -> Scalar:
    if op == "sum":
        return S.binary("+", acc, x)
    if op == "prod":
        return S.binary("*", acc, x)
    # np.maximum's / np.minimum's: NaN-propagating, as np.max / np.min; bools by or / and
    return S.extremum("maximum" if op == "max" else "minimum", acc, x)


def _identity(op: str, t: ScalarType) -> Scalar:
    if op == "sum":
        return S.as_scalar(Literal(0), t)
    if op == "prod":
        return S.as_scalar(Literal(1), t)
    if t.is_float:
        return S.as_scalar(Literal(float("-inf") if op == "max" else float("inf")), t)
    if t.is_bool:
        return S.as_scalar(Literal(op != "max"), t)
    big = (1 << (t.bits - 1)) - 1
    return S.as_scalar(Literal(-big - 1 if op == "max" else big), t)


def reduce(op: str, v: Array | ArrayExpr | Scalar) -> Scalar:
    """sum / max / min over all elements: chunks reduced in parallel, then combined. A
    scalar (an expression of 0-d arrays) is its own max and min, and its sum has the sum's
    type (bools and integers sum as i64)."""
    if isinstance(v, Scalar):
        return (v if op not in ("sum", "prod") or v.type.is_float
                else S.cast(v, _accumulator_type(v.type, op)))
    consumed(v)
    e = as_expr(v)
    # Whether the loop nest reads one C-contiguous array, each element once (the lanes and
    # the tail below cover [0, n) without overlap): not an expression, which may read an
    # array twice per element (`x * x`), nor a strided view.
    covers_once = isinstance(v, Array) and not v.type.strided
    if not e.linear:      # (a view, a transpose, a broadcast: computed in C order first)
        e = as_expr(contiguous(e))
        covers_once = True
    acc_t = _accumulator_type(e.dtype, op)
    n = numel(e.shape)
    if op in ("max", "min"):
        ok = arith.cmpi(arith.CmpIPredicate.ugt, n, idx(0))
        adj.check(ok, "ValueError", f"{op}() of an empty array (no identity)")
    chunks = arith.ceildivui(n, idx(CHUNK))
    partial = memref.alloc(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], mlir_type(acc_t)),
                           [chunks], [])
    loop = scf.ParallelOp([], [idx(0)], [chunks], [idx(1)], [])
    if covers_once:
        # Reverse mode may then store the adjoints into a fresh shadow instead of zeroing it
        # and adding them, with the chunks in parallel (passes/autodiff/rules/control_flow_ops.py).
        loop.operation.attributes[adj.COVERS_ONCE_ATTR] = ir.UnitAttr.get()
    body = loop.regions[0].blocks.append(ir.IndexType.get())
    with ir.InsertionPoint(body):
        c = body.arguments[0]
        lo = arith.muli(c, idx(CHUNK))
        hi = arith.minui(arith.addi(lo, idx(CHUNK)), n)
        reassociable = op in ("sum", "prod") and acc_t.is_float
        lanes = SUM_LANES if reassociable else LANES
        per_lane = arith.divui(arith.subi(hi, lo), idx(lanes))
        full = arith.addi(lo, arith.muli(per_lane, idx(lanes)))
        init = [_identity(op, acc_t).value] * lanes
        # Sums: lane k takes the k-th quarter of the chunk (blocked), so each lane's loads
        # are contiguous and LLVM vectorises them as four streams; interleaved lanes (lane k
        # at j + k) made it de-interleave every vector with shuffles (vpermps): W4's sum(x*x)
        # f32 was 1.5-2.4x slower (paired runs), a gradient of sum((a*x+b-y)**2) 1.4x. Max
        # and min keep interleaved lanes, which LLVM packs into vectors as they are.
        blocked = reassociable
        if blocked:
            chunk = scf.ForOp(lo, arith.addi(lo, per_lane), idx(1), init)
        else:
            chunk = scf.ForOp(lo, full, idx(lanes), init)
        with ir.InsertionPoint(chunk.body):
            j = chunk.induction_variable
            accs = [_combine(op, Scalar(a, acc_t),
                             S.cast(e.element(arith.addi(j, arith.muli(per_lane, idx(k))
                                                         if blocked else idx(k))),
                                    acc_t)).value
                    for k, a in enumerate(chunk.inner_iter_args)]
            if reassociable:
                for a in accs:
                    a.owner.attributes["fastmath"] = ir.Attribute.parse("#arith.fastmath<reassoc>")
            scf.YieldOp(accs)
        total = Scalar(chunk.results[0], acc_t)
        for k in range(1, lanes):
            total = _combine(op, total, Scalar(chunk.results[k], acc_t))
        tail = scf.ForOp(full, hi, idx(1), [total.value])
        with ir.InsertionPoint(tail.body):
            x = S.cast(e.element(tail.induction_variable), acc_t)
            scf.YieldOp([_combine(op, Scalar(tail.inner_iter_args[0], acc_t), x).value])
        memref.store(tail.results[0], partial, [c])
        scf.ReduceOp([], 0)
    result = (_pairwise_sum(partial, chunks, acc_t) if op == "sum"
              else _in_order(op, partial, chunks, acc_t))
    return S.cast(result, e.dtype) if e.dtype.is_float else result


def reduce_axis(op: str, v: Array | ArrayExpr, axis: int | None, keepdims: bool) -> Array:
    """NumPy's `np.sum/max/min(v, axis=axis, keepdims=keepdims)` of an array with an axis
    (or with keepdims and no axis): one accumulation along the axis per element of the
    others, in parallel over those (f32 sums accumulate in f64, as `reduce`'s)."""
    a = materialize(v)
    rank = a.type.ndim
    dtype = a.type.dtype
    acc_t = _accumulator_type(dtype, op)
    out_t = dtype if dtype.is_float or op not in ("sum", "prod") else acc_t
    if axis is None:       # keepdims: the whole reduction, shaped (1, ..., 1)
        out = alloc(out_t, [idx(1)] * rank)
        total = S.cast(reduce(op, a), out_t)
        memref.store(total.value, out.value, [idx(0)] * rank)
        return out
    if not -rank <= axis < rank:
        raise UserError(f"axis {axis} is out of bounds for an array of {rank} dimensions")
    axis %= rank
    shape = dims(a)
    others = [s for k, s in enumerate(shape) if k != axis]
    out = alloc(out_t, others[:axis] + ([idx(1)] if keepdims else []) + others[axis:])
    outer = numel(others)
    if op in ("max", "min"):
        ok = arith.ori(arith.cmpi(arith.CmpIPredicate.ugt, shape[axis], idx(0)),
                       arith.cmpi(arith.CmpIPredicate.eq, outer, idx(0)))
        adj.check(ok, "ValueError", f"{op}() along an axis of length 0 (no identity)")
    loop = scf.ParallelOp([], [idx(0)], [outer], [idx(1)], [])
    body = loop.regions[0].blocks.append(ir.IndexType.get())
    with ir.InsertionPoint(body):
        at = _unravel(body.arguments[0], others)
        run = scf.ForOp(idx(0), shape[axis], idx(1), [_identity(op, acc_t).value])
        with ir.InsertionPoint(run.body):
            where = at[:axis] + [run.induction_variable] + at[axis:]
            x = S.cast(Scalar(memref.load(a.value, where), dtype), acc_t)
            scf.YieldOp([_combine(op, Scalar(run.inner_iter_args[0], acc_t), x).value])
        put = at[:axis] + ([idx(0)] if keepdims else []) + at[axis:]
        memref.store(S.cast(Scalar(run.results[0], acc_t), out_t).value, out.value, put)
        scf.ReduceOp([], 0)
    return out


def _unravel(linear: ir.Value, counts: list[ir.Value]) -> list[ir.Value]:
    """Row-major multi-index of `linear` in a space of extents `counts`."""
    out = []
    for c in reversed(counts[1:]):
        out.append(arith.remui(linear, c))
        linear = arith.divui(linear, c)
    return ([linear] if counts else []) + out[::-1]


def _in_order(op: str, partial: ir.Value, count: ir.Value, acc_t: ScalarType) -> Scalar:
    final = scf.ForOp(idx(0), count, idx(1), [_identity(op, acc_t).value])
    with ir.InsertionPoint(final.body):
        x = Scalar(memref.load(partial, [final.induction_variable]), acc_t)
        scf.YieldOp([_combine(op, Scalar(final.inner_iter_args[0], acc_t), x).value])
    return Scalar(final.results[0], acc_t)


def _pairwise_sum(partial: ir.Value, count: ir.Value, acc_t: ScalarType) -> Scalar:
    """The sum of partial[0:count], added pairwise (the launch rule's sums of per-item
    adjoints use the same code)."""
    return Scalar(pairwise_sum(partial, count, mlir_type(acc_t)), acc_t)
