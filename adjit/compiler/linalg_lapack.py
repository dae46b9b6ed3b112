"""np.linalg's solve, inv, det and cholesky in compiled code: LAPACK calls and their
derivatives.

The factorisations are those of the OpenBLAS that NumPy's wheel bundles (runtime/lapack.py
finds its getrf, getrs and potrf, for f32 and f64), so a solve is NumPy's solve: the same
library, the same pivoting, the same rounding. LAPACK is column-major and overwrites its
operands, so each call works on copies laid out for it (an O(n^2) copy beside an O(n^3)
factorisation) and writes the result into an array of the caller's.

Each operation is an @adjit.func (`_functions()`: `solve_into(a, b, x)`, `det_of(a)`,
`cholesky_into(a, l)`) whose body calls a primitive of this module that emits the LAPACK call,
and whose custom rules (adjit.rules) are its derivatives, as matmul_into's are
(compiler/matmul.py). The rules' bodies call primitives here that emit, at compile time, the
products of the standard rules out of calls of these functions again and of matmul_into,
never of LAPACK directly: so a derivative of a derivative (grad of grad, hessian, jvp of grad)
meets only calls with rules and element-wise code, which it differentiates the same way.
- solve, x = A^-1 b: forward dx = A^-1 (db - dA x); reverse b_bar += A^-T x_bar,
  A_bar -= (A^-T x_bar) x^T, then x_bar = 0 (x's old value reaches nothing).
- inv is solve(A, I) (linalg_calls.py), so d(A^-1) = -A^-1 dA A^-1 comes from solve's rules.
- det: forward d det = det * tr(A^-1 dA); reverse A_bar += d_bar * det * A^-T.
- cholesky, A = L L^T (JAX's convention: the tangent dA is symmetrised, A's two triangles are
  one variable; the primal reads the lower one, as NumPy's): forward
  dL = L Phi(L^-1 sym(dA) L^-T) with Phi the lower triangle and half the diagonal (Murray
  2016); reverse its transpose, A_bar += sym(L^-T Phi(L^T L_bar) L^-1).
What a rule needs of an argument the caller overwrites afterwards (config.overwritten) is
copied onto the tape.

Errors: a singular matrix (getrf's info > 0) in solve or inv and a matrix that is not positive
definite in cholesky raise numpy.linalg.LinAlgError from the call, with NumPy's message, as
NumPy does (an adj.check; the code goes on with the NaNs LAPACK leaves and the call raises when
it returns). det of a singular matrix is 0.
"""
from __future__ import annotations

import functools

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from ..core.errors import UserError
from ..core.types import f32, i64
from ..dialects import adj
from ..lang import rules
from ..lang.functions import device_function
from ..runtime import lapack
from . import arrays as A
from . import callables
from . import matmul as MM
from . import scalar_ops as S
from .values import Array, Literal, PyObj, Scalar

SINGULAR = "Singular matrix"                          # NumPy's messages
NOT_PD = "Matrix is not positive definite"


# -- LAPACK calls ---------------------------------------------------------------------------
def _int_type() -> ir.Type:
    return ir.IntegerType.get_signless(lapack.INT_BITS)


def _i64() -> ir.Type:
    return ir.IntegerType.get_signless(64)


def _pointer(m: ir.Value) -> ir.Value:
    """The address of memref `m`'s first element, an i64 (every LAPACK argument is a
    pointer; on the ABIs adjit runs on, a pointer is passed as an i64 is). Only memory this
    module allocated is passed, whose offset is 0."""
    return arith.index_cast(_i64(), memref.extract_aligned_pointer_as_index(m))


def _cell(value: ir.Value | int, t: ir.Type | None = None) -> ir.Value:
    """A one-element memref holding `value` (an integer of LAPACK's width, or of type `t`)."""
    t = t or _int_type()
    m = memref.alloca(ir.MemRefType.get([1], t), [], [])
    if isinstance(value, int):
        value = arith.constant(t, value)
    elif value.type != t:
        value = arith.index_cast(t, value)
    memref.store(value, m, [A.idx(0)])
    return m


