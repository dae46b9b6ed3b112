"""Small vectors, matrices and quaternions in compiled code (Warp's `vec3`, `mat33`, `quat`).

A value is a `Vec`: its components as separate scalars, row-major. Nothing of it reaches the
IR but those scalars: a parameter or result of a vector type is that many scalar
parameters or results, an array of vectors is the array of its components (trailing
dimensions), and every operation and builtin is written out in scalar ops. So the autodiff
pass, the CPU and the GPU lowerings need nothing new, and LLVM sees straight-line scalar code
(as hand-written components would be). The builtins keep Warp's names and meanings; where a
formula has a singular point users meet (`normalize` or `length` of a zero vector, the
inverse of a singular matrix) it is guarded with selects whose unused side is computed on
a safe operand, so that neither the value nor the derivative is NaN (Warp documents a zero
result there).

Python locals holding a vector are stored in the code generator's variables as one
variable per component, `v[0]`, `v[1]`, ... (names no Python identifier can clash with),
so that `if`s and loops merge and carry them as the scalars they are; `names` records each
name's vector type (see `CodeGenerator.assign` and `_lookup`).
"""
from __future__ import annotations

import ast
import functools
import inspect
import itertools
from typing import Sequence

import numpy as np

from mlir import ir
from mlir.dialects import arith, memref

from ..dialects import adj
from . import array_layout  # noqa: F401 (adjit.transpose's array meaning, wrapped below)
from . import arrays as A
from . import scalar_ops as S
from . import builtin_calls as B
from .builtin_calls import register_builtin, lookup
from ..lang.builtins import UNARY_MATH, namespace
from ..lang.structs import struct_type
from ..core.errors import UserError
from ..core.types import (ArrayType, ScalarType, VecArrayType, VecType, as_scalar_type, f32,
                          promote)
from .values import Array, Literal, PyObj, Scalar, SliceValue, Vec, VecArray

_AXES = {"x": 0, "y": 1, "z": 2, "w": 3}


# ---- values ---------------------------------------------------------------------------
def make(kind: str, shape: tuple[int, ...], items: Sequence, dtype: ScalarType | None = None
         ) -> Vec:
    """A Vec of `items` (Scalars or Literals), all of `dtype`, else of their promoted type
    (f32, Warp's default float, when all are constants)."""
    if dtype is None:
        typed = [s.type for s in items if isinstance(s, Scalar)]
        dtype = functools.reduce(promote, typed) if typed else f32
    if not dtype.is_float:
        raise UserError(f"vectors, matrices and quaternions hold floats (f32 or f64), not "
                        f"{dtype!r}")
    out = tuple(S.cast(S.as_scalar(s, dtype), dtype) for s in items)
    return Vec(VecType(kind, tuple(shape), dtype), out)


def of_type(t: VecType, items: Sequence) -> Vec:
    return make(t.kind, t.shape, items, t.dtype)


def zero(s: Scalar) -> Scalar:
    return S.as_scalar(Literal(0.0), s.type)


def _float(v) -> Scalar | Literal:
    if isinstance(v, Literal):
        if isinstance(v.value, bool):
            raise UserError("expected a number, got a bool")
        return v
    if isinstance(v, Scalar):
        return v
    raise UserError(f"expected a scalar, got {S.describe(v)}")


def construct(t: VecType, args: list, kwargs: dict) -> Vec:
    """`vec3(x, y, z)`, `vec3()` (zeros; the identity for quat), `vec3(s)` (every component
    s), `vec3d(v)` (another vector's components, converted), `mat22(a, b, c, d)` (row-major)."""
    if kwargs:
        raise UserError(f"{t!r}() takes no keyword arguments")
    n = t.size
    if not args:
        items = [Literal(0.0)] * n
        if t.kind in ("quat", "transform"):
            items[-1] = Literal(1.0)       # the identity rotation
        return of_type(t, items)
    if t.kind == "transform" and len(args) == 2:
        p, q = args
        if not (isinstance(p, Vec) and p.type.kind == "vec" and p.type.size == 3
                and isinstance(q, Vec) and q.type.kind == "quat"):
            raise UserError(f"{t!r}(p, q) takes a vec3 and a quat, got {S.describe(p)} and "
                            f"{S.describe(q)}")
        return of_type(t, [*p.items, *q.items])
    if len(args) == 1 and isinstance(args[0], Vec):
        v = args[0]
        if v.type.shape != t.shape:
            raise UserError(f"{t!r}() of {S.describe(v)}: the shapes differ")
        return of_type(t, v.items)
    if len(args) == 1:
        return of_type(t, [_float(args[0])] * n)
    if any(isinstance(a, Vec) for a in args):
        raise UserError(f"{t!r}() takes its {n} components (row-major for a matrix); build a "
                        "matrix from vectors with adjit.matrix_from_rows or "
                        "adjit.matrix_from_cols")
    if len(args) != n:
        raise UserError(f"{t!r}() takes {n} components, got {len(args)}")
    return of_type(t, [_float(a) for a in args])


def describe_shape(v: Vec) -> str:
    return S.describe(v)


# ---- indexing -------------------------------------------------------------------------
def _pick(items: Sequence[Scalar], k) -> Scalar:
    """items[k] for a runtime index k: a chain of selects (differentiable, and the same
    code on every target), index 0 for an index out of range."""
    kv = S.as_scalar(k)
    if not (kv.type.is_int or kv.type.name == "index"):
        raise UserError(f"a vector index must be an integer, got {S.describe(k)}")
    out = items[0]
    for j in range(1, len(items)):
        is_j = S.compare("==", kv, Literal(j))
        out = S.select(is_j, items[j], out)
    return out


def _const_index(k, n: int, what: str) -> int | None:
    if isinstance(k, Literal) and isinstance(k.value, int) and not isinstance(k.value, bool):
        j = k.value + n if k.value < 0 else k.value
        if not 0 <= j < n:
            raise UserError(f"index {k.value} out of range for {what}")
        return j
    return None


def _rows(v: Vec) -> list[list[Scalar]]:
    n, m = v.type.shape
    return [list(v.items[i * m:(i + 1) * m]) for i in range(n)]


def row(v: Vec, i) -> Vec:
    n, m = v.type.shape
    j = _const_index(i, n, f"the rows of {S.describe(v)}")
    rows = _rows(v)
    if j is not None:
        items = rows[j]
    else:
        items = [_pick([r[c] for r in rows], i) for c in range(m)]
    return make("vec", (m,), items, v.type.dtype)


def _slice_positions(s: SliceValue, n: int, what: str) -> list[int]:
    """The components `lo:hi:step` picks of `n` (Python's rule); constant bounds only, since
    the result's size is part of its type."""
    parts = []
    for p in (s.lower, s.upper, s.step):
        if p is not None and not (isinstance(p, Literal) and isinstance(p.value, int)):
            raise UserError(f"a slice of {what} takes constant bounds (the size of the vector "
                            f"it gives is part of its type), got {S.describe(p)}")
        parts.append(None if p is None else p.value)
    if parts[2] == 0:
        raise UserError("slice step cannot be zero")
    ks = list(range(n))[slice(*parts)]
    if not ks:
        raise UserError(f"the slice [{_spell(parts)}] of {what} is empty (a vector has at least "
                        "one component)")
    return ks


