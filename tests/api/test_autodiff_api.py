"""The differentiation API of SPEC, end to end: every derivative against an analytic form
and central finite differences."""
import math

import numpy as np
import pytest

import adjit
from adjit import (Active, Const, Duplicated, DuplicatedNoNeed, Forward, ForwardWithPrimal,
                   Reverse, ReverseSplitWithPrimal, ReverseWithPrimal, autodiff, autodiff_thunk)


def fd(f, args, k, eps=1e-6):
    """Central difference of scalar f with respect to scalar argument k."""
    lo, hi = list(args), list(args)
    lo[k] -= eps
    hi[k] += eps
    return (f(*hi) - f(*lo)) / (2 * eps)


@adjit.jit
def poly(a: float, b: float):
    return a * a * b + adjit.sin(a) / b


def poly_grad(a, b):
    return 2 * a * b + math.cos(a) / b, a * a - math.sin(a) / b ** 2


def test_reverse_scalar_matches_analytic_and_fd():
    a, b = 0.7, 1.3
    da, db = autodiff(Reverse, poly, Active(a), Active(b))
    ea, eb = poly_grad(a, b)
    assert da == pytest.approx(ea, rel=1e-12) and db == pytest.approx(eb, rel=1e-12)
    assert da == pytest.approx(fd(poly, [a, b], 0), rel=1e-7)
    assert db == pytest.approx(fd(poly, [a, b], 1), rel=1e-7)


def test_reverse_const_argument_gets_none_and_with_primal():
    grads, primal = autodiff(ReverseWithPrimal, poly, Active(0.7), Const(1.3))
    assert grads[1] is None
    assert grads[0] == pytest.approx(poly_grad(0.7, 1.3)[0], rel=1e-12)
    assert primal == pytest.approx(poly(0.7, 1.3), rel=1e-15)
    # An argument given without an annotation is Const.
    assert autodiff(Reverse, poly, Active(0.7), 1.3)[1] is None


def test_forward_scalar():
    t = autodiff(Forward, poly, Duplicated(0.7, 1.0), Const(1.3))
    assert t == pytest.approx(poly_grad(0.7, 1.3)[0], rel=1e-12)
    t, p = autodiff(ForwardWithPrimal, poly, Duplicated(0.7, 0.5), Duplicated(1.3, 2.0))
    ga, gb = poly_grad(0.7, 1.3)
    assert t == pytest.approx(0.5 * ga + 2.0 * gb, rel=1e-12)
    assert p == pytest.approx(poly(0.7, 1.3))


@adjit.jit
def weighted_loss(w: float, x, y):
    s = 0.0
    for i in range(x.shape[0]):
        r = w * x[i] - y[i]
        s += r * r
    return s


def test_reverse_array_shadow_accumulates():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(50), rng.standard_normal(50)
    dx = np.ones(50)          # accumulated into: dx += grad
    dw, _, _ = autodiff(Reverse, weighted_loss, Active(0.5), Duplicated(x, dx), Const(y))
    r = 0.5 * x - y
    np.testing.assert_allclose(dx - 1.0, 2 * r * 0.5, rtol=1e-12)
    assert dw == pytest.approx(np.sum(2 * r * x), rel=1e-12)
    assert dw == pytest.approx(fd(lambda w: weighted_loss(w, x, y), [0.5], 0), rel=1e-6)


def test_forward_array_tangent():
    rng = np.random.default_rng(2)
    x, y, tx = rng.standard_normal(20), rng.standard_normal(20), rng.standard_normal(20)
    t = autodiff(Forward, weighted_loss, Const(0.5), Duplicated(x, tx), Const(y))
    assert t == pytest.approx(np.sum(2 * (0.5 * x - y) * 0.5 * tx), rel=1e-12)


def test_split_mode_tape_reused():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(30), rng.standard_normal(30)
    dx = np.zeros(30)
    fwd, rev = autodiff_thunk(ReverseSplitWithPrimal, weighted_loss, Active, Duplicated, Const)
    tape, primal, shadow = fwd(Active(0.5), Duplicated(x, dx), Const(y))
    assert primal == pytest.approx(weighted_loss(0.5, x, y))
    g1 = rev(Active(0.5), Duplicated(x, dx), Const(y), 1.0, tape)
    g2 = rev(Active(0.5), Duplicated(x, dx), Const(y), 2.0, tape)
    assert g2[0] == pytest.approx(2 * g1[0], rel=1e-12)
    np.testing.assert_allclose(dx, 3 * 2 * (0.5 * x - y) * 0.5, rtol=1e-12)
    assert tape.nbytes >= 0


