"""Matrix products in compiled code: NumPy's `x @ y`, `np.matmul` and `np.dot` of 1-D, 2-D and
3-D arrays (a stack of matrices, NumPy's batch; a 2-D or 1-D operand is broadcast over it).

Float products call a BLAS: runtime/native/gemm.cpp's `adj_gemm_f32/f64`, which call the
sgemm/dgemm of the OpenBLAS that NumPy's wheel bundles (runtime/extension.py finds it when
the extension loads; without one, gemm.cpp's own blocked loop nest). Why a BLAS and not a
tiled, vectorised loop nest emitted here: measured on this project's machines, the naive
parallel loop nest this replaces took 38 ms for a 256x256 f64 product where NumPy takes 0.4;
reaching a BLAS's speed needs packing into cache-sized panels and register-blocked
micro-kernels tuned per CPU, which OpenBLAS has for every x86 and Arm generation
(DYNAMIC_ARCH) and which NumPy has already loaded into the process. It also gives NumPy's
own rounding. Integer products (no BLAS has them) are a loop nest here.

Every operand is seen as a 3-D array (batch, rows, cols) through views (expand_shape, a
cast to the fully strided type), so one function does every rank: a 1-D `x` on the left
is (1, 1, k), on the right (1, k, 1); the result is allocated in NumPy's shape and viewed
the same way. The product is a call of `matmul_into(a, b, c)`, an @adjit.func whose body
calls the BLAS and whose custom rules (adjit.rules) are its derivatives, so the autodiff pass
treats it as it treats any call with rules (in every mode, with any activities, taping an
operand the caller overwrites afterwards: config.overwritten):
- forward:  dC = dA @ B + A @ dB (each lane of a batched tangent; zero without dA and dB);
- reverse:  dA += dC @ B^T, dB += A^T @ dC, then dC = 0 (C's old value reaches nothing):
            two products, where the pass differentiating a loop nest would scatter one
            atomic-free add per multiply;
the sum over the batch of a broadcast operand's adjoint is gemm.cpp's (a C of batch 1).
The rules' bodies call primitives here (`_tangents`, `_taped`, `_adjoints`) that emit those
products at compile time, as the lanes of a batched tangent are a Python tuple. Each product
they emit is a call of matmul_into again, for the gemm.cpp flags it needs (one function per
flags value, transposed operands and accumulation: `_functions`), never of the BLAS
directly: a derivative of a derivative (hessian, hvp, grad of grad) meets only calls with
rules, which it differentiates the same way.
"""
from __future__ import annotations

import functools

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from ..core.errors import UserError
from ..core.symbols import GEMM_SYMBOLS
from ..core.types import ArrayType, f32, f64, promote
from ..dialects import adj
from ..dialects.mlir_types import mlir_type
from ..lang import rules
from ..lang.functions import device_function
from . import arrays as A
from . import callables
from . import scalar_ops as S
from .values import Array, ArrayExpr, Literal, PyObj, Scalar

# gemm.cpp's flags
TRANS_A, TRANS_B, ACCUMULATE = 1, 2, 4
# The memref operands' positions in a call of the runtime function (after the flags): what
# its declaration says it writes (attribute WRITES_ATTR, memory.WrittenArguments), so that
# the pass knows it reads A and B and writes only C.
WRITES_ATTR = "adj.writes"
_C_OPERAND = 3


