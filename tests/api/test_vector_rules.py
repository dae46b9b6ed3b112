"""Custom rules (adjit.rules) of @adjit.func functions taking and returning vectors
(compiler/rule_compiler.py: a vector argument is a vector to the rule, its `.dval` a vector
of tangents; a vector result's primal and tangent are vectors; a reverse rule gives a
vector adjoint; vectors go on the tape): checked against finite differences in both modes,
and shown to be the rules' derivatives, not the automatic ones."""
import numpy as np
import pytest

import adjit
from adjit import Array, Duplicated, Forward, Reverse, autodiff
AugmentedReturn = adjit.rules.AugmentedReturn


def _rules(V):
    @adjit.func
    def unit(v: V):
        """normalize, whose rules give the exact derivative (P v' / |v|)."""
        return v / adjit.length(v)

    @adjit.rules.forward(unit)
    def _(config, v):
        n = adjit.length(v.val)
        u = v.val / n
        return u, (v.dval - u * adjit.dot(u, v.dval)) / n

    @adjit.rules.augmented_primal(unit)
    def _(config, v):
        return AugmentedReturn(unit(v.val), None, v.val)

    @adjit.rules.reverse(unit)
    def _(config, dret, tape, v):
        n = adjit.length(tape)
        u = tape / n
        return ((dret - u * adjit.dot(u, dret)) / n,)

    @adjit.func
    def clipped_dist(a: V, b: V, s: float):
        """|a - b| * s, whose rules clip the gradient to length 1 in a (a derivative the
        automatic one is not) and pass the true one in b and s."""
        return adjit.length(a - b) * s

    @adjit.rules.forward(clipped_dist)
    def _(config, a, b, s):
        d = a.val - b.val
        n = adjit.length(d)
        u = d / n
        t = adjit.dot(u, a.dval) * 0.5 - adjit.dot(u, b.dval) * s.val + n * s.dval
        return n * s.val, t

    @adjit.rules.augmented_primal(clipped_dist)
    def _(config, a, b, s):
        return AugmentedReturn(adjit.length(a.val - b.val) * s.val, None,
                               (a.val - b.val, s.val))

    @adjit.rules.reverse(clipped_dist)
    def _(config, dret, tape, a, b, s):
        d, sv = tape
        n = adjit.length(d)
        u = d / n
        return u * (dret * 0.5), u * (-dret * sv), dret * n

    @adjit.kernel
    def k_unit(x: Array[V, 1], y: Array[V, 1]):
        i = adjit.index()
        y[i] = unit(x[i]) * 2.0

    @adjit.kernel
    def k_dist(x: Array[V, 1], z: Array[V, 1], s: Array[float, 1], out: Array[float, 1]):
        i = adjit.index()
        out[i] = clipped_dist(x[i], z[i], s[i])

    return k_unit, k_dist