def _call(gen, routine: str, operands: list[ir.Value]) -> None:
    """A call of LAPACK's `routine` ("dgetrf") on memrefs `operands` (their addresses),
    declared in the module once."""
    name = lapack.symbol(routine)
    module = gen.unit.module
    args = [_pointer(m) for m in operands]
    for _ in range(_CHARACTERS.get(routine[1:], 0)):
        args.append(arith.constant(_i64(), 1))      # a CHARACTER argument's hidden length
    declared = any("sym_name" in op.attributes
                   and ir.StringAttr(op.attributes["sym_name"]).value == name
                   for op in module.body.operations)
    if not declared:
        with ir.InsertionPoint.at_block_begin(module.body), ir.Location.unknown():
            func.FuncOp(name, ir.FunctionType.get([_i64()] * len(args), []),
                        visibility="private")
    func.CallOp([], ir.FlatSymbolRefAttr.get(name), args)


# The CHARACTER arguments of each routine (each has a hidden length after the others).
_CHARACTERS = {"getrs": 1, "potrf": 1, "gesvd": 2}


def _info(cell: ir.Value) -> ir.Value:
    return memref.load(cell, [A.idx(0)])


def _report(cell: ir.Value, info: Array) -> None:
    """LAPACK's INFO into the caller's `info` (an i64 array of one element), which the
    caller checks where the user's call is (a check here would name this file's line)."""
    value = _info(cell)
    if lapack.INT_BITS != 64:
        value = arith.extsi(_i64(), value)
    memref.store(value, info.value, [A.idx(0)])


def check(info: Array, message: str) -> None:
    """LinAlgError(`message`) from the call where `info` (what an operation reported) is
    not 0."""
    ok = arith.cmpi(arith.CmpIPredicate.eq, memref.load(info.value, [A.idx(0)]),
                    arith.constant(_i64(), 0))
    adj.check(ok, "LinAlgError", message)


def new_info() -> Array:
    return A.alloc(i64, [A.idx(1)])


def _prefix(dtype) -> str:
    return "s" if dtype == f32 else "d"


def _at_least_one(n: ir.Value) -> ir.Value:
    return arith.maxui(n, A.idx(1))


def _getrf(gen, work: Array, n: ir.Value) -> tuple[ir.Value, ir.Value]:
    """LU with partial pivoting of the n x n column-major `work`, in place: (ipiv, info)."""
    ipiv = memref.alloc(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], _int_type()),
                        [_at_least_one(n)], [])
    info = _cell(0)
    size, lda = _cell(n), _cell(_at_least_one(n))
    _call(gen, _prefix(work.type.dtype) + "getrf", [size, size, work.value, lda, ipiv, info])
    return ipiv, info


def _lu_solve(gen, args: list, kwargs: dict):
    """`lu_solve(a, b, x, info)` in solve_into's body: x = A^-1 b of 2-D arrays (n x n,
    n x k); getrf's INFO into info[0] (> 0: A is singular)."""
    a, b, x, info_out = args
    dtype = x.type.dtype
    n, k = A.dims(b)
    # Column-major copies: wa holds A^T in C order, which is A in Fortran's.
    wa = A.alloc(dtype, [n, n])
    A.store_into(wa, A.transpose(a), new=True)
    wb = A.alloc(dtype, [k, n])
    A.store_into(wb, A.transpose(b), new=True)
    ipiv, info = _getrf(gen, wa, n)
    _report(info, info_out)
    trans = _cell(ord("N"), ir.IntegerType.get_signless(8))
    size, rhs, lda = _cell(n), _cell(k), _cell(_at_least_one(n))
    _call(gen, _prefix(dtype) + "getrs",
          [trans, size, rhs, wa.value, lda, ipiv, wb.value, lda, _cell(0)])
    A.store_into(x, A.transpose(wb))


