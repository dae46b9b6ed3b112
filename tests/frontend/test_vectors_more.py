"""Vectors as Warp users write them (issue 33): one component written through an array
element (`y[i].x = s`, `m[i][r][c] += s`, `q[i].w = s`), components of local vectors and
matrices with runtime indices, slices of vectors and `len()`, `a if c else b` on vectors,
`atomic_add(grid, i, j, v)`, and Warp's quat_slerp / quat_to_axis_angle (against JAX in
float64, and finite differences where they are singular). Values against NumPy, derivatives
in both modes (check_grad runs forward and reverse against central differences)."""
import numpy as np
import pytest

import adjit
from adjit import Array, Duplicated, Forward, Reverse

rng = np.random.default_rng(33)


# ---- one component through an array element ----------------------------------------------
@adjit.kernel
def _components(x: Array[adjit.vec3d, 1], m: Array[adjit.mat33d, 1], q: Array[adjit.quatd, 1],
                k: Array[adjit.i64, 1], y: Array[adjit.vec3d, 1], out_m: Array[adjit.mat33d, 1],
                out_q: Array[adjit.quatd, 1]):
    i = adjit.index()
    p = x[i]
    y[i].x = p.y * 2.0
    y[i][1] = p.x * p.z
    y[i].z += p.x                     # read, add, write one component
    y[i][-1] += 1.0
    out_m[i][0, 1] = p.x
    out_m[i][1][2] = m[i][2, 0] * p.y
    out_m[i][2][1] += m[i][0][0]
    out_m[i][k[i], 0] = p.z           # a runtime row
    out_m[i][2] = out_m[i][2] + adjit.vec3d(1.0, 2.0, 3.0) * p.x    # a row
    out_q[i].w = q[i].x * 3.0
    out_q[i][0] += q[i].w
    out_q[i].y = q[i][2]


def _components_np(x, m, q, k, y, out_m, out_q):
    y, out_m, out_q = y.copy(), out_m.copy(), out_q.copy()
    for i in range(len(x)):
        p = x[i]
        y[i, 0] = p[1] * 2
        y[i, 1] = p[0] * p[2]
        y[i, 2] += p[0] + 1
        out_m[i, 0, 1] = p[0]
        out_m[i, 1, 2] = m[i, 2, 0] * p[1]
        out_m[i, 2, 1] += m[i, 0, 0]
        out_m[i, k[i], 0] = p[2]
        out_m[i, 2] += np.array([1.0, 2.0, 3.0]) * p[0]
        out_q[i, 3] = q[i, 0] * 3
        out_q[i, 0] += q[i, 3]
        out_q[i, 1] = q[i, 2]
    return y, out_m, out_q


def _component_args(n):
    return (rng.standard_normal((n, 3)), rng.standard_normal((n, 3, 3)),
            rng.standard_normal((n, 4)), rng.integers(0, 3, n), rng.standard_normal((n, 3)),
            rng.standard_normal((n, 3, 3)), rng.standard_normal((n, 4)))


@pytest.mark.parametrize("n", [0, 1, 5])
def test_components_written_through_array_elements(n):
    args = _component_args(n)
    want = _components_np(*args)
    y, out_m, out_q = (a.copy() for a in args[4:])
    _components(*args[:4], y, out_m, out_q, ndrange=n)
    for got, w in zip((y, out_m, out_q), want):
        np.testing.assert_allclose(got, w, rtol=1e-14, atol=1e-14)


def test_components_written_through_array_elements_differentiate():
    n = 4
    x, m, q, k, y, out_m, out_q = _component_args(n)
    wy, wm, wq = (rng.standard_normal(a.shape) for a in (y, out_m, out_q))

    def loss(x, m, q, y0, m0, q0):
        y, om, oq = _components_np(x, m, q, k, y0, m0, q0)
        return np.sum(y * wy) + np.sum(om * wm) + np.sum(oq * wq)

    # reverse: the gradient of every input (an output's untouched components pass through)
    shadows = [np.zeros_like(a) for a in (x, m, q)]
    dy, dm, dq = wy.copy(), wm.copy(), wq.copy()
    adjit.autodiff(Reverse, _components, *[Duplicated(a.copy(), s) for a, s in
                                           zip((x, m, q), shadows)], k,
                   Duplicated(y.copy(), dy), Duplicated(out_m.copy(), dm),
                   Duplicated(out_q.copy(), dq), ndrange=n)
    inputs = [x, m, q, y, out_m, out_q]
    for j, got in enumerate(shadows + [dy, dm, dq]):
        np.testing.assert_allclose(got, _fd(loss, inputs, j), rtol=1e-7, atol=1e-7)
    # forward: the tangent of the outputs along a direction of the inputs
    tangents = [rng.standard_normal(a.shape) for a in inputs]
    outs = [a.copy() for a in (y, out_m, out_q)]
    douts = [t.copy() for t in tangents[3:]]
    adjit.autodiff(Forward, _components, *[Duplicated(a.copy(), t) for a, t in
                                           zip((x, m, q), tangents[:3])], k,
                   *[Duplicated(o, d) for o, d in zip(outs, douts)], ndrange=n)
    h = 1e-6
    plus = _components_np(*[a + h * t for a, t in zip(inputs[:3], tangents[:3])], k,
                          *[a + h * t for a, t in zip(inputs[3:], tangents[3:])])
    minus = _components_np(*[a - h * t for a, t in zip(inputs[:3], tangents[:3])], k,
                           *[a - h * t for a, t in zip(inputs[3:], tangents[3:])])
    for d, p, mi in zip(douts, plus, minus):
        np.testing.assert_allclose(d, (p - mi) / (2 * h), rtol=1e-6, atol=1e-7)