def matmul(gen, x, y) -> Array | Scalar:
    """NumPy's `x @ y` (np.matmul; np.dot for these ranks) of 1-D to 3-D arrays in the code
    `gen` generates. Inner dimensions (and batch dimensions, equal or 1) are checked at run
    time: a ValueError at the user's line."""
    for v in (x, y):
        if not isinstance(v, (Array, ArrayExpr)) or v.type.ndim not in (1, 2, 3):
            raise UserError("@ (matmul) takes 1-D, 2-D or 3-D arrays (scalars: use *), got "
                            f"{S.describe(v)}")
    dtype = promote(x.type.dtype, y.type.dtype)
    a, b = (_operand(v, dtype) for v in (x, y))
    ra, rb = a.type.ndim, b.type.ndim
    ad, bd = A.dims(a), A.dims(b)
    k_a, k_b = ad[-1], (bd[-2] if rb >= 2 else bd[0])
    adj.check(arith.cmpi(arith.CmpIPredicate.eq, k_a, k_b), "ValueError",
              "matmul: the inner dimensions differ")
    batch = None
    if ra == 3 and rb == 3:
        ba, bb = ad[0], bd[0]
        one = A.idx(1)
        ok = arith.ori(arith.cmpi(arith.CmpIPredicate.eq, ba, bb),
                       arith.ori(arith.cmpi(arith.CmpIPredicate.eq, ba, one),
                                 arith.cmpi(arith.CmpIPredicate.eq, bb, one)))
        adj.check(ok, "ValueError", "matmul: the batch dimensions differ (and neither is 1)")
        batch = arith.maxui(ba, bb)
    elif ra == 3 or rb == 3:
        batch = ad[0] if ra == 3 else bd[0]
    rows = ad[-2] if ra >= 2 else None
    cols = bd[-1] if rb >= 2 else None
    shape = [s for s in (batch, rows, cols) if s is not None]
    out = A.alloc(dtype, shape)
    a3 = _view3(a, "left")
    b3 = _view3(b, "right")
    c3 = _view3(out, "out", present=(batch is not None, rows is not None, cols is not None))
    if dtype in (f32, f64):
        _product(gen, 0, a3, b3, c3)
    else:
        _loop_nest(a3, b3, c3)
    if not shape:
        return Scalar(memref.load(out.value, []), dtype)
    return out


def _operand(v, dtype) -> Array:
    """`v` as an array of `dtype` (an expression computed, another dtype converted)."""
    if v.type.dtype != dtype:
        v = A.elementwise(lambda s: S.cast(s, dtype), [v])
    return A.materialize(v)


def _i64_attr(v: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)


def _view3(a: Array, role: str, present: tuple[bool, bool, bool] | None = None) -> Array:
    """`a` as a 3-D array (batch, rows, cols) of the fully strided type, a view. `role`:
    "left" (a 1-D array is a row, (1, 1, k)), "right" (a column, (1, k, 1)) or "out" (its
    dimensions are those of (batch, rows, cols) that are `present`)."""
    r = a.type.ndim
    if role == "left":
        present = (r == 3, r >= 2, True)
    elif role == "right":
        present = (r == 3, True, r >= 2)
    dyn = ir.ShapedType.get_dynamic_size()
    value = a.value
    if r < 3:
        sizes = iter(A.dims(a))
        static, dynamic = [], []
        for p in present:
            if p:
                static.append(dyn)
                dynamic.append(next(sizes))
            else:
                static.append(1)
        # Each source dimension takes the unit dimensions before it (the first one, those
        # after it too): (n, k) -> [[0, 1], [2]], (k,) -> [[0, 1, 2]].
        groups, current = [], []
        for d, p in enumerate(present):
            current.append(d)
            if p:
                groups.append(current)
                current = []
        if current:
            if groups:
                groups[-1] += current
            else:
                groups.append(current)
        assoc = ir.ArrayAttr.get([ir.ArrayAttr.get([_i64_attr(d) for d in g]) for g in groups])
        src_t = ir.MemRefType(value.type)
        layout = (ir.StridedLayoutAttr.get(dyn, [dyn] * 3)
                  if "strided" in str(src_t.layout) else None)
        t = ir.MemRefType.get(static, mlir_type(a.type.dtype), layout)
        if r == 0:
            value = memref.expand_shape(t, value, ir.ArrayAttr.get([]), [], static)
        else:
            value = memref.expand_shape(t, value, assoc, dynamic, static)
    t3 = ArrayType(a.type.dtype, 3, True)
    if value.type != mlir_type(t3):
        value = memref.cast(mlir_type(t3), value)
    return Array(value, t3, getattr(a, "root", None), getattr(a, "fresh", False))


