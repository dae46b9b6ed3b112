"""The derivative entry points where features meet (issue 29, items 1, 4, 5 and the errors
about size-1 dimensions and structs): struct shadows are zeros, stop_gradient holds at every
order, multi-pass entry points leave their arguments as they were, size-1 dimensions and
structs work in every entry point; each against JAX (float64) and finite differences."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import adjit

jax.config.update("jax_enable_x64", True)
sg = jax.lax.stop_gradient


# ---- item 1: a struct's shadow is zeros, whatever the class's defaults -------------------------
@adjit.struct
class Body:
    mass: adjit.f64 = 1.5
    pos: adjit.vec3d = (1.0, 2.0, 3.0)
    turn: adjit.quatd
    n: int = 3


@adjit.jit
def body_energy(b: Body, c: float):
    return (b.mass * b.mass * c + b.pos[0] * b.pos[1] * b.mass + b.pos[2] * c
            + b.turn[3] * b.turn[0] + b.turn[3] * b.mass)


def _body_fd(b: Body, field: str, idx, c: float, eps: float = 1e-6) -> float:
    def at(h):
        t = Body(mass=b.mass, pos=b.pos, turn=b.turn)
        if idx is None:
            setattr(t, field, getattr(b, field) + h)
        else:
            v = getattr(b, field).copy()
            v[idx] += h
            setattr(t, field, v)
        return body_energy(t, c)
    return (at(eps) - at(-eps)) / (2 * eps)


def test_zeros_like_struct_is_zeros_not_the_class_defaults():
    z = adjit.zeros_like_struct(Body())
    assert z.mass == 0.0 and z.n == 0
    np.testing.assert_array_equal(z.pos, np.zeros(3))
    np.testing.assert_array_equal(z.turn, np.zeros(4))     # not the identity quaternion


def test_grad_of_a_struct_with_defaults_against_finite_differences():
    b, c = Body(), 0.7                      # every field at its default (turn: identity)
    g = adjit.grad(body_energy)(b, c)
    assert g.mass == pytest.approx(_body_fd(b, "mass", None, c), rel=1e-8)
    for j in range(3):
        assert g.pos[j] == pytest.approx(_body_fd(b, "pos", j, c), rel=1e-8, abs=1e-9)
    for j in range(4):
        assert g.turn[j] == pytest.approx(_body_fd(b, "turn", j, c), rel=1e-8, abs=1e-9)
    # and by Reverse with a zeros_like_struct shadow
    ds = adjit.zeros_like_struct(b)
    adjit.autodiff(adjit.Reverse, body_energy, adjit.Duplicated(b, ds), adjit.Active(c))
    assert ds.mass == pytest.approx(g.mass, rel=1e-14)
    np.testing.assert_allclose(ds.turn, g.turn, rtol=1e-14)


# ---- item 4: stop_gradient at every order -------------------------------------------------------
@adjit.jit
def held(x: float):
    return x * adjit.stop_gradient(x)


@adjit.jit
def held_trig(x: float):
    return adjit.sin(x) * adjit.cos(adjit.stop_gradient(x))


@adjit.jit
def held_cubic(x: float, y: float):
    return x * x * adjit.stop_gradient(x * y) + adjit.exp(adjit.stop_gradient(y) * x)


@adjit.jit
def held_array(x):
    return adjit.sum(x * x * adjit.stop_gradient(adjit.sin(x)))


def _jax_held(x):
    return x * sg(x)


def _jax_held_trig(x):
    return jnp.sin(x) * jnp.cos(sg(x))


def _jax_held_cubic(x, y):
    return x * x * sg(x * y) + jnp.exp(sg(y) * x)


def _jax_held_array(x):
    return jnp.sum(x * x * sg(jnp.sin(x)))


@adjit.jit
def held_trig_tangent(x: float):
    """The forward derivative of held_trig, in compiled code (for reverse over forward)."""
    return adjit.jvp(held_trig, (x,), (1.0,))[1]


@pytest.mark.parametrize("x", [0.5, -1.3])
def test_second_order_through_stop_gradient_matches_jax(x):
    for f, jf in ((held, _jax_held), (held_trig, _jax_held_trig)):
        want = float(jax.grad(jax.grad(jf))(x))
        assert adjit.grad(adjit.grad(f))(x) == pytest.approx(want, rel=1e-14, abs=1e-15)
        assert adjit.hvp(f, (x,), (1.0,)) == pytest.approx(want, rel=1e-14, abs=1e-15)
        assert adjit.jvp(adjit.grad(f), (x,), (1.0,))[1] == pytest.approx(
            want, rel=1e-14, abs=1e-15)
        assert adjit.jacfwd(adjit.grad(f))(x) == pytest.approx(want, rel=1e-14, abs=1e-15)
        assert adjit.jacrev(adjit.grad(f))(x) == pytest.approx(want, rel=1e-14, abs=1e-15)
    # reverse over forward, and third order
    want = float(jax.grad(lambda t: jax.jvp(_jax_held_trig, (t,), (1.0,))[1])(x))
    assert adjit.grad(held_trig_tangent)(x) == pytest.approx(want, rel=1e-14)
    want3 = float(jax.grad(jax.grad(jax.grad(_jax_held_trig)))(x))
    assert adjit.grad(adjit.grad(adjit.grad(held_trig)))(x) == pytest.approx(want3, rel=1e-13)


def test_hessians_through_stop_gradient_match_jax():
    x, y = 0.4, -0.9
    want = np.array(jax.hessian(_jax_held_cubic, (0, 1))(x, y)).reshape(2, 2)
    for i in range(2):
        row = adjit.hvp(held_cubic, (x, y), tuple(float(i == j) for j in range(2)))
        np.testing.assert_allclose(row, want[i], rtol=1e-13, atol=1e-15)
    xs = np.linspace(-1.0, 1.2, 5)
    want = np.asarray(jax.hessian(_jax_held_array)(xs))
    np.testing.assert_allclose(adjit.hessian(held_array)(xs), want, rtol=1e-13, atol=1e-15)
    v = np.arange(5.0) - 2.0
    np.testing.assert_allclose(adjit.hvp(held_array, (xs,), (v,)), want @ v, rtol=1e-13,
                               atol=1e-15)
    # (finite differences see through stop_gradient: JAX is the reference here)
    np.testing.assert_allclose(adjit.grad(held_array)(xs), jax.grad(_jax_held_array)(xs),
                               rtol=1e-14)


# ---- size-1 dimensions in every entry point ------------------------------------------------------
@adjit.jit
def unit_loss(x):
    return adjit.sum(adjit.sin(x) * x * x)


@adjit.jit
def unit_map(x):
    return adjit.sin(x) * x


@adjit.jit
def outer_loss(x, w):
    """(3, 1) times (1, 4): broadcasting that the size-1 dimensions make."""
    return adjit.sum(adjit.sin(x * w) * x)


@adjit.jit
def unit_grad_inside(x):
    return adjit.grad(unit_loss)(x)


@adjit.jit
def unit_hvp_inside(x, v):
    return adjit.hvp(unit_loss, (x,), (v,))


@adjit.jit
def unit_hessian_inside(x):
    return adjit.hessian(unit_loss)(x)


@adjit.jit
def unit_jacobians_inside(x):
    return adjit.jacfwd(unit_map)(x), adjit.jacrev(unit_map)(x)


def _jax_unit_loss(x):
    return jnp.sum(jnp.sin(x) * x * x)


def _jax_unit_map(x):
    return jnp.sin(x) * x


@pytest.mark.parametrize("shape", [(1,), (1, 3), (3, 1), (1, 1)])
def test_size_one_dimensions_in_every_entry_point_match_jax(shape):
    x = np.linspace(0.3, 1.1, int(np.prod(shape))).reshape(shape)
    v = np.linspace(-1.0, 0.5, x.size).reshape(shape)
    g = np.asarray(jax.grad(_jax_unit_loss)(x))
    h = np.asarray(jax.hessian(_jax_unit_loss)(x))
    hv = (h.reshape(x.size, x.size) @ v.ravel()).reshape(shape)
    jac = np.asarray(jax.jacfwd(_jax_unit_map)(x))
    tol = dict(rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(adjit.grad(unit_loss)(x), g, **tol)
    np.testing.assert_allclose(unit_grad_inside(x), g, **tol)
    np.testing.assert_allclose(adjit.hvp(unit_loss, (x,), (v,)), hv, **tol)
    np.testing.assert_allclose(unit_hvp_inside(x, v), hv, **tol)
    for got in (adjit.hessian(unit_loss)(x), unit_hessian_inside(x)):
        assert got.shape == shape + shape and got.dtype == np.float64
        np.testing.assert_allclose(got, h, **tol)
    for got in (adjit.jacfwd(unit_map)(x), adjit.jacrev(unit_map)(x),
                *unit_jacobians_inside(x)):
        assert got.shape == shape + shape
        np.testing.assert_allclose(got, jac, **tol)
    value, tangent = adjit.jvp(unit_map, (x,), (v,))
    np.testing.assert_allclose(tangent, jax.jvp(_jax_unit_map, (x,), (v,))[1], **tol)
    _, pullback = adjit.vjp(unit_map, x)
    np.testing.assert_allclose(pullback(v)[0], jax.vjp(_jax_unit_map, x)[1](v)[0], **tol)
    assert adjit.check_grad(unit_loss, x) < 1e-6


def test_broadcasting_size_one_dimensions_jacobians_match_jax():
    x = np.linspace(0.2, 0.8, 3).reshape(3, 1)
    w = np.linspace(-0.5, 1.0, 4).reshape(1, 4)

    def jf(x, w):
        return jnp.sum(jnp.sin(x * w) * x)
    tol = dict(rtol=1e-13, atol=1e-15)
    gx, gw = adjit.grad(outer_loss, (0, 1))(x, w)
    np.testing.assert_allclose(gx, jax.grad(jf, 0)(x, w), **tol)
    np.testing.assert_allclose(gw, jax.grad(jf, 1)(x, w), **tol)
    np.testing.assert_allclose(adjit.hessian(outer_loss, 1)(x, w),
                               jax.hessian(jf, 1)(x, w), **tol)
    np.testing.assert_allclose(adjit.jacrev(adjit.grad(outer_loss, 0), 1)(x, w),
                               jax.jacrev(jax.grad(jf, 0), 1)(x, w), **tol)
    assert adjit.check_grad(outer_loss, x, w) < 1e-6


@adjit.kernel
def doubled(x: adjit.Array[adjit.f64, 1], y: adjit.Array[adjit.f64, 1]):
    i = adjit.index()
    y[i] = x[i] * x[i] * 2.0


@adjit.jit
def launch_doubled(x):
    y = adjit.zeros_like(x)
    doubled(x, y, ndrange=x.shape[0])
    return adjit.sum(y)


def test_a_size_one_array_passed_to_an_annotated_kernel_from_jit_code():
    x = np.array([0.75])
    assert launch_doubled(x) == pytest.approx(2 * 0.75 ** 2, rel=1e-15)
    assert adjit.grad(launch_doubled)(x)[0] == pytest.approx(4 * 0.75, rel=1e-15)


# ---- item 5: multi-pass entry points leave their arguments as they were ---------------------------
@adjit.jit
def writes_input(x, y):
    """Writes both arguments before using them (x[0] from x[1]: the tangent of a write moves
    between elements, so each pass must start from clean bases too)."""
    x[0] = x[1] * x[0]
    y[1] = y[1] + 1.0
    return adjit.sin(x) * y * x


@adjit.jit
def writes_input_loss(x, y):
    x[0] = x[1] * x[0]
    y[1] = y[1] + 1.0
    return adjit.sum(adjit.sin(x) * y * x * x)


def _jax_writes_input(x, y):
    x, y = jnp.asarray(x), jnp.asarray(y)
    x = x.at[0].set(x[1] * x[0])
    y = y.at[1].set(y[1] + 1.0)
    return jnp.sin(x) * y * x


def _jax_writes_input_loss(x, y):
    return jnp.sum(_jax_writes_input(x, y) * jnp.asarray(x).at[0].set(x[1] * x[0]))


@adjit.jit
def jacobians_of_writes_inside(x, y):
    return (adjit.jacfwd(writes_input)(x, y), adjit.jacrev(writes_input)(x, y),
            adjit.hessian(writes_input_loss)(x, y), adjit.jacfwd(writes_input, 1)(x, y))


@adjit.jit
def vjp_of_writes_inside(x, y, ct):
    value, pullback = adjit.vjp(writes_input, x, y)
    gx, gy = pullback(ct)
    gx2, gy2 = pullback(ct)          # a second pullback: the same primals
    return gx, gy, gx2 - gx, gy2 - gy


def test_jacobians_of_a_function_writing_its_arguments_match_jax_and_restore_them():
    x0, y0 = np.array([0.3, -0.7, 1.1]), np.array([0.5, 1.5, -2.0])
    tol = dict(rtol=1e-13, atol=1e-15)
    jx = np.asarray(jax.jacfwd(_jax_writes_input, 0)(x0, y0))
    jy = np.asarray(jax.jacfwd(_jax_writes_input, 1)(x0, y0))
    h = np.asarray(jax.hessian(_jax_writes_input_loss, 0)(x0, y0))
    for name, fn, want in (
            ("jacfwd", lambda x, y: adjit.jacfwd(writes_input)(x, y), jx),
            ("jacfwd width 2", lambda x, y: adjit.jacfwd(writes_input, width=2)(x, y), jx),
            ("jacrev", lambda x, y: adjit.jacrev(writes_input)(x, y), jx),
            ("jacfwd y", lambda x, y: adjit.jacfwd(writes_input, 1)(x, y), jy),
            ("jacrev y", lambda x, y: adjit.jacrev(writes_input, 1)(x, y), jy),
            ("hessian", lambda x, y: adjit.hessian(writes_input_loss)(x, y), h),
            ("jacrev of grad", lambda x, y: adjit.jacrev(adjit.grad(writes_input_loss))(x, y),
             h)):
        x, y = x0.copy(), y0.copy()
        np.testing.assert_allclose(fn(x, y), want, **tol, err_msg=name)
        np.testing.assert_array_equal(x, x0, err_msg=name)     # unchanged
        np.testing.assert_array_equal(y, y0, err_msg=name)
    x, y = x0.copy(), y0.copy()
    for got, want in zip(jacobians_of_writes_inside(x, y), (jx, jx, h, jy)):
        np.testing.assert_allclose(got, want, **tol)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(y, y0)


def test_vjp_of_a_function_writing_its_arguments_differentiates_at_the_primals_given():
    x0, y0 = np.array([0.3, -0.7, 1.1]), np.array([0.5, 1.5, -2.0])
    ct = np.array([1.0, -2.0, 0.5])
    want = jax.vjp(_jax_writes_input, x0, y0)[1](ct)
    x, y = x0.copy(), y0.copy()
    value, pullback = adjit.vjp(writes_input, x, y)
    np.testing.assert_allclose(value, _jax_writes_input(x0, y0), rtol=1e-15)
    for _ in range(2):
        gx, gy = pullback(ct)
        np.testing.assert_allclose(gx, want[0], rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(gy, want[1], rtol=1e-13, atol=1e-15)
    x, y = x0.copy(), y0.copy()
    gx, gy, dx, dy = vjp_of_writes_inside(x, y, ct)
    np.testing.assert_allclose(gx, want[0], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(gy, want[1], rtol=1e-13, atol=1e-15)
    assert not dx.any() and not dy.any()


# ---- jvp and hvp of a struct argument ------------------------------------------------------------
@adjit.struct
class Inner:
    w: adjit.f64 = 0.5


@adjit.struct
class Springs:
    k: adjit.f64 = 2.0
    x: adjit.Array[adjit.f64, 1]
    v: adjit.vec3d
    n: int = 2
    inner: Inner


@adjit.jit
def spring_energy(p: Springs, c: float):
    s = 0.0
    for i in range(p.n):
        s += p.k * p.x[i] * p.x[i] * c + p.v[0] * adjit.sin(p.x[i]) * p.inner.w
    return s + p.v[1] * p.v[2] * p.k + c * c * p.inner.w * p.inner.w


def _jax_spring_energy(k, x, v, w, c):
    return (jnp.sum(k * x * x * c + v[0] * jnp.sin(x) * w) + v[1] * v[2] * k
            + c * c * w * w)


def _springs(k=1.3, x=(0.4, -0.9), v=(0.5, 1.5, -1.0), w=0.7):
    return Springs(k=k, x=np.array(x), v=v, inner=Inner(w=w))


def _flat(p: Springs):
    return p.k, p.x, p.v, p.inner.w


def test_jvp_of_a_struct_argument_matches_jax_and_finite_differences():
    p, c = _springs(), 0.3
    t = adjit.zeros_like_struct(p)
    t.k, t.x[:], t.v, t.inner.w = 1.0, (0.5, -1.0), (1.0, 2.0, 3.0), -0.25
    value, tangent = adjit.jvp(spring_energy, (p, c), (t, 0.5))
    want_v, want_t = jax.jvp(_jax_spring_energy, (*_flat(p), c), (*_flat(t), 0.5))
    assert value == pytest.approx(float(want_v), rel=1e-14)
    assert tangent == pytest.approx(float(want_t), rel=1e-13)
    eps = 1e-6

    def at(h):
        q = _springs(p.k + h * t.k, p.x + h * t.x, p.v + h * t.v, p.inner.w + h * t.inner.w)
        return spring_energy(q, c + h * 0.5)
    assert tangent == pytest.approx((at(eps) - at(-eps)) / (2 * eps), rel=1e-7)
    # batched: two struct tangents at once
    t2 = adjit.zeros_like_struct(p)
    t2.x[:] = (1.0, 0.0)
    _, (a, b) = adjit.jvp(spring_energy, (p, c), ((t, t2), (0.5, 0.0)), width=2)
    assert a == pytest.approx(tangent, rel=1e-14)
    assert b == pytest.approx(float(jax.jvp(_jax_spring_energy, (*_flat(p), c),
                                            (*_flat(t2), 0.0))[1]), rel=1e-13)
    with pytest.raises(TypeError, match="tangent 0 must be a Springs struct"):
        adjit.jvp(spring_energy, (p, c), (1.0, 0.5))


def test_hvp_of_a_struct_argument_matches_jax_and_finite_differences_of_grad():
    p, c = _springs(), 0.3
    t = adjit.zeros_like_struct(p)
    t.k, t.x[:], t.v, t.inner.w = 1.0, (0.5, -1.0), (1.0, 2.0, 3.0), -0.25
    hp, hc = adjit.hvp(spring_energy, (p, c), (t, 0.5))
    assert type(hp) is Springs and type(hp.inner) is Inner and hp.n == 0
    want = jax.jvp(jax.grad(_jax_spring_energy, (0, 1, 2, 3, 4)), (*_flat(p), c),
                   (*_flat(t), 0.5))[1]
    for got, w in zip((*_flat(hp), hc), want):
        np.testing.assert_allclose(got, w, rtol=1e-13, atol=1e-15)
    eps = 1e-6

    def grads(h):
        q = _springs(p.k + h * t.k, p.x + h * t.x, p.v + h * t.v, p.inner.w + h * t.inner.w)
        g = adjit.grad(spring_energy, (0, 1))(q, c + h * 0.5)
        return (*_flat(g[0]), g[1])
    fd = [(a - b) / (2 * eps) for a, b in zip(grads(eps), grads(-eps))]
    for got, w in zip((*_flat(hp), hc), fd):
        np.testing.assert_allclose(got, w, rtol=1e-6, atol=1e-8)
    # one struct argument alone, and width=2
    hp1 = adjit.hvp(lambda_free_spring, (p,), (t,))
    want1 = jax.jvp(jax.grad(lambda *a: _jax_spring_energy(*a, 0.3), (0, 1, 2, 3)),
                    _flat(p), _flat(t))[1]
    for got, w in zip(_flat(hp1), want1):
        np.testing.assert_allclose(got, w, rtol=1e-13, atol=1e-15)
    lanes = adjit.hvp(spring_energy, (p, c), ((t, t), (0.5, 0.5)), width=2)
    for lane in lanes:
        np.testing.assert_allclose(lane[0].x, hp.x, rtol=1e-15)
        assert lane[1] == hc


@adjit.jit
def lambda_free_spring(p: Springs):
    return spring_energy(p, 0.3)


@adjit.jit
def spring_field(p: Springs, c: float):
    return p.x * p.k * c + adjit.sin(p.x) * p.inner.w * p.v[1]


def _jax_spring_field(k, x, v, w, c):
    return x * k * c + jnp.sin(x) * w * v[1]


def test_vjp_and_check_grad_of_a_struct_argument():
    p, c = _springs(), 0.3
    for f, jf, ct in ((spring_energy, _jax_spring_energy, 2.0),
                      (spring_field, _jax_spring_field, np.array([1.0, -2.0]))):
        value, pullback = adjit.vjp(f, p, c)
        jvalue, jpullback = jax.vjp(jf, *_flat(p), c)
        np.testing.assert_allclose(value, jvalue, rtol=1e-14)
        for _ in range(2):                      # a pullback may be called again
            gp, gc = pullback(ct)
            assert type(gp) is Springs
            want = jpullback(ct)
            for got, w in zip((*_flat(gp), gc), want):
                np.testing.assert_allclose(got, w, rtol=1e-13, atol=1e-15)
    assert adjit.check_grad(spring_energy, p, c) < 1e-6


def test_jacobians_and_derivatives_of_derivatives_refuse_a_struct_clearly():
    p = _springs()
    for make in (adjit.jacfwd, adjit.jacrev, adjit.hessian,
                 lambda f: adjit.grad(adjit.grad(f, 1), 1)):
        with pytest.raises(TypeError, match="argument 0 is a Springs struct; jacfwd, jacrev, "
                                            "hessian and derivatives of derivatives take"):
            make(spring_energy)(p, 0.3)


@adjit.jit
def unit_derivatives_inside(x, v):
    _, tangent = adjit.jvp(unit_map, (x,), (v,))
    _, pullback = adjit.vjp(unit_map, x)
    (cotangent,) = pullback(v)
    dx = adjit.zeros_like(x)
    adjit.autodiff(adjit.Reverse, unit_loss, adjit.Duplicated(x, dx))
    forward = adjit.autodiff(adjit.Forward, unit_loss, adjit.Duplicated(x, v))
    _, (lane0, lane1) = adjit.jvp(unit_map, (x,), ((v, x),), width=2)
    return tangent, cotangent, dx, forward, lane1


@pytest.mark.parametrize("shape", [(1,), (1, 3), (3, 1)])
def test_size_one_dimensions_in_jvp_vjp_and_autodiff_inside_jit_match_jax(shape):
    x = np.linspace(0.3, 1.1, int(np.prod(shape))).reshape(shape)
    v = np.linspace(-1.0, 0.5, x.size).reshape(shape)
    tangent, cotangent, dx, forward, lane1 = unit_derivatives_inside(x, v)
    tol = dict(rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(tangent, jax.jvp(_jax_unit_map, (x,), (v,))[1], **tol)
    np.testing.assert_allclose(cotangent, jax.vjp(_jax_unit_map, x)[1](v)[0], **tol)
    np.testing.assert_allclose(dx, jax.grad(_jax_unit_loss)(x), **tol)
    assert forward == pytest.approx(float(jax.jvp(_jax_unit_loss, (x,), (v,))[1]), rel=1e-13)
    np.testing.assert_allclose(lane1, jax.jvp(_jax_unit_map, (x,), (x,))[1], **tol)


@pytest.mark.parametrize("shape", [(1,), (1, 3), (3, 1)])
def test_size_one_dimensions_in_float32_keep_the_dtype(shape):
    x = np.linspace(0.3, 1.1, int(np.prod(shape))).reshape(shape).astype(np.float32)
    x64 = x.astype(np.float64)
    for got, want in ((adjit.hessian(unit_loss)(x), jax.hessian(_jax_unit_loss)(x64)),
                      (adjit.jacfwd(unit_map)(x), jax.jacfwd(_jax_unit_map)(x64)),
                      (adjit.jacrev(unit_map)(x), jax.jacfwd(_jax_unit_map)(x64)),
                      (adjit.hessian(held_array)(x), jax.hessian(_jax_held_array)(x64))):
        assert got.dtype == np.float32 and got.shape == shape + shape
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


# ---- strided arguments: a fresh shadow is contiguous, the array a view --------------------------
@adjit.jit
def strided_grad_inside(x):
    return adjit.grad(unit_loss)(x)


@adjit.jit
def strided_pullback_inside(x, v):
    _, pullback = adjit.vjp(unit_map, x)
    (g,) = pullback(v[::-1])                  # a reversed cotangent
    _, t = adjit.jvp(unit_map, (x,), (v[::-1],))
    return g, t


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["fortran", "reversed"])
def test_strided_arguments_in_compiled_derivatives_match_jax(layout, dtype):
    base = np.linspace(0.1, 1.2, 12).astype(dtype)
    x = np.asfortranarray(base.reshape(3, 4)) if layout == "fortran" else base[::-1]
    x64 = np.array(x, dtype=np.float64)
    tol = dict(rtol=2e-6, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-13, atol=1e-15)
    v = np.ones_like(x)
    for got, want in ((strided_grad_inside(x), jax.grad(_jax_unit_loss)(x64)),
                      (adjit.hvp(unit_loss, (x,), (v,)),
                       jax.jvp(jax.grad(_jax_unit_loss), (x64,), (v.astype(np.float64),))[1]),
                      (adjit.hessian(unit_loss)(x), jax.hessian(_jax_unit_loss)(x64)),
                      (adjit.jacfwd(unit_map)(x), jax.jacfwd(_jax_unit_map)(x64)),
                      (adjit.jacrev(unit_map)(x), jax.jacfwd(_jax_unit_map)(x64))):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, **tol)
    if layout == "reversed":
        v = np.arange(12.0).astype(dtype)
        g, t = strided_pullback_inside(x, v)
        want = jax.jvp(_jax_unit_map, (x64,), (v[::-1].astype(np.float64),))[1]
        np.testing.assert_allclose(g, want, **tol)
        np.testing.assert_allclose(t, want, **tol)


@adjit.jit
def unit_map_twice(x, y):
    return unit_map(x), unit_map(y)


def test_one_function_called_with_two_layouts_in_one_compiled_function():
    """Specialisations whose mangled names agree (a layout and size-1 dimensions are left
    out of them) are functions of their own."""
    x = np.linspace(0.1, 1.0, 6)
    m = np.linspace(0.1, 0.6, 6).reshape(2, 3)
    for a, b in ((x, x[::-1]), (m, m[:1]), (m, np.asfortranarray(m))):
        got_a, got_b = unit_map_twice(a, b)
        np.testing.assert_allclose(got_a, np.sin(a) * a, rtol=1e-15)
        np.testing.assert_allclose(got_b, np.sin(b) * b, rtol=1e-15)


# ---- check_grad of every argument kind --------------------------------------------------------
@adjit.jit
def zero_d_loss(x):
    return adjit.sin(x[()]) * x[()]


@adjit.jit
def scalar_loss(c):
    return adjit.sin(c) * c * c


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_check_grad_of_float32_0d_scalars_views_and_foreign_arrays(dtype):
    """float32 arguments take a step float32 can resolve (1e-6 drowned in rounding: errors
    of 2-9%); torch tensors and JAX arrays are taken as NumPy arrays of them."""
    import torch
    bound = 1e-3 if dtype == np.float32 else 1e-8
    b = np.linspace(0.1, 1.2, 8).astype(dtype)
    for f, arg in ((unit_loss, b), (unit_loss, b[1:4]), (unit_loss, b[::-2]),
                   (zero_d_loss, np.array(dtype(0.7))), (scalar_loss, dtype(0.7)),
                   (unit_loss, torch.from_numpy(b.copy())), (unit_loss, jnp.asarray(b))):
        err = adjit.check_grad(f, arg)
        assert isinstance(err, float) and err < bound, (f, arg, err)
    # a given eps is used as given
    assert adjit.check_grad(unit_loss, b.astype(np.float64), eps=1e-4) < 1e-6


def test_jacobians_and_hessians_of_torch_and_jax_arrays_match_jax():
    import torch
    x = np.linspace(0.1, 1.0, 4)
    v = np.linspace(-1.0, 1.0, 4)
    tol = dict(rtol=1e-13, atol=1e-15)
    jac = jax.jacfwd(_jax_unit_map)(x)
    h = jax.hessian(_jax_unit_loss)(x)
    for convert in (torch.from_numpy, jnp.asarray):
        xs = convert(x.copy())
        np.testing.assert_allclose(adjit.jacfwd(unit_map)(xs), jac, **tol)
        np.testing.assert_allclose(adjit.jacrev(unit_map)(xs), jac, **tol)
        np.testing.assert_allclose(adjit.hessian(unit_loss)(xs), h, **tol)
        np.testing.assert_allclose(adjit.hvp(unit_loss, (xs,), (convert(v.copy()),)), h @ v,
                                   **tol)
        np.testing.assert_allclose(adjit.jvp(adjit.grad(unit_loss), (xs,),
                                             (convert(v.copy()),))[1], h @ v, **tol)


# ---- split mode and vector arguments -----------------------------------------------------
@adjit.jit
def _vec_energy(v: adjit.vec3, s: float):
    return adjit.dot(v, v) * s


def test_split_mode_names_how_to_pass_a_vector():
    """autodiff takes Active(vec) (a zero shadow it returns); a split tape's halves take the
    shadow from the user, and the refusal says so (it said 'arrays are Duplicated')."""
    from adjit import Active, Duplicated, ReverseSplitWithPrimal
    with pytest.raises(TypeError, match=r"argument 'v' \(adjit.vec3\) is marked Active: "
                                        r"split mode takes a vector, matrix or quaternion"):
        adjit.autodiff_thunk(ReverseSplitWithPrimal, _vec_energy, Active, Active)
    fw, rv = adjit.autodiff_thunk(ReverseSplitWithPrimal, _vec_energy, Duplicated, Active)
    v = np.array([1.0, 2.0, 3.0], np.float32)
    dv = np.zeros(3, np.float32)
    tape, primal, _ = fw(Duplicated(v, dv), Active(2.0))
    assert primal == pytest.approx(28.0)
    _, ds = rv(Duplicated(v, dv), Active(2.0), 1.0, tape)
    assert ds == pytest.approx(14.0)
    np.testing.assert_allclose(dv, 2 * 2.0 * v)