def _fd(loss, inputs, j, h=1e-6):
    out = np.zeros_like(inputs[j])
    for pos in np.ndindex(*inputs[j].shape):
        plus = [a.copy() for a in inputs]
        minus = [a.copy() for a in inputs]
        plus[j][pos] += h
        minus[j][pos] -= h
        out[pos] = (loss(*plus) - loss(*minus)) / (2 * h)
    return out


@adjit.kernel
def _components_f32(y: Array[adjit.vec3, 1], q: Array[adjit.quat, 1]):
    i = adjit.index()
    y[i].y = 2.5
    y[i][2] *= 2.0
    q[i].w = y[i].x


def test_components_of_float32_elements():
    y, q = rng.standard_normal((3, 3)).astype(np.float32), np.zeros((3, 4), np.float32)
    want = y.copy()
    want[:, 1], want[:, 2] = 2.5, 2 * y[:, 2]
    _components_f32(y, q, ndrange=3)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(q[:, 3], y[:, 0])
    np.testing.assert_array_equal(q[:, :3], 0.0)


@adjit.jit
def _jit_components(x: Array[adjit.vec3d, 1], m: Array[adjit.mat22d, 1], s: float):
    for i in range(x.shape[0]):
        x[i].x = x[i].y * s
        x[i][2] += s * s
        m[i][1][0] = m[i][0, 1] * s
    return adjit.sum(x) + adjit.sum(m)


def test_components_in_jit_code_differentiate():
    x, m = rng.standard_normal((3, 3)), rng.standard_normal((3, 2, 2))
    got = _jit_components(x.copy(), m.copy(), 0.7)
    wx, wm = x.copy(), m.copy()
    wx[:, 0] = x[:, 1] * 0.7
    wx[:, 2] += 0.49
    wm[:, 1, 0] = m[:, 0, 1] * 0.7
    assert got == pytest.approx(wx.sum() + wm.sum(), rel=1e-14)
    assert adjit.check_grad(_jit_components, x, m, 0.7) < 1e-6


# ---- components of local vectors and matrices ----------------------------------------------
@adjit.jit
def _local(v: adjit.vec3d, m: adjit.mat33d, q: adjit.quatd, k: int, s: float):
    v.x = s
    v[1] += 2.0 * s
    m[1, 2] = v.y
    m[2][0] = s * s
    m[k, k] = m[k][k] * s          # runtime indices: a select per component
    m[0] = v * s                   # a row
    q.w = s
    q[k] -= 1.0
    return v, m, q


def _local_np(v, m, q, k, s):
    v, m, q = v.copy(), m.copy(), q.copy()
    v[0] = s
    v[1] += 2 * s
    m[1, 2] = v[1]
    m[2, 0] = s * s
    m[k, k] *= s
    m[0] = v * s
    q[3] = s
    q[k] -= 1
    return v, m, q


@pytest.mark.parametrize("k", [0, 2])
def test_components_of_local_vectors(k):
    v, m, q = rng.standard_normal(3), rng.standard_normal((3, 3)), rng.standard_normal(4)
    for got, want in zip(_local(v, m, q, k, 0.5), _local_np(v, m, q, k, 0.5)):
        np.testing.assert_allclose(got, want, rtol=1e-15)

    @adjit.jit
    def loss(v: adjit.vec3d, m: adjit.mat33d, q: adjit.quatd, s: float):
        a, b, c = _local(v, m, q, k, s)
        return adjit.dot(a, a) + adjit.ddot(b, b) + adjit.dot(c, c)

    assert adjit.check_grad(loss, v, m, q, 0.5) < 1e-6


# ---- slices and len ---------------------------------------------------------------------
@adjit.jit
def _slices(v: adjit.vec4d, m: adjit.mat33d, q: adjit.quatd):
    head = v[0:2]
    tail = v[1:]
    back = v[::-1]
    rows = m[1:]                   # a 2x3 matrix
    block = m[0:2, 1:3]
    col = m[:, 0]
    part = m[2, 1:]
    axis = q[0:3]
    sizes = len(v) * 100 + len(m) * 10 + len(q)
    return (head, tail, back, rows, block, col, part, axis, sizes,
            adjit.length(head) + adjit.dot(col, part[0:1][0] * col))


