"""`@adjit.struct` (lang/structs.py): structs made in Python, passed to kernels,
@adjit.func and @adjit.jit, their fields read and their array fields written through, checked
against NumPy (f32, f64); derivatives of struct arguments (Duplicated(s, ds)) in both modes
against central finite differences; errors naming the field and the line."""
import numpy as np
import pytest

import adjit
from adjit import Active, Array, Duplicated, Forward, Reverse, ReverseWithPrimal
from adjit import zeros_like_struct as zeros_like

rng = np.random.default_rng(3)


@adjit.struct
class Wind:
    strength: float
    direction: adjit.vec3d


def _types(dt):
    """A particle struct and its kernels for float dtype `dt` (vec3 or vec3d fields)."""
    V = adjit.vec3 if dt == np.float32 else adjit.vec3d
    S = adjit.f32 if dt == np.float32 else adjit.f64

    @adjit.struct
    class Particles:
        x: Array[V, 1]
        v: Array[V, 1]
        m: Array[S, 1]
        k: S
        gravity: V
        wind: Wind
        steps: int

    @adjit.func
    def force(p: Particles, i):
        w = p.wind.direction * p.wind.strength
        return p.gravity * p.m[i] - p.x[i] * p.k + V(w)

    @adjit.kernel
    def step(p: Particles, dt: float):
        i = adjit.index()
        for _ in range(p.steps):
            p.v[i] += force(p, i) * (dt / p.m[i])
            p.x[i] = p.x[i] + p.v[i] * dt

    @adjit.jit
    def simulate(p: Particles, dt: float):
        step(p, dt, ndrange=p.x.shape[0])
        e = 0.0
        for i in range(p.x.shape[0]):
            e += adjit.dot(p.x[i], p.x[i]) * p.k
        return e

    return Particles, force, step, simulate


def _make(P, dt, n=5):
    return P(x=rng.random((n, 3)).astype(dt), v=rng.random((n, 3)).astype(dt),
             m=(1 + rng.random(n)).astype(dt), k=0.7,
             gravity=(0.0, -9.8, 0.0), wind=Wind(strength=0.5, direction=(1.0, 0.0, 0.5)),
             steps=2)


def _step_np(x, v, m, k, g, w, steps, dt):
    x, v = x.astype(np.float64), v.astype(np.float64)
    for _ in range(steps):
        f = g[None] * m[:, None] - x * k + w[None]
        v = v + f * (dt / m[:, None])
        x = x + v * dt
    return x, v


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_kernel_func_and_jit_take_structs(dt):
    P, _, step, simulate = _types(dt)
    p = _make(P, dt)
    x0, v0 = p.x.copy(), p.v.copy()
    w = p.wind.direction * p.wind.strength
    want_x, want_v = _step_np(x0, v0, p.m, 0.7, np.array([0, -9.8, 0]), w, 2, 0.01)
    step(p, 0.01, ndrange=5)              # array fields are written through
    tol = 1e-5 if dt == np.float32 else 1e-12
    np.testing.assert_allclose(p.x, want_x, rtol=tol, atol=tol)
    np.testing.assert_allclose(p.v, want_v, rtol=tol, atol=tol)
    p.x[:], p.v[:] = x0, v0
    e = simulate(p, 0.01)                 # @jit: the struct passed on to a launch
    np.testing.assert_allclose(e, 0.7 * np.sum(want_x ** 2), rtol=tol * 10)


def test_construction_defaults_and_assignment():
    @adjit.struct
    class Config:
        n: int
        scale: adjit.f32 = 2.0
        origin: adjit.vec2
        data: Array[adjit.f64, 2]
    c = Config()
    assert c.n == 0 and c.scale == np.float32(2.0) and c.data is None
    np.testing.assert_array_equal(c.origin, [0, 0])
    c.origin = [1, 2]
    assert c.origin.dtype == np.float32 and list(c.origin) == [1, 2]
    c2 = Config(n=3, data=np.zeros((2, 2)))
    assert c2.n == 3 and c2.data.shape == (2, 2)
    assert "Config(n=3, scale=2.0" in repr(c2)
    # quaternions default to the identity rotation, as Warp's

    @adjit.struct
    class Body:
        q: adjit.quat
    np.testing.assert_array_equal(Body().q, [0, 0, 0, 1])


