"""Structs made and returned in compiled code (issue 33): `Body(pos, vel, mass=...)` by
position or keyword in @jit, @func and kernels, field assignment (a vector field's
component too), struct variables through ifs and loops, struct results of @func (passed on
to other calls) and of @jit (an instance of the class in Python), nested structs; and
derivatives of functions taking or returning structs, inside compiled code (grad,
value_and_grad, vjp, jvp) and from Python (jvp, vjp, autodiff_thunk), checked against the
Python function, the analytic derivative and finite differences in float64."""
from __future__ import annotations

import numpy as np
import pytest

import adjit
from adjit import (Active, Array, Duplicated, Reverse, ReverseSplitWithPrimal, f32, f64,
                   vec3, vec3d)


@adjit.struct
class Body:
    pos: vec3d
    vel: vec3d
    mass: f64 = 2.0
    tag: int


@adjit.struct
class Pair:
    a: Body
    k: f64


@adjit.struct
class Cloud:
    x: Array[f64, 1]
    w: f64


@adjit.func
def drift(b: Body, dt: f64) -> Body:
    return Body(b.pos + dt * b.vel, b.vel, mass=b.mass, tag=b.tag + 1)


@adjit.func
def energy(b: Body) -> f64:
    return 0.5 * b.mass * adjit.dot(b.vel, b.vel) + b.mass * b.pos[2]


@adjit.jit
def simulate(x: f64, v: f64, n: int):
    b = Body(vec3d(x, 0.0, 1.0), vec3d(v, 1.0, 0.5))   # mass: the class's default; tag 0
    for i in range(n):
        b = drift(b, 0.1)
        if b.pos[0] > 1.0:
            b.vel[0] = -b.vel[0]
            b.mass = b.mass * 1.5
    return b, energy(b)


def _close_bodies(got, want, rtol=1e-12):
    assert type(got) is Body
    np.testing.assert_allclose(got.pos, want.pos, rtol=rtol)
    np.testing.assert_allclose(got.vel, want.vel, rtol=rtol)
    assert got.pos.dtype == np.float64 and got.pos.shape == (3,)
    assert isinstance(got.mass, np.float64) and isinstance(got.tag, np.int64)
    assert got.mass == pytest.approx(want.mass, rel=rtol) and got.tag == want.tag


@pytest.mark.parametrize("x, v, n", [(0.5, 2.0, 7), (0.5, 2.0, 0), (1.5, -1.0, 1)])
def test_made_changed_and_returned_in_jit_as_python_does(x, v, n):
    b, e = simulate(x, v, n)
    want_b, want_e = simulate.pyfn(x, v, n)
    _close_bodies(b, want_b)
    assert e == pytest.approx(want_e, rel=1e-12)


# ---- nested structs, array fields, a kernel --------------------------------------------
@adjit.jit
def nested(x: f64, xs: Array[f64, 1]):
    p = Pair(a=Body(vel=vec3d(x, 0.0, 0.0)), k=x)
    p.a.mass = 3.0 * x
    p.a.pos.z = x + 1.0                 # a component of a vector field of a nested struct
    q = p                               # a copy: p's later changes leave it
    p.k += 1.0
    c = Cloud(xs * x, w=q.k)
    return q, p.k, c


def test_nested_structs_copies_and_array_fields():
    xs = np.array([1.0, 2.0, 3.0])
    q, k, c = nested(2.0, xs)
    assert type(q) is Pair and type(q.a) is Body and type(c) is Cloud
    assert q.k == 2.0 and k == 3.0 and q.a.mass == 6.0
    np.testing.assert_array_equal(q.a.pos, [0.0, 0.0, 3.0])
    np.testing.assert_array_equal(q.a.vel, [2.0, 0.0, 0.0])
    np.testing.assert_array_equal(c.x, xs * 2.0)
    assert c.w == 2.0


@adjit.kernel
def per_item(xs: Array[f64, 1], out: Array[f64, 2]):
    i = adjit.index()
    b = Body(pos=vec3d(xs[i], 0.0, xs[i] * xs[i]), vel=vec3d(1.0, xs[i], 0.0))
    b.vel.x = 2.0 * xs[i]
    b = drift(b, 0.5)
    g = adjit.grad(energy)(b)
    out[i, 0] = energy(b)
    out[i, 1] = g.mass + g.vel[0]


def _per_item_reference(x):
    pos = np.array([x, 0.0, x * x])
    vel = np.array([2.0 * x, x, 0.0])
    pos = pos + 0.5 * vel
    m = 2.0
    e = 0.5 * m * vel @ vel + m * pos[2]
    return [e, (0.5 * vel @ vel + pos[2]) + m * vel[0]]


