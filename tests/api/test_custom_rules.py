"""Custom derivative rules (SPEC: Custom rules), from Python."""
import numpy as np
import pytest

import adjit
from adjit import Active, Const, Duplicated, Forward, Reverse, autodiff


@adjit.func
def softplus(x):
    return adjit.log(1.0 + adjit.exp(x))


@adjit.rules.forward(softplus)
def _(config, x):
    s = 1.0 / (1.0 + adjit.exp(-x.val))
    return softplus(x.val), s * x.dval


@adjit.rules.augmented_primal(softplus)
def _(config, x):
    return adjit.rules.AugmentedReturn(softplus(x.val), None, x.val)


@adjit.rules.reverse(softplus)
def _(config, dret, tape, x):
    return (dret / (1.0 + adjit.exp(-tape)),)


@adjit.kernel
def apply_softplus(x, y):
    i = adjit.index()
    y[i] = softplus(x[i])


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_spec_softplus_rules_in_a_kernel():
    x = np.linspace(-3, 3, 16)
    y, dy = np.zeros(16), np.ones(16)
    dx = np.zeros(16)
    autodiff(Reverse, apply_softplus, Duplicated(x, dx), Duplicated(y, dy), ndrange=16)
    np.testing.assert_allclose(y, np.log1p(np.exp(x)), rtol=1e-12)
    np.testing.assert_allclose(dx, sigmoid(x), rtol=1e-12)
    tx, ty = np.ones(16), np.zeros(16)
    autodiff(Forward, apply_softplus, Duplicated(x, tx), Duplicated(y, ty), ndrange=16)
    np.testing.assert_allclose(ty, sigmoid(x), rtol=1e-12)


@adjit.func
def straight_through(x):
    """Rounds in the primal; its rule passes half the gradient through (so a test can tell
    that the rule, not the automatic derivative of floor, was used)."""
    return adjit.floor(x)


@adjit.rules.forward(straight_through)
def _(config, x):
    return adjit.floor(x.val), 0.5 * x.dval


@adjit.rules.augmented_primal(straight_through)
def _(config, x):
    return adjit.rules.AugmentedReturn(adjit.floor(x.val), None, None)


@adjit.rules.reverse(straight_through)
def _(config, dret, tape, x):
    return (0.5 * dret,)


@adjit.jit
def quantised_loss(a: float):
    q = straight_through(3.0 * a)
    return q * q


def test_rule_replaces_automatic_derivative():
    a = 1.2
    q = np.floor(3.0 * a)
    da, = autodiff(Reverse, quantised_loss, Active(a))
    assert da == pytest.approx(2 * q * 0.5 * 3.0)
    assert autodiff(Forward, quantised_loss, Duplicated(a, 1.0)) == pytest.approx(2 * q * 1.5)


@adjit.func
def mark(log):
    log[2] += 1.0


@adjit.rules.augmented_primal(mark)
def _(config, log):
    log.val[0] += 1.0
    return adjit.rules.AugmentedReturn(None, None, None)


@adjit.rules.reverse(mark)
def _(config, dret, tape, log):
    log.val[1] += 1.0
    return (None,)


@adjit.jit
def uses_mark(a: float, log):
    mark(log)
    return a * a


def test_rules_fire_on_all_const_calls():
    # mark(log) has only Const arguments and no result: its rules still run (seed 002).
    log = np.zeros(3)
    da, _ = autodiff(Reverse, uses_mark, Active(2.0), Const(log))
    assert da == pytest.approx(4.0)
    np.testing.assert_array_equal(log, [1.0, 1.0, 0.0])


@adjit.func
def twice(x):
    return 2.0 * x


@adjit.rules.reverse(twice)
def _(config, dret, tape, x):
    return (dret, dret)


@adjit.rules.augmented_primal(twice)
def _(config, x):
    return adjit.rules.AugmentedReturn(2.0 * x.val, None, None)


@adjit.jit
def calls_twice(a: float):
    return twice(a)


def test_rule_returning_wrong_count_refused():
    with pytest.raises(adjit.CompilationError, match="one entry per argument"):
        autodiff(Reverse, calls_twice, Active(1.0))


@adjit.func
def leaky(x):
    return adjit.max(x, 0.1 * x)


@adjit.rules.forward(leaky)
def _(config, x):
    if x.dval is None:        # decided at compile time: x is Const
        return leaky(x.val), 0.0
    if x.val > 0.0:           # a return inside runtime control flow
        return leaky(x.val), x.dval
    return leaky(x.val), 0.1 * x.dval


@adjit.jit
def leaky_loss(a: float, b: float):
    return leaky(a) * b


def test_rule_with_returns_inside_control_flow():
    assert autodiff(Forward, leaky_loss, Duplicated(-2.0, 1.0), Const(3.0)) == \
        pytest.approx(0.3)
    assert autodiff(Forward, leaky_loss, Duplicated(2.0, 1.0), Const(3.0)) == pytest.approx(3.0)
    # x Const: the rule still runs and takes its `x.dval is None` branch.
    assert autodiff(Forward, leaky_loss, Const(2.0), Duplicated(3.0, 1.0)) == pytest.approx(2.0)