def test_python_side_errors_name_the_field():
    P, _, step, _ = _types(np.float32)
    p = _make(P, np.float32)
    with pytest.raises(AttributeError, match=r"no field 'mass'.*x, v, m, k"):
        p.mass = 1.0
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'mass'"):
        P(mass=1.0)
    with pytest.raises(TypeError, match=r"Particles\.m .*needs dtype float32, got float64"):
        p.m = np.ones(5)
    with pytest.raises(ValueError, match=r"Particles\.x .*trailing ones are \(3,\)"):
        p.x = np.ones((5, 2), np.float32)
    with pytest.raises(ValueError, match=r"Particles\.gravity .*shape \(3,\)"):
        p.gravity = (1.0, 2.0)
    with pytest.raises(TypeError, match=r"Particles\.k .*needs a scalar"):
        p.k = np.ones(3)
    with pytest.raises(TypeError, match=r"Particles\.steps .*needs an integer"):
        p.steps = 1.5
    with pytest.raises(TypeError, match=r"Particles\.wind .*needs a Wind struct"):
        p.wind = 3.0
    q = P(k=1.0)
    with pytest.raises(TypeError, match=r"field 'x' .* of the Particles is not set"):
        step(q, 0.1, ndrange=1)
    with pytest.raises(TypeError, match=r"argument 'p' must be a Particles struct"):
        step(p.x, 0.1, ndrange=1)
    with pytest.raises(TypeError, match="zeros_like_struct takes an @adjit.struct"):
        adjit.zeros_like_struct(p.x)
    with pytest.raises(TypeError, match="decorates a class"):
        adjit.struct(lambda: 0)
    with pytest.raises(TypeError, match="field 'a' has annotation"):
        @adjit.struct
        class Bad:
            a: str


def test_compile_errors_name_the_line():
    @adjit.struct
    class Pair:
        a: Array[adjit.f64, 1]
        b: float

    @adjit.kernel
    def unknown(p: Pair):
        i = adjit.index()
        p.a[i] = p.c
    with pytest.raises(adjit.CompilationError, match=r"test_structs.py:\d+:.*struct Pair has "
                                                     r"no field 'c' \(its fields: a, b\)"):
        unknown(Pair(a=np.zeros(2)), ndrange=2)

    @adjit.kernel
    def writes_scalar(p: Pair):
        p.b = 1.0
    with pytest.raises(adjit.CompilationError, match=r"cannot assign to p\.b: the fields of "
                                                     "a struct argument are read-only"):
        writes_scalar(Pair(a=np.zeros(2)), ndrange=2)

    @adjit.func
    def takes(p: Pair):
        return p.b

    @adjit.kernel
    def passes_array(p: Pair):
        p.a[adjit.index()] = takes(p.a)
    with pytest.raises(adjit.CompilationError, match=r"argument 'p' must be a Pair struct"):
        passes_array(Pair(a=np.zeros(2)), ndrange=2)


# ---- derivatives -----------------------------------------------------------------------
def _energy_types(dt):
    V = adjit.vec3 if dt == np.float32 else adjit.vec3d

    @adjit.struct
    class Springs:
        x: Array[V, 1]
        k: float
        anchor: V
        w: Array[float, 1]
        n: int

    @adjit.func
    def energy(s: Springs, c: float):
        e = 0.0
        for i in range(s.n):
            d = s.x[i] - s.anchor
            e += s.k * adjit.dot(d, d) * s.w[i] + c * adjit.length(d)
        return e

    @adjit.kernel
    def energies(s: Springs, out: Array[float, 1]):
        i = adjit.index()
        d = s.x[i] - s.anchor
        out[i] = s.k * adjit.length_sq(d) * s.w[i] * s.w[i]

    return Springs, energy, energies


def _springs(S, dt, n=4, seed=0):
    r = np.random.default_rng(seed)
    return S(x=r.random((n, 3)).astype(dt), k=1.3, anchor=(0.1, 0.2, 0.3), w=r.random(n),
             n=n)


def _energy_np(s, c):
    d = s.x.astype(np.float64) - s.anchor.astype(np.float64)
    return float(np.sum(s.k * np.sum(d * d, 1) * s.w + c * np.linalg.norm(d, axis=1)))


