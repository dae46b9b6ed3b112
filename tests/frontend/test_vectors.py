"""Small vectors, matrices and quaternions (adjit.vec3, mat33, quat...; compiler/vectors.py):
values in kernels, @func and @jit, arrays of them as trailing-dimension arrays, Warp's
builtins against NumPy, and their derivatives in both modes against finite differences."""
import numpy as np
import pytest

import adjit
from adjit import Array

rng = np.random.default_rng(7)


# ---- values, arrays of vectors, operators -----------------------------------------------
def _make_ops(V):
    """The kernel for vectors of type V (vec3 or vec3d)."""
    @adjit.func
    def spring(p: V, q: V, k: float):
        d = p - q
        return d * k, adjit.length(d)

    @adjit.kernel
    def ops(x: Array[V, 1], v: Array[V, 1], out: Array[V, 1], s):
        i = adjit.index()
        p = x[i]
        f = V(0.0, -9.8, 0.0)
        if p.y > 0.5:                      # a vector merged by an if
            f = f + v[i] * 2.0
        for _ in range(3):                 # and carried by a loop
            f += V(1.0, 0.0, 0.0)
        g, length = spring(p, v[i], 3.0)   # @func: vector argument and result
        f.z = f.z - 1.0                    # component assignment
        out[i] = f + g - (-p) / 2.0
        s[i] = length + f.x + p[2] + v[i][1] + float(p == p) + float(p != p)

    return ops


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_values_and_arrays_of_vectors(dt):
    n = 9
    x, v = rng.random((n, 3)).astype(dt), rng.random((n, 3)).astype(dt)
    out, s = np.zeros_like(x), np.zeros(n, dt)
    _make_ops(adjit.vec3 if dt == np.float32 else adjit.vec3d)(x, v, out, s, ndrange=n)
    f = np.tile([3.0, -9.8, -1.0], (n, 1))
    f = np.where(x[:, 1:2] > 0.5, f + 2 * v, f)
    tol = 1e-5 if dt == np.float32 else 1e-12
    np.testing.assert_allclose(out, f + 3 * (x - v) + x / 2, rtol=tol, atol=tol)
    np.testing.assert_allclose(s, np.linalg.norm(x - v, axis=1) + f[:, 0] + x[:, 2] + v[:, 1]
                               + 1, rtol=tol, atol=tol)


@adjit.kernel
def _indexing(m: Array[adjit.mat33, 1], k: Array[adjit.i64, 1], out):
    i = adjit.index()
    a = m[i]
    r = a[k[i]]                         # a runtime row index
    out[i, 0] = a[1, 2] + a[2][0] + r[k[i]] + r.x
    b = a
    b[0, 0] = 5.0
    b[1] = adjit.vec3(1.0, 2.0, 3.0)
    out[i, 1] = b[0, 0] + b[1, 1] + a[0, 0] * 0.0


def test_matrix_indexing():
    n = 6
    m = rng.random((n, 3, 3)).astype(np.float32)
    k = rng.integers(0, 3, n)
    out = np.zeros((n, 2), np.float32)
    _indexing(m, k, out, ndrange=n)
    rows = m[np.arange(n), k]
    np.testing.assert_allclose(out[:, 0], m[:, 1, 2] + m[:, 2, 0] + rows[np.arange(n), k]
                               + rows[:, 0], rtol=1e-6)
    np.testing.assert_allclose(out[:, 1], 7.0)


@adjit.jit
def _jit_sum(x: Array[adjit.vec3d, 1], g: adjit.vec3d):
    total = adjit.vec3d()
    for i in range(x.shape[0]):
        total = total + adjit.cross(x[i], g)
    return total, adjit.dot(total, g)


def test_jit_vectors_and_vector_arguments_from_python():
    x = rng.random((5, 3))
    g = adjit.vec3d(0.5, -1.0, 2.0)
    # A vector returned to Python comes back as a NumPy array of its shape and dtype.
    total, dot = _jit_sum(x, g)
    expected = np.cross(x, g).sum(0)
    assert isinstance(total, np.ndarray) and total.shape == (3,) and total.dtype == np.float64
    np.testing.assert_allclose(total, expected, rtol=1e-12)
    np.testing.assert_allclose(dot, expected @ g, rtol=1e-12)
    total, _ = _jit_sum(x, [0.5, -1.0, 2.0])   # any sequence of 3 numbers
    np.testing.assert_allclose(total, expected, rtol=1e-12)


