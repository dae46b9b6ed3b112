"""Batched tangents (issue 13, item 3): forward mode with N tangents in one pass over the
primal (`adjit.BatchDuplicated`, `width=` on jvp, hvp, jacfwd and hessian), each lane
against the width-1 derivative along the same direction (equal to rounding), finite
differences and analytic Jacobians; custom forward rules of width N; the same inside
compiled code; bad input refused with the argument named."""
from __future__ import annotations

import math

import numpy as np
import pytest

import adjit
from adjit import rules

from test_higher_order import rosen, rosen_hessian


# ---- functions under test -----------------------------------------------------------------------
@adjit.jit
def mixed(a: float, x, y):
    """Scalar and array tangents, a loop, transcendentals, a write and a float result."""
    s = 0.0
    for i in range(x.shape[0]):
        y[i] = math.exp(a * x[i])
        s += y[i] * math.sin(x[i]) / (1.0 + x[i] * x[i])
    return s


@adjit.kernel
def wave(a: float, x, y):
    i = adjit.index()
    y[i] = adjit.sin(a * x[i]) + x[i] * x[i] * a


@adjit.jit
def swapping(u, v, steps: int):
    """Arrays swapped in a loop (`u, v = v, u`): the shadows of each lane follow."""
    n = u.shape[0]
    for _ in range(steps):
        for i in range(1, n - 1):
            v[i] = u[i] + 0.25 * (u[i - 1] - 2.0 * u[i] + u[i + 1]) + 0.1 * adjit.sin(u[i])
        v[0] = u[0]
        v[n - 1] = u[n - 1]
        u, v = v, u
    s = 0.0
    for i in range(n):
        s += u[i] * u[i]
    return s


@adjit.jit
def cyclic(x):
    y = adjit.empty_like(x)
    for i in range(len(x)):
        y[i] = adjit.sin(x[i]) * x[(i + 1) % len(x)] + x[i] * x[i]
    return y


def cyclic_jacobian(x):
    n = len(x)
    jac = np.diag(np.cos(x) * np.roll(x, -1) + 2 * x)
    for i in range(n):
        jac[i, (i + 1) % n] += np.sin(x[i])
    return jac


RNG = np.random.default_rng(7)
X = RNG.uniform(-1.0, 1.0, 11)


def _forward(f, *anns, **kw):
    return adjit.autodiff(adjit.Forward, f, *anns, **kw)