def test_slices_and_len_of_vectors():
    v, m, q = rng.standard_normal(4), rng.standard_normal((3, 3)), rng.standard_normal(4)
    got = _slices(v, m, q)
    want = (v[0:2], v[1:], v[::-1], m[1:], m[0:2, 1:3], m[:, 0], m[2, 1:], q[0:3], 434,
            np.linalg.norm(v[:2]) + m[2, 1] * m[:, 0] @ m[:, 0])
    for g, w in zip(got, want):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-14)

    @adjit.jit
    def loss(v: adjit.vec4d, m: adjit.mat33d, q: adjit.quatd):
        head, tail, back, rows, block, col, part, axis, sizes, s = _slices(v, m, q)
        return (s + adjit.dot(tail, back[1:]) + adjit.ddot(block, block) + adjit.dot(axis, col)
                + adjit.dot(part, head) + rows[1, 2] * float(sizes))

    assert adjit.check_grad(loss, v, m, q) < 1e-6


# ---- a if c else b ------------------------------------------------------------------------
@adjit.kernel
def _choose(x: Array[adjit.vec3d, 1], q: Array[adjit.quatd, 1], m: Array[adjit.mat22d, 1],
            out: Array[adjit.vec3d, 1], out_q: Array[adjit.quatd, 1],
            out_m: Array[adjit.mat22d, 1]):
    i = adjit.index()
    p = x[i]
    out[i] = p * 2.0 if p.x > 0.0 else -p
    out_q[i] = q[i] if q[i].w >= 0.0 else -q[i]
    out_m[i] = m[i] if i % 2 == 0 else adjit.transpose(m[i]) * p.y


@pytest.mark.parametrize("n", [0, 1, 6])
def test_conditional_expressions_on_vectors(n):
    x, q, m = rng.standard_normal((n, 3)), rng.standard_normal((n, 4)), rng.standard_normal((n, 2, 2))
    out, out_q, out_m = np.zeros_like(x), np.zeros_like(q), np.zeros_like(m)
    _choose(x, q, m, out, out_q, out_m, ndrange=n)
    np.testing.assert_allclose(out, np.where(x[:, :1] > 0, 2 * x, -x), rtol=1e-15)
    np.testing.assert_allclose(out_q, np.where(q[:, 3:] >= 0, q, -q), rtol=1e-15)
    even = (np.arange(n) % 2 == 0)[:, None, None]
    np.testing.assert_allclose(out_m, np.where(even, m, m.transpose(0, 2, 1) * x[:, 1, None, None]),
                               rtol=1e-15)
    if n:
        dx = np.zeros_like(x)
        adjit.autodiff(Reverse, _choose, Duplicated(x, dx), q, m,
                       Duplicated(out, np.ones_like(out)), out_q,
                       Duplicated(out_m, np.ones_like(out_m)), ndrange=n)
        want = np.where(x[:, :1] > 0, 2.0, -1.0) * np.ones_like(x)
        want[:, 1] += np.where(even[:, 0, 0], 0.0, m.sum(axis=(1, 2)))
        np.testing.assert_allclose(dx, want, rtol=1e-14)


@adjit.jit
def _choose_jit(v: adjit.vec3d, q: adjit.quatd, s: float):
    w = v * s if s > 0.0 else adjit.cross(v, v + adjit.vec3d(1.0))
    r = adjit.quat_rotate(q if q.w > 0.0 else -q, w)
    return adjit.dot(r, w) + (v if s > 1.0 else w).x


@pytest.mark.parametrize("s", [-0.5, 0.5, 1.5])
def test_conditional_expressions_on_vectors_in_jit(s):
    v, q = rng.standard_normal(3), rng.standard_normal(4)
    q /= np.linalg.norm(q)
    w = v * s if s > 0 else np.cross(v, v + 1)
    r = adjit.quat_rotate(q, w)
    assert _choose_jit(v, q, s) == pytest.approx(r @ w + (v if s > 1 else w)[0], rel=1e-13)
    assert adjit.check_grad(_choose_jit, v, q, s) < 1e-6


# ---- atomic_add(grid, i, j, v) ------------------------------------------------------------
@adjit.kernel
def _splat(grid: Array[float, 2], forces: Array[adjit.vec2d, 2], xs: Array[float, 1]):
    i = adjit.index()
    adjit.atomic_add(grid, i % 2, 1, xs[i])          # Warp's spelling
    adjit.atomic_add(grid, (0, i % 3), xs[i] * 2.0)  # the tuple
    adjit.atomic_sub(grid, 1, 0, xs[i] * xs[i])
    adjit.atomic_add(forces, 1, i % 2, adjit.vec2d(xs[i], 1.0))
    adjit.atomic_sub(forces, 0, 0, adjit.vec2d(0.0, xs[i]))


def _splat_np(xs):
    grid, forces = np.zeros((2, 3)), np.zeros((2, 2, 2))
    for i, x in enumerate(xs):
        grid[i % 2, 1] += x
        grid[0, i % 3] += 2 * x
        grid[1, 0] -= x * x
        forces[1, i % 2] += [x, 1.0]
        forces[0, 0] -= [0.0, x]
    return grid, forces