def _lu_det(gen, args: list, kwargs: dict) -> Scalar:
    """`lu_det(a)` in det_of's body: the product of U's diagonal, negated for each row
    exchange (det A^T = det A, so A is copied in C order)."""
    a, = args
    dtype = a.type.dtype
    n = A.dims(a)[0]
    work = A.alloc(dtype, [n, n])
    A.store_into(work, A.as_expr(a), new=True)
    ipiv, _ = _getrf(gen, work, n)
    one = S.as_scalar(Literal(1.0), dtype)
    run = scf.ForOp(A.idx(0), n, A.idx(1), [one.value])
    with ir.InsertionPoint(run.body):
        i = run.induction_variable
        acc = Scalar(run.inner_iter_args[0], dtype)
        u = Scalar(memref.load(work.value, [i, i]), dtype)
        pivot = memref.load(ipiv, [i])
        own = arith.index_cast(_int_type(), arith.addi(i, A.idx(1)))     # 1-based
        swapped = arith.cmpi(arith.CmpIPredicate.ne, pivot, own)
        term = Scalar(arith.select(swapped, S.negate(u).value, u.value), dtype)
        scf.YieldOp([S.binary("*", acc, term).value])
    return Scalar(run.results[0], dtype)


def _potrf(gen, args: list, kwargs: dict):
    """`potrf(a, l, info)` in cholesky_into's body: l = the lower Cholesky factor of a's
    lower triangle; potrf's INFO into info[0] (> 0: not positive definite). A C-order copy
    of A is Fortran's A^T; potrf 'U' factors its upper triangle, A's lower one, as U^T U, and
    that U read in C order is L."""
    a, l, info_out = args
    dtype = l.type.dtype
    n = A.dims(a)[0]
    work = A.alloc(dtype, [n, n])
    A.store_into(work, A.as_expr(a), new=True)
    info = _cell(0)
    uplo = _cell(ord("U"), ir.IntegerType.get_signless(8))
    _call(gen, _prefix(dtype) + "potrf", [uplo, _cell(n), work.value, _cell(_at_least_one(n)),
                                          info])
    _report(info, info_out)
    A.store_into(l, _lower(work, halve=False))


def _lower(m: Array, halve: bool, transposed: bool = False):
    """The lower triangle of `m` (of m^T where `transposed`), the rest 0, lazily; its
    diagonal halved where `halve` (Phi of the Cholesky rules)."""
    dtype = m.type.dtype
    zero = S.as_scalar(Literal(0.0), dtype)

    def at(ids):
        i, j = ids
        v = Scalar(memref.load(m.value, [j, i] if transposed else [i, j]), dtype)
        if halve:
            diag = arith.cmpi(arith.CmpIPredicate.eq, i, j)
            v = Scalar(arith.select(diag, S.binary("*", v, Literal(0.5)).value, v.value), dtype)
        below = arith.cmpi(arith.CmpIPredicate.ule, j, i)
        return Scalar(arith.select(below, v.value, zero.value), dtype)
    return A.nd_expr(dtype, A.dims(m), at, None)


# -- helpers of the rules' primitives ---------------------------------------------------------
def _mm(gen, flags: int, a: Array, b: Array, c: Array) -> None:
    """c (+)= op(a) @ op(b) of 2-D arrays, a call of matmul_into (differentiable)."""
    MM._product(gen, flags, MM._view3(a, "left"), MM._view3(b, "right"),
                MM._view3(c, "out", (False, True, True)))


def _new_like(a: Array) -> Array:
    return A.alloc(a.type.dtype, A.dims(a))


def _copied(a: Array) -> Array:
    out = _new_like(a)
    A.store_into(out, A.as_expr(a), new=True)
    return out


def _stored(e, like: Array) -> Array:
    out = _new_like(like)
    A.store_into(out, e, new=True)
    return out


def _binary(op: str, x, y):
    return A.elementwise(lambda p, q: S.binary(op, p, q), [x, y])


def _add_into(target: Array, v) -> None:
    A.store_into(target, _binary("+", target, v))


def _eye(dtype, n: ir.Value) -> Array:
    out = A.alloc(dtype, [n, n])
    one, zero = (S.as_scalar(Literal(v), dtype) for v in (1.0, 0.0))
    A.store_into(out, A.nd_expr(dtype, [n, n], lambda ids: Scalar(arith.select(
        arith.cmpi(arith.CmpIPredicate.eq, ids[0], ids[1]), one.value, zero.value), dtype),
        None), new=True)
    return out