# ---- each lane is the width-1 derivative along its direction ----------------------------------
@pytest.mark.parametrize("width", [1, 2, 3, 5, 8])
def test_each_lane_equals_its_own_forward_pass(width):
    a, x = 0.7, X.copy()
    das = tuple(RNG.standard_normal(width))
    dxs = tuple(RNG.standard_normal(x.size) for _ in range(width))
    dys = tuple(np.zeros_like(x) for _ in range(width))
    ts = _forward(mixed, adjit.BatchDuplicated(a, das), adjit.BatchDuplicated(x, dxs),
                  adjit.BatchDuplicated(np.zeros_like(x), dys))
    assert isinstance(ts, tuple) and len(ts) == width
    for k in range(width):
        dy = np.zeros_like(x)
        t = _forward(mixed, adjit.Duplicated(a, das[k]), adjit.Duplicated(x, dxs[k]),
                     adjit.Duplicated(np.zeros_like(x), dy))
        np.testing.assert_allclose(ts[k], t, rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(dys[k], dy, rtol=1e-14, atol=1e-15)
        # and central differences of the primal along the same direction
        h = 1e-6
        up = mixed(a + h * das[k], x + h * dxs[k], np.zeros_like(x))
        down = mixed(a - h * das[k], x - h * dxs[k], np.zeros_like(x))
        assert abs(ts[k] - (up - down) / (2 * h)) < 1e-7 * max(1.0, abs(ts[k]))


def test_with_primal_returns_the_lanes_and_the_value():
    ts, value = adjit.autodiff(adjit.ForwardWithPrimal, mixed,
                               adjit.BatchDuplicated(0.3, (1.0, 0.0)),
                               adjit.BatchDuplicated(X, (np.zeros_like(X), np.ones_like(X))),
                               adjit.BatchDuplicated(np.zeros_like(X),
                                                     (np.zeros_like(X), np.zeros_like(X))))
    assert value == pytest.approx(mixed(0.3, X, np.zeros_like(X)), rel=1e-15)
    assert len(ts) == 2


def test_a_kernel_launch_in_float32_at_a_large_size():
    """The launch's derivative kernel, batched: four shadows per array, f32 over 2^20
    items, each lane against its own width-1 launch (the same operations, in lanes)."""
    n, width = 1 << 20, 4
    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 2, n).astype(np.float32)
    dxs = tuple(rng.standard_normal(n).astype(np.float32) for _ in range(width))
    das = (1.0, 0.0, -0.5, 2.0)
    dys = tuple(np.zeros(n, np.float32) for _ in range(width))
    _forward(wave, adjit.BatchDuplicated(np.float32(0.3), das), adjit.BatchDuplicated(x, dxs),
             adjit.BatchDuplicated(np.zeros(n, np.float32), dys), ndrange=n)
    for k in range(width):
        dy = np.zeros(n, np.float32)
        _forward(wave, adjit.Duplicated(np.float32(0.3), das[k]), adjit.Duplicated(x, dxs[k]),
                 adjit.Duplicated(np.zeros(n, np.float32), dy), ndrange=n)
        np.testing.assert_allclose(dys[k], dy, rtol=2e-6, atol=2e-6)
        exact = (np.cos(0.3 * x.astype(np.float64)) * (das[k] * x + 0.3 * dxs[k])
                 + 2 * x * dxs[k] * 0.3 + x.astype(np.float64) ** 2 * das[k])
        np.testing.assert_allclose(dys[k], exact, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("steps", [1, 4, 7])
def test_arrays_swapped_in_a_loop(steps):
    u = np.linspace(0.0, 1.0, 9) ** 2
    dus = (np.ones(9), np.linspace(-1, 1, 9), np.eye(9)[4])
    ts = _forward(swapping, adjit.BatchDuplicated(u.copy(), tuple(d.copy() for d in dus)),
                  adjit.BatchDuplicated(np.zeros(9), tuple(np.zeros(9) for _ in dus)), steps)
    g = np.zeros(9)
    adjit.autodiff(adjit.Reverse, swapping, adjit.Duplicated(u.copy(), g),
                   adjit.Duplicated(np.zeros(9), np.zeros(9)), steps)
    for t, d in zip(ts, dus):
        assert t == pytest.approx(g @ d, rel=1e-12, abs=1e-13)


def test_singular_points_lane_by_lane():
    """sqrt at 0: the lane whose tangent is 0 gets 0 (strong zero), the others +inf and
    -inf as their width-1 passes do; a lane's NaN stays in its lane."""
    @adjit.jit
    def root(x: float):
        return math.sqrt(x)

    ts = _forward(root, adjit.BatchDuplicated(0.0, (0.0, 1.0, -1.0, math.nan)))
    assert ts[0] == 0.0
    assert ts[1] == math.inf and ts[2] == -math.inf and math.isnan(ts[3])
    for t, d in zip(ts[:3], (0.0, 1.0, -1.0)):
        assert t == _forward(root, adjit.Duplicated(0.0, d))


def test_a_device_function_called_from_a_kernel():
    @adjit.func
    def bump(v: float, a: float) -> float:
        return adjit.exp(-a * v * v)

    @adjit.kernel
    def apply(a: float, x, y):
        i = adjit.index()
        y[i] = bump(x[i], a) * x[i]

    x = np.linspace(-1, 1, 33)
    lanes = (np.ones(33), np.zeros(33), x.copy())
    das = (0.0, 1.0, 0.5)
    dys = tuple(np.zeros(33) for _ in lanes)
    _forward(apply, adjit.BatchDuplicated(1.3, das), adjit.BatchDuplicated(x, lanes),
             adjit.BatchDuplicated(np.zeros(33), dys), ndrange=33)
    e = np.exp(-1.3 * x * x)
    for dy, dx, da in zip(dys, lanes, das):
        exact = e * dx + x * e * (-2.6 * x * dx - x * x * da)
        np.testing.assert_allclose(dy, exact, rtol=1e-13, atol=1e-14)


# ---- custom forward rules of width N -------------------------------------------------------------
@adjit.func
def cube(x: float) -> float:
    return x * x * x


@rules.forward(cube)
def cube_fwd(config, x):
    slope = 3.0 * x.val * x.val
    if config.width == 1:
        return x.val * x.val * x.val, slope * x.dval
    return x.val * x.val * x.val, tuple(slope * t for t in x.dval)


@adjit.jit
def uses_cube(x):
    s = 0.0
    for i in range(len(x)):
        s += cube(x[i] + 0.5)
    return s


def test_a_custom_forward_rule_gets_the_width_and_n_tuples():
    x = np.linspace(-1, 1, 6)
    dxs = (np.ones(6), np.arange(6.0), -x)
    ts = _forward(uses_cube, adjit.BatchDuplicated(x, dxs))
    for t, d in zip(ts, dxs):
        assert t == pytest.approx(float(np.sum(3 * (x + 0.5) ** 2 * d)), rel=1e-14)
        assert t == pytest.approx(_forward(uses_cube, adjit.Duplicated(x, d)), rel=1e-14)


def test_a_forward_rule_returning_one_tangent_at_width_n_is_refused_at_its_return():
    @adjit.func
    def twice(x: float) -> float:
        return 2.0 * x

    @rules.forward(twice)
    def twice_fwd(config, x):
        return 2.0 * x.val, 2.0 * x.val    # one tangent, whatever the width

    @adjit.jit
    def use(x: float):
        return twice(x)

    with pytest.raises(adjit.CompilationError, match=r"width 2 .*returns \(primal, "
                       r"\(tangent 0, \.\.\., tangent 1\)\)") as e:
        _forward(use, adjit.BatchDuplicated(1.0, (1.0, 2.0)))
    assert "twice_fwd" in str(e.value) or "test_batched_tangents.py" in str(e.value)


# ---- conveniences ------------------------------------------------------------------------------
@pytest.mark.parametrize("width", [1, 2, 3, 11, 16])
def test_jacfwd_by_blocks_of_width_columns(width):
    np.testing.assert_allclose(adjit.jacfwd(cyclic, width=width)(X), cyclic_jacobian(X),
                               rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("width", [2, 5])
def test_hessian_by_batched_forward_over_reverse(width):
    np.testing.assert_allclose(adjit.hessian(rosen, width=width)(X), rosen_hessian(X),
                               rtol=1e-12, atol=1e-12)


def test_jvp_takes_a_tuple_or_the_rows_of_an_array():
    directions = RNG.standard_normal((3, X.size))
    jac = cyclic_jacobian(X)
    for tangents in ((tuple(directions),), (directions,)):
        value, ts = adjit.jvp(cyclic, (X,), tangents, width=3)
        np.testing.assert_allclose(value, cyclic(X), rtol=1e-15)
        assert len(ts) == 3
        for t, d in zip(ts, directions):
            np.testing.assert_allclose(t, jac @ d, rtol=1e-13, atol=1e-14)


def test_hvp_of_width_n():
    vs = (np.ones(X.size), RNG.standard_normal(X.size))
    hs = adjit.hvp(rosen, (X,), (vs,), width=2)
    for h, v in zip(hs, vs):
        np.testing.assert_allclose(h, rosen_hessian(X) @ v, rtol=1e-12, atol=1e-11)


def test_batched_forward_over_reverse_from_python():
    vs = (np.ones(X.size), np.arange(X.size, dtype=float))
    hs = adjit.autodiff(adjit.Forward, adjit.grad(rosen), adjit.BatchDuplicated(X, vs))
    for h, v in zip(hs, vs):
        np.testing.assert_allclose(h, rosen_hessian(X) @ v, rtol=1e-12, atol=1e-11)


# ---- inside compiled code -----------------------------------------------------------------------
def test_batched_derivatives_inside_compiled_code():
    @adjit.jit
    def sensitivities(a: float, x, d0, d1, v0, v1):
        y = adjit.zeros_like(x)
        t = adjit.autodiff(adjit.Forward, mixed, adjit.BatchDuplicated(a, (1.0, 0.0)),
                           adjit.BatchDuplicated(x, (d0, d1)),
                           adjit.BatchDuplicated(y, (adjit.zeros_like(x), adjit.zeros_like(x))))
        h0, h1 = adjit.hvp(rosen, (x,), ((v0, v1),), width=2)
        value, (j0, j1) = adjit.jvp(cyclic, (x,), ((v0, v1),), width=2)
        return t[0], t[1], h0, h1, j0, j1, adjit.jacfwd(cyclic, width=4)(x)

    d0, d1 = np.zeros(X.size), RNG.standard_normal(X.size)
    v0, v1 = np.ones(X.size), RNG.standard_normal(X.size)
    t0, t1, h0, h1, j0, j1, jac = sensitivities(0.4, X, d0, d1, v0, v1)
    y = np.zeros_like(X)
    assert t0 == pytest.approx(_forward(mixed, adjit.Duplicated(0.4, 1.0),
                                        adjit.Duplicated(X, d0),
                                        adjit.Duplicated(y, np.zeros_like(X))), rel=1e-14)
    assert t1 == pytest.approx(_forward(mixed, adjit.Duplicated(0.4, 0.0),
                                        adjit.Duplicated(X, d1),
                                        adjit.Duplicated(y, np.zeros_like(X))), rel=1e-14)
    hess, expected = rosen_hessian(X), cyclic_jacobian(X)
    np.testing.assert_allclose(h0, hess @ v0, rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(h1, hess @ v1, rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(j0, expected @ v0, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(j1, expected @ v1, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(jac, expected, rtol=1e-14, atol=1e-15)


# ---- bad input ---------------------------------------------------------------------------------
def test_mismatched_widths_are_refused():
    with pytest.raises(ValueError, match="same number of tangents; got 2, 3"):
        _forward(mixed, adjit.BatchDuplicated(0.1, (1.0, 2.0)),
                 adjit.BatchDuplicated(X, (X, X, X)), adjit.BatchDuplicated(X.copy(), (X, X)))


def test_duplicated_and_batch_duplicated_together_are_refused():
    with pytest.raises(TypeError, match="Duplicated and BatchDuplicated"):
        _forward(mixed, adjit.Duplicated(0.1, 1.0), adjit.BatchDuplicated(X, (X, X)),
                 adjit.BatchDuplicated(X.copy(), (X.copy(), X.copy())))


def test_reverse_mode_takes_batched_cotangents():
    """(tests/api/test_batched_cotangents.py has the rest) Each lane's shadow gets the
    gradient added, as a Duplicated one would."""
    lanes = (np.zeros_like(X), np.ones_like(X))
    adjit.autodiff(adjit.Reverse, rosen, adjit.BatchDuplicated(X, lanes))
    g = adjit.grad(rosen)(X)
    np.testing.assert_array_equal(lanes[0], g)
    np.testing.assert_array_equal(lanes[1], 1.0 + g)


def test_one_array_as_two_lanes_is_refused():
    """Each lane's shadow is written: two lanes sharing an array would race."""
    y = np.zeros_like(X)
    with pytest.raises(ValueError, match="overlap"):
        _forward(mixed, adjit.BatchDuplicated(0.1, (1.0, 2.0)),
                 adjit.BatchDuplicated(X, (X.copy(), X.copy())),
                 adjit.BatchDuplicated(np.zeros_like(X), (y, y)))


def test_a_wrong_lane_is_named():
    with pytest.raises(ValueError, match=r"argument 'x' \(tangent 1\): the shadow has shape "
                                         r"\(3,\)"):
        _forward(rosen, adjit.BatchDuplicated(X, (np.zeros_like(X), np.zeros(3))))
    with pytest.raises(TypeError, match="takes a tuple of tangents"):
        _forward(rosen, adjit.BatchDuplicated(X, np.zeros_like(X)))


@pytest.mark.parametrize("width", [0, -1, 2.0, True])
def test_width_must_be_a_positive_integer(width):
    with pytest.raises(ValueError, match="width must be a positive integer"):
        adjit.jacfwd(cyclic, width=width)


def test_jvp_with_the_wrong_number_of_tangents():
    with pytest.raises(ValueError, match="2 tangents for width=3"):
        adjit.jvp(cyclic, (X,), ((X, X),), width=3)


def test_inside_compiled_code_a_jvp_width_needs_n_tangents():
    @adjit.jit
    def bad(x, v):
        return adjit.jvp(cyclic, (x,), (v,), width=2)

    with pytest.raises(adjit.CompilationError, match="with width=2, a tuple of 2 tangents"):
        bad(X, X)