def _spell(parts) -> str:
    lo, hi, step = ("" if p is None else str(p) for p in parts)
    return f"{lo}:{hi}" + (f":{step}" if step else "")


def subscript(v: Vec, sub) -> Scalar | Vec:
    """`v[k]`, `m[i]` (a row), `m[i, j]`, with constant or runtime integer indices; `v[lo:hi]`,
    `m[lo:hi]`, `m[i, lo:hi]`, `m[lo:hi, j]` with constant bounds (Warp's slices: a shorter
    vector, or a smaller matrix; a slice of a quaternion is a vector)."""
    items = list(sub) if isinstance(sub, tuple) else [sub]
    what = S.describe(v)
    if v.type.kind == "mat":
        if len(items) == 1 and not isinstance(items[0], SliceValue):
            return row(v, items[0])
        if len(items) == 1:
            items.append(SliceValue(None, None, None))
        if len(items) != 2:
            raise UserError(f"a matrix takes one or two indices, got {len(items)}")
        r, c = items
        if not isinstance(r, SliceValue):
            return subscript(row(v, r), c)
        n, m = v.type.shape
        rows = [row(v, Literal(k)) for k in _slice_positions(r, n, what)]
        if not isinstance(c, SliceValue):      # part of a column
            return make("vec", (len(rows),), [subscript(x, c) for x in rows], v.type.dtype)
        cols = _slice_positions(c, m, what)
        return make("mat", (len(rows), len(cols)), [x.items[k] for x in rows for k in cols],
                    v.type.dtype)
    if len(items) != 1:
        raise UserError(f"{what} takes one index, got {len(items)}")
    if isinstance(items[0], SliceValue):
        ks = _slice_positions(items[0], v.type.size, what)
        return make("vec", (len(ks),), [v.items[k] for k in ks], v.type.dtype)
    j = _const_index(items[0], v.type.size, what)
    return v.items[j] if j is not None else _pick(v.items, items[0])


def with_item(v: Vec, sub, value) -> Vec:
    """`v` with `v[sub] = value` (a new Vec: the variable is rebound to it): a component
    (`v[k]`, `m[i, j]`), or a row (`m[i] = r`); constant indices pick the component, runtime
    ones select it (every component a select on the index)."""
    items = list(sub) if isinstance(sub, tuple) else [sub]
    shape, what = v.type.shape, S.describe(v)
    if len(items) > len(shape):
        raise UserError(f"{what} takes {len(shape)} ind{'ex' if len(shape) == 1 else 'ices'}, "
                        f"got {len(items)}")
    if any(isinstance(k, SliceValue) for k in items):
        raise UserError(f"assigning to a slice of {what}: assign its components one by one")
    rest = shape[len(items):]
    if rest:
        if not (isinstance(value, Vec) and value.type.shape == rest
                and value.type.kind != "mat"):
            raise UserError(f"assigning {S.describe(value)} to a row of {what}")
        values = list(value.items)
    else:
        values = [_float(value)]
    consts = [_const_index(k, d, what) for k, d in zip(items, shape)]
    for k, c in zip(items, consts):
        if c is None:
            kv = S.as_scalar(k)
            if not (kv.type.is_int or kv.type.name == "index"):
                raise UserError(f"a vector index must be an integer, got {S.describe(k)}")
    flat = list(v.items)
    width = len(values)
    for prefix in itertools.product(*(range(d) for d in shape[:len(items)])):
        if any(c is not None and c != p for c, p in zip(consts, prefix)):
            continue
        cond = None
        for k, c, p in zip(items, consts, prefix):
            if c is None:
                e = S.compare("==", S.as_scalar(k), Literal(p))
                cond = e if cond is None else S.binary("&", cond, e)
        base = int(np.ravel_multi_index(prefix + (0,) * len(rest), shape))
        for t in range(width):
            new = S.as_scalar(values[t], v.type.dtype)
            flat[base + t] = new if cond is None else S.select(cond, new,
                                                               S.as_scalar(flat[base + t]))
    return of_type(v.type, flat)


def axis_index(t: VecType, name: str) -> int:
    """The component `.x .y .z .w` names in a value of type `t`, or UserError."""
    if t.kind == "transform":
        raise UserError(f"a {t!r} value has no attribute .{name} (its parts: .p, a vec3, and "
                        ".q, a quat)")
    if t.kind == "mat" or name not in _AXES or _AXES[name] >= t.size:
        have = (", ".join(f".{a}" for a in list(_AXES)[:t.size])
                if t.kind != "mat" else "none (index a matrix: m[i, j])")
        raise UserError(f"a {t!r} value has no attribute .{name} (its components: {have})")
    return _AXES[name]


def axis(v: Vec, name: str) -> int:
    """The component `.x .y .z .w` names, or UserError."""
    return axis_index(v.type, name)


def attribute(v: Vec, name: str) -> Scalar | Vec:
    """`v.x` (a component), or a transform's `t.p` (its position) and `t.q` (its rotation)."""
    if v.type.kind == "transform" and name in ("p", "q"):
        return transform_get_translation(v) if name == "p" else transform_get_rotation(v)
    return v.items[axis(v, name)]


# ---- arithmetic -----------------------------------------------------------------------
def _same_shape(op: str, a: Vec, b: Vec) -> None:
    if a.type.shape != b.type.shape or (a.type.kind == "mat") != (b.type.kind == "mat"):
        raise UserError(f"operator {op} on {S.describe(a)} and {S.describe(b)}: their "
                        "shapes differ")


def _componentwise(fn, a: Vec, b: Vec | None = None) -> Vec:
    items = ([fn(x) for x in a.items] if b is None else
             [fn(x, y) for x, y in zip(a.items, b.items)])
    return make(a.type.kind, a.type.shape, items)


def _sum(terms: Sequence) -> Scalar:
    out = terms[0]
    for t in terms[1:]:
        out = S.binary("+", out, t)
    return out


def _is_scalar(v) -> bool:
    return isinstance(v, (Scalar, Literal)) and not (isinstance(v, Literal)
                                                    and isinstance(v.value, bool))