@pytest.mark.parametrize("n", [0, 1, 7])
def test_atomic_add_with_separate_indices(n):
    xs = rng.standard_normal(n)
    grid, forces = np.zeros((2, 3)), np.zeros((2, 2, 2))
    _splat(grid, forces, xs, ndrange=n)
    want_grid, want_forces = _splat_np(xs)
    np.testing.assert_allclose(grid, want_grid, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(forces, want_forces, rtol=1e-14, atol=1e-15)
    # reverse mode: d(sum(w * grid) + sum(wf * forces)) / dxs
    w, wf = rng.standard_normal((2, 3)), rng.standard_normal((2, 2, 2))
    dxs = np.zeros(n)
    adjit.autodiff(Reverse, _splat, Duplicated(np.zeros((2, 3)), w.copy()),
                   Duplicated(np.zeros((2, 2, 2)), wf.copy()), Duplicated(xs, dxs), ndrange=n)
    i = np.arange(n)
    want = w[i % 2, 1] + 2 * w[0, i % 3] - 2 * xs * w[1, 0] + wf[1, i % 2, 0] - wf[0, 0, 1]
    np.testing.assert_allclose(dxs, want, rtol=1e-13, atol=1e-14)
    # forward mode: the outputs' tangents along a direction of xs
    t = rng.standard_normal(n)
    dgrid, dforces = np.zeros((2, 3)), np.zeros((2, 2, 2))
    adjit.autodiff(Forward, _splat, Duplicated(np.zeros((2, 3)), dgrid),
                   Duplicated(np.zeros((2, 2, 2)), dforces), Duplicated(xs, t), ndrange=n)
    h = 1e-6
    for d, p, m in zip((dgrid, dforces), _splat_np(xs + h * t), _splat_np(xs - h * t)):
        np.testing.assert_allclose(d, (p - m) / (2 * h), rtol=1e-7, atol=1e-8)


# ---- lerp of scalars and arrays, and the builtins from Python -------------------------------
@adjit.jit
def _lerp_arrays(a: Array[float, 1], b: Array[float, 1], t: float):
    return adjit.lerp(a, b, t), adjit.lerp(t, 2.0, t)


@adjit.jit
def _lerp_loss(a: Array[float, 1], b: Array[float, 1], t: float):
    out, s = _lerp_arrays(a, b, t)
    return adjit.sum(out * out) + s


@pytest.mark.parametrize("n", [0, 1, 4])
def test_lerp_of_scalars_and_arrays(n):
    a, b = rng.standard_normal(n), rng.standard_normal(n)
    out, s = _lerp_arrays(a, b, 0.25)
    assert out.dtype == np.float64 and out.shape == (n,)
    np.testing.assert_allclose(out, 0.75 * a + 0.25 * b, rtol=1e-15)
    assert s == pytest.approx(0.75 * 0.25 + 0.5, rel=1e-15)
    assert adjit.check_grad(_lerp_loss, a, b, 0.25) < 1e-6


def test_the_new_builtins_from_python():
    m, p = rng.standard_normal((4, 4)), rng.standard_normal(3)
    np.testing.assert_allclose(adjit.transform_point(m, p), m[:3, :3] @ p + m[:3, 3])
    np.testing.assert_allclose(adjit.transform_vector(m, p), m[:3, :3] @ p)
    assert adjit.ddot(m, m) == pytest.approx(np.sum(m * m))
    assert adjit.lerp(1.0, 3.0, 0.25) == 1.5
    v = adjit.lerp(adjit.vec3(0, 0, 0), adjit.vec3(1, 2, 3), 0.5)
    assert v.dtype == np.float32 and np.allclose(v, [0.5, 1.0, 1.5])
    axis, angle = adjit.quat_to_axis_angle(adjit.quat_from_axis_angle(np.array([0.0, 1, 0]), 0.5))
    np.testing.assert_allclose(axis, [0, 1, 0], atol=1e-15)
    assert angle == pytest.approx(0.5)


# ---- element-wise functions of vectors --------------------------------------------------
@adjit.jit
def _componentwise(v: adjit.vec3d, w: adjit.vec3d, m: adjit.mat22d, q: adjit.quatd):
    a = abs(v) + adjit.sin(v) + np.exp(w * 0.5) + adjit.sqrt(adjit.cw_mul(w, w) + adjit.vec3d(1.0))
    b = adjit.min(v, w) + np.maximum(v, w) + adjit.clip(v, -0.5, 0.5)
    c = adjit.where(v.x > 0.0, v, w) + adjit.pow(abs(w), 1.5)
    d = adjit.get_diag(adjit.tanh(m))
    r = adjit.abs(q)
    return a, b, c, d, r, max(v) + adjit.min(w) + np.max(q)


def _componentwise_np(v, w, m, q):
    a = abs(v) + np.sin(v) + np.exp(w * 0.5) + np.sqrt(w * w + 1)
    b = np.minimum(v, w) + np.maximum(v, w) + np.clip(v, -0.5, 0.5)
    c = np.where(v[0] > 0, v, w) + np.abs(w) ** 1.5
    return a, b, c, np.diag(np.tanh(m)), abs(q), v.max() + w.min() + q.max()


def test_elementwise_functions_apply_to_each_component():
    v, w, m, q = (rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal((2, 2)),
                  rng.standard_normal(4))
    for got, want in zip(_componentwise(v, w, m, q), _componentwise_np(v, w, m, q)):
        assert np.shape(got) == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-14)

    @adjit.jit
    def loss(v: adjit.vec3d, w: adjit.vec3d, m: adjit.mat22d, q: adjit.quatd):
        a, b, c, d, r, s = _componentwise(v, w, m, q)
        return adjit.dot(a, b) + adjit.dot(c, c) + adjit.dot(d, d) + adjit.dot(r, q) + s

    assert adjit.check_grad(loss, v, w, m, q) < 1e-6