@adjit.jit
def _jit_shapes(v: adjit.vec3, s: adjit.f32):
    return adjit.normalize(v) * s, adjit.outer(v, v), adjit.quat_from_axis_angle(v, s)


@adjit.jit
def _jit_one_vector(v: adjit.vec3):
    return -v


def test_vector_matrix_and_quaternion_results_are_arrays_of_their_shape():
    v = adjit.vec3(1.0, 2.0, 2.0)
    n, m, q = _jit_shapes(v, np.float32(3.0))
    np.testing.assert_allclose(n, v / 3.0 * 3.0, rtol=1e-6)
    assert n.dtype == m.dtype == q.dtype == np.float32
    assert m.shape == (3, 3) and q.shape == (4,)
    np.testing.assert_allclose(m, np.outer(v, v), rtol=1e-6)
    one = _jit_one_vector(v)
    assert isinstance(one, np.ndarray) and one.shape == (3,)
    np.testing.assert_array_equal(one, -v)


def test_python_side_constructors():
    assert adjit.vec3(1, 2, 3).dtype == np.float32 and adjit.vec3(1, 2, 3).shape == (3,)
    np.testing.assert_array_equal(adjit.vec3d(2.0), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(adjit.quat(), [0, 0, 0, 1])
    assert adjit.mat33().shape == (3, 3) and adjit.mat22d(1, 2, 3, 4)[1, 0] == 3
    assert repr(adjit.vec(5, adjit.f64)) == "adjit.vec(5, adjit.f64)"
    assert repr(adjit.Array[adjit.vec3, 1]) == "adjit.Array[adjit.vec3, 1]"
    assert adjit.mat(2, 3, np.float64).shape == (2, 3)


# ---- errors name the user's line ----------------------------------------------------------
def _compile_error(fn, *args, **kw):
    with pytest.raises(adjit.CompilationError) as e:
        fn(*args, **kw)
    return str(e.value)


def test_errors():
    @adjit.kernel
    def add_sizes(out):
        a = adjit.vec3(1.0, 2.0, 3.0)
        b = adjit.vec2(1.0, 2.0)
        out[0] = (a + b).x

    msg = _compile_error(add_sizes, np.zeros(1, np.float32), ndrange=1)
    assert "their shapes differ" in msg and "(a + b).x" in msg

    @adjit.kernel
    def bad_attr(out):
        a = adjit.vec3(1.0, 2.0, 3.0)
        out[0] = a.w

    msg = _compile_error(bad_attr, np.zeros(1, np.float32), ndrange=1)
    assert "has no attribute .w" in msg and "out[0] = a.w" in msg

    @adjit.kernel
    def bad_count(out):
        out[0] = adjit.vec3(1.0, 2.0).x

    msg = _compile_error(bad_count, np.zeros(1, np.float32), ndrange=1)
    assert "takes 3 components, got 2" in msg

    @adjit.kernel
    def vec_times_vec(out):
        a = adjit.vec3(1.0, 2.0, 3.0)
        out[0] = (a * a).x

    msg = _compile_error(vec_times_vec, np.zeros(1, np.float32), ndrange=1)
    assert "cw_mul" in msg and "(a * a).x" in msg

    @adjit.kernel
    def takes_vectors(x: Array[adjit.vec3, 1]):
        i = adjit.index()
        x[i] = x[i] * 2.0

    with pytest.raises(ValueError, match=r"trailing ones are \(3,\)"):
        takes_vectors(np.zeros((4, 2), np.float32), ndrange=4)
    with pytest.raises(TypeError, match="needs dtype float32"):
        takes_vectors(np.zeros((4, 3)), ndrange=4)
    ok = np.ones((4, 3), np.float32)
    takes_vectors(ok, ndrange=4)
    # The fast path (no Python checks) still meets the compiled code's check.
    with pytest.raises(ValueError, match="trailing dimensions"):
        takes_vectors(np.zeros((4, 2), np.float32), ndrange=4)
    np.testing.assert_array_equal(ok, 2.0)


# ---- builtins against NumPy, derivatives against finite differences ---------------------
def _unit_quats(n, dt):
    q = rng.standard_normal((n, 4))
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(dt)


def _well_conditioned(n, k, dt):
    return (rng.standard_normal((n, k, k)) * 0.3 + 2 * np.eye(k)).astype(dt)


def _quat_mul_np(a, b):
    x1, y1, z1, w1 = a
    x2, y2, z2, w2 = b
    return np.array([w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2, w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                     w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2, w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2])


def _rotate_np(q, v):
    # the rotation matrix of a unit quaternion, written independently of adjit's formula
    x, y, z, w = q
    m = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                  [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                  [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
    return m @ v


def _axis_angle_np(axis, angle):
    return np.array([*(axis * np.sin(angle / 2)), np.cos(angle / 2)])


# Each case: an @adjit.func of (a, b), its NumPy reference, the kinds of a, b and the
# result: "v3" a 3-vector, "m23" a 2x3 matrix, "q" a quaternion, "s" a scalar.
@adjit.func
def _f_dot(a, b):
    return adjit.dot(a, b)


@adjit.func
def _f_cross(a, b):
    return adjit.cross(a, b)


@adjit.func
def _f_length(a, b):
    return adjit.length(a)


@adjit.func
def _f_length_sq(a, b):
    return adjit.length_sq(a)


@adjit.func
def _f_normalize(a, b):
    return adjit.normalize(a)


@adjit.func
def _f_transpose(a, b):
    return adjit.transpose(a)


@adjit.func
def _f_determinant2(a, b):
    return adjit.determinant(a)


@adjit.func
def _f_determinant3(a, b):
    return adjit.determinant(a)


@adjit.func
def _f_determinant4(a, b):
    return adjit.determinant(a)


@adjit.func
def _f_inverse2(a, b):
    return adjit.inverse(a)


@adjit.func
def _f_inverse3(a, b):
    return adjit.inverse(a)


@adjit.func
def _f_inverse4(a, b):
    return adjit.inverse(a)


@adjit.func
def _f_mul_mm(a, b):
    return adjit.mul(a, b)


@adjit.func
def _f_matmul_op(a, b):
    return a @ b


@adjit.func
def _f_mul_vm(a, b):
    return adjit.mul(a, b)


@adjit.func
def _f_mat_times_vec(a, b):
    return a * b


@adjit.func
def _f_quat_mul(a, b):
    return a * b


@adjit.func
def _f_diag(a, b):
    return adjit.diag(a)


@adjit.func
def _f_identity(a, b):
    return adjit.identity(3, adjit.f64) * adjit.dot(a, b)


@adjit.func
def _f_trace(a, b):
    return adjit.trace(a)


@adjit.func
def _f_skew(a, b):
    return adjit.skew(a) * b


@adjit.func
def _f_cw_mul(a, b):
    return adjit.cw_mul(a, b)


@adjit.func
def _f_cw_div(a, b):
    return adjit.cw_div(a, b + adjit.vec3d(3.0))


@adjit.func
def _f_quat_from_axis_angle(a, b):
    return adjit.quat_from_axis_angle(a, b[0])


@adjit.func
def _f_quat_rotate(a, b):
    return adjit.quat_rotate(a, b)


@adjit.func
def _f_quat_rotate_inv(a, b):
    return adjit.quat_rotate_inv(a, b)


@adjit.func
def _f_quat_inverse(a, b):
    return adjit.quat_inverse(a) * b


@adjit.func
def _f_quat_to_matrix(a, b):
    return adjit.quat_to_matrix(a) * b


@adjit.func
def _f_matrix_from_cols(a, b):
    return adjit.matrix_from_cols(a, b)


@adjit.func
def _f_outer(a, b):
    return adjit.outer(a, b)


@adjit.func
def _f_ddot(a, b):
    return adjit.ddot(a, b)


@adjit.func
def _f_lerp(a, b):
    return adjit.lerp(a, b, 0.3)


@adjit.func
def _f_transform_point(a, b):
    return adjit.transform_point(a, b)


@adjit.func
def _f_transform_vector(a, b):
    return adjit.transform_vector(a, b)


@adjit.func
def _f_arith(a, b):
    return (a - b) * 2.0 + a / 3.0 - (-b) * a[1]


CASE = {
    "dot": (_f_dot, np.dot, "v3", "v3", "s"),
    "cross": (_f_cross, np.cross, "v3", "v3", "v3"),
    "length": (_f_length, np.linalg.norm, "v4", "v4", "s"),
    "length_sq": (_f_length_sq, lambda a: a @ a, "v3", "v3", "s"),
    "normalize": (_f_normalize, lambda a: a / np.linalg.norm(a), "v3", "v3", "v3"),
    "outer": (_f_outer, np.outer, "v3", "v2", "m32"),
    "transpose": (_f_transpose, np.transpose, "m23", "m23", "m32"),
    "determinant2": (_f_determinant2, np.linalg.det, "m22", "m22", "s"),
    "determinant3": (_f_determinant3, np.linalg.det, "m33", "m33", "s"),
    "determinant4": (_f_determinant4, np.linalg.det, "m44", "m44", "s"),
    "inverse2": (_f_inverse2, np.linalg.inv, "m22", "m22", "m22"),
    "inverse3": (_f_inverse3, np.linalg.inv, "m33", "m33", "m33"),
    "inverse4": (_f_inverse4, np.linalg.inv, "m44", "m44", "m44"),
    "mul_mm": (_f_mul_mm, np.matmul, "m33", "m33", "m33"),
    "matmul_op": (_f_matmul_op, np.matmul, "m23", "v3", "v2"),
    "mul_vm": (_f_mul_vm, np.matmul, "v2", "m23", "v3"),
    "mat_times_vec": (_f_mat_times_vec, np.matmul, "m33", "v3", "v3"),
    "quat_mul": (_f_quat_mul, _quat_mul_np, "q", "q", "q"),
    "diag": (_f_diag, np.diag, "v3", "v3", "m33"),
    "identity": (_f_identity, lambda a, b: np.eye(3) * (a @ b), "v3", "v3", "m33"),
    "trace": (_f_trace, np.trace, "m33", "m33", "s"),
    "skew": (_f_skew, lambda a, b: np.cross(a, b), "v3", "v3", "v3"),
    "cw_mul": (_f_cw_mul, np.multiply, "v3", "v3", "v3"),
    "cw_div": (_f_cw_div, lambda a, b: a / (b + 3), "v3", "v3", "v3"),
    "quat_from_axis_angle": (_f_quat_from_axis_angle, lambda a, b: _axis_angle_np(a, b[0]), "v3", "v3", "q"),
    "quat_rotate": (_f_quat_rotate, _rotate_np, "q", "v3", "v3"),
    "quat_rotate_inv": (_f_quat_rotate_inv, lambda a, b: _rotate_np(a * [-1, -1, -1, 1], b), "q", "v3", "v3"),
    "quat_inverse": (_f_quat_inverse, lambda a, b: _quat_mul_np( a * [-1, -1, -1, 1], b), "q", "q", "q"),
    "quat_to_matrix": (_f_quat_to_matrix, lambda a, b: _rotate_np(a, b), "q", "v3", "v3"),
    "matrix_from_cols": (_f_matrix_from_cols, lambda a, b: np.stack([a, b], 1), "v3", "v3", "m32"),
    "ddot": (_f_ddot, lambda a, b: np.sum(a * b), "m23", "m23", "s"),
    "lerp": (_f_lerp, lambda a, b: 0.7 * a + 0.3 * b, "q", "q", "q"),
    "transform_point": (_f_transform_point, lambda a, b: (a @ [*b, 1.0])[:3], "m44", "v3", "v3"),
    "transform_vector": (_f_transform_vector, lambda a, b: (a @ [*b, 0.0])[:3], "m44", "v3",
                         "v3"),
    "arith": (_f_arith, lambda a, b: (a - b) * 2 + a / 3 + b * a[1], "v4", "v4", "v4"),
}


CASES = ["dot", "cross", "length", "length_sq", "normalize", "outer", "transpose",
         "determinant2", "determinant3", "determinant4", "inverse2", "inverse3", "inverse4",
         "mul_mm", "matmul_op", "mul_vm", "mat_times_vec", "quat_mul", "diag", "identity",
         "trace", "skew", "cw_mul", "cw_div", "quat_from_axis_angle", "quat_rotate",
         "quat_rotate_inv", "quat_inverse", "quat_to_matrix", "matrix_from_cols", "ddot",
         "lerp", "transform_point", "transform_vector", "arith"]


def _type(kind, dt):
    f = adjit.f32 if dt == np.float32 else adjit.f64
    if kind == "q":
        return adjit.quat if dt == np.float32 else adjit.quatd
    if kind[0] == "v":
        return adjit.vec(int(kind[1]), f)
    return adjit.mat(int(kind[1]), int(kind[2]), f)


def _inputs(kind, n, dt):
    if kind == "q":
        return _unit_quats(n, dt)
    if kind[0] == "v":
        return rng.standard_normal((n, int(kind[1]))).astype(dt)
    if kind[1] == kind[2]:
        return _well_conditioned(n, int(kind[1]), dt)
    return rng.standard_normal((n, int(kind[1]), int(kind[2]))).astype(dt)


def _loss(fn, ka, kb, kr, dt):
    """A scalar @jit function: sum over i of <fn(a[i], b[i]), w[i]> (the weights make every
    component of the result count, with a different weight)."""
    TA, TB = _type(ka, dt), _type(kb, dt)
    if kr == "s":
        @adjit.func
        def contract(r, w, i):
            return r * w[i]
        TW = Array[adjit.f64 if dt == np.float64 else adjit.f32, 1]
    else:
        TW = Array[_type(kr, dt), 1]
        if kr[0] == "m":
            @adjit.func
            def contract(r, w, i):
                return adjit.trace(adjit.mul(adjit.transpose(r), w[i]))
        else:
            @adjit.func
            def contract(r, w, i):
                return adjit.dot(r, w[i])

    @adjit.jit
    def loss(a: Array[TA, 1], b: Array[TB, 1], w: TW):
        s = 0.0
        for i in range(a.shape[0]):
            s += contract(fn(a[i], b[i]), w, i)
        return s

    return loss


def _reference(ref, ka, kb, kr, a, b, w):
    unary = ref.__code__.co_argcount == 1 if hasattr(ref, "__code__") else \
        ref in (np.linalg.norm, np.transpose, np.linalg.det, np.linalg.inv, np.diag, np.trace)
    total = 0.0
    for i in range(len(a)):
        r = ref(a[i].astype(np.float64)) if unary else \
            ref(a[i].astype(np.float64), b[i].astype(np.float64))
        total += float(np.sum(np.asarray(r) * w[i]))
    return total


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("name", CASES)
def test_builtin_values_and_derivatives(name, dt):
    fn, ref, ka, kb, kr = CASE[name]
    n = 4
    a, b = _inputs(ka, n, dt), _inputs(kb, n, dt)
    w = (rng.standard_normal((n, *_type(kr, dt).shape)) if kr != "s"
         else rng.standard_normal(n)).astype(dt)
    if name == "matmul_op":     # (a @ b with a (2, 3) matrix: the types decide)
        pass
    loss = _loss(fn, ka, kb, kr, dt)
    got = loss(a, b, w)
    expected = _reference(ref, ka, kb, kr, a, b, w)
    tol = 1e-4 if dt == np.float32 else 1e-10
    assert got == pytest.approx(expected, rel=tol, abs=tol)
    if dt == np.float64:        # derivatives, both modes, against central differences
        assert adjit.check_grad(loss, a, b, w) < 1e-6


# ---- singular points: defined values, no NaN derivative (Warp's documented behaviour) ----
@adjit.jit
def _at_zero(x: Array[adjit.vec3d, 1], w: Array[adjit.vec3d, 1]):
    s = 0.0
    for i in range(x.shape[0]):
        s += adjit.dot(adjit.normalize(x[i]), w[i]) + adjit.length(x[i])
        s += adjit.trace(adjit.inverse(adjit.outer(x[i], x[i])))   # singular: zero matrix
    return s


def test_normalize_and_length_of_zero_vector():
    x = np.zeros((2, 3))
    w = rng.standard_normal((2, 3))
    assert _at_zero(x, w) == 0.0
    dx = np.zeros_like(x)
    adjit.autodiff(adjit.Reverse, _at_zero, adjit.Duplicated(x, dx), adjit.Const(w))
    np.testing.assert_array_equal(dx, 0.0)          # finite, and zero as Warp's
    tangent = adjit.autodiff(adjit.Forward, _at_zero, adjit.Duplicated(x, np.ones_like(x)),
                             adjit.Const(w))
    assert tangent == 0.0


# ---- a kernel on arrays of vectors, differentiated as a launch --------------------------
@adjit.kernel
def _springs(x: Array[adjit.vec3d, 1], rest, f: Array[adjit.vec3d, 1]):
    i = adjit.index()
    j = (i + 1) % x.shape[0]
    d = x[j] - x[i]
    length = adjit.length(d)
    force = adjit.normalize(d) * (length - rest[i])
    adjit.atomic_add(f, i, force)
    adjit.atomic_add(f, j, -force)


@adjit.jit
def _spring_energy(x: Array[adjit.vec3d, 1], rest, target: Array[adjit.vec3d, 1]):
    f = adjit.zeros_like(x)
    _springs(x, rest, f, ndrange=x.shape[0])
    e = 0.0
    for i in range(x.shape[0]):
        e += adjit.length_sq(f[i] - target[i])
    return e


def test_kernel_on_arrays_of_vectors_differentiated():
    n = 6
    x = rng.standard_normal((n, 3))
    rest = rng.random(n) + 0.5
    target = rng.standard_normal((n, 3))
    d = np.roll(x, -1, 0) - x
    length = np.linalg.norm(d, axis=1)
    force = d / length[:, None] * (length - rest)[:, None]
    f = force - np.roll(force, 1, 0)
    assert _spring_energy(x, rest, target) == pytest.approx(np.sum((f - target) ** 2), rel=1e-12)
    assert adjit.check_grad(_spring_energy, x, rest, target) < 1e-6
    # and the launch itself, from Python: reverse mode into the shadow array of vectors
    fx, dfx = np.zeros_like(x), rng.standard_normal((n, 3))
    dx = np.zeros_like(x)
    adjit.autodiff(adjit.Reverse, _springs, adjit.Duplicated(x, dx), adjit.Const(rest),
                   adjit.Duplicated(fx, dfx.copy()), ndrange=n)
    eps = 1e-6
    fd = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[k] += eps
        xm[k] -= eps
        fp, fm = np.zeros_like(x), np.zeros_like(x)
        _springs(xp, rest, fp, ndrange=n)
        _springs(xm, rest, fm, ndrange=n)
        fd[k] = np.sum((fp - fm) * dfx) / (2 * eps)
    np.testing.assert_allclose(dx, fd, rtol=1e-6, atol=1e-8)


def test_vector_results_from_the_disk_cache(tmp_path):
    """A new process that loads the compiled function from the disk cache (its meta says
    which results are vectors) gives the same arrays."""
    import subprocess
    import sys
    import textwrap
    script = tmp_path / "vec_cache.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, adjit
        @adjit.jit
        def f(v: adjit.vec3, s: adjit.f32):
            return adjit.outer(v, v) * s, s
        m, s = f(adjit.vec3(1, 2, 3), np.float32(2.0))
        assert isinstance(m, np.ndarray) and m.shape == (3, 3) and m.dtype == np.float32
        import sys
        compiled = any(n.startswith("mlir") for n in sys.modules)
        adjit.wait_for_builds()
        print(m.sum(), s, compiled)
    """))
    env = {**__import__("os").environ, "ADJIT_CACHE_DIR": str(tmp_path / "cache"),
           "ADJIT_DISK_CACHE": "1"}
    runs = [subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           env=env, timeout=300) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    # (the second process loads the cached code, without MLIR)
    assert [r.stdout for r in runs] == ["72.0 2.0 True\n", "72.0 2.0 False\n"]