def binary(op: str, a, b):
    """`a op b` where a or b is a Vec: + - between like shapes, * / by a scalar, * and @
    as Warp's mul (matrix products, quaternion product)."""
    if op in ("+", "-"):
        if not (isinstance(a, Vec) and isinstance(b, Vec)):
            raise UserError(f"operator {op} on {S.describe(a)} and {S.describe(b)} (add or "
                            "subtract vectors of the same shape)")
        _same_shape(op, a, b)
        kind = a.type.kind if a.type.kind == b.type.kind else "vec"
        out = _componentwise(lambda x, y: S.binary(op, x, y), a, b)
        return make(kind, out.type.shape, out.items)
    if op == "*" and (_is_scalar(a) or _is_scalar(b)):
        s, v = (a, b) if _is_scalar(a) else (b, a)
        first = _is_scalar(a)
        return _componentwise(lambda x: S.binary("*", s, x) if first else S.binary("*", x, s),
                              v)
    if op == "/" and isinstance(a, Vec) and _is_scalar(b):
        return _componentwise(lambda x: S.binary("/", x, b), a)
    if op == "/" and _is_scalar(a) and isinstance(b, Vec):
        return _componentwise(lambda x: S.binary("/", a, x), b)
    if op in ("*", "@") and isinstance(a, Vec) and isinstance(b, Vec):
        return mul(a, b)
    raise UserError(f"operator {op} on {S.describe(a)} and {S.describe(b)}"
                    + (" (adjit.cw_mul/cw_div are the component-wise product and quotient)"
                       if op in ("*", "/") else ""))


def negate(v: Vec) -> Vec:
    return _componentwise(S.negate, v)


def equal(op: str, a, b) -> Scalar:
    """`a == b` / `a != b`: whether every component is equal (Warp's meaning), a bool."""
    if not (isinstance(a, Vec) and isinstance(b, Vec)):
        raise UserError(f"comparison {op} of {S.describe(a)} and {S.describe(b)}")
    if op not in ("==", "!="):
        raise UserError(f"comparison {op} of vectors: only == and != are defined")
    _same_shape(op, a, b)
    out = None
    for x, y in zip(a.items, b.items):
        e = S.compare("==", x, y)
        out = e if out is None else S.binary("&", out, e)
    return out if op == "==" else S.logical_not(out)


# ---- builtins -------------------------------------------------------------------------
def _vec_arg(v, name: str, kinds=("vec", "quat"), size: int | None = None) -> Vec:
    if (not isinstance(v, Vec) or v.type.kind not in kinds or
            (size is not None and v.type.size != size)):
        want = " or ".join(kinds) if size is None else f"a {size}-component {kinds[0]}"
        raise UserError(f"{name}() takes {want}, got {S.describe(v)}")
    return v


def _mat_arg(v, name: str, square: bool = False) -> Vec:
    if (not isinstance(v, Vec) or v.type.kind != "mat" or
            (square and v.type.shape[0] != v.type.shape[1])):
        raise UserError(f"{name}() takes a {'square ' if square else ''}matrix, got "
                        f"{S.describe(v)}")
    return v


def dot(a, b) -> Scalar:
    a, b = _vec_arg(a, "dot"), _vec_arg(b, "dot")
    _same_shape("dot", a, b)
    return _sum([S.binary("*", x, y) for x, y in zip(a.items, b.items)])


def cross(a, b) -> Vec:
    a, b = _vec_arg(a, "cross", ("vec",), 3), _vec_arg(b, "cross", ("vec",), 3)
    (ax, ay, az), (bx, by, bz) = a.items, b.items
    d = lambda p, q, r, s: S.binary("-", S.binary("*", p, q), S.binary("*", r, s))  # noqa: E731
    return make("vec", (3,), [d(ay, bz, az, by), d(az, bx, ax, bz), d(ax, by, ay, bx)])


def length_sq(v) -> Scalar:
    v = _vec_arg(v, "length_sq")
    return dot(v, v)


def _safe_sqrt(s: Scalar) -> tuple[Scalar, Scalar]:
    """(s > 0, sqrt(s) where s > 0 else sqrt(1)): the square root is taken of 1 where s
    is 0, so that its derivative (1/(2 sqrt s)) is never infinite; callers select."""
    ok = S.compare(">", s, Literal(0.0))
    return ok, S.math_unary("sqrt", S.select(ok, s, Literal(1.0)))


def length(v) -> Scalar:
    """|v|; 0 with a zero derivative at the zero vector (Warp's adj_length), not NaN."""
    v = _vec_arg(v, "length")
    ok, r = _safe_sqrt(length_sq(v))
    return S.select(ok, r, Literal(0.0))


def normalize(v) -> Vec:
    """v / |v|, and the zero vector for the zero vector, with a zero derivative there (as
    Warp documents): the division is by 1 where |v| is 0, so neither the value nor the
    derivative is NaN."""
    v = _vec_arg(v, "normalize")
    ok, r = _safe_sqrt(length_sq(v))
    inv = S.binary("/", Literal(1.0), r)
    return make(v.type.kind, v.type.shape,
                [S.select(ok, S.binary("*", x, inv), zero(x)) for x in v.items])


def outer(a, b) -> Vec:
    a, b = _vec_arg(a, "outer", ("vec",)), _vec_arg(b, "outer", ("vec",))
    return make("mat", (a.type.size, b.type.size),
                [S.binary("*", x, y) for x in a.items for y in b.items])


def transpose(m) -> Vec:
    m = _mat_arg(m, "transpose")
    n, k = m.type.shape
    rows = _rows(m)
    return make("mat", (k, n), [rows[i][j] for j in range(k) for i in range(n)])


def trace(m) -> Scalar:
    m = _mat_arg(m, "trace", square=True)
    rows = _rows(m)
    return _sum([rows[i][i] for i in range(len(rows))])


def diag(v) -> Vec:
    v = _vec_arg(v, "diag", ("vec",))
    n = v.type.size
    return make("mat", (n, n), [v.items[i] if i == j else zero(v.items[0])
                                for i in range(n) for j in range(n)])


def get_diag(m) -> Vec:
    """The diagonal of a square matrix, a vector (Warp's get_diag)."""
    m = _mat_arg(m, "get_diag", square=True)
    rows = _rows(m)
    return make("vec", (len(rows),), [rows[i][i] for i in range(len(rows))])


def identity(n, dtype=None) -> Vec:
    if not (isinstance(n, Literal) and isinstance(n.value, int) and n.value >= 1):
        raise UserError("identity(n, dtype) takes a constant positive n")
    t = f32 if dtype is None else as_scalar_type(dtype)
    k = n.value
    return make("mat", (k, k), [Literal(1.0 if i == j else 0.0)
                                for i in range(k) for j in range(k)], t)


def _det(rows: list[list]) -> Scalar:
    """Laplace expansion along the first row (n <= 4: at most 24 products, the closed
    forms Warp writes out)."""
    n = len(rows)
    if n == 1:
        return rows[0][0]
    if n == 2:
        return S.binary("-", S.binary("*", rows[0][0], rows[1][1]),
                        S.binary("*", rows[0][1], rows[1][0]))
    terms = []
    for j in range(n):
        minor = [r[:j] + r[j + 1:] for r in rows[1:]]
        t = S.binary("*", rows[0][j], _det(minor))
        terms.append(t if j % 2 == 0 else S.negate(t))
    return _sum(terms)