# ---- Warp's builtins against JAX --------------------------------------------------------------
jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)


def _jq_mul(a, b):
    x1, y1, z1, w1 = a
    x2, y2, z2, w2 = b
    return jnp.array([w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2, w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                      w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2, w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2])


def _j_axis_angle(q):
    v = jnp.where(q[3] < 0, -q[:3], q[:3])
    n = jnp.linalg.norm(v)
    return v / n, 2 * jnp.arctan2(n, jnp.abs(q[3]))


def _j_slerp(q0, q1, t):
    # Warp's definition, written independently: q0 * exp(t log(q0^-1 q1))
    axis, angle = _j_axis_angle(_jq_mul(q0 * jnp.array([-1.0, -1, -1, 1]), q1))
    return _jq_mul(q0, jnp.concatenate([axis * jnp.sin(t * angle / 2),
                                        jnp.cos(t * angle / 2)[None]]))


@adjit.jit
def _slerp_loss(q0: adjit.quatd, q1: adjit.quatd, t: float, w: adjit.quatd):
    return adjit.dot(adjit.quat_slerp(q0, q1, t), w)


@adjit.jit
def _axis_angle_loss(q: adjit.quatd, w: adjit.vec3d):
    axis, angle = adjit.quat_to_axis_angle(q)
    return adjit.dot(axis, w) + 0.7 * angle


def _unit(n=4):
    q = rng.standard_normal(n)
    return q / np.linalg.norm(q)


@pytest.mark.parametrize("t", [0.0, 0.3, 1.0, 1.7])
def test_quat_slerp_against_jax(t):
    q0, q1, w = _unit(), _unit(), rng.standard_normal(4)
    q1 = q1 if (adjit.mul(adjit.quat_inverse(q0), q1))[3] >= 0 else -q1   # both ways
    for b in (q1, -q1):
        assert _slerp_loss(q0, b, t, w) == pytest.approx(float(_j_slerp(q0, b, t) @ w),
                                                         rel=1e-13)
        np.testing.assert_allclose(adjit.quat_slerp(q0, b, t), _j_slerp(q0, b, t), rtol=1e-13)
        got = adjit.grad(_slerp_loss, (0, 1, 2))(q0, b, t, w)
        want = jax.grad(lambda a, c, s: _j_slerp(a, c, s) @ w, (0, 1, 2))(q0, b, t)
        for g, j in zip(got, want):
            np.testing.assert_allclose(g, j, rtol=1e-10, atol=1e-12)
        assert adjit.check_grad(_slerp_loss, q0, b, t, w) < 1e-6
    # the ends: q0 at t = 0, q1 at t = 1
    if t in (0.0, 1.0):
        np.testing.assert_allclose(adjit.quat_slerp(q0, q1, t), [q0, q1][int(t)], atol=1e-15)


@pytest.mark.parametrize("case", ["equal", "opposite", "close"])
def test_quat_slerp_where_the_quaternions_are_equal(case):
    """Warp's formula divides 0 by 0 where q0 == q1 (JAX's grad of it is NaN there); adjit's
    value is q0 and its derivatives are the limit's, finite and equal to central differences
    (and to JAX's a hair away)."""
    q0, w, t = _unit(), rng.standard_normal(4), 0.3
    q1 = {"equal": q0.copy(), "opposite": -q0,
          "close": q0 + 1e-5 * rng.standard_normal(4)}[case]
    if case != "close":
        np.testing.assert_allclose(adjit.quat_slerp(q0, q1, t), q0, rtol=1e-15)
        np.testing.assert_allclose([_slerp_loss(q0, q1, t, w)], [q0 @ w], rtol=1e-15)
    grads = adjit.grad(_slerp_loss, (0, 1, 2))(q0, q1, t, w)
    assert all(np.all(np.isfinite(g)) for g in grads)
    assert adjit.check_grad(_slerp_loss, q0, q1, t, w) < 1e-6
    near = q1 + 1e-7 * rng.standard_normal(4)      # where Warp's formula is defined
    want = jax.grad(lambda b: _j_slerp(q0, b, t) @ w)(near)
    np.testing.assert_allclose(grads[1], want, rtol=1e-5, atol=1e-6)
    # second order (forward over reverse): finite, and the derivative of the gradient
    hess = adjit.hessian(_slerp_loss, 1)(q0, q1, t, w)
    g = adjit.grad(_slerp_loss, 1)
    h = 1e-5
    fd = np.stack([(g(q0, q1 + h * e, t, w) - g(q0, q1 - h * e, t, w)) / (2 * h)
                   for e in np.eye(4)], axis=1)
    np.testing.assert_allclose(hess, fd, rtol=1e-5, atol=1e-6)