def _loop_nest(a: Array, b: Array, c: Array) -> None:
    """c = a @ b of 3-D arrays, a loop nest (integer dtypes: no BLAS): parallel over c's
    elements, each a dot product; a batch of 1 broadcast."""
    dtype = c.type.dtype
    ad, bd, cd = A.dims(a), A.dims(b), A.dims(c)
    one = A.idx(1)

    def batch_of(d: ir.Value, t: ir.Value) -> ir.Value:
        return arith.select(arith.cmpi(arith.CmpIPredicate.eq, d, one), A.idx(0), t)

    def body(ids: list[ir.Value]) -> None:
        t, i, j = ids
        ta, tb = batch_of(ad[0], t), batch_of(bd[0], t)
        run = scf.ForOp(A.idx(0), ad[2], A.idx(1), [S.as_scalar(Literal(0), dtype).value])
        with ir.InsertionPoint(run.body):
            k = run.induction_variable
            u = Scalar(memref.load(a.value, [ta, i, k]), dtype)
            v = Scalar(memref.load(b.value, [tb, k, j]), dtype)
            acc = Scalar(run.inner_iter_args[0], dtype)
            scf.YieldOp([S.binary("+", acc, S.binary("*", u, v)).value])
        memref.store(run.results[0], c.value, ids)
    A.for_each(cd, body)


# -- the runtime call -----------------------------------------------------------------------
def _declare(module: ir.Module, dtype) -> str:
    """The runtime function of `dtype`'s products, declared in `module` once."""
    name = GEMM_SYMBOLS[0] if dtype == f32 else GEMM_SYMBOLS[1]
    for op in module.body.operations:
        if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value == name:
            return name
    m3 = mlir_type(ArrayType(dtype, 3, True))
    with ir.InsertionPoint.at_block_begin(module.body), ir.Location.unknown():
        decl = func.FuncOp(name, ir.FunctionType.get([ir.IntegerType.get_signless(64)] +
                                                     [m3] * 3, []), visibility="private")
        decl.operation.attributes[WRITES_ATTR] = ir.ArrayAttr.get([_i64_attr(_C_OPERAND)])
    return name


def _gemm_call(gen, flags: int, a: Array, b: Array, c: Array) -> None:
    """c (+)= op(a) @ op(b) (gemm.cpp's flags), a call of the runtime."""
    dtype = c.type.dtype
    name = _declare(gen.unit.module, dtype)
    t3 = mlir_type(ArrayType(dtype, 3, True))
    operands = [v.value if v.value.type == t3 else memref.cast(t3, v.value) for v in (a, b, c)]
    func.CallOp([], ir.FlatSymbolRefAttr.get(name),
                [arith.constant(ir.IntegerType.get_signless(64), flags)] + operands)


def _gemm(gen, args: list, kwargs: dict):
    """`_gemm(flags, a, b, c)` in matmul_into's body."""
    flags, a, b, c = args
    _gemm_call(gen, flags.value, a, b, c)


def _copy(a: Array) -> Array:
    """A C-contiguous copy of a 3-D array (memref.copy: memrefCopy for a strided one)."""
    out = A.alloc(a.type.dtype, A.dims(a))
    memref.copy(a.value, out.value)
    return out


def _fill_zero(a: Array) -> None:
    A.fill(a, Literal(0.0))


def _product(gen, flags: int, a: Array, b: Array, c: Array) -> None:
    """c (+)= op(a) @ op(b) (gemm.cpp's flags), a call of matmul_into for `flags`, whose
    rules differentiate it (a derivative's products are these calls too)."""
    t3 = ArrayType(c.type.dtype, 3, True)
    m3 = mlir_type(t3)
    a, b, c = (v if v.value.type == m3 else Array(memref.cast(m3, v.value), t3)
               for v in (a, b, c))
    callables.call(gen, _functions(flags), [a, b, c], {})


def _tangents(gen, args: list, kwargs: dict):
    """The forward rule's tangents of C (+)= op(A) @ op(B): dC (+)= op(dA) @ op(B) +
    op(A) @ op(dB), per lane."""
    flags = args[0].value
    a, b, c = (p.obj for p in args[1:])
    if c.dval is None:
        return None
    lanes = list(c.dval) if isinstance(c.dval, tuple) else [c.dval]

    def lane(d, k):
        return None if d is None else (d[k] if isinstance(d, tuple) else d)
    for k, dc in enumerate(lanes):
        da, db = lane(a.dval, k), lane(b.dval, k)
        if da is None and db is None:
            if not flags & ACCUMULATE:
                _fill_zero(dc)
            continue
        if da is not None:
            _product(gen, flags, da, b.val, dc)
        if db is not None:
            _product(gen, flags | ACCUMULATE if da is not None else flags, a.val, db, dc)
    return None