def _trace(m: Array) -> Scalar:
    dtype = m.type.dtype
    run = scf.ForOp(A.idx(0), A.dims(m)[0], A.idx(1),
                    [S.as_scalar(Literal(0.0), dtype).value])
    with ir.InsertionPoint(run.body):
        i = run.induction_variable
        acc = Scalar(run.inner_iter_args[0], dtype)
        scf.YieldOp([S.binary("+", acc, Scalar(memref.load(m.value, [i, i]), dtype)).value])
    return Scalar(run.results[0], dtype)


def _solve(gen, a: Array, b: Array, x: Array) -> None:
    """x = A^-1 b inside a rule. A's singularity was reported by the primal call (every
    matrix solved with here is A, A^T or the Cholesky factor L): a solve here only adds
    the NaNs of its result where one was reported."""
    callables.call(gen, _functions()[0], [a, b, x, new_info()], {})


def _det(gen, a: Array) -> Scalar:
    return callables.call(gen, _functions()[1], [a], {})


def _lanes(d, width: int) -> list:
    if d is None:
        return [None] * width
    return list(d) if isinstance(d, tuple) else [d]


def _objs(args: list) -> list:
    return [p.obj if isinstance(p, PyObj) else p for p in args]


def _tape(kept: list):
    kept = [t for t in kept if t is not None]
    if not kept:
        return PyObj(None)
    return kept[0] if len(kept) == 1 else tuple(kept)


def _untape(tape) -> list:
    return list(tape) if isinstance(tape, tuple) else ([] if tape is None else [tape])


# -- solve's rules ----------------------------------------------------------------------------
def _solve_tangents(gen, args: list, kwargs: dict):
    """dx = A^-1 (db - dA x), per lane (x holds the primal already)."""
    config, a, b, x = _objs(args)[:4]
    if x.dval is None:
        return None
    lanes = _lanes(x.dval, config.width)
    for dx, da, db in zip(lanes, _lanes(a.dval, len(lanes)), _lanes(b.dval, len(lanes))):
        if da is None and db is None:
            A.fill(dx, Literal(0.0))
            continue
        rhs = db
        if da is not None:
            t = _new_like(x.val)
            _mm(gen, 0, da, x.val, t)
            rhs = _stored(_binary("-", db, t) if db is not None
                          else A.elementwise(lambda q: S.negate(q), [t]), x.val)
        _solve(gen, a.val, rhs, dx)
    return None


def _solve_taped(gen, args: list, kwargs: dict):
    """What the reverse rule reads that the caller overwrites after the call: A, and x
    (for A's adjoint)."""
    config, a, x = _objs(args)
    over = config.overwritten
    return _tape([_copied(a.val) if over and over[0] else None,
                  _copied(x.val) if over and over[2] and a.dval is not None else None])


def _solve_adjoints(gen, args: list, kwargs: dict):
    """g = A^-T x_bar; b_bar += g; A_bar += -g x^T; x_bar = 0."""
    config, tape, a, b, x = _objs(args)[:5]
    if x.dval is None:
        return None
    over = config.overwritten
    taped = _untape(tape)
    va = taped.pop(0) if over and over[0] else a.val
    vx = taped.pop(0) if over and over[2] and a.dval is not None else x.val
    if a.dval is not None or b.dval is not None:
        g = _new_like(x.dval)
        _solve(gen, _stored(A.transpose(va), va), x.dval, g)
        if b.dval is not None:
            _add_into(b.dval, g)
        if a.dval is not None:
            minus_g = _stored(A.elementwise(lambda q: S.negate(q), [g]), g)
            _mm(gen, MM.ACCUMULATE | MM.TRANS_B, minus_g, vx, a.dval)
    A.fill(x.dval, Literal(0.0))
    return None


# -- det's rules ------------------------------------------------------------------------------
def _cofactors(gen, a: Array, d: Scalar) -> Array:
    """A's cofactor matrix adj(A)^T: det * A^-T (solves: differentiable, for the derivatives
    of det's derivatives), and where det is 0 the singular values' (singular_cofactors)."""
    n = A.dims(a)[0]
    z = _new_like(a)
    _solve(gen, _stored(A.transpose(a), a), _eye(a.type.dtype, n), z)
    c = _stored(A.elementwise(lambda q: S.binary("*", d, q), [z]), a)
    callables.call(gen, _functions()[3], [a, c], {})
    return c


