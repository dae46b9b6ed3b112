"""NumPy's linear algebra in @jit code: np.linalg.solve, inv, det, cholesky and norm, np.outer
and np.einsum.

solve, inv, det and cholesky call LAPACK (linalg_lapack.py: the OpenBLAS NumPy bundles, with
custom rules as derivatives); norm, outer and einsum are built from the array operations of
arrays.py (their derivatives come from those ops' rules), einsum's matrix products from
matmul.py. Values and dtypes are NumPy's: integer arrays become f64, f32 stays f32. A stack
of matrices (..., M, M) is a loop over its matrices (`_each_matrix`), each a call on views.

They allocate their results, so only @adjit.jit functions on the CPU compile them: a kernel
or device function gets a UserError (small fixed-size matrices in kernels have the matrix
types' adjit.inverse and adjit.determinant), and a device="cuda" host program refuses LAPACK
calls (unit.host_program asks `uses_lapack`).
"""
from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith, memref, scf

from ..core.errors import UserError
from ..core.types import ArrayType, f32, f64, promote
from ..dialects import adj
from ..dialects.mlir_types import mlir_type
from ..runtime import lapack
from . import arrays as A
from . import linalg_lapack as L
from . import matmul as MM
from . import scalar_ops as S
from .builtin_calls import register_builtin
from .values import Array, ArrayExpr, Literal, PyObj, Scalar


def _host(gen, name: str) -> None:
    """Refuses `name` outside @jit code on the CPU."""
    if gen.kind == "kernel":
        raise UserError(f"{name} is not compiled in kernels (it allocates its result and calls "
                        "LAPACK on the CPU); for small fixed-size matrices use the matrix "
                        "types' adjit.inverse(m) and adjit.determinant(m)")
    gen.require_host(name)


def _array(v, name: str, what: str) -> Array | ArrayExpr:
    if not isinstance(v, (Array, ArrayExpr)):
        raise UserError(f"{name}: {what} must be an array, got {S.describe(v)}")
    return v


def _float_dtype(*vs):
    """NumPy's linalg dtype: f32 stays f32, f64 and integers (and bools) are f64."""
    dtype = vs[0].type.dtype
    for v in vs[1:]:
        dtype = promote(dtype, v.type.dtype)
    return dtype if dtype in (f32, f64) else f64


def _operand(v, dtype) -> Array:
    return MM._operand(v, dtype)


def _no_kwargs(kwargs: dict, name: str, allowed=()) -> None:
    extra = sorted(set(kwargs) - set(allowed))
    if extra:
        raise UserError(f"{name}() got an unexpected keyword argument {extra[0]!r}")


def _square(gen, v, name: str, dtype) -> Array:
    """`v` as a (stack of) square matrices of `dtype`, (..., M, M) (checked at run time:
    NumPy's LinAlgError)."""
    v = _array(v, name, "the matrix")
    if v.type.ndim < 2:
        raise UserError(f"{name}: {v.type.ndim}-dimensional array given. Array must be at "
                        "least two-dimensional")
    a = _operand(v, dtype)
    rows, cols = A.dims(a)[-2:]
    adj.check(arith.cmpi(arith.CmpIPredicate.eq, rows, cols), "LinAlgError",
              "Last 2 dimensions of the array must be square")
    return a


def _each_matrix(a: Array, arrays: list[tuple[Array, int | None]], body) -> None:
    """body(views) for each matrix of the stack `a` (..., M, M): `arrays` are (array, its
    number of core dimensions, or None for one shared by every matrix), each batched one of
    a's batch shape; views are each one's core part for that matrix (a 2-D `a` is the
    stack of itself)."""
    batch = A.dims(a)[:-2]
    if not batch:
        body([v for v, _ in arrays])
        return
    from .numpy_calls import reshape
    count = A.numel(batch)
    flat = []
    for v, core in arrays:
        if core is None:
            flat.append(v)
            continue
        sizes = [count] + A.dims(v)[v.type.ndim - core:]
        flat.append(A.materialize(reshape(v, [S.from_index(n) for n in sizes])))
    loop = scf.ForOp(A.idx(0), count, A.idx(1))
    with ir.InsertionPoint(loop.body):
        i = S.from_index(loop.induction_variable)
        body([f if core is None else A.view(f, [i], False, False)
              for f, (_, core) in zip(flat, arrays)])
        scf.YieldOp([])