def determinant(m) -> Scalar:
    m = _mat_arg(m, "determinant", square=True)
    if m.type.shape[0] > 4:
        raise UserError("determinant() takes matrices up to 4x4")
    return _det(_rows(m))


def inverse(m) -> Vec:
    """The inverse by cofactors (n <= 4); the zero matrix for a singular one (Warp's), its
    division made by 1 there so that no NaN reaches the derivative."""
    m = _mat_arg(m, "inverse", square=True)
    n = m.type.shape[0]
    if n > 4:
        raise UserError("inverse() takes matrices up to 4x4")
    rows = _rows(m)
    det = _det(rows)
    ok = S.compare("!=", det, Literal(0.0))
    inv_det = S.binary("/", Literal(1.0), S.select(ok, det, Literal(1.0)))
    items = []
    for i in range(n):          # inverse[i][j] = cofactor[j][i] / det
        for j in range(n):
            if n == 1:
                c = Literal(1.0)
            else:
                minor = [r[:i] + r[i + 1:] for k, r in enumerate(rows) if k != j]
                c = _det(minor)
                if (i + j) % 2:
                    c = S.negate(c)
            x = S.binary("*", c, inv_det)
            items.append(S.select(ok, x, zero(S.as_scalar(x, m.type.dtype))))
    return make("mat", (n, n), items, m.type.dtype)


def _quat_mul(a: Vec, b: Vec) -> Vec:
    (x1, y1, z1, w1), (x2, y2, z2, w2) = a.items, b.items
    p = lambda *t: _sum([S.binary("*", u, v) if s > 0 else S.negate(S.binary("*", u, v))  # noqa: E731
                         for s, u, v in t])
    return make("quat", (4,), [
        p((1, w1, x2), (1, x1, w2), (1, y1, z2), (-1, z1, y2)),
        p((1, w1, y2), (-1, x1, z2), (1, y1, w2), (1, z1, x2)),
        p((1, w1, z2), (1, x1, y2), (-1, y1, x2), (1, z1, w2)),
        p((1, w1, w2), (-1, x1, x2), (-1, y1, y2), (-1, z1, z2))])


def mul(a, b):
    """Warp's mul: matrix times matrix or vector, row vector times matrix, quaternion
    product, and a scalar times anything."""
    if _is_scalar(a) or _is_scalar(b):
        return binary("*", a, b)
    if not (isinstance(a, Vec) and isinstance(b, Vec)):
        raise UserError(f"mul() of {S.describe(a)} and {S.describe(b)}")
    ka, kb = a.type.kind, b.type.kind
    if ka == "quat" and kb == "quat":
        return _quat_mul(a, b)
    if ka == "transform" and kb == "transform":
        return transform_multiply(a, b)
    if ka == "mat" and kb == "mat":
        n, k = a.type.shape
        k2, m = b.type.shape
        if k != k2:
            raise UserError(f"mul() of {S.describe(a)} and {S.describe(b)}: inner sizes "
                            f"{k} and {k2} differ")
        ra, rb = _rows(a), _rows(b)
        return make("mat", (n, m), [_sum([S.binary("*", ra[i][t], rb[t][j]) for t in range(k)])
                                    for i in range(n) for j in range(m)])
    if ka == "mat" and kb == "vec":
        n, k = a.type.shape
        if b.type.size != k:
            raise UserError(f"mul() of {S.describe(a)} and {S.describe(b)}: sizes differ")
        return make("vec", (n,), [_sum([S.binary("*", r[t], b.items[t]) for t in range(k)])
                                  for r in _rows(a)])
    if ka == "vec" and kb == "mat":
        k, m = b.type.shape
        if a.type.size != k:
            raise UserError(f"mul() of {S.describe(a)} and {S.describe(b)}: sizes differ")
        rb = _rows(b)
        return make("vec", (m,), [_sum([S.binary("*", a.items[t], rb[t][j]) for t in range(k)])
                                  for j in range(m)])
    raise UserError(f"mul() of {S.describe(a)} and {S.describe(b)} (Warp's mul: matrix "
                    "times matrix or vector, quaternion times quaternion; adjit.dot and "
                    "adjit.cw_mul multiply vectors)")


def cw(op: str, a, b) -> Vec:
    if not (isinstance(a, Vec) and isinstance(b, Vec)):
        raise UserError(f"cw_{'mul' if op == '*' else 'div'}() takes two vectors or matrices, "
                        f"got {S.describe(a)} and {S.describe(b)}")
    _same_shape(op, a, b)
    return _componentwise(lambda x, y: S.binary(op, x, y), a, b)


def skew(v) -> Vec:
    v = _vec_arg(v, "skew", ("vec",), 3)
    x, y, z = v.items
    o = zero(x)
    return make("mat", (3, 3), [o, S.negate(z), y, z, o, S.negate(x), S.negate(y), x, o])


def quat_from_axis_angle(ax, angle) -> Vec:
    ax = _vec_arg(ax, "quat_from_axis_angle", ("vec",), 3)
    half = S.binary("*", _float(angle), Literal(0.5))
    s, c = S.math_unary("sin", half), S.math_unary("cos", half)
    return make("quat", (4,), [*(S.binary("*", x, s) for x in ax.items), c])


def quat_inverse(q) -> Vec:
    """The conjugate (Warp's quat_inverse: the inverse of a unit quaternion)."""
    q = _vec_arg(q, "quat_inverse", ("quat",))
    x, y, z, w = q.items
    return make("quat", (4,), [S.negate(x), S.negate(y), S.negate(z), w])


def quat_rotate(q, v) -> Vec:
    """v rotated by unit quaternion q, Warp's formula: v (2w² - 1) + 2w (q_v × v) +
    2 q_v (q_v · v)."""
    q = _vec_arg(q, "quat_rotate", ("quat",))
    v = _vec_arg(v, "quat_rotate", ("vec",), 3)
    qv = make("vec", (3,), q.items[:3])
    w = q.items[3]
    a = S.binary("-", S.binary("*", S.binary("*", w, w), Literal(2.0)), Literal(1.0))
    c = cross(qv, v)
    d = S.binary("*", dot(qv, v), Literal(2.0))
    w2 = S.binary("*", w, Literal(2.0))
    return binary("+", binary("+", binary("*", v, a), binary("*", c, w2)), binary("*", qv, d))


def quat_rotate_inv(q, v) -> Vec:
    return quat_rotate(quat_inverse(q), v)


def quat_to_matrix(q) -> Vec:
    """The rotation matrix of unit quaternion q: its columns are the rotated axes."""
    q = _vec_arg(q, "quat_to_matrix", ("quat",))
    cols = [quat_rotate(q, make("vec", (3,), [Literal(float(i == k)) for i in range(3)],
                                q.type.dtype)) for k in range(3)]
    return matrix_from_cols(*cols)


def _b(op, a, b):
    return S.binary(op, a, b)