def _det_tangent(gen, args: list, kwargs: dict):
    """d det = sum(cofactors * dA) (det * tr(A^-1 dA) where A is regular), per lane."""
    config, a, d = _objs(args)
    dtype = a.val.type.dtype
    lanes = _lanes(a.dval, config.width)
    c = _cofactors(gen, a.val, d) if any(da is not None for da in lanes) else None
    out = []
    for da in lanes:
        if da is None:
            out.append(S.as_scalar(Literal(0.0), dtype))
            continue
        out.append(A.reduce("sum", _binary("*", c, da)))
    return out[0] if config.width == 1 else tuple(out)


def _det_taped(gen, args: list, kwargs: dict):
    config, a, d = _objs(args)
    over = config.overwritten
    return _tape([d, _copied(a.val) if over and over[0] and a.dval is not None else None])


def _det_adjoints(gen, args: list, kwargs: dict):
    """A_bar += d_bar * det * A^-T."""
    config, dret, tape, a = _objs(args)
    if a.dval is None or dret is None:
        return None
    taped = _untape(tape)
    d = taped.pop(0)
    va = taped.pop(0) if taped else a.val
    c = _cofactors(gen, va, d)
    _add_into(a.dval, A.elementwise(lambda q: S.binary("*", dret, q), [c]))
    return None


def _svd_cofactors(gen, a: Array, c: Array) -> None:
    """`svd_cofactors(a, c)` in singular_cofactors' body: where det A is 0 (exactly: a zero
    pivot), c = the cofactor matrix from A's SVD, adj(A)^T = det(U) det(V) U adj(S) V^T with
    adj(S)_i the product of the other singular values (no division: right at any rank). The
    C-order copy of A is Fortran's A^T = U' S V'^T, whose factors read in C order are
    Ur = U'^T and Vr = V', and adj(A)^T = adj(A^T) = det(U') det(V') Vr adj(S) Ur."""
    dtype = a.type.dtype
    n = A.dims(a)[0]
    zero = S.as_scalar(Literal(0.0), dtype)
    d = _lu_det(gen, [a], {})
    branch = scf.IfOp(arith.cmpf(arith.CmpFPredicate.OEQ, d.value, zero.value))
    with ir.InsertionPoint(branch.then_block):
        work = A.alloc(dtype, [n, n])
        A.store_into(work, A.as_expr(a), new=True)
        sv = A.alloc(dtype, [n])
        ur, vr = A.alloc(dtype, [n, n]), A.alloc(dtype, [n, n])
        job = _cell(ord("A"), ir.IntegerType.get_signless(8))
        size, lda = _cell(n), _cell(_at_least_one(n))
        query = A.alloc(dtype, [A.idx(1)])
        info = _cell(0)
        routine = _prefix(dtype) + "gesvd"
        _call(gen, routine, [job, job, size, size, work.value, lda, sv.value, ur.value, lda,
                             vr.value, lda, query.value, _cell(-1), info])
        count = arith.fptosi(_int_type(), memref.load(query.value, [A.idx(0)]))
        lwork = A.alloc(dtype, [arith.index_cast(ir.IndexType.get(), count)])
        _call(gen, routine, [job, job, size, size, work.value, lda, sv.value, ur.value, lda,
                             vr.value, lda, lwork.value, _cell(count), info])
        sign = S.binary("*", _lu_det(gen, [ur], {}), _lu_det(gen, [vr], {}))
        # (det of an orthogonal matrix: +-1, rounded to its sign)
        sign = Scalar(arith.select(arith.cmpf(arith.CmpFPredicate.OLT, sign.value, zero.value),
                                   S.as_scalar(Literal(-1.0), dtype).value,
                                   S.as_scalar(Literal(1.0), dtype).value), dtype)

        def others(k: ir.Value) -> Scalar:
            """The product of the singular values but the k-th."""
            run = scf.ForOp(A.idx(0), n, A.idx(1), [S.as_scalar(Literal(1.0), dtype).value])
            with ir.InsertionPoint(run.body):
                j = run.induction_variable
                acc = Scalar(run.inner_iter_args[0], dtype)
                v = Scalar(memref.load(sv.value, [j]), dtype)
                same = arith.cmpi(arith.CmpIPredicate.eq, j, k)
                scf.YieldOp([arith.select(same, acc.value, S.binary("*", acc, v).value)])
            return Scalar(run.results[0], dtype)
        weights = A.alloc(dtype, [n])
        A.for_each([n], lambda ids: memref.store(S.binary("*", sign, others(ids[0])).value,
                                                 weights.value, ids))
        scaled = _stored(A.nd_expr(dtype, [n, n], lambda ids: S.binary(
            "*", Scalar(memref.load(vr.value, ids), dtype),
            Scalar(memref.load(weights.value, [ids[1]]), dtype)), None), vr)
        _mm(gen, 0, scaled, ur, c)
        scf.YieldOp([])