def _fd(S, dt, fn, field, idx, eps):
    """d fn(s) / d s.field[idx] by central differences (idx None: a scalar field)."""
    out = []
    for sign in (1, -1):
        s = _springs(S, dt)
        if idx is None:
            setattr(s, field, getattr(s, field) + sign * eps)
        else:
            a = getattr(s, field).astype(np.float64)
            a[idx] += sign * eps
            setattr(s, field, a.astype(getattr(s, field).dtype))
        out.append(fn(s))
    return (out[0] - out[1]) / (2 * eps)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_reverse_and_forward_mode_of_a_struct_argument(dt):
    S, energy, _ = _energy_types(dt)
    s = _springs(S, dt)
    tol = 2e-3 if dt == np.float32 else 1e-6
    np.testing.assert_allclose(energy(s, 0.4), _energy_np(s, 0.4), rtol=tol * 1e-2)
    ds = zeros_like(s)
    ds.k = 1.0          # a shadow accumulates: the derivative is added to it
    grads, value = adjit.autodiff(ReverseWithPrimal, energy, Duplicated(s, ds), Active(0.4))
    np.testing.assert_allclose(value, _energy_np(s, 0.4), rtol=tol * 1e-2)
    assert grads[0] is None
    fn = lambda t: _energy_np(t, 0.4)   # noqa: E731
    # (the reference is f64 NumPy; a perturbed f32 field is rounded to f32)
    eps = 1e-3 if dt == np.float32 else 1e-6
    np.testing.assert_allclose(ds.k - 1.0, _fd(S, dt, fn, "k", None, eps), rtol=tol)
    for j in range(3):
        np.testing.assert_allclose(ds.anchor[j], _fd(S, dt, fn, "anchor", j, eps), rtol=tol)
        np.testing.assert_allclose(ds.x[1, j], _fd(S, dt, fn, "x", (1, j), eps), rtol=tol)
    np.testing.assert_allclose(ds.w[2], _fd(S, dt, fn, "w", 2, eps), rtol=tol)
    dc = sum(np.linalg.norm(s.x[i].astype(np.float64) - s.anchor, axis=-1) for i in range(4))
    np.testing.assert_allclose(grads[1], dc, rtol=tol)
    # forward: the tangent along every float field of the shadow at once
    t = zeros_like(s)
    t.k, t.anchor, t.x[:], t.w[:] = 0.5, (1.0, -1.0, 2.0), 0.25, -0.5
    tangent = adjit.autodiff(Forward, energy, Duplicated(s, t), 0.4)
    want = 0.5 * _fd(S, dt, fn, "k", None, eps) + 0.25 * sum(
        _fd(S, dt, fn, "x", (i, j), eps) for i in range(4) for j in range(3)) - 0.5 * sum(
        _fd(S, dt, fn, "w", i, eps) for i in range(4)) + sum(
        c * _fd(S, dt, fn, "anchor", j, eps) for j, c in enumerate((1.0, -1.0, 2.0)))
    np.testing.assert_allclose(tangent, want, rtol=tol)
    # adjit.grad: a struct of the derivatives of its fields
    g = adjit.grad(energy, 0)(s, 0.4)
    assert type(g) is S
    np.testing.assert_allclose(g.k, ds.k - 1.0, rtol=1e-6)
    np.testing.assert_allclose(g.x, ds.x, rtol=1e-6)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_a_kernel_launch_derivative_with_a_struct(dt):
    S, _, energies = _energy_types(dt)
    s = _springs(S, dt)
    n = 4
    out, dout = np.zeros(n), rng.random(n)
    ds = zeros_like(s)
    adjit.autodiff(Reverse, energies, Duplicated(s, ds), Duplicated(out, dout.copy()),
                   ndrange=n)

    def fn(t):
        d = t.x.astype(np.float64) - t.anchor.astype(np.float64)
        return float(np.sum(dout * t.k * np.sum(d * d, 1) * t.w ** 2))
    tol = 2e-3 if dt == np.float32 else 1e-6
    eps = 1e-3 if dt == np.float32 else 1e-6
    np.testing.assert_allclose(ds.k, _fd(S, dt, fn, "k", None, eps), rtol=tol)
    for j in range(3):
        np.testing.assert_allclose(ds.anchor[j], _fd(S, dt, fn, "anchor", j, eps), rtol=tol)
        np.testing.assert_allclose(ds.x[3, j], _fd(S, dt, fn, "x", (3, j), eps), rtol=tol)
    np.testing.assert_allclose(ds.w, [_fd(S, dt, fn, "w", i, eps) for i in range(n)],
                               rtol=tol)
    t = zeros_like(s)
    t.k = 1.0
    dout2 = np.zeros(n)
    adjit.autodiff(Forward, energies, Duplicated(s, t), Duplicated(np.zeros(n), dout2),
                   ndrange=n)
    d = s.x.astype(np.float64) - s.anchor
    np.testing.assert_allclose(dout2, np.sum(d * d, 1) * s.w ** 2, rtol=tol)