def quat_to_axis_angle(q) -> tuple:
    """(axis, angle), Warp's: the rotation of q about a unit axis by an angle in [0, pi]
    (q and -q give the same: the sign of w is folded into the axis). At angle 0 the axis
    is the zero vector, and both have a zero derivative there, as normalize and length do."""
    q = _vec_arg(q, "quat_to_axis_angle", ("quat",))
    x, y, z, w = q.items
    flip = S.compare("<", w, Literal(0.0))
    v = make("vec", (3,), [S.select(flip, S.negate(c), c) for c in (x, y, z)], q.type.dtype)
    angle = _b("*", Literal(2.0), S.atan2(length(v), S.absolute(w)))
    return normalize(v), angle


# Below this squared half angle slerp's sin(t phi) / sin(phi) and cos(t phi) are their
# Taylor series in phi^2 (exact to rounding there: the next term is O(phi^4)), so that the
# value and its derivatives are defined where the two quaternions are equal (phi = 0).
_SMALL = {"f32": 3e-4, "f64": 1e-8}


def quat_slerp(q0, q1, t) -> Vec:
    """Warp's quat_slerp: q0 * quat_from_axis_angle(axis, t * angle), (axis, angle) the
    rotation from q0 to q1 (quat_to_axis_angle(quat_inverse(q0) * q1): the shorter way). It
    is written as q0 * (v sin(t phi) / |v|, cos(t phi)), (v, w) that rotation with w >= 0 and
    phi = atan2(|v|, w), whose Taylor series near phi = 0 keeps it and its derivatives
    smooth where q0 == q1 (Warp's formula divides 0 by 0 there)."""
    q0 = _vec_arg(q0, "quat_slerp", ("quat",))
    q1 = _vec_arg(q1, "quat_slerp", ("quat",))
    t = _float(t)
    rel = _quat_mul(quat_inverse(q0), q1)
    x, y, z, w = rel.items
    flip = S.compare("<", w, Literal(0.0))
    v = [S.select(flip, S.negate(c), c) for c in (x, y, z)]
    w = S.absolute(w)
    r2 = _sum([_b("*", c, c) for c in v])
    dt = rel.type.dtype
    small = S.compare("<=", r2, _b("*", S.as_scalar(Literal(_SMALL.get(dt.name, 1e-8)), dt),
                                   _b("*", w, w)))
    # the exact form, on |v| = 1 where the series is used (no 0/0, no infinite derivative)
    r = S.math_unary("sqrt", S.select(small, S.as_scalar(Literal(1.0), dt), r2))
    tphi = _b("*", t, S.atan2(r, w))
    g_big, c_big = _b("/", S.math_unary("sin", tphi), r), S.math_unary("cos", tphi)
    # the series: phi^2 ~ |v|^2 / w^2; w is 1 where it is 0 (q0 or q1 zero: the identity)
    ws = S.select(S.compare(">", w, Literal(0.0)), w, S.as_scalar(Literal(1.0), dt))
    inv_w = _b("/", Literal(1.0), ws)
    phi2 = _b("*", r2, _b("*", inv_w, inv_w))
    tt = _b("*", t, t)
    g_small = _b("*", _b("*", t, inv_w),
                 _b("-", Literal(1.0),
                    _b("*", _b("+", Literal(1.0 / 3.0), _b("/", tt, Literal(6.0))), phi2)))
    c_small = _b("-", Literal(1.0), _b("*", _b("*", tt, phi2), Literal(0.5)))
    g, c = S.select(small, g_small, g_big), S.select(small, c_small, c_big)
    step = make("quat", (4,), [*(_b("*", comp, g) for comp in v), c], dt)
    return _quat_mul(q0, step)


def lerp(a, b, t):
    """Warp's lerp: a * (1 - t) + b * t, of scalars (element-wise over arrays in @jit
    code) or of vectors, matrices and quaternions of one type (t a scalar)."""
    if isinstance(a, Vec) or isinstance(b, Vec):
        if not (isinstance(a, Vec) and isinstance(b, Vec)):
            raise UserError(f"lerp() of {S.describe(a)} and {S.describe(b)}: give two vectors "
                            "of one type, or two scalars")
        _same_shape("lerp", a, b)
        if not _is_scalar(t):
            raise UserError(f"lerp(a, b, t) takes a scalar t, got {S.describe(t)}")
        return binary("+", binary("*", a, _b("-", Literal(1.0), t)), binary("*", b, t))
    return B.lift(lambda x, y, s: _b("+", _b("*", x, _b("-", Literal(1.0), s)), _b("*", y, s)),
                  [a, b, t])


def ddot(a, b) -> Scalar:
    """The double dot product of two matrices of one shape: sum of a[i, j] * b[i, j]."""
    a, b = _mat_arg(a, "ddot"), _mat_arg(b, "ddot")
    _same_shape("ddot", a, b)
    return _sum([_b("*", x, y) for x, y in zip(a.items, b.items)])


def _transform(name: str, m, p, w: bool) -> Vec:
    if isinstance(m, Vec) and m.type.kind == "transform":
        p = _vec_arg(p, name, ("vec",), 3)
        r = quat_rotate(transform_get_rotation(m), p)
        return binary("+", r, transform_get_translation(m)) if w else r
    if not (isinstance(m, Vec) and m.type.kind == "mat"):
        raise UserError(f"{name}() takes a transform or a 4x4 matrix, got {S.describe(m)}")
    p = _vec_arg(p, name, ("vec",), 3)
    if m.type.shape != (4, 4):
        raise UserError(f"{name}() takes a 4x4 matrix (a mat44), got {S.describe(m)}")
    rows = _rows(m)
    return make("vec", (3,), [_sum([_b("*", rows[i][j], p.items[j]) for j in range(3)]
                                   + ([rows[i][3]] if w else [])) for i in range(3)])


def _xform_arg(t, name: str) -> Vec:
    if not (isinstance(t, Vec) and t.type.kind == "transform"):
        raise UserError(f"{name}() takes a transform, got {S.describe(t)}")
    return t


def transform_get_translation(t) -> Vec:
    t = _xform_arg(t, "transform_get_translation")
    return make("vec", (3,), t.items[:3], t.type.dtype)


def transform_get_rotation(t) -> Vec:
    t = _xform_arg(t, "transform_get_rotation")
    return make("quat", (4,), t.items[3:], t.type.dtype)


def _xform(p: Vec, q: Vec) -> Vec:
    return make("transform", (7,), [*p.items, *q.items])


_PARTS = {"p": (0, "vec", 3), "q": (3, "quat", 4)}


def transform_part(t: VecType, path: list):
    """For a write into `t.p...` or `t.q...` of a transform type `t` (`path` the target's
    subscripts and attributes after the transform): (the part's first component, its type,
    the rest of the path); None for any other path."""
    if not (t.kind == "transform" and path and isinstance(path[0], ast.Attribute)
            and path[0].attr in _PARTS):
        return None
    offset, kind, n = _PARTS[path[0].attr]
    return offset, VecType(kind, (n,), t.dtype), path[1:]