def test_quat_slerp_in_float32():
    q0, q1 = _unit().astype(np.float32), _unit().astype(np.float32)

    @adjit.jit
    def slerp32(q0: adjit.quat, q1: adjit.quat, t: adjit.f32):
        return adjit.quat_slerp(q0, q1, t), adjit.quat_slerp(q0, q0, t)

    got, same = slerp32(q0, q1, np.float32(0.25))
    assert got.dtype == np.float32 and same.dtype == np.float32
    np.testing.assert_allclose(got, _j_slerp(q0.astype(np.float64), q1.astype(np.float64), 0.25),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(same, q0, rtol=1e-6)


@pytest.mark.parametrize("flip", [1.0, -1.0])
def test_quat_to_axis_angle_against_jax(flip):
    q, w = _unit() * 1.7 * flip, rng.standard_normal(3)   # (not unit: the angle ignores scale)
    axis, angle = adjit.quat_to_axis_angle(q)
    ja, jang = _j_axis_angle(q)
    np.testing.assert_allclose(axis, ja, rtol=1e-14)
    assert angle == pytest.approx(float(jang), rel=1e-14) and 0 <= angle <= np.pi
    # Warp's contract: from_axis_angle(axis, angle) is normalize(q) or -normalize(q)
    back = adjit.quat_from_axis_angle(axis, angle)
    assert np.allclose(back, q / np.linalg.norm(q)) or np.allclose(back, -q / np.linalg.norm(q))
    assert _axis_angle_loss(q, w) == pytest.approx(float(ja @ w + 0.7 * jang), rel=1e-14)
    got = adjit.grad(_axis_angle_loss, 0)(q, w)
    want = jax.grad(lambda a: _j_axis_angle(a)[0] @ w + 0.7 * _j_axis_angle(a)[1])(q)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12)
    assert adjit.check_grad(_axis_angle_loss, q, w) < 1e-6


def test_quat_to_axis_angle_at_angle_zero():
    """The axis is unspecified at angle 0 (Warp): the zero vector, with a zero derivative;
    the angle's derivative is 0 there, as central differences give (|v| is even)."""
    q, w = np.array([0.0, 0.0, 0.0, 2.0]), rng.standard_normal(3)
    axis, angle = adjit.quat_to_axis_angle(q)
    np.testing.assert_array_equal(axis, 0.0)
    assert angle == 0.0
    assert _axis_angle_loss(q, w) == 0.0
    np.testing.assert_array_equal(adjit.grad(_axis_angle_loss, 0)(q, w), 0.0)

    @adjit.jit
    def angle_only(q: adjit.quatd):
        return adjit.quat_to_axis_angle(q)[1]

    h = 1e-6
    fd = [(angle_only(q + h * e) - angle_only(q - h * e)) / (2 * h) for e in np.eye(4)]
    np.testing.assert_allclose(adjit.grad(angle_only)(q), fd, atol=1e-9)
    np.testing.assert_array_equal(adjit.jacfwd(angle_only)(q), 0.0)


# ---- errors ------------------------------------------------------------------------------------
def _error(fn, *args, **kw):
    with pytest.raises(adjit.CompilationError) as e:
        fn(*args, **kw)
    return str(e.value)


def test_errors_name_the_problem_and_the_line():
    @adjit.jit
    def runtime_slice(v: adjit.vec3d, k: int):
        return v[0:k]

    msg = _error(runtime_slice, np.zeros(3), 2)
    assert "constant bounds" in msg and "v[0:k]" in msg

    @adjit.jit
    def np_max_axis(v: adjit.vec3d):
        return np.max(v, 0)

    assert "a vector has no axes" in _error(np_max_axis, np.zeros(3))

    @adjit.jit
    def empty_slice(v: adjit.vec3d):
        return v[2:1]

    assert "is empty" in _error(empty_slice, np.zeros(3))

    @adjit.kernel
    def whole_array_attr(y: Array[adjit.vec3d, 1]):
        y.x = 1.0

    msg = _error(whole_array_attr, np.zeros((1, 3)), ndrange=1)
    assert "index the array of vectors first" in msg and "y.x = 1.0" in msg

    @adjit.kernel
    def too_many(y: Array[adjit.vec3d, 1]):
        i = adjit.index()
        y[i][0, 1] = 1.0

    assert "takes 1 index, got 2" in _error(too_many, np.zeros((1, 3)), ndrange=1)

    @adjit.kernel
    def matrix_attr(m: Array[adjit.mat22d, 1]):
        i = adjit.index()
        m[i].x = 1.0

    assert "has no attribute .x" in _error(matrix_attr, np.zeros((1, 2, 2)), ndrange=1)

    @adjit.kernel
    def wrong_row(m: Array[adjit.mat22d, 1]):
        i = adjit.index()
        m[i][0] = adjit.vec3d(1.0, 2.0, 3.0)

    assert "to a row of" in _error(wrong_row, np.zeros((1, 2, 2)), ndrange=1)

    @adjit.jit
    def mixed(v: adjit.vec3d, s: float):
        return v if s > 0.0 else s

    msg = _error(mixed, np.zeros(3), 1.0)
    assert "give both sides one vector type" in msg

    @adjit.jit
    def bad_transform(m: adjit.mat33d, p: adjit.vec3d):
        return adjit.transform_point(m, p)

    assert "takes a 4x4 matrix" in _error(bad_transform, np.eye(3), np.zeros(3))

    @adjit.jit
    def bad_lerp(v: adjit.vec3d, s: float):
        return adjit.lerp(v, s, 0.5)

    assert "give two vectors of one type" in _error(bad_lerp, np.zeros(3), 1.0)

    @adjit.kernel
    def atomic_too_few(g: Array[float, 2]):
        adjit.atomic_add(g, 0, 1.0)

    assert "with 1 indices" in _error(atomic_too_few, np.zeros((2, 2)), ndrange=1)