def _column(a: Array) -> Array:
    """A 1-D array as a (n, 1) view (writes through it reach `a`)."""
    n = A.dims(a)[0]
    dyn = ir.ShapedType.get_dynamic_size()
    src = ir.MemRefType(a.value.type)
    layout = (ir.StridedLayoutAttr.get(dyn, [dyn, dyn]) if "strided" in str(src.layout)
              else None)
    t = ir.MemRefType.get([dyn, 1], src.element_type, layout)
    assoc = ir.ArrayAttr.get([ir.ArrayAttr.get([MM._i64_attr(0), MM._i64_attr(1)])])
    value = memref.expand_shape(t, a.value, assoc, [n], [dyn, 1])
    t2 = ArrayType(a.type.dtype, 2, True)
    return Array(memref.cast(mlir_type(t2), value), t2, a.root, a.fresh)


def _start(gen, name: str) -> None:
    _host(gen, name)
    L.require_lapack(name)


def _one_matrix(gen, args, kwargs, name: str) -> Array:
    _start(gen, name)
    _no_kwargs(kwargs, name)
    if len(args) != 1:
        raise UserError(f"{name}(a) takes 1 argument, got {len(args)}")
    return _square(gen, args[0], name, _float_dtype(_array(args[0], name, "a")))


# -- solve, inv, det, cholesky ----------------------------------------------------------------
def _solve(gen, args, kwargs):
    name = "np.linalg.solve"
    _start(gen, name)
    _no_kwargs(kwargs, name)
    if len(args) != 2:
        raise UserError(f"{name}(a, b) takes 2 arguments, got {len(args)}")
    a, b = _array(args[0], name, "a"), _array(args[1], name, "b")
    dtype = _float_dtype(a, b)
    a = _square(gen, a, name, dtype)
    b = _operand(b, dtype)
    nb = 1 if b.type.ndim == 1 else 2           # NumPy 2: a 1-D b is one vector (M,)
    batch = A.dims(a)[:-2]
    shared = nb == 1 or b.type.ndim == 2
    if not shared and b.type.ndim != a.type.ndim:
        raise UserError(f"{name}: b of shape (..., M, K) needs a's number of dimensions "
                        f"({a.type.ndim}), got {b.type.ndim} (or give b of shape (M,) or "
                        "(M, K), solved with every matrix)")
    if not shared:
        for d, e in zip(batch, A.dims(b)[:-2]):
            adj.check(arith.cmpi(arith.CmpIPredicate.eq, d, e), "ValueError",
                      "solve: the stacks of a and b differ in shape")
    core = A.dims(b)[-nb:]
    adj.check(arith.cmpi(arith.CmpIPredicate.eq, core[0], A.dims(a)[-1]), "ValueError",
              "solve: b's first dimension differs from the size of the matrix")
    x = A.alloc(dtype, list(batch) + core)

    def one(views):
        va, vb, vx = views
        if nb == 1:
            vb, vx = _column(vb), _column(vx)
        L.solve(gen, va, vb, vx)
    _each_matrix(a, [(a, 2), (b, None if shared else nb), (x, nb)], one)
    return x


def _inv(gen, args, kwargs):
    a = _one_matrix(gen, args, kwargs, "np.linalg.inv")
    n = A.dims(a)[-1]
    x = A.alloc(a.type.dtype, A.dims(a))
    eye = L._eye(a.type.dtype, n)
    _each_matrix(a, [(a, 2), (eye, None), (x, 2)], lambda v: L.solve(gen, *v))
    return x


def _det(gen, args, kwargs):
    a = _one_matrix(gen, args, kwargs, "np.linalg.det")
    if a.type.ndim == 2:
        return L.det(gen, a)
    out = A.alloc(a.type.dtype, A.dims(a)[:-2])

    def one(views):
        va, cell = views
        memref.store(L.det(gen, va).value, cell.value, [])
    _each_matrix(a, [(a, 2), (out, 0)], one)
    return out