# -- cholesky's rules -------------------------------------------------------------------------
def _symmetrised(m: Array) -> Array:
    """(m + m^T) / 2."""
    return _stored(A.elementwise(lambda p, q: S.binary("*", S.binary("+", p, q), Literal(0.5)),
                                 [m, A.transpose(m)]), m)


def _cholesky_tangents(gen, args: list, kwargs: dict):
    """dL = L Phi(L^-1 sym(dA) L^-T), per lane (l holds the primal already)."""
    config, a, l = _objs(args)[:3]
    if l.dval is None:
        return None
    lv = l.val
    for dl, da in zip(_lanes(l.dval, config.width), _lanes(a.dval, config.width)):
        if da is None:
            A.fill(dl, Literal(0.0))
            continue
        y = _new_like(lv)
        _solve(gen, lv, _symmetrised(da), y)                 # L^-1 S
        z = _new_like(lv)
        _solve(gen, lv, _stored(A.transpose(y), lv), z)      # (L^-1 S L^-T)^T
        _mm(gen, 0, lv, _stored(_lower(z, halve=True, transposed=True), lv), dl)
    return None


def _cholesky_taped(gen, args: list, kwargs: dict):
    config, a, l = _objs(args)
    over = config.overwritten
    return _tape([_copied(l.val) if over and over[1] and a.dval is not None else None])


def _cholesky_adjoints(gen, args: list, kwargs: dict):
    """A_bar += sym(L^-T Phi(L^T L_bar) L^-1); L_bar = 0."""
    config, tape, a, l = _objs(args)[:4]
    if l.dval is None:
        return None
    taped = _untape(tape)
    if a.dval is not None:
        lv = taped.pop(0) if taped else l.val
        p = _new_like(lv)
        _mm(gen, MM.TRANS_A, lv, l.dval, p)                   # L^T L_bar
        lt = _stored(A.transpose(lv), lv)
        g = _new_like(lv)
        _solve(gen, lt, _stored(_lower(p, halve=True), lv), g)   # L^-T Phi
        h = _new_like(lv)
        _solve(gen, lt, _stored(A.transpose(g), lv), h)      # (L^-T Phi L^-1)^T
        _add_into(a.dval, _symmetrised(h))
    A.fill(l.dval, Literal(0.0))
    return None


def _primitive(name: str, compile_call) -> callables.Primitive:
    """A function the operations' bodies and rules call in compiled code."""
    return callables.Primitive("linalg", name, compile_call)


lu_solve = _primitive("lu_solve", _lu_solve)
lu_det = _primitive("lu_det", _lu_det)
potrf = _primitive("potrf", _potrf)
solve_tangents = _primitive("solve_tangents", _solve_tangents)
solve_taped = _primitive("solve_taped", _solve_taped)
solve_adjoints = _primitive("solve_adjoints", _solve_adjoints)
det_tangent = _primitive("det_tangent", _det_tangent)
svd_cofactors = _primitive("svd_cofactors", lambda gen, args, kwargs: _svd_cofactors(gen, *args))
det_taped = _primitive("det_taped", _det_taped)
det_adjoints = _primitive("det_adjoints", _det_adjoints)
cholesky_tangents = _primitive("cholesky_tangents", _cholesky_tangents)
cholesky_taped = _primitive("cholesky_taped", _cholesky_taped)
cholesky_adjoints = _primitive("cholesky_adjoints", _cholesky_adjoints)


