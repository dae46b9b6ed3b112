"""The custom-rule contract (SPEC: Custom rules; lang/rules.py): a rule that returns the
wrong number or kind of values is refused at its `return` line; `config.needs_primal` is
false exactly where no one reads the primal; a mode without its rules differentiates the
body automatically and says so once."""
import inspect
import math
import warnings

import numpy as np
import pytest

import adjit
from adjit import (Active, Const, Duplicated, Forward, ForwardWithPrimal, Reverse,
                   ReverseWithPrimal, autodiff)


def return_line(rule) -> int:
    """The line of the (last) `return` in `rule`'s source."""
    lines, first = inspect.getsourcelines(rule)
    return first + max(k for k, l in enumerate(lines) if l.strip().startswith("return"))


def refused(call, rule, match: str) -> adjit.CompilationError:
    with pytest.raises(adjit.CompilationError, match=match) as e:
        call()
    assert e.value.filename == __file__ and e.value.lineno == return_line(rule), str(e.value)
    return e.value


# ---- values for a function with no result (issue 8, item 3) ------------------------------
@adjit.func
def bump(x, log):
    log[0] += x


@adjit.rules.forward(bump)
def _bump_forward(config, x, log):
    log.val[0] += x.val
    return 2.0


@adjit.jit
def calls_bump(a: float, log):
    bump(a, log)
    return a * a


def test_forward_rule_value_for_a_function_without_result_is_refused():
    refused(lambda: autodiff(Forward, calls_bump, Duplicated(1.5, 1.0), Const(np.zeros(1))),
            _bump_forward, r"bump returns nothing, so its forward rule returns None; this "
                           r"one returns the constant 2.0")


@adjit.func
def bump2(x, log):
    log[0] += x


@adjit.rules.augmented_primal(bump2)
def _bump2_augmented(config, x, log):
    return adjit.rules.AugmentedReturn(2.0, None, None)


@adjit.rules.reverse(bump2)
def _(config, dret, tape, x, log):
    return (1.0, None)


@adjit.jit
def calls_bump2(a: float, log):
    bump2(a, log)
    return a * a


def test_augmented_primal_for_a_function_without_result_is_refused():
    refused(lambda: autodiff(Reverse, calls_bump2, Active(1.5), Const(np.zeros(1))),
            _bump2_augmented, r"bump2 returns nothing, so the primal of its AugmentedReturn "
                              r"is None; this one is the constant 2.0")


# ---- reverse rules: one entry per argument, None for what is not Active ------------------
@adjit.func
def scaled(x, y):
    return x * y


@adjit.rules.augmented_primal(scaled)
def _(config, x, y):
    return adjit.rules.AugmentedReturn(scaled(x.val, y.val), None, None)


@adjit.rules.reverse(scaled)
def _scaled_reverse(config, dret, tape, x, y):
    return (dret * y.val, dret * x.val)      # a value for y even where y is Const


@adjit.jit
def calls_scaled(a: float, b: float):
    return scaled(a, b)


def test_reverse_rule_value_for_a_const_argument_is_refused():
    e = refused(lambda: autodiff(Reverse, calls_scaled, Active(2.0), Const(3.0)),
                _scaled_reverse, r"a reverse rule gives None for argument 1 \(y\), which is "
                                 r"Const; this one gives a Python float \(weak adjit.f64\) "
                                 r"value")
    assert "return (dret * y.val, dret * x.val)" in e.source_line


@adjit.func
def scaled2(x, y):
    return x * y


@adjit.rules.augmented_primal(scaled2)
def _(config, x, y):
    return adjit.rules.AugmentedReturn(scaled2(x.val, y.val), None, None)


@adjit.rules.reverse(scaled2)
def _(config, dret, tape, x, y):
    # One rule for every activity: Const arguments get None (known at compile time).
    return (None if x.is_const else dret * y.val, None if y.is_const else dret * x.val)


@adjit.jit
def calls_scaled2(a: float, b: float):
    return scaled2(a, b) * a


def test_reverse_rule_written_for_every_activity():
    assert autodiff(Reverse, calls_scaled2, Active(2.0), Const(3.0)) == (12.0, None)
    assert autodiff(Reverse, calls_scaled2, Const(2.0), Active(3.0)) == (None, 4.0)
    assert autodiff(Reverse, calls_scaled2, Active(2.0), Active(3.0)) == (12.0, 4.0)


@adjit.func
def scaled3(x, y):
    return x * y


@adjit.rules.augmented_primal(scaled3)
def _(config, x, y):
    return adjit.rules.AugmentedReturn(scaled3(x.val, y.val), None, None)


@adjit.rules.reverse(scaled3)
def _scaled3_reverse(config, dret, tape, x, y):
    return (None, None)


@adjit.jit
def calls_scaled3(a: float, b: float):
    return scaled3(a, b)


def test_reverse_rule_none_for_an_active_argument_is_refused():
    refused(lambda: autodiff(Reverse, calls_scaled3, Active(2.0), Const(3.0)), _scaled3_reverse,
            r"a reverse rule gives the adjoint of argument 0 \(x\), which is Active; this one "
            r"gives None")