def with_part(t: Vec, name: str, value) -> Vec:
    """Transform `t` with its part `name` ("p" or "q") replaced by `value`."""
    offset, kind, n = _PARTS[name]
    if not (isinstance(value, Vec) and value.type.kind == kind and value.type.size == n):
        raise UserError(f"assigning {S.describe(value)} to .{name} of {S.describe(t)} (a "
                        f"{'vec3' if name == 'p' else 'quat'})")
    items = list(t.items)
    items[offset:offset + n] = value.items
    return of_type(t.type, items)


def store_part(gen, va: VecArray, sub, offset: int, t: VecType, comps: list, value) -> None:
    """`xf[i].p = v`, `xf[i].q = q`, `xf[i].p.x = s`, `xf[i].q[k] = s`: writes only those
    components of a transform element (`t` the part's type)."""
    if len(comps) > 1:
        raise UserError(f"a {t!r} value takes one index, got {len(comps)}")
    if not comps:
        if not (isinstance(value, Vec) and value.type.kind == t.kind
                and value.type.size == t.size):
            raise UserError(f"assigning {S.describe(value)} to a {t!r} part of {va.vec!r}")
        for k, x in enumerate(value.items):
            store_component(gen, va, sub, [Literal(offset + k)], x)
        return
    c = _const_index(comps[0], t.size, f"a {t!r} value")
    k = (Literal(offset + c) if c is not None else
         S.binary("+", S.as_scalar(comps[0]), Literal(offset)))
    store_component(gen, va, sub, [k], value)


def transform_multiply(a, b) -> Vec:
    """Warp's: a after b, (quat_rotate(a.q, b.p) + a.p, a.q * b.q)."""
    a, b = _xform_arg(a, "transform_multiply"), _xform_arg(b, "transform_multiply")
    qa = transform_get_rotation(a)
    return _xform(binary("+", quat_rotate(qa, transform_get_translation(b)),
                         transform_get_translation(a)),
                  _quat_mul(qa, transform_get_rotation(b)))


def transform_inverse(t) -> Vec:
    """Warp's: (-quat_rotate(q^-1, p), q^-1) for a unit rotation q."""
    t = _xform_arg(t, "transform_inverse")
    qi = quat_inverse(transform_get_rotation(t))
    return _xform(negate(quat_rotate(qi, transform_get_translation(t))), qi)


def transform_point(m, p) -> Vec:
    """Warp's transform_point: of a transform, quat_rotate(t.q, p) + t.p; of a mat44, m
    applied to (p, 1), its first three components (no division by the fourth: an affine
    transform)."""
    return _transform("transform_point", m, p, True)


def transform_vector(m, v) -> Vec:
    """Warp's transform_vector: of a transform, quat_rotate(t.q, v); of a mat44, m applied
    to (v, 0) (no translation)."""
    return _transform("transform_vector", m, v, False)


def matrix_from_rows(*rows) -> Vec:
    rows = [_vec_arg(r, "matrix_from_rows", ("vec",)) for r in rows]
    if not rows or len({r.type.size for r in rows}) != 1:
        raise UserError("matrix_from_rows() takes vectors of one size")
    return make("mat", (len(rows), rows[0].type.size), [x for r in rows for x in r.items])


def matrix_from_cols(*cols) -> Vec:
    cols = [_vec_arg(c, "matrix_from_cols", ("vec",)) for c in cols]
    if not cols or len({c.type.size for c in cols}) != 1:
        raise UserError("matrix_from_cols() takes vectors of one size")
    n = cols[0].type.size
    return make("mat", (n, len(cols)), [c.items[i] for i in range(n) for c in cols])


def vector(*args) -> Vec:
    """`adjit.vector(a, b, c)`: a vector of the arguments' type (Warp's wp.vector)."""
    if len(args) < 1:
        raise UserError("vector() takes at least one component")
    return make("vec", (len(args),), [_float(a) for a in args])


# ---- arrays of vectors ----------------------------------------------------------------
def _element_subs(va: VecArray, sub, gen) -> list[ir.Value]:
    items = list(sub) if isinstance(sub, tuple) else [sub]
    if len(items) != va.array.type.ndim - len(va.vec.shape):
        raise UserError(f"an array of {va.vec!r} with {va.array.type.ndim - len(va.vec.shape)} "
                        f"dimension(s) takes that many indices, got {len(items)}")
    return gen.subscripts(va.array, tuple(items))


def _component_subs(va: VecArray, subs: list[ir.Value]) -> list[list[ir.Value]]:
    return [subs + [A.idx(k) for k in ks]
            for ks in itertools.product(*(range(d) for d in va.vec.shape))]


def load(gen, va: VecArray, sub) -> Vec:
    subs = _element_subs(va, sub, gen)
    return of_type(va.vec, [A.load(va.array, s, gen.debug) for s in _component_subs(va, subs)])


def store(gen, va: VecArray, sub, value) -> None:
    if not (isinstance(value, Vec) and value.type.shape == va.vec.shape
            and (value.type.kind == "mat") == (va.vec.kind == "mat")):
        raise UserError(f"assigning {S.describe(value)} into an array of {va.vec!r}")
    subs = _element_subs(va, sub, gen)
    for s, x in zip(_component_subs(va, subs), value.items):
        A.store(va.array, s, x, gen.debug)


def store_component(gen, va: VecArray, sub, comps: list, value) -> None:
    """`y[i].x = s`, `y[i][k] = s`, `y[i][r, c] = s`, `y[i][r] = row`: writes only those
    components of element `y[sub]` (`comps`: indices into its trailing dimensions, constant or
    runtime), as Warp does; the others are not read or written."""
    shape, what = va.vec.shape, f"a {va.vec!r} element"
    if len(comps) > len(shape):
        raise UserError(f"{what} takes {len(shape)} ind{'ex' if len(shape) == 1 else 'ices'}, "
                        f"got {len(comps)}")
    if any(isinstance(k, SliceValue) for k in comps):
        raise UserError(f"assigning to a slice of {what}: assign its components one by one")
    idx = []
    for k, d in zip(comps, shape):
        c = _const_index(k, d, what)
        if c is None:
            kv = S.as_scalar(k)
            if not (kv.type.is_int or kv.type.name == "index"):
                raise UserError(f"a vector index must be an integer, got {S.describe(k)}")
        idx.append(A.idx(c) if c is not None else S.to_index(k))
    subs = _element_subs(va, sub, gen) + idx
    rest = shape[len(comps):]
    if not rest:
        A.store(va.array, subs, _float(value), gen.debug)
        return
    if not (isinstance(value, Vec) and value.type.shape == rest and value.type.kind != "mat"):
        raise UserError(f"assigning {S.describe(value)} to a row of {what}")
    for ks, x in zip(itertools.product(*(range(d) for d in rest)), value.items):
        A.store(va.array, subs + [A.idx(k) for k in ks], x, gen.debug)