def _taped(gen, args: list, kwargs: dict):
    """The augmented rule's tape: a copy of A (B) where the caller overwrites it after the
    call and the reverse pass needs it, for dB (dA); else None, and the reverse pass reads
    the operand itself."""
    config, a, b = (p.obj for p in args)
    over = config.overwritten
    keep = [_copy(a.val) if over and over[0] and b.dval is not None else None,
            _copy(b.val) if over and over[1] and a.dval is not None else None]
    kept = [t for t in keep if t is not None]
    if not kept:
        return PyObj(None)
    return kept[0] if len(kept) == 1 else tuple(kept)


def _adjoints(gen, args: list, kwargs: dict):
    """The reverse rule of C (+)= op(A) @ op(B) (A, B from the tape where it holds them):
    dA += dC @ op(B)^T (transposed where A is), dB += op(A)^T @ dC (likewise), then dC = 0
    unless C accumulated (its old value reached the result as it was)."""
    flags = args[0].value
    config, tape, a, b, c = (p.obj if isinstance(p, PyObj) else p for p in args[1:])
    if c.dval is None:
        return None
    over = config.overwritten
    taped = list(tape) if isinstance(tape, tuple) else ([] if tape is None else [tape])
    va = taped.pop(0) if over and over[0] and b.dval is not None else a.val
    vb = taped.pop(0) if over and over[1] and a.dval is not None else b.val
    ta, tb = bool(flags & TRANS_A), bool(flags & TRANS_B)
    if a.dval is not None:
        if not ta:      # dA += dC @ op(B)^T
            _product(gen, ACCUMULATE | (0 if tb else TRANS_B), c.dval, vb, a.dval)
        else:           # dA += op(B) @ dC^T
            _product(gen, ACCUMULATE | TRANS_B | (TRANS_A if tb else 0), vb, c.dval, a.dval)
    if b.dval is not None:
        if not tb:      # dB += op(A)^T @ dC
            _product(gen, ACCUMULATE | (0 if ta else TRANS_A), va, c.dval, b.dval)
        else:           # dB += dC^T @ op(A)^T
            _product(gen, ACCUMULATE | TRANS_A | (TRANS_B if ta else 0), c.dval, va, b.dval)
    if not flags & ACCUMULATE:
        _fill_zero(c.dval)
    return None


# (called by the rules and matmul_into)
gemm = callables.Primitive("matmul", "gemm", _gemm)
tangents = callables.Primitive("matmul", "tangents", _tangents)
taped = callables.Primitive("matmul", "taped", _taped)
adjoints = callables.Primitive("matmul", "adjoints", _adjoints)


@functools.cache
def _functions(flags: int = 0):
    """matmul_into for gemm.cpp's `flags` and its rules (C (+)= op(A) @ op(B)), made on first
    use: parsing their source at import would cost every unit that never multiplies
    matrices. Their rules' products are calls of these functions again (forward dC = dA @ B
    + A @ dB, reverse dA += dC @ B^T and dB += A^T @ dC, with the flags that spell them),
    never of the BLAS itself: so the derivative of a derivative finds rules where it meets a
    product, in every mode and at every order."""
    FLAGS = flags      # a closure constant of the code below (and of its cache key)

    def matmul_into(a, b, c):
        gemm(FLAGS, a, b, c)

    # One symbol per flags value (the symbol is the function's name, mangled).
    matmul_into.__name__ = matmul_into.__qualname__ = f"matmul_into_{flags}"
    matmul_into = device_function(matmul_into)

    @rules.forward(matmul_into)
    def _forward(config, a, b, c):
        matmul_into(a.val, b.val, c.val)
        tangents(FLAGS, a, b, c)

    @rules.augmented_primal(matmul_into)
    def _augmented(config, a, b, c):
        matmul_into(a.val, b.val, c.val)
        return rules.AugmentedReturn(None, None, taped(config, a, b))

    @rules.reverse(matmul_into)
    def _reverse(config, dret, tape, a, b, c):
        adjoints(FLAGS, config, tape, a, b, c)
        return None, None, None

    return matmul_into
