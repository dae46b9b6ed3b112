"""Custom rules (default provider: func.funcs marked adj.rule_for / adj.rule_kind) replace the
automatic derivative at every call, in both modes, including calls where all is const."""
import math

import numpy as np
import pytest

from ad_helpers import ENTRY, Compiled, GradCheck, differentiate, request
from adjit.dialects.adj import AdjError

SOFTPLUS = """
func.func private @softplus(%x: f64) -> f64 {
  %one = arith.constant 1.0 : f64
  %e = math.exp %x : f64
  %s = arith.addf %one, %e : f64
  %r = math.log %s : f64
  return %r : f64
}
// sigmoid(x) * SCALE: the rules scale the true derivative, so a test can see them run.
func.func private @sigmoid_scaled(%x: f64) -> f64 {
  %one = arith.constant 1.0 : f64
  %scale = arith.constant SCALE : f64
  %n = arith.negf %x : f64
  %e = math.exp %n : f64
  %d = arith.addf %one, %e : f64
  %s = arith.divf %scale, %d : f64
  return %s : f64
}
func.func private @sp_fwd(%x: f64, %dx: f64) -> (f64, f64) attributes {
    adj.rule_for = @softplus, adj.rule_kind = "forward", adj.rule_activity = ["dup"]} {
  %p = func.call @softplus(%x) : (f64) -> f64
  %s = func.call @sigmoid_scaled(%x) : (f64) -> f64
  %t = arith.mulf %s, %dx : f64
  return %p, %t : f64, f64
}
func.func private @sp_aug(%x: f64) -> (f64, f64) attributes {
    adj.rule_for = @softplus, adj.rule_kind = "augmented", adj.rule_activity = ["active"]} {
  %p = func.call @softplus(%x) : (f64) -> f64
  return %p, %x : f64, f64
}
func.func private @sp_rev(%x: f64, %dret: f64, %tape: f64) -> f64 attributes {
    adj.rule_for = @softplus, adj.rule_kind = "reverse", adj.rule_activity = ["active"]} {
  %s = func.call @sigmoid_scaled(%tape) : (f64) -> f64
  %d = arith.mulf %s, %dret : f64
  return %d : f64
}
"""

CALLER = f"""
func.func @f(%x: f64, %n: index) -> f64 attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%a = %x) -> f64 {{
    %s = func.call @softplus(%a) : (f64) -> f64
    %h = arith.mulf %s, %x : f64
    scf.yield %h : f64
  }}
  return %r : f64
}}
"""


def test_rules_replace_the_automatic_derivative():
    exact = GradCheck(SOFTPLUS.replace("SCALE", "1.0") + CALLER, "f", ["active", "const"])
    exact.check([0.3, 3])
    doubled = GradCheck(SOFTPLUS.replace("SCALE", "2.0") + CALLER, "f", ["active", "const"])
    # One softplus: d/dx softplus(x) * x = 2 sigmoid(x) x + softplus(x) with the rule's 2.
    x = 0.3
    sig = 1 / (1 + math.exp(-x))
    (dx,), _, _ = doubled.reverse([x, 1], [None, None])
    assert dx == pytest.approx(2 * sig * x + math.log1p(math.exp(x)), rel=1e-12)
    assert doubled.forward([x, 1], [None, None], [1.0, 0]) == pytest.approx(dx, rel=1e-12)


SIDE_EFFECT = f"""
func.func private @bar(%c: memref<?xf64>) {{
  %c0 = arith.constant 0 : index
  %v = memref.load %c[%c0] : memref<?xf64>
  %h = arith.constant 100.0 : f64
  %w = arith.addf %v, %h : f64
  memref.store %w, %c[%c0] : memref<?xf64>
  return
}}
func.func private @bar_aug(%c: memref<?xf64>) attributes {{
    adj.rule_for = @bar, adj.rule_kind = "augmented"}} {{
  %c0 = arith.constant 0 : index
  %v = memref.load %c[%c0] : memref<?xf64>
  %h = arith.constant 1.0 : f64
  %w = arith.addf %v, %h : f64
  memref.store %w, %c[%c0] : memref<?xf64>
  return
}}
func.func private @bar_rev(%c: memref<?xf64>) attributes {{
    adj.rule_for = @bar, adj.rule_kind = "reverse"}} {{
  %c0 = arith.constant 0 : index
  %v = memref.load %c[%c0] : memref<?xf64>
  %h = arith.constant 10.0 : f64
  %w = arith.addf %v, %h : f64
  memref.store %w, %c[%c0] : memref<?xf64>
  return
}}
func.func @foo(%x: f64, %c: memref<?xf64>) -> f64 attributes {{{ENTRY}}} {{
  func.call @bar(%c) : (memref<?xf64>) -> ()
  %r = arith.mulf %x, %x : f64
  return %r : f64
}}
"""


def test_rules_fire_on_all_const_calls():
    # Enzyme PR 1371 (seed 002): the rules of a call whose argument and result are all const
    # must still run in reverse mode (a synchronize inside one must happen).
    c = Compiled(SIDE_EFFECT + request("foo", "d", "reverse", ["active", "const"], "active"))
    counter = np.zeros(1)
    c("d_aug", 3.0, counter)
    assert counter[0] == 1.0            # the augmented rule ran, not @bar
    (dx,) = c("d_rev", 3.0, counter, 1.0)
    assert counter[0] == 11.0           # then the reverse rule
    assert dx == 6.0


def test_rule_with_the_wrong_signature_is_refused():
    text = SOFTPLUS.replace("SCALE", "1.0").replace(
        "func.func private @sp_rev(%x: f64, %dret: f64, %tape: f64)",
        "func.func private @sp_rev(%x: f64, %dret: f64)").replace(
        "func.call @sigmoid_scaled(%tape)", "func.call @sigmoid_scaled(%x)")
    with pytest.raises(AdjError, match=r"custom reverse rule @sp_rev has type \(f64, f64\) -> "
                                       r"\(f64\), but the call needs \(f64, f64, f64\) -> \(f64\)"):
        differentiate(text + CALLER + request("f", "d", "reverse", ["active", "const"], "active"))


def test_augmented_rule_without_reverse_rule_is_refused():
    text = SOFTPLUS.replace("SCALE", "1.0").replace('adj.rule_kind = "reverse"',
                                                    'adj.rule_kind = "unused"')
    with pytest.raises(AdjError, match="an augmented_primal rule without a reverse rule; "
                                       "reverse mode needs both"):
        differentiate(text + CALLER + request("f", "d", "reverse", ["active", "const"], "active"))


def test_custom_provider():
    calls = []

    def provider(fn, kind, activity, ret_activity, config):
        calls.append((fn, kind, tuple(activity), ret_activity, config["needs_primal"]))
        return None   # no rules: differentiate automatically

    text = SOFTPLUS.replace("SCALE", "1.0") + CALLER
    GradCheck(text, "f", ["active", "const"], rule_provider=provider).check([0.3, 2])
    assert ("softplus", "augmented", ("active",), "active", True) in calls
    assert ("softplus", "forward", ("dup",), "dup", True) in calls