@adjit.kernel
def saxpy(a: float, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


def test_kernel_launch_reverse():
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal(100), rng.standard_normal(100)
    y0 = y.copy()
    dx, dy = np.zeros(100), rng.standard_normal(100)
    dy0 = dy.copy()
    grads = autodiff(Reverse, saxpy, Active(2.0), Duplicated(x, dx), Duplicated(y, dy),
                     ndrange=100)
    np.testing.assert_allclose(y, 2.0 * x + y0)          # primal effects happen
    np.testing.assert_allclose(dx, 2.0 * dy0)
    np.testing.assert_allclose(dy, dy0)
    assert grads[0] == pytest.approx(np.sum(x * dy0), rel=1e-12)   # summed over items
    assert grads[1] is None and grads[2] is None


def test_kernel_launch_forward():
    x, y = np.arange(5.0), np.ones(5)
    tx, ty = np.ones(5), np.zeros(5)
    out = autodiff(Forward, saxpy, Const(3.0), Duplicated(x, tx), Duplicated(y, ty), ndrange=5)
    assert out is None
    np.testing.assert_allclose(ty, 3.0 * tx)


@adjit.kernel
def gather_square(x, idx, out):
    i = adjit.index()
    out[i] = x[idx[i]] * x[idx[i]]


def test_kernel_colliding_reads_accumulate():
    x = np.array([1.0, 2.0, 3.0])
    idx = np.array([0, 0, 2, 0], dtype=np.int64)
    out, dout = np.zeros(4), np.ones(4)
    dx = np.zeros(3)
    autodiff(Reverse, gather_square, Duplicated(x, dx), Const(idx), Duplicated(out, dout),
             ndrange=4)
    np.testing.assert_allclose(dx, [3 * 2 * 1.0, 0.0, 2 * 3.0])


def test_conveniences():
    g = adjit.grad(poly)(0.7, 1.3)
    assert g == pytest.approx(poly_grad(0.7, 1.3)[0], rel=1e-12)
    v, (ga, gb) = adjit.value_and_grad(poly, argnums=(0, 1))(0.7, 1.3)
    assert v == pytest.approx(poly(0.7, 1.3))
    assert (ga, gb) == pytest.approx(poly_grad(0.7, 1.3), rel=1e-12)
    p, t = adjit.jvp(poly, (0.7, 1.3), (1.0, 0.0))
    assert t == pytest.approx(poly_grad(0.7, 1.3)[0], rel=1e-12)
    p, pullback = adjit.vjp(poly, 0.7, 1.3)
    assert pullback(2.0) == pytest.approx(tuple(2 * g for g in poly_grad(0.7, 1.3)), rel=1e-12)
    x, y = np.linspace(0, 1, 10), np.linspace(1, 2, 10)
    gx = adjit.grad(weighted_loss, argnums=1)(0.5, x, y)
    np.testing.assert_allclose(gx, 2 * (0.5 * x - y) * 0.5, rtol=1e-12)


def test_check_grad():
    x, y = np.linspace(0, 1, 10), np.linspace(1, 2, 10)
    assert adjit.check_grad(weighted_loss, 0.5, x, y) < 1e-6


# ---- errors ---------------------------------------------------------------------------
def test_active_array_refused():
    with pytest.raises(TypeError, match="Active.*Duplicated"):
        autodiff(Reverse, weighted_loss, Active(0.5), Active(np.ones(3)), Const(np.ones(3)))


def test_missing_and_bad_shadows_refused():
    with pytest.raises(TypeError, match="without a shadow"):
        autodiff(Reverse, weighted_loss, Active(0.5), Duplicated(np.ones(3), None),
                 Const(np.ones(3)))
    with pytest.raises(ValueError, match="shadow has shape"):
        autodiff(Reverse, weighted_loss, Active(0.5), Duplicated(np.ones(3), np.ones(4)),
                 Const(np.ones(3)))
    with pytest.raises(ValueError, match="dtype"):
        autodiff(Reverse, weighted_loss, Active(0.5),
                 Duplicated(np.ones(3), np.ones(3, np.float32)), Const(np.ones(3)))


@adjit.jit
def int_arg(n: int, x: float):
    return x * n


def test_integer_active_refused():
    with pytest.raises(TypeError, match="integer.*Active"):
        autodiff(Reverse, int_arg, Active(3), Active(1.0))


@adjit.jit
def returns_array(x):
    return x * 2.0


def test_grad_of_non_scalar_refused():
    with pytest.raises(TypeError, match="scalar"):
        adjit.grad(returns_array)(np.ones(3))


def test_split_mode_tape_survives_changes_between_halves():
    # As in Enzyme, the user may change the arrays between the two halves of split mode:
    # the tape keeps what the reverse half needs.
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal(30), rng.standard_normal(30)
    dx = np.zeros(30)
    fwd, rev = autodiff_thunk(ReverseSplitWithPrimal, weighted_loss, Active, Duplicated, Const)
    tape, _, _ = fwd(Active(0.5), Duplicated(x, dx), Const(y))
    expected = np.sum(2 * (0.5 * x - y) * x)
    x[:] = 0.0
    y[:] = 0.0
    dw, _, _ = rev(Active(0.5), Duplicated(x, dx), Const(y), 1.0, tape)
    assert dw == pytest.approx(expected, rel=1e-12)
    assert tape.nbytes > 0


@adjit.kernel
def squarings(x, n):
    i = adjit.index()
    a = x[i]
    while x[i] < n:          # its count depends on x, which the loop writes: refused
        x[i] = x[i] * x[i] + 0.5
    x[i] = a


def test_pass_refusal_names_the_user_line():
    x = np.full(4, 0.9)
    with pytest.raises(adjit.CompilationError) as err:
        autodiff(Reverse, squarings, Duplicated(x, np.ones(4)), Const(3.0), ndrange=4)
    assert err.value.filename == __file__
    assert err.value.lineno == squarings.__wrapped__.__code__.co_firstlineno + 4   # the loop
    assert "cannot differentiate" in str(err.value)