def _cholesky(gen, args, kwargs):
    name = "np.linalg.cholesky"
    upper = kwargs.pop("upper", Literal(False))
    if not (isinstance(upper, Literal) and upper.value is False):
        raise UserError(f"{name}: upper=True is not compiled (take the transpose of the "
                        "lower factor)")
    a = _one_matrix(gen, args, kwargs, name)
    out = A.alloc(a.type.dtype, A.dims(a))
    _each_matrix(a, [(a, 2), (out, 2)], lambda v: L.cholesky(gen, *v))
    return out


# -- norm -------------------------------------------------------------------------------------
def _static(v, name: str, what: str):
    """A compile-time value: a literal, a string, a tuple of ints."""
    if v is None:
        return None
    if isinstance(v, Literal):
        return v.value
    if isinstance(v, PyObj):
        return v.obj
    if isinstance(v, tuple) and all(isinstance(x, Literal) for x in v):
        return tuple(x.value for x in v)
    raise UserError(f"{name}: {what} must be a constant, got {S.describe(v)}")


def _abs(x):
    return A.elementwise(S.absolute, [x])


def _sqrt(v):
    return S.math_unary("sqrt", v)


def _norm(gen, args, kwargs):
    name = "np.linalg.norm"
    _host(gen, name)
    _no_kwargs(kwargs, name, ("ord", "axis", "keepdims"))
    if not 1 <= len(args) <= 4:
        raise UserError(f"{name}(x, ord=None, axis=None, keepdims=False) takes 1 to 4 "
                        f"arguments, got {len(args)}")
    rest = list(args[1:]) + [None] * (4 - len(args))
    ord_ = _static(kwargs.get("ord", rest[0]), name, "ord")
    axis = _static(kwargs.get("axis", rest[1]), name, "axis")
    keepdims = bool(_static(kwargs.get("keepdims", rest[2]), name, "keepdims") or False)
    x = _array(args[0], name, "x")
    dtype = _float_dtype(x)
    x = _operand(x, dtype)
    nd = x.type.ndim
    if isinstance(axis, int):
        axis = (axis,)
    if axis is None and ord_ is None:
        total = _sqrt(A.reduce("sum", A.elementwise(lambda q: S.binary("*", q, q), [x])))
        return _kept(total, nd, keepdims)
    if axis is None:
        if nd not in (1, 2):
            raise UserError(f"{name}: ord={ord_!r} without axis needs a 1-D or 2-D array, got "
                            f"{nd} dimensions")
        axis = tuple(range(nd))
    axis = tuple(a % nd if -nd <= a < nd else _bad_axis(name, a, nd) for a in axis)
    if len(axis) == 1:
        return _vector_norm(name, x, ord_, axis[0], keepdims, nd)
    if len(axis) == 2 and axis[0] != axis[1]:
        return _matrix_norm(name, x, ord_, axis, keepdims, nd)
    raise UserError(f"{name}: axis must be an int or a pair of different ints, got {axis}")


def _bad_axis(name, a, nd):
    raise UserError(f"{name}: axis {a} is out of bounds for an array of {nd} dimensions")


def _kept(total: Scalar, nd: int, keepdims: bool):
    if not keepdims:
        return total
    out = A.alloc(total.type, [A.idx(1)] * nd)
    memref.store(total.value, out.value, [A.idx(0)] * nd)
    return out


def _vector_norm(name, x: Array, ord_, axis: int, keepdims: bool, nd: int):
    one_d = nd == 1

    def reduce(op, e):
        if one_d:
            return _kept(A.reduce(op, e), 1, keepdims)
        return A.reduce_axis(op, e, axis, keepdims)

    def post(fn, v):
        return fn(v) if isinstance(v, Scalar) else A.materialize(A.elementwise(fn, [v]))
    if ord_ is None or ord_ == 2:
        return post(_sqrt, reduce("sum", A.elementwise(lambda q: S.binary("*", q, q), [x])))
    if ord_ == np.inf:
        return reduce("max", _abs(x))
    if ord_ == -np.inf:
        return reduce("min", _abs(x))
    if ord_ == 1:
        return reduce("sum", _abs(x))
    if ord_ == 0:      # the count of non-zero elements, as a float
        return reduce("sum", A.elementwise(lambda q: S.cast(S.compare("!=", q, Literal(0.0)),
                                                            q.type), [x]))
    if isinstance(ord_, (int, float)) and not isinstance(ord_, bool):
        p = float(ord_)
        powered = reduce("sum", A.elementwise(lambda q: S.power(S.absolute(q), Literal(p)),
                                              [x]))
        return post(lambda s: S.power(s, Literal(1.0 / p)), powered)
    raise UserError(f"{name}: invalid norm order {ord_!r} for vectors")