def atomic_add(gen, va: VecArray, sub, value) -> Vec:
    """adjit.atomic_add(x, i, v) into an array of vectors: each component atomically (Warp's
    meaning); the value is the element before."""
    if not (isinstance(value, Vec) and value.type.shape == va.vec.shape):
        raise UserError(f"atomic_add of {S.describe(value)} into an array of {va.vec!r}")
    subs = _element_subs(va, sub, gen)
    return of_type(va.vec, [A.atomic_add(va.array, s, x, gen.debug)
                            for s, x in zip(_component_subs(va, subs), value.items)])


def check_trailing(arr: Array, vec: VecType, what: str) -> None:
    """The compiled code's check that an array given for an array of `vec` has `vec.shape`
    as its trailing dimensions (a ValueError after the call; a call from Python is checked
    before too, where the fast path does not skip it)."""
    nd = arr.type.ndim
    ok = None
    for k, d in enumerate(vec.shape):
        e = arith.cmpi(arith.CmpIPredicate.eq, memref.dim(arr.value, A.idx(nd - len(vec.shape) + k)),
                       A.idx(d))
        ok = e if ok is None else arith.andi(ok, e)
    adj.check(ok, "ValueError", f"{what} must have trailing dimensions "
                                f"{vec.shape} (an array of {vec!r})")


# ---- function boundaries --------------------------------------------------------------
def flat_types(types: Sequence) -> list:
    """The IR's types of parameters of `types`: a vector type is that many scalars."""
    out = []
    for t in types:
        out.extend([t.dtype] * t.size if isinstance(t, VecType) else
                   [t.array] if isinstance(t, VecArrayType) else [t])
    return out


def flat_values(v) -> list[ir.Value]:
    if isinstance(v, VecArray):
        return [v.array.value]
    return [x.value for x in v.items] if isinstance(v, Vec) else [v.value]


def operand_type(v):
    """The parameter type a call's argument `v` specialises a device function for: an array
    of vectors stays one (VecArrayType: the callee indexes vectors), unless it is a view."""
    if isinstance(v, VecArray):
        return (VecArrayType(v.vec, v.type.ndim - len(v.vec.shape)) if not v.type.strided
                else v.type)
    return v.type


def flat_names(names: Sequence[str], types: Sequence) -> list[str]:
    out = []
    for n, t in zip(names, types):
        out.extend([f"{n}[{k}]" for k in range(t.size)] if isinstance(t, VecType) else [n])
    return out


def annotations(pyfn) -> list:
    """Per parameter, its vector annotation (a VecType or VecArrayType), its struct's
    StructType (structs.py), or None."""
    try:
        sig = inspect.signature(pyfn, eval_str=True)
    except Exception:     # (functions.annotations_of reported it when it was decorated)
        return []
    return [p.annotation if isinstance(p.annotation, (VecType, VecArrayType)) else
            struct_type(p.annotation) if isinstance(p.annotation, type) else None
            for p in sig.parameters.values()]


def bind(params: Sequence[str], types: Sequence, args: Sequence[ir.Value], anns: Sequence,
         where: str) -> dict:
    """Parameter names -> values: a VecType parameter from its scalars, a parameter
    annotated with a vector type given a small array from its elements, an array annotated
    `adjit.Array[vec, n]` as an array of vectors (its trailing dimensions checked)."""
    out, pos = {}, 0
    anns = list(anns) + [None] * (len(params) - len(anns))
    for name, t, ann in zip(params, types, anns):
        if isinstance(t, VecType):
            out[name] = of_type(t, [Scalar(a, t.dtype) for a in args[pos:pos + t.size]])
            pos += t.size
            continue
        a = args[pos]
        pos += 1
        if isinstance(t, VecArrayType):      # passed on by a caller: checked there
            out[name] = VecArray(Array(a, t.array, a), t.vec)
            continue
        if not isinstance(t, ArrayType):
            out[name] = Scalar(a, t)
            continue
        arr = Array(a, t, a)
        what = f"{where}: argument {name!r}"
        if isinstance(ann, VecArrayType):
            check_trailing(arr, ann.vec, what)
            out[name] = VecArray(arr, ann.vec)
        elif isinstance(ann, VecType):
            # A vector given from Python is a NumPy array of its shape (adjit.vec3(...)):
            # its components are read once, here.
            check_trailing(arr, ann, what)
            out[name] = of_type(ann, [A.load(arr, [A.idx(k) for k in ks], False) for ks in
                                      itertools.product(*(range(d) for d in ann.shape))])
        else:
            out[name] = arr
    return out


def regroup(outs: list, layout: Sequence) -> list:
    """Results of a call, the scalars of each vector result gathered into a Vec
    (`layout`: per result of the Python function, its VecType or None)."""
    out, pos = [], 0
    for t in layout:
        if isinstance(t, VecType):
            out.append(of_type(t, outs[pos:pos + t.size]))
            pos += t.size
        else:
            out.append(outs[pos])
            pos += 1
    return out


# ---- builtin calls --------------------------------------------------------------------
def _fixed(fn, n: int, name: str):
    def handler(gen, args, kwargs):
        if kwargs:
            raise UserError(f"{name}() takes no keyword arguments")
        if len(args) != n:
            raise UserError(f"{name}() takes {n} argument{'s' if n != 1 else ''}, got "
                            f"{len(args)}")
        return fn(*args)
    return handler


def _identity(gen, args, kwargs):
    n = kwargs.pop("n", args[0] if args else None)
    dtype = kwargs.pop("dtype", args[1] if len(args) > 1 else None)
    if kwargs or n is None or len(args) > 2:
        raise UserError("identity(n, dtype=adjit.f32) takes n and dtype")
    if isinstance(dtype, PyObj):
        dtype = dtype.obj
    return identity(n, dtype)


def _transform_identity(gen, args, kwargs):
    dtype = kwargs.pop("dtype", args[0] if args else None)
    if kwargs or len(args) > 1:
        raise UserError("transform_identity(dtype=adjit.f32) takes a dtype")
    t = f32 if dtype is None else as_scalar_type(dtype.obj if isinstance(dtype, PyObj)
                                                  else dtype)
    return make("transform", (7,), [Literal(float(k == 6)) for k in range(7)], t)


def _variadic(fn, name: str):
    def handler(gen, args, kwargs):
        if kwargs:
            raise UserError(f"{name}() takes no keyword arguments")
        return fn(*args)
    return handler