@pytest.mark.parametrize("n", [0, 1, 4])
def test_a_kernel_makes_passes_and_differentiates_structs(n):
    xs = np.linspace(0.5, 1.5, n)
    out = np.zeros((n, 2))
    per_item(xs, out, ndrange=n)
    np.testing.assert_allclose(out, np.array([_per_item_reference(x) for x in xs])
                               .reshape(n, 2), rtol=1e-12)
    if n == 0:
        return
    # reverse mode through the construction (and the gradient inside): finite differences
    dout = np.zeros((n, 2))
    dout[:, 0] = 1.0
    dxs = np.zeros(n)
    adjit.autodiff(Reverse, per_item, Duplicated(xs, dxs), Duplicated(np.zeros((n, 2)), dout),
                   ndrange=n)
    eps = 1e-6
    fd = [(_per_item_reference(x + eps)[0] - _per_item_reference(x - eps)[0]) / (2 * eps)
          for x in xs]
    np.testing.assert_allclose(dxs, fd, rtol=1e-6)


# ---- derivatives inside compiled code --------------------------------------------------
@adjit.jit
def energy_and_gradient(b: Body):
    return adjit.value_and_grad(energy)(b)


@adjit.jit
def drift_vjp(b: Body, dt: f64, ct: Body):
    out, pullback = adjit.vjp(drift, b, dt)
    gb, gdt = pullback(ct)
    return out, gb, gdt


@adjit.jit
def drift_jvp(b: Body, dt: f64, tb: Body):
    return adjit.jvp(drift, (b, dt), (tb, 1.0))


B = Body(pos=vec3d(0.5, -1.0, 2.0), vel=vec3d(1.5, 0.25, -2.0), mass=1.25, tag=4)
CT = Body(pos=vec3d(1.0, 2.0, -1.0), vel=vec3d(0.5, -0.5, 3.0), mass=0.75, tag=9)


def _fd_energy(field, k=None, eps=1e-6):
    def at(h):
        b = Body(pos=B.pos.copy(), vel=B.vel.copy(), mass=B.mass, tag=B.tag)
        if k is None:
            setattr(b, field, getattr(b, field) + h)
        else:
            getattr(b, field)[k] += h
        return energy.pyfn(b)
    return (at(eps) - at(-eps)) / (2 * eps)


@adjit.func
def speed2(v: vec3d) -> f64:
    return adjit.dot(v, v)


@adjit.jit
def vector_gradient(v: vec3d):
    return adjit.grad(speed2)(v)


def test_grad_of_a_vector_in_jit():
    np.testing.assert_allclose(vector_gradient(B.vel), 2.0 * B.vel, rtol=1e-15)


def test_value_and_grad_of_a_struct_in_jit():
    e, g = energy_and_gradient(B)
    assert e == pytest.approx(energy.pyfn(B), rel=1e-12)
    assert type(g) is Body and g.tag == 0 and isinstance(g.tag, np.int64)
    np.testing.assert_allclose(g.pos, [0.0, 0.0, B.mass], rtol=1e-12)
    np.testing.assert_allclose(g.vel, B.mass * B.vel, rtol=1e-12)
    assert g.mass == pytest.approx(0.5 * B.vel @ B.vel + B.pos[2], rel=1e-12)
    assert g.mass == pytest.approx(_fd_energy("mass"), rel=1e-7)
    np.testing.assert_allclose(g.vel, [_fd_energy("vel", k) for k in range(3)], rtol=1e-7)
    # the same from Python (adjit.grad takes structs too)
    g2 = adjit.grad(energy)(B)
    np.testing.assert_allclose(g2.vel, g.vel, rtol=1e-14)


def test_vjp_of_a_struct_result_in_jit_and_from_python():
    out, gb, gdt = drift_vjp(B, 0.1, CT)
    _close_bodies(out, drift.pyfn(B, 0.1))
    np.testing.assert_allclose(gb.pos, CT.pos, rtol=1e-12)
    np.testing.assert_allclose(gb.vel, 0.1 * CT.pos + CT.vel, rtol=1e-12)
    assert gb.mass == pytest.approx(CT.mass) and gb.tag == 0
    assert gdt == pytest.approx(B.vel @ CT.pos, rel=1e-12)
    value, pullback = adjit.vjp(drift, B, 0.1)
    _close_bodies(value, out)
    pb, pdt = pullback(CT)
    np.testing.assert_allclose(pb.vel, gb.vel, rtol=1e-12)
    assert pdt == pytest.approx(gdt, rel=1e-12)
    with pytest.raises(TypeError, match="the cotangent of a Body result is a Body struct"):
        pullback(1.0)


def test_jvp_of_a_struct_result_in_jit_and_from_python():
    out, tangent = drift_jvp(B, 0.1, CT)
    _close_bodies(out, drift.pyfn(B, 0.1))
    np.testing.assert_allclose(tangent.pos, CT.pos + 0.1 * CT.vel + B.vel, rtol=1e-12)
    np.testing.assert_allclose(tangent.vel, CT.vel, rtol=1e-12)
    assert tangent.mass == pytest.approx(CT.mass) and tangent.tag == 0
    value, t2 = adjit.jvp(drift, (B, 0.1), (CT, 1.0))
    _close_bodies(value, out)
    np.testing.assert_allclose(t2.pos, tangent.pos, rtol=1e-12)