def _matrix_norm(name, x: Array, ord_, axis: tuple, keepdims: bool, nd: int):
    if nd != 2:
        raise UserError(f"{name}: matrix norms are compiled for 2-D arrays, got {nd} "
                        "dimensions")
    if ord_ in (None, "fro"):
        total = _sqrt(A.reduce("sum", A.elementwise(lambda q: S.binary("*", q, q), [x])))
        return _kept(total, 2, keepdims)
    if ord_ in (1, -1, np.inf, -np.inf):
        # 1: the largest column sum of |x| (summed over the rows, axis[0]); inf: the
        # largest row sum (over axis[1]); negative: the smallest
        over = axis[0] if ord_ in (1, -1) else axis[1]
        sums = A.reduce_axis("sum", _abs(x), over, False)
        total = A.reduce("max" if ord_ > 0 else "min", sums)
        return _kept(total, 2, keepdims)
    if ord_ in (2, -2, "nuc"):
        raise UserError(f"{name}: ord={ord_!r} of a matrix needs its singular values, which "
                        "are not compiled (ord None/'fro', 1, -1, inf and -inf are)")
    raise UserError(f"{name}: invalid norm order {ord_!r} for matrices")


# -- outer, einsum ----------------------------------------------------------------------------
def _flat(v) -> Array | ArrayExpr:
    from .numpy_calls import reshape
    return v if v.type.ndim == 1 else reshape(v, [Literal(-1)])


def _outer(gen, args, kwargs):
    name = "np.outer"
    _host(gen, name)
    _no_kwargs(kwargs, name)
    if len(args) != 2:
        raise UserError(f"{name}(a, b) takes 2 arguments, got {len(args)}")
    a, b = (A.as_expr(_flat(_array(v, name, w))) for v, w in zip(args, ("a", "b")))
    return A.materialize(_product_expr([a, b], [[0], [1]], 2))


def _product_expr(exprs: list, positions: list[list[int]], rank: int) -> ArrayExpr:
    """The product of `exprs`, each read at the result's indices `positions[k]`."""
    shape = [None] * rank
    for e, pos in zip(exprs, positions):
        for d, p in enumerate(pos):
            if shape[p] is None:
                shape[p] = e.shape[d]

    def at(ids):
        value = None
        for e, pos in zip(exprs, positions):
            v = A.element_at(e, [ids[p] for p in pos])
            value = v if value is None else S.binary("*", value, v)
        return value
    dtype = exprs[0].dtype
    for e in exprs[1:]:
        dtype = promote(dtype, e.dtype)
    return A.nd_expr(dtype, shape, lambda ids: S.cast(at(ids), dtype), None)


# Two-operand contractions that are matrix products (letters named in order of appearance):
# the operands' transposes, then matmul.
_MATMULS = {"ab,bc->ac": (False, False), "abc,acd->abd": (False, False),
            "ab,b->a": (False, False), "a,ab->b": (False, False), "a,a->": (False, False),
            "ab,cb->ac": (False, True), "ba,bc->ac": (True, False)}


def _canonical(inputs: list[str], output: str) -> str:
    names: dict[str, str] = {}
    for c in "".join(inputs) + output:
        names.setdefault(c, "abcdefghijklmnopqrstuvwxyz"[len(names)])
    return ",".join("".join(names[c] for c in s) for s in inputs) + "->" + "".join(
        names[c] for c in output)