def test_derivative_errors():
    S, energy, _ = _energy_types(np.float64)
    s = _springs(S, np.float64)
    with pytest.raises(TypeError, match="struct marked Active: a struct is Duplicated"):
        adjit.autodiff(Reverse, energy, Active(s), Active(0.4))
    with pytest.raises(TypeError, match="the shadow must be a Springs struct"):
        adjit.autodiff(Reverse, energy, Duplicated(s, s.x), Active(0.4))
    bare = S()
    with pytest.raises(TypeError, match="field 'x' of the shadow Springs is not set"):
        adjit.autodiff(Reverse, energy, Duplicated(s, bare), Active(0.4))
    with pytest.raises(TypeError, match="argument 's' is a Springs struct marked Active"):
        adjit.autodiff_thunk(adjit.ReverseSplitWithPrimal, energy, Active, Active)

    @adjit.jit
    def inner(s: S, ds: S):
        return adjit.autodiff(Reverse, energy, Duplicated(s, ds), Active(0.4))[1]
    with pytest.raises(adjit.CompilationError, match="is a Springs struct marked Duplicated: "
                                                     "in reverse mode inside compiled code"):
        inner(s, zeros_like(s))


def test_struct_layout_is_in_the_cache_fingerprint():
    from adjit.lang.source import fingerprint

    def make(swap):
        @adjit.struct
        class T:
            if swap:
                b: float
                a: float
            else:
                a: float
                b: float

        @adjit.func
        def f(t: T):
            return t.a
        return f
    assert fingerprint(make(False)) != fingerprint(make(True))


# ---- Active vector arguments -------------------------------------------------------------
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_an_active_vector_argument_gets_its_gradient_as_an_array(dt):
    V = adjit.vec3 if dt == np.float32 else adjit.vec3d

    @adjit.jit
    def pull(x: Array[V, 1], target: V, k: float):
        e = 0.0
        for i in range(x.shape[0]):
            d = x[i] - target
            e += k * adjit.length(d)
        return e

    x = rng.random((4, 3)).astype(dt)
    target = V(0.5, -0.2, 0.1)

    def ref(t, k):
        return float(np.sum(k * np.linalg.norm(x.astype(np.float64) - t, axis=1)))
    grads, value = adjit.autodiff(ReverseWithPrimal, pull, x, Active(target), Active(2.0))
    tol = 1e-3 if dt == np.float32 else 1e-7
    np.testing.assert_allclose(value, ref(target.astype(np.float64), 2.0), rtol=tol)
    g = grads[1]
    assert isinstance(g, np.ndarray) and g.shape == (3,) and g.dtype == dt
    eps = 1e-6
    t64 = target.astype(np.float64)
    fd = [(ref(t64 + e, 2.0) - ref(t64 - e, 2.0)) / (2 * eps) for e in np.eye(3) * eps]
    np.testing.assert_allclose(g, fd, rtol=tol, atol=tol)
    np.testing.assert_allclose(grads[2], ref(t64, 1.0), rtol=tol)
    # a plain NumPy array or a list is a vector too
    g2 = adjit.autodiff(Reverse, pull, x, Active([0.5, -0.2, 0.1]), 2.0)[1]
    np.testing.assert_allclose(g2, g, rtol=1e-6)
    with pytest.raises(ValueError, match=r"argument 'target' .*shape \(2,\), not \(3,\)"):
        adjit.autodiff(Reverse, pull, x, Active(np.ones(2)), 2.0)
    with pytest.raises(TypeError, match="forward mode takes Duplicated"):
        adjit.autodiff(Forward, pull, x, Active(target), 2.0)