@functools.cache
def _functions():
    """(solve_into, det_of, cholesky_into) and their rules, made on first use (parsing their
    source at import would cost every unit that does no linear algebra)."""

    def solve_into(a, b, x, info):
        lu_solve(a, b, x, info)

    def det_of(a):
        return lu_det(a)

    def cholesky_into(a, l, info):
        potrf(a, l, info)

    def singular_cofactors(a, c):
        svd_cofactors(a, c)

    solve_into = device_function(solve_into)
    det_of = device_function(det_of)
    cholesky_into = device_function(cholesky_into)
    singular_cofactors = device_function(singular_cofactors)

    @rules.forward(solve_into)
    def _solve_forward(config, a, b, x, info):
        solve_into(a.val, b.val, x.val, info.val)
        solve_tangents(config, a, b, x)

    @rules.augmented_primal(solve_into)
    def _solve_augmented(config, a, b, x, info):
        solve_into(a.val, b.val, x.val, info.val)
        return rules.AugmentedReturn(None, None, solve_taped(config, a, x))

    @rules.reverse(solve_into)
    def _solve_reverse(config, dret, tape, a, b, x, info):
        solve_adjoints(config, tape, a, b, x)
        return None, None, None, None

    @rules.forward(det_of)
    def _det_forward(config, a):
        d = det_of(a.val)
        return d, det_tangent(config, a, d)

    @rules.augmented_primal(det_of)
    def _det_augmented(config, a):
        d = det_of(a.val)
        return rules.AugmentedReturn(d, None, det_taped(config, a, d))

    @rules.reverse(det_of)
    def _det_reverse(config, dret, tape, a):
        det_adjoints(config, dret, tape, a)
        return (None,)

    @rules.forward(cholesky_into)
    def _cholesky_forward(config, a, l, info):
        cholesky_into(a.val, l.val, info.val)
        cholesky_tangents(config, a, l)

    @rules.augmented_primal(cholesky_into)
    def _cholesky_augmented(config, a, l, info):
        cholesky_into(a.val, l.val, info.val)
        return rules.AugmentedReturn(None, None, cholesky_taped(config, a, l))

    @rules.reverse(cholesky_into)
    def _cholesky_reverse(config, dret, tape, a, l, info):
        cholesky_adjoints(config, tape, a, l)
        return None, None, None

    # Where det A is 0, c (det * A^-T, NaN) becomes the cofactors from A's singular values;
    # elsewhere c is left as it is. Its derivative is the identity on c: the derivative of
    # det's derivative at a singular matrix is not the cofactors' (NaN), at any other the
    # solves' (exact).
    @rules.forward(singular_cofactors)
    def _cofactors_forward(config, a, c):
        singular_cofactors(a.val, c.val)

    @rules.augmented_primal(singular_cofactors)
    def _cofactors_augmented(config, a, c):
        singular_cofactors(a.val, c.val)
        return rules.AugmentedReturn(None, None, None)

    @rules.reverse(singular_cofactors)
    def _cofactors_reverse(config, dret, tape, a, c):
        return None, None

    return solve_into, det_of, cholesky_into, singular_cofactors


def require_lapack(name: str) -> None:
    if not lapack.available():
        raise UserError(f"{name} needs the LAPACK of the OpenBLAS that NumPy's wheel bundles, "
                        "and none was found in this NumPy installation")


def solve(gen, a: Array, b: Array, x: Array) -> None:
    """x = A^-1 b of 2-D arrays (n x n; n x k), a call of solve_into; LinAlgError at the
    user's line (the code being compiled) where A is singular."""
    info = new_info()
    callables.call(gen, _functions()[0], [a, b, x, info], {})
    check(info, SINGULAR)


def det(gen, a: Array) -> Scalar:
    """det A of a square 2-D array, a call of det_of."""
    return _det(gen, a)


def cholesky(gen, a: Array, l: Array) -> None:
    """l = the lower Cholesky factor of a (2-D), a call of cholesky_into; LinAlgError at the
    user's line where A is not positive definite."""
    info = new_info()
    callables.call(gen, _functions()[2], [a, l, info], {})
    check(info, NOT_PD)