def _einsum(gen, args, kwargs):
    name = "np.einsum"
    _host(gen, name)
    kwargs.pop("optimize", None)      # (the order of contraction is this module's)
    _no_kwargs(kwargs, name)
    if not args or not isinstance(_static(args[0], name, "the subscripts"), str):
        raise UserError(f"{name}: the first argument must be the subscripts, a constant "
                        "string ('ij,jk->ik')")
    spec = _static(args[0], name, "the subscripts")
    operands = [_array(v, name, f"operand {k}") for k, v in enumerate(args[1:])]
    text = spec.replace(" ", "")
    if "..." in text or not all(c.isalpha() or c in ",->" for c in text):
        raise UserError(f"{name}: subscripts {spec!r} are not compiled: letters only (no "
                        "ellipsis '...'), operands separated by ',', an optional '->'")
    inputs, arrow, output = text.partition("->")
    inputs = inputs.split(",")
    if not 1 <= len(operands) <= 3 or len(inputs) != len(operands):
        raise UserError(f"{name}: subscripts {spec!r} name {len(inputs)} operand(s) and "
                        f"{len(operands)} were given (1 to 3 operands are compiled)")
    if not arrow:
        counts = {c: "".join(inputs).count(c) for c in "".join(inputs)}
        output = "".join(sorted(c for c, n in counts.items() if n == 1))
    for s, v in zip(inputs, operands):
        if len(s) != v.type.ndim:
            raise UserError(f"{name}: subscripts {spec!r}: {s!r} names {len(s)} dimensions of "
                            f"an operand that has {v.type.ndim}")
    if len(set(output)) != len(output) or any(c not in "".join(inputs) for c in output):
        raise UserError(f"{name}: subscripts {spec!r}: the output {output!r} must name "
                        "distinct letters of the inputs")
    dtype = operands[0].type.dtype
    for v in operands[1:]:
        dtype = promote(dtype, v.type.dtype)
    # each letter's size, from its first operand; the others checked equal
    sizes: dict[str, ir.Value] = {}
    for s, v in zip(inputs, operands):
        for c, d in zip(s, A.dims(v) if isinstance(v, Array) else v.shape):
            if c in sizes:
                adj.check(arith.cmpi(arith.CmpIPredicate.eq, sizes[c], d), "ValueError",
                          f"einsum({spec!r}): the operands' sizes for {c!r} differ")
            else:
                sizes[c] = d
    canonical = _canonical(inputs, output)
    if dtype in (f32, f64) and canonical in _MATMULS:
        ta, tb = _MATMULS[canonical]
        x, y = (A.transpose(v) if t else v for v, t in zip(operands, (ta, tb)))
        return MM.matmul(gen, x, y)
    exprs = [A.as_expr(_operand(v, dtype)) for v in operands]
    contracted = [c for c in dict.fromkeys("".join(inputs)) if c not in output]

    def at(ids):
        env = dict(zip(output, ids))

        def product():
            value = None
            for s, e in zip(inputs, exprs):
                v = A.element_at(e, [env[c] for c in s])
                value = v if value is None else S.binary("*", value, v)
            return S.cast(value, dtype)
        if not contracted:
            return product()
        return _sum_over(contracted, sizes, env, product, dtype)
    if not output:
        return at([])
    return A.materialize(A.nd_expr(dtype, [sizes[c] for c in output], at, None))


def _sum_over(letters: list[str], sizes: dict, env: dict, term, dtype) -> Scalar:
    """The sum of term() over every value of `letters` (bound in `env`), a loop nest."""
    c, rest = letters[0], letters[1:]
    run = scf.ForOp(A.idx(0), sizes[c], A.idx(1), [S.as_scalar(Literal(0), dtype).value])
    with ir.InsertionPoint(run.body):
        env[c] = run.induction_variable
        v = term() if not rest else _sum_over(rest, sizes, env, term, dtype)
        scf.YieldOp([S.binary("+", Scalar(run.inner_iter_args[0], dtype), v).value])
    return Scalar(run.results[0], dtype)


HANDLERS = {np.linalg.solve: _solve, np.linalg.inv: _inv, np.linalg.det: _det,
            np.linalg.cholesky: _cholesky, np.linalg.norm: _norm, np.outer: _outer,
            np.einsum: _einsum}
for _fn, _handler in HANDLERS.items():
    register_builtin([_fn], _handler)


def uses_lapack(module) -> bool:
    """Whether `module` calls LAPACK (a device="cuda" host program refuses it)."""
    names = {lapack.symbol(t + r) for t in "sd" for r in lapack.ROUTINES} if (
        lapack.available()) else set()
    return any("sym_name" in op.attributes
               and ir.StringAttr(op.attributes["sym_name"]).value in names
               for op in module.body.operations)