VECTOR_BUILTINS = {
    "cross": _fixed(cross, 2, "cross"), "length": _fixed(length, 1, "length"),
    "length_sq": _fixed(length_sq, 1, "length_sq"),
    "normalize": _fixed(normalize, 1, "normalize"), "outer": _fixed(outer, 2, "outer"),
    "determinant": _fixed(determinant, 1, "determinant"),
    "inverse": _fixed(inverse, 1, "inverse"), "mul": _fixed(mul, 2, "mul"),
    "diag": _fixed(diag, 1, "diag"), "identity": _identity,
    "trace": _fixed(trace, 1, "trace"), "skew": _fixed(skew, 1, "skew"),
    "cw_mul": _fixed(functools.partial(cw, "*"), 2, "cw_mul"),
    "cw_div": _fixed(functools.partial(cw, "/"), 2, "cw_div"),
    "quat_from_axis_angle": _fixed(quat_from_axis_angle, 2, "quat_from_axis_angle"),
    "quat_rotate": _fixed(quat_rotate, 2, "quat_rotate"),
    "quat_rotate_inv": _fixed(quat_rotate_inv, 2, "quat_rotate_inv"),
    "quat_inverse": _fixed(quat_inverse, 1, "quat_inverse"),
    "quat_to_matrix": _fixed(quat_to_matrix, 1, "quat_to_matrix"),
    "matrix_from_rows": _variadic(matrix_from_rows, "matrix_from_rows"),
    "matrix_from_cols": _variadic(matrix_from_cols, "matrix_from_cols"),
    "vector": _variadic(vector, "vector"),
    "quat_to_axis_angle": _fixed(quat_to_axis_angle, 1, "quat_to_axis_angle"),
    "quat_slerp": _fixed(quat_slerp, 3, "quat_slerp"), "lerp": _fixed(lerp, 3, "lerp"),
    "ddot": _fixed(ddot, 2, "ddot"), "get_diag": _fixed(get_diag, 1, "get_diag"),
    "transform_point": _fixed(transform_point, 2, "transform_point"),
    "transform_vector": _fixed(transform_vector, 2, "transform_vector"),
    "transform_get_translation": _fixed(transform_get_translation, 1,
                                        "transform_get_translation"),
    "transform_get_rotation": _fixed(transform_get_rotation, 1, "transform_get_rotation"),
    "transform_multiply": _fixed(transform_multiply, 2, "transform_multiply"),
    "transform_inverse": _fixed(transform_inverse, 1, "transform_inverse"),
    "transform_identity": _transform_identity,
}
for _name, _handler in VECTOR_BUILTINS.items():
    register_builtin([namespace[_name]], _handler)


def _on_vectors(name: str, vector_fn, n: int) -> None:
    """`adjit.dot` and `adjit.transpose`, and NumPy's `np.dot` and `np.transpose`, keep
    their array meaning (NumPy's) and take vectors and matrices too (Warp's; np.transpose
    of a matrix had returned it unchanged)."""
    for obj in (namespace[name], getattr(np, name)):
        arrays = lookup(obj)

        def handler(gen, args, kwargs, arrays=arrays):
            if any(isinstance(a, Vec) for a in args):
                return _fixed(vector_fn, n, name)(gen, args, kwargs)
            return arrays(gen, args, kwargs)

        register_builtin([obj], handler)


# The element-wise functions apply to each component of a vector, matrix or quaternion
# (`abs(v)`, `adjit.min(a, b)`, `np.sin(v)`, `adjit.where(c, a, b)`: Warp's and NumPy's
# meaning); max/min of one vector are its largest/smallest component (Warp's max(v)).
_COMPONENTWISE = (*UNARY_MATH, "floor", "ceil", "abs", "pow", "atan2", "hypot", "copysign",
                  "maximum", "minimum", "degrees", "radians", "clip", "where", "max", "min")
_NUMPY_NAMES = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "atan2": "arctan2",
                "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh", "pow": "power"}


def _over_components(name: str, obj, pairwise):
    """`obj`'s handler, taking vectors too: component by component through `pairwise` (the
    adjit builtin's handler, on scalars), or, for max/min of one vector, over its
    components; anything else as before."""
    before = lookup(obj)
    reduction_only = obj in (getattr(np, "max"), getattr(np, "min"), getattr(np, "amax", None),
                             getattr(np, "amin", None))

    def handler(gen, args, kwargs):
        vecs = [a for a in args if isinstance(a, Vec)]
        if not vecs:
            return before(gen, args, kwargs)
        if name in ("max", "min") and len(args) == 1 and not kwargs:
            return pairwise(gen, list(vecs[0].items), {})
        if reduction_only:
            raise UserError(f"np.{name}(v, axis) of {S.describe(vecs[0])}: a vector has no "
                            f"axes (adjit.{name}(a, b) is the component-wise {name})")
        for v in vecs[1:]:
            _same_shape(name, vecs[0], v)
        t = vecs[0].type
        kind = t.kind if all(v.type.kind == t.kind for v in vecs) else "vec"
        items = [pairwise(gen, [a.items[k] if isinstance(a, Vec) else a for a in args], kwargs)
                 for k in range(t.size)]
        return make(kind, t.shape, items)
    return handler


def _register_componentwise() -> None:
    import builtins as py
    import math
    for name in _COMPONENTWISE:
        pairwise = lookup(namespace[name])
        objs = [namespace[name], getattr(math, name, None), getattr(np, name, None),
                getattr(np, _NUMPY_NAMES.get(name, name), None),
                *([getattr(py, name)] if name in ("abs", "max", "min") else []),
                *([np.absolute] if name == "abs" else []),
                *([getattr(np, "a" + name, None)] if name in ("max", "min") else [])]
        seen = []
        for obj in objs:
            if obj is None or any(obj is o for o in seen) or lookup(obj) is None:
                continue
            seen.append(obj)
            register_builtin([obj], _over_components(name, obj, pairwise))


_register_componentwise()
_on_vectors("dot", dot, 2)
_on_vectors("transpose", transpose, 1)

_atomic_add_arrays = lookup(namespace["atomic_add"])


def _atomic(name: str, negate_value: bool):
    """atomic_add / atomic_sub (an add of -v): `(x, i, v)`, `(x, (i, j), v)`, and Warp's
    `(x, i, j, v)` with the indices as separate arguments; on an array of scalars or of
    vectors (each component atomically). The value is the element before."""
    def handler(gen, args, kwargs):
        if kwargs or len(args) < 3:
            raise UserError(f"adjit.{name}(arr, i, v) takes an array, its index (one per "
                            f"dimension: (arr, i, j, v) or (arr, (i, j), v)) and a value")
        arr, sub, v = args[0], (args[1] if len(args) == 3 else tuple(args[1:-1])), args[-1]
        if negate_value:
            v = negate(v) if isinstance(v, Vec) else B.lift(S.negate, [v])
        if isinstance(arr, VecArray):
            return atomic_add(gen, arr, sub, v)
        return _atomic_add_arrays(gen, [arr, sub, v], {})
    return handler


register_builtin([namespace["atomic_add"]], _atomic("atomic_add", False))
register_builtin([namespace["atomic_sub"]], _atomic("atomic_sub", True))

_len_others = lookup(len)


def _len(gen, args, kwargs):
    """len(v) of a vector or quaternion: its size; of a matrix: its rows (Warp's); a
    constant."""
    if len(args) == 1 and not kwargs and isinstance(args[0], Vec):
        return Literal(args[0].type.shape[0])
    return _len_others(gen, args, kwargs)


register_builtin([len], _len)
