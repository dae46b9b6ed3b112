"""Matrix products in compiled code: NumPy's `x @ y`, `np.matmul` and `np.dot`."""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref, scf

from ..core.errors import UserError
from ..core.types import promote
from ..dialects import adj
from . import scalar_ops as S
from .arrays import alloc, dims, idx, materialize
from .values import Array, ArrayExpr, Literal, Scalar


def matmul(x: Array | ArrayExpr | Scalar, y: Array | ArrayExpr | Scalar) -> Array | Scalar:
    """NumPy's `x @ y` (np.matmul; np.dot for these ranks) of 1-D and 2-D arrays: (n, k) @
    (k, m) -> (n, m), (k,) @ (k, m) -> (m,), (n, k) @ (k,) -> (n,), (k,) @ (k,) -> a
    scalar. A loop nest, parallel over the result's elements, each a dot product in the
    result's type; its derivatives are the pass's (loads and adds). Not a BLAS: the k loop
    reads y by columns."""
    for v in (x, y):
        if not isinstance(v, (Array, ArrayExpr)) or v.type.ndim not in (1, 2):
            raise UserError("@ (matmul) takes 1-D or 2-D arrays (batched 3-D and scalars: "
                            f"not supported), got {S.describe(v)}")
    a, b = materialize(x), materialize(y)
    dtype = promote(a.type.dtype, b.type.dtype)
    ad, bd = dims(a), dims(b)
    k_a = ad[-1]
    k_b = bd[0]
    adj.check(arith.cmpi(arith.CmpIPredicate.eq, k_a, k_b), "ValueError",
              "matmul: the inner dimensions differ")
    rows = ad[0] if a.type.ndim == 2 else None
    cols = bd[1] if b.type.ndim == 2 else None
    shape = [s for s in (rows, cols) if s is not None]

    def dot_at(i: ir.Value | None, j: ir.Value | None) -> Scalar:
        run = scf.ForOp(idx(0), k_a, idx(1), [S.as_scalar(Literal(0), dtype).value])
        with ir.InsertionPoint(run.body):
            k = run.induction_variable
            u = Scalar(memref.load(a.value, [i, k] if i is not None else [k]), a.type.dtype)
            v = Scalar(memref.load(b.value, [k, j] if j is not None else [k]), b.type.dtype)
            acc = Scalar(run.inner_iter_args[0], dtype)
            scf.YieldOp([S.binary("+", acc, S.cast(S.binary("*", u, v), dtype)).value])
        return Scalar(run.results[0], dtype)

    if not shape:
        return dot_at(None, None)
    out = alloc(dtype, shape)
    loop = scf.ParallelOp([], [idx(0)] * len(shape), shape, [idx(1)] * len(shape), [])
    body = loop.regions[0].blocks.append(*[ir.IndexType.get()] * len(shape))
    with ir.InsertionPoint(body):
        ids = list(body.arguments)
        i = ids[0] if rows is not None else None
        j = ids[-1] if cols is not None else None
        memref.store(dot_at(i, j).value, out.value, ids)
        scf.ReduceOp([], 0)
    return out