def test_autodiff_thunk_takes_structs():
    fwd, rev = adjit.autodiff_thunk(ReverseSplitWithPrimal, energy, Duplicated)
    db = adjit.zeros_like_struct(B)
    tape, primal, _ = fwd(Duplicated(B, db))
    assert rev(Duplicated(B, db), 2.0, tape) == (None,)
    assert primal == pytest.approx(energy.pyfn(B), rel=1e-12)
    np.testing.assert_allclose(db.vel, 2.0 * B.mass * B.vel, rtol=1e-12)
    assert db.mass == pytest.approx(2.0 * (0.5 * B.vel @ B.vel + B.pos[2]), rel=1e-12)


@adjit.func
def spring(b: Body, k: f32):
    return k * b.pos[0]


@adjit.jit
def spring_grad32(b: Body, k: f32):
    return adjit.grad(spring, argnums=(0, 1))(b, k)


def test_float32_argument_beside_a_struct():
    gb, gk = spring_grad32(B, np.float32(2.0))
    assert isinstance(gk, np.float32) and gk == np.float32(B.pos[0])
    np.testing.assert_allclose(gb.pos, [2.0, 0.0, 0.0])


# ---- refusals --------------------------------------------------------------------------
@adjit.jit
def reads_an_unset_array(w: f64):
    c = Cloud(w=w)
    return adjit.sum(c.x)


@adjit.jit
def gives_a_field_a_scalar(x: f64):
    return Body(pos=x)


@adjit.jit
def unknown_field(x: f64):
    return Body(speed=x)


@adjit.jit
def writes_its_argument(b: Body):
    b.vel.x = 1.0
    return b


@adjit.jit
def an_int_field_a_fraction(x: f64):
    return Body(tag=x)


@adjit.jit
def second_order(b: Body):
    return adjit.grad(adjit.grad(energy))(b)


@pytest.mark.parametrize("fn, arg, message", [
    (reads_an_unset_array, 1.0, r"field 'x' of this Cloud is not set: assign it first"),
    (gives_a_field_a_scalar, 1.0, r"Body\.pos \(adjit\.vec3d\): needs adjit\.vec3d, got a adjit\.f64"),
    (unknown_field, 1.0, r"Body\(\) got an unexpected keyword argument 'speed' \(its fields: "
                         r"pos, vel, mass, tag\)"),
    (writes_its_argument, B, r"cannot assign to b\.vel\.x: the fields of a struct argument "
                             r"are read-only"),
    (an_int_field_a_fraction, 1.0, r"Body\.tag \(adjit\.i64\): needs an integer"),
    (second_order, B, r"grad\(grad\(energy\)\)\(\) of grad\(energy\) with a struct or vector "
                      r"argument inside compiled code: second derivatives take scalars"),
], ids=["unset-array", "wrong-kind", "unknown-field", "argument-written", "int-field",
        "second-order"])
def test_refusals_name_the_struct_and_the_line(fn, arg, message):
    with pytest.raises(adjit.CompilationError, match=message) as e:
        fn(arg)
    assert "test_structs_made_in_code.py" in str(e.value)


# ---- a new process: struct results from the disk cache, without MLIR -------------------
STRUCT_PROGRAM = """
import sys
import adjit
from adjit import f64, vec3d

@adjit.struct
class Body:
    pos: vec3d
    mass: f64
    tag: int

@adjit.jit
def make(x: f64):
    return Body(vec3d(x, 2.0 * x, 0.0), x * x, 3)

b = make(1.5)
value, pullback = adjit.vjp(make, 1.5)
(g,) = pullback(Body(vec3d(1.0, 1.0, 1.0), 1.0, 0))
_, t = adjit.jvp(make, (1.5,), (1.0,))
print({"b": [type(b).__name__, b.pos.tolist(), float(b.mass), int(b.tag)], "g": float(g),
       "t": [type(t).__name__, t.pos.tolist(), float(t.mass)], "mlir": "mlir.ir" in sys.modules})
assert adjit.wait_for_builds(120)
"""


def test_struct_results_and_their_derivatives_load_from_the_disk_cache(tmp_path):
    from test_transform_disk_cache import run
    cache = tmp_path / "cache"
    first = run(tmp_path, cache, program=STRUCT_PROGRAM)
    assert first["b"] == ["Body", [1.5, 3.0, 0.0], 2.25, 3]
    assert first["g"] == 1.0 + 2.0 + 2 * 1.5
    assert first["t"] == ["Body", [1.0, 2.0, 0.0], 3.0]
    again = run(tmp_path, cache, program=STRUCT_PROGRAM, block_mlir=True)
    assert again == {**first, "mlir": False}