@adjit.func
def store_scaled(x, out, i):
    out[i] = 3.0 * x[i]


@adjit.rules.augmented_primal(store_scaled)
def _(config, x, out, i):
    out.val[i.val] = 3.0 * x.val[i.val]
    return adjit.rules.AugmentedReturn(None, None, None)


@adjit.rules.reverse(store_scaled)
def _store_scaled_reverse(config, dret, tape, x, out, i):
    x.dval[i.val] += 3.0 * out.dval[i.val]
    return (0.0, None, None)


@adjit.kernel
def store_kernel(x, out):
    i = adjit.index()
    store_scaled(x, out, i)


def test_reverse_rule_value_for_an_array_argument_is_refused():
    x, out = np.ones(4), np.zeros(4)
    refused(lambda: autodiff(Reverse, store_kernel, Duplicated(x, np.zeros(4)),
                             Duplicated(out, np.ones(4)), ndrange=4),
            _store_scaled_reverse, r"argument 0 \(x\), which is an array: its adjoint goes "
                                   r"into x.dval")


@adjit.func
def shadowed(x):
    return 2.0 * x


@adjit.rules.augmented_primal(shadowed)
def _shadowed_augmented(config, x):
    return adjit.rules.AugmentedReturn(2.0 * x.val, 1.0, None)


@adjit.rules.reverse(shadowed)
def _(config, dret, tape, x):
    return (2.0 * dret,)


@adjit.jit
def calls_shadowed(a: float):
    return shadowed(a)


def test_augmented_shadow_for_a_scalar_result_is_refused():
    refused(lambda: autodiff(Reverse, calls_shadowed, Active(1.0)), _shadowed_augmented,
            r"the shadow of an AugmentedReturn is None")


# ---- config.needs_primal (issue 8, item 4) -----------------------------------------------
@adjit.func
def cube(x):
    return x * x * x


@adjit.rules.forward(cube)
def _(config, x):
    # The primal only when asked: None is accepted only where needs_primal is false.
    return (cube(x.val) if config.needs_primal else None), 3.0 * x.val * x.val * x.dval


@adjit.rules.augmented_primal(cube)
def _(config, x):
    return adjit.rules.AugmentedReturn(cube(x.val) if config.needs_primal else None, None,
                                       x.val)


@adjit.rules.reverse(cube)
def _(config, dret, tape, x):
    return (3.0 * tape * tape * dret,)


@adjit.jit
def just_cube(a: float):
    return cube(a)           # under Forward and Reverse, no one reads cube's primal


@adjit.jit
def cube_squared(a: float):
    c = cube(a)
    return c * c             # the primal is read: needs_primal is true


def test_rules_skip_the_primal_where_no_one_reads_it():
    a = 1.5
    assert autodiff(Forward, just_cube, Duplicated(a, 1.0)) == pytest.approx(3 * a * a)
    assert autodiff(Reverse, just_cube, Active(a))[0] == pytest.approx(3 * a * a)
    # With the primal asked for (or read by the caller), the rules give it.
    t, p = autodiff(ForwardWithPrimal, just_cube, Duplicated(a, 1.0))
    assert (t, p) == pytest.approx((3 * a * a, a ** 3))
    (g,), p = autodiff(ReverseWithPrimal, just_cube, Active(a))
    assert (g, p) == pytest.approx((3 * a * a, a ** 3))
    assert autodiff(Forward, cube_squared, Duplicated(a, 1.0)) == pytest.approx(6 * a ** 5)
    assert autodiff(Reverse, cube_squared, Active(a))[0] == pytest.approx(6 * a ** 5)
    h = 1e-6
    fd = (cube_squared(a + h) - cube_squared(a - h)) / (2 * h)
    assert fd == pytest.approx(6 * a ** 5, rel=1e-8)


@adjit.func
def cube_no_primal(x):
    return x * x * x


@adjit.rules.forward(cube_no_primal)
def _cube_no_primal_forward(config, x):
    return None, 3.0 * x.val * x.val * x.dval       # never the primal


@adjit.rules.augmented_primal(cube_no_primal)
def _cube_no_primal_augmented(config, x):
    return adjit.rules.AugmentedReturn(None, None, x.val)       # never the primal


@adjit.rules.reverse(cube_no_primal)
def _(config, dret, tape, x):
    return (3.0 * tape * tape * dret,)


@adjit.jit
def cube_no_primal_plus_one(a: float):
    return cube_no_primal(a) + 1.0


@adjit.jit
def just_cube_no_primal(a: float):
    return cube_no_primal(a)