# ---- Warp's transform: (p, q) in 7 floats ---------------------------------------------------
def _matrix_of(t):
    """The 4x4 matrix of transform t, written independently of adjit's formulas."""
    x, y, z, w = t[3:]
    r = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                  [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                  [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
    m = np.eye(4)
    m[:3, :3], m[:3, 3] = r, t[:3]
    return m


def _random_transform(dt=np.float64):
    return np.concatenate([rng.standard_normal(3), _unit()]).astype(dt)


@adjit.jit
def _transforms(a: adjit.transformd, b: adjit.transformd, x: adjit.vec3d):
    ab = a * b
    made = adjit.transformd(a.p + x, adjit.transform_get_rotation(b))
    inv = adjit.transform_inverse(a)
    return (adjit.transform_point(a, x), adjit.transform_vector(a, x), ab,
            adjit.transform_multiply(inv, a), made, adjit.transform_get_translation(b),
            b.q, adjit.transform_identity(adjit.f64), len(a) + a[6] * 0.0)


def test_transforms_against_their_matrices():
    a, b, x = _random_transform(), _random_transform(), rng.standard_normal(3)
    point, vector, ab, identity, made, bp, bq, ident, size = _transforms(a, b, x)
    ma = _matrix_of(a)
    np.testing.assert_allclose(point, (ma @ [*x, 1.0])[:3], rtol=1e-13)
    np.testing.assert_allclose(vector, ma[:3, :3] @ x, rtol=1e-13)
    assert ab.shape == (7,) and ab.dtype == np.float64
    np.testing.assert_allclose(_matrix_of(ab), ma @ _matrix_of(b), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(identity, [0, 0, 0, 0, 0, 0, 1], atol=1e-15)
    np.testing.assert_allclose(made, np.concatenate([a[:3] + x, b[3:]]), rtol=1e-15)
    np.testing.assert_array_equal(bp, b[:3])
    np.testing.assert_array_equal(bq, b[3:])
    np.testing.assert_array_equal(ident, adjit.transform_identity(np.float64))
    assert size == 7
    # the NumPy side agrees
    np.testing.assert_allclose(adjit.transform_point(a, x), point, rtol=1e-14)
    np.testing.assert_allclose(adjit.mul(a, b), ab, rtol=1e-14)
    np.testing.assert_allclose(_matrix_of(adjit.transform_inverse(a)), np.linalg.inv(ma),
                               rtol=1e-12, atol=1e-13)
    t = adjit.transform(np.array([1.0, 2.0, 3.0]), adjit.quat())
    assert t.dtype == np.float32 and list(t) == [1, 2, 3, 0, 0, 0, 1]
    assert list(adjit.transformd()) == [0, 0, 0, 0, 0, 0, 1]

    @adjit.jit
    def loss(a: adjit.transformd, b: adjit.transformd, x: adjit.vec3d):
        point, vector, ab, identity, made, bp, bq, ident, size = _transforms(a, b, x)
        return (adjit.dot(point, vector) + adjit.dot(ab[:], (ab * 0.5 + made)[:]) + adjit.dot(bq, bq)
                + adjit.length(bp) + identity[2])

    assert adjit.check_grad(loss, a, b, x) < 1e-6


@adjit.kernel
def _place(xf: Array[adjit.transform, 1], x: Array[adjit.vec3, 1], out: Array[adjit.vec3, 1]):
    i = adjit.index()
    t = xf[i]
    out[i] = adjit.transform_point(t, x[i]) + adjit.transform_vector(t, x[i]) * 0.5
    xf[i] = t * adjit.transform(adjit.vec3(0.0, 0.0, 1.0), adjit.quat())


@pytest.mark.parametrize("n", [0, 1, 4])
def test_arrays_of_transforms_in_a_kernel(n):
    xf = np.array([_random_transform(np.float32) for _ in range(n)], np.float32).reshape(n, 7)
    x = rng.standard_normal((n, 3)).astype(np.float32)
    out, before = np.zeros_like(x), xf.copy()
    _place(xf, x, out, ndrange=n)
    assert out.dtype == np.float32
    for i in range(n):
        m = _matrix_of(before[i].astype(np.float64))
        np.testing.assert_allclose(out[i], (m @ [*x[i], 1])[:3] + 0.5 * m[:3, :3] @ x[i],
                                   rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(_matrix_of(xf[i].astype(np.float64)),
                                   m @ _matrix_of(np.array([0, 0, 1.0, 0, 0, 0, 1])),
                                   rtol=1e-5, atol=1e-5)


@adjit.kernel
def _xf_points(xf: Array[adjit.transformd, 1], x: Array[adjit.vec3d, 1],
               out: Array[adjit.vec3d, 1]):
    i = adjit.index()
    out[i] = adjit.transform_point(adjit.transform_inverse(xf[i]) * xf[i] * xf[i], x[i])


@adjit.jit
def _transform_parts(t: adjit.transformd, v: adjit.vec3d, k: int):
    t.p = v * 2.0
    t.p.x += 1.0
    t.q = adjit.normalize(t.q)
    t.q[k] = t.q[k] * 3.0
    return t


@adjit.kernel
def _transform_parts_kernel(xf: Array[adjit.transformd, 1], x: Array[adjit.vec3d, 1],
                            k: int):
    i = adjit.index()
    xf[i].p = x[i]
    xf[i].p.z += 1.0
    xf[i].q.w = 2.0
    xf[i].q[k] = x[i].x
    xf[i].q += adjit.quatd(1.0, 1.0, 1.0, 1.0)


def test_writing_a_part_of_a_transform():
    t, v = _random_transform(), rng.standard_normal(3)
    want = t.copy()
    want[:3] = 2 * v
    want[0] += 1
    want[3:] = t[3:] / np.linalg.norm(t[3:])
    want[3 + 1] *= 3
    np.testing.assert_allclose(_transform_parts(t, v, 1), want, rtol=1e-15)

    @adjit.jit
    def loss(t: adjit.transformd, v: adjit.vec3d):
        r = _transform_parts(t, v, 2)
        return adjit.dot(r[:], r[:])

    assert adjit.check_grad(loss, t, v) < 1e-6
    n = 3
    xf, x = np.array([_random_transform() for _ in range(n)]), rng.standard_normal((n, 3))
    want = xf.copy()
    want[:, :3] = x
    want[:, 2] += 1
    want[:, 6] = 2
    want[:, 3 + 0] = x[:, 0]
    want[:, 3:] += 1
    _transform_parts_kernel(xf, x, 0, ndrange=n)
    np.testing.assert_allclose(xf, want, rtol=1e-15)


def test_transforms_in_a_kernel_differentiate():
    n = 3
    xf = np.array([_random_transform() for _ in range(n)])
    x, w = rng.standard_normal((n, 3)), rng.standard_normal((n, 3))

    def ref(xf, x):
        # (NumPy's builtins; off unit rotations transform_inverse is not the inverse)
        return np.array([adjit.transform_point(adjit.mul(adjit.mul(adjit.transform_inverse(t),
                                                                   t), t), p)
                         for t, p in zip(xf, x)])

    dxf, dx = np.zeros_like(xf), np.zeros_like(x)
    adjit.autodiff(Reverse, _xf_points, Duplicated(xf, dxf), Duplicated(x, dx),
                   Duplicated(np.zeros((n, 3)), w.copy()), ndrange=n)
    loss = lambda xf, x: np.sum(ref(xf, x) * w)                       # noqa: E731
    np.testing.assert_allclose(dxf, _fd(loss, [xf, x], 0), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(dx, _fd(loss, [xf, x], 1), rtol=1e-7, atol=1e-8)
    txf, tx, out, dout = (rng.standard_normal((n, 7)), rng.standard_normal((n, 3)),
                          np.zeros((n, 3)), np.zeros((n, 3)))
    adjit.autodiff(Forward, _xf_points, Duplicated(xf, txf), Duplicated(x, tx),
                   Duplicated(out, dout), ndrange=n)
    h = 1e-6
    np.testing.assert_allclose(out, ref(xf, x), rtol=1e-12)
    np.testing.assert_allclose(dout, (ref(xf + h * txf, x + h * tx) - ref(xf - h * txf, x - h * tx))
                               / (2 * h), rtol=1e-6, atol=1e-7)


def test_transform_errors():
    @adjit.jit
    def component(t: adjit.transformd):
        return t.x

    assert "its parts: .p, a vec3, and .q, a quat" in _error(component, np.zeros(7))

    @adjit.jit
    def write_part(t: adjit.transformd):
        t.p = adjit.quatd()
        return t

    msg = _error(write_part, np.zeros(7))
    assert "to .p of a adjit.transformd value (a vec3)" in msg and "t.p = adjit.quatd()" in msg

    @adjit.jit
    def wrong_parts(q: adjit.quatd):
        return adjit.transformd(q, q)

    assert "takes a vec3 and a quat" in _error(wrong_parts, np.zeros(4))

    @adjit.jit
    def not_a_transform(q: adjit.quatd):
        return adjit.transform_inverse(q)

    assert "transform_inverse() takes a transform" in _error(not_a_transform, np.zeros(4))