def _unit_np(x):
    return 2 * x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_rules_taking_and_returning_a_vector(dt):
    k_unit, _ = _rules(adjit.vec3 if dt == np.float32 else adjit.vec3d)
    r = np.random.default_rng(0)
    n = 6
    x, w = (r.random((n, 3)) + 0.2).astype(dt), r.standard_normal((n, 3)).astype(dt)
    y = np.zeros_like(x)
    k_unit(x, y, ndrange=n)
    tol = 1e-5 if dt == np.float32 else 1e-12
    np.testing.assert_allclose(y, _unit_np(x), rtol=tol)
    # reverse: x's shadow gets the cotangent w through the rule
    dx = np.zeros_like(x)
    autodiff(Reverse, k_unit, Duplicated(x, dx), Duplicated(np.zeros_like(x), w.copy()),
             ndrange=n)
    eps = 1e-6
    x64 = x.astype(np.float64)
    fd = np.zeros_like(x64)
    for i in range(n):
        for j in range(3):
            e = np.zeros_like(x64)
            e[i, j] = eps
            fd[i, j] = np.sum(w * (_unit_np(x64 + e) - _unit_np(x64 - e))) / (2 * eps)
    ftol = 1e-3 if dt == np.float32 else 1e-7
    np.testing.assert_allclose(dx, fd, rtol=ftol, atol=ftol)
    # forward: the tangent of y along w
    ty = np.zeros_like(x)
    autodiff(Forward, k_unit, Duplicated(x, w.copy()), Duplicated(np.zeros_like(x), ty),
             ndrange=n)
    fd_t = (_unit_np(x64 + eps * w) - _unit_np(x64 - eps * w)) / (2 * eps)
    np.testing.assert_allclose(ty, fd_t, rtol=ftol, atol=ftol)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_the_rules_are_used_with_vector_arguments_and_a_vector_tape(dt):
    _, k_dist = _rules(adjit.vec3 if dt == np.float32 else adjit.vec3d)
    r = np.random.default_rng(1)
    n = 5
    x, z = r.random((n, 3)).astype(dt), r.random((n, 3)).astype(dt) + 1.0
    s, out = r.random(n) + 0.5, np.zeros(n)
    k_dist(x, z, s, out, ndrange=n)
    dist = np.linalg.norm(x.astype(np.float64) - z, axis=1)
    tol = 1e-5 if dt == np.float32 else 1e-12
    np.testing.assert_allclose(out, dist * s, rtol=tol)
    dx, dz, ds = np.zeros_like(x), np.zeros_like(z), np.zeros(n)
    autodiff(Reverse, k_dist, Duplicated(x, dx), Duplicated(z, dz), Duplicated(s, ds),
             Duplicated(out, np.ones(n)), ndrange=n)
    u = (x.astype(np.float64) - z) / dist[:, None]
    # in a: the rule's half gradient (the automatic one would be u * s)
    np.testing.assert_allclose(dx, 0.5 * u, rtol=tol * 10, atol=tol)
    # in b and s: the true derivative, against finite differences
    eps = 1e-6
    fd_z = np.zeros((n, 3))
    for j in range(3):
        e = np.zeros((n, 3))
        e[:, j] = eps
        fd_z[:, j] = (np.linalg.norm(x - (z + e), axis=1) -
                      np.linalg.norm(x - (z - e), axis=1)) * s / (2 * eps)
    ftol = 1e-3 if dt == np.float32 else 1e-7
    np.testing.assert_allclose(dz, fd_z, rtol=ftol, atol=ftol)
    np.testing.assert_allclose(ds, dist, rtol=ftol)
    tx, tz = r.standard_normal((n, 3)).astype(dt), r.standard_normal((n, 3)).astype(dt)
    tout = np.zeros(n)
    autodiff(Forward, k_dist, Duplicated(x, tx), Duplicated(z, tz), Duplicated(s, np.ones(n)),
             Duplicated(np.zeros(n), tout), ndrange=n)
    want = np.sum(u * tx, 1) * 0.5 - np.sum(u * tz, 1) * s + dist
    np.testing.assert_allclose(tout, want, rtol=ftol, atol=ftol)


def test_a_rule_giving_the_wrong_shape_is_refused_at_its_return():
    @adjit.func
    def sq(v: adjit.vec3d):
        return adjit.dot(v, v)

    @adjit.rules.augmented_primal(sq)
    def _(config, v):
        return AugmentedReturn(sq(v.val), None, v.val)

    @adjit.rules.reverse(sq)
    def _(config, dret, tape, v):
        return (dret * 2.0,)          # a scalar where the vector's adjoint is due

    @adjit.kernel
    def k(x: Array[adjit.vec3d, 1], out: Array[float, 1]):
        i = adjit.index()
        out[i] = sq(x[i])

    x = np.ones((2, 3))
    with pytest.raises(adjit.CompilationError, match=r"test_vector_rules.py:\d+.*adjoint of "
                                                     r"argument 0 \(v\), a adjit.vec3d, as a"):
        autodiff(Reverse, k, Duplicated(x, np.zeros_like(x)),
                 Duplicated(np.zeros(2), np.ones(2)), ndrange=2)


@adjit.func
def triple(v: adjit.vec3d):
    """3 v, whose rules give half the derivative (so that a test sees that they are used
    for a vector result in both modes)."""
    return v * 3.0


@adjit.rules.forward(triple)
def _(config, v):
    return v.val * 3.0, v.dval * 1.5


@adjit.rules.augmented_primal(triple)
def _(config, v):
    return AugmentedReturn(v.val * 3.0, None, None)


@adjit.rules.reverse(triple)
def _(config, dret, tape, v):
    return (dret * 1.5,)


@adjit.kernel
def _k_triple(x: Array[adjit.vec3d, 1], y: Array[adjit.vec3d, 1]):
    i = adjit.index()
    y[i] = triple(x[i])


def test_a_vector_results_rules_are_used_in_both_modes():
    x, w = np.ones((3, 3)), np.arange(9.0).reshape(3, 3)
    y = np.zeros_like(x)
    _k_triple(x, y, ndrange=3)
    np.testing.assert_array_equal(y, 3 * x)
    dx = np.zeros_like(x)
    autodiff(Reverse, _k_triple, Duplicated(x, dx), Duplicated(y, w.copy()), ndrange=3)
    np.testing.assert_array_equal(dx, 1.5 * w)
    ty = np.zeros_like(x)
    autodiff(Forward, _k_triple, Duplicated(x, w.copy()), Duplicated(y, ty), ndrange=3)
    np.testing.assert_array_equal(ty, 1.5 * w)