def test_needs_primal_is_true_where_the_primal_is_read():
    # Under Forward, `return f(a)` reads only the tangent: a None primal is accepted...
    assert autodiff(Forward, just_cube_no_primal, Duplicated(2.0, 1.0)) == pytest.approx(12.0)
    # ...but not where the caller computes with the primal (+ 1.0) or returns it.
    refused(lambda: autodiff(Forward, cube_no_primal_plus_one, Duplicated(2.0, 1.0)),
            _cube_no_primal_forward, "the primal is None, but the rule's config asks for it")
    refused(lambda: autodiff(ForwardWithPrimal, just_cube_no_primal, Duplicated(2.0, 1.0)),
            _cube_no_primal_forward, "the primal is None, but the rule's config asks for it")
    # The same in reverse mode, for the augmented rule.
    assert autodiff(Reverse, just_cube_no_primal, Active(2.0))[0] == pytest.approx(12.0)
    refused(lambda: autodiff(Reverse, cube_no_primal_plus_one, Active(2.0)),
            _cube_no_primal_augmented, "the primal is None, but the rule's config asks for it")
    refused(lambda: autodiff(ReverseWithPrimal, just_cube_no_primal, Active(2.0)),
            _cube_no_primal_augmented, "the primal is None, but the rule's config asks for it")


# ---- a forward rule alone: reverse mode differentiates the body, and says so once --------
@adjit.func
def forward_only(x):
    return adjit.sin(x) * x


@adjit.rules.forward(forward_only)
def _(config, x):
    # Doubles the true derivative, so forward mode shows that the rule ran.
    return forward_only(x.val), 2.0 * (adjit.cos(x.val) * x.val + adjit.sin(x.val)) * x.dval


@adjit.jit
def uses_forward_only(a: float):
    return forward_only(a) * 3.0


@adjit.jit
def uses_forward_only_twice(a: float):
    return forward_only(a) + forward_only(2.0 * a)


def test_reverse_mode_of_a_forward_rule_alone_is_automatic_and_warned_once():
    a = 0.7
    exact = 3.0 * (math.cos(a) * a + math.sin(a))
    with pytest.warns(UserWarning) as record:
        (da,) = autodiff(Reverse, uses_forward_only, Active(a))
    messages = [str(w.message) for w in record if "forward_only" in str(w.message)]
    line = inspect.getsourcelines(forward_only.pyfn)[1]
    assert messages == [f"forward_only ({__file__}:{line}) has a forward rule only: reverse "
                        f"mode differentiates its body automatically (give it "
                        f"augmented_primal and reverse rules to replace that)"]
    assert da == pytest.approx(exact, rel=1e-14)                  # the body's derivative
    assert autodiff(Forward, uses_forward_only, Duplicated(a, 1.0)) == \
        pytest.approx(2 * exact, rel=1e-14)                        # the rule
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # once: no second warning for this function
        (db,) = autodiff(Reverse, uses_forward_only_twice, Active(a))
    assert db == pytest.approx(math.cos(a) * a + math.sin(a) + 2 * (
        math.cos(2 * a) * 2 * a + math.sin(2 * a)), rel=1e-14)


# ---- rule symbols (issue 8, item 5) ------------------------------------------------------
@adjit.func
def twin(x):
    return 2.0 * x


@adjit.rules.forward(twin)
def _(config, x):
    return twin(x.val), 3.0 * x.dval          # 3, not 2: the rule ran


@adjit.func
def twin__f64__rule_forward_d_dps():
    # Named as twin's forward rule is (function symbol, kind, activities, config): the rule
    # must not take this function for itself.
    return 1.0


@adjit.jit
def uses_twin(a: adjit.f64):     # (typed: twin's symbol is twin__f64; a `float` is wf64)
    return twin__f64__rule_forward_d_dps() * twin(a)


def test_a_symbol_of_the_rules_name_is_not_taken_for_the_rule():
    from adjit.compiler.rule_compiler import rule_symbol
    from adjit.lang.rules import Config
    assert rule_symbol("twin__f64", "forward", ["dup"], "dup", Config(True, False, ())) != \
        rule_symbol("twin__f64", "forward", ["dup"], "dup", Config(False, True, ()))
    assert rule_symbol("twin__f64", "forward", ["dup"], "dup", Config(True, True, ())) == \
        "twin__f64__rule_forward_d_dps"
    t, p = autodiff(ForwardWithPrimal, uses_twin, Duplicated(1.5, 1.0))
    assert (t, p) == (3.0, 3.0)


@adjit.func
def reverse_only(x):
    return x * x


@adjit.rules.augmented_primal(reverse_only)
def _(config, x):
    return adjit.rules.AugmentedReturn(reverse_only(x.val), None, x.val)


@adjit.rules.reverse(reverse_only)
def _(config, dret, tape, x):
    return (4.0 * tape * dret,)               # twice the true derivative: the rule ran


@adjit.jit
def uses_reverse_only(a: float):
    return reverse_only(a)


def test_forward_mode_of_reverse_rules_alone_is_automatic_and_warned_once():
    line = inspect.getsourcelines(reverse_only.pyfn)[1]
    with pytest.warns(UserWarning, match=rf"reverse_only \({__file__}:{line}\) has "
                                         r"augmented_primal and reverse rules only: forward "
                                         r"mode differentiates its body automatically"):
        assert autodiff(Forward, uses_reverse_only, Duplicated(1.5, 1.0)) == 3.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert autodiff(Reverse, uses_reverse_only, Active(1.5)) == (6.0,)
        assert autodiff(ForwardWithPrimal, uses_reverse_only, Duplicated(1.5, 1.0)) == \
            (3.0, 2.25)
