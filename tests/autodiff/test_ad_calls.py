"""Calls: callees are differentiated recursively, once per signature, in both modes."""
import numpy as np

from ad_helpers import ENTRY, Compiled, GradCheck, function, request

CALLEE = """
func.func private @g(%x: memref<?xf64>, %i: index, %s: f64) -> f64 {
  %v = memref.load %x[%i] : memref<?xf64>
  %w = arith.mulf %v, %s : f64
  %e = math.exp %w : f64
  memref.store %e, %x[%i] : memref<?xf64>
  return %w : f64
}
"""

CALLER = CALLEE + f"""
func.func @f(%x: memref<?xf64>, %a: f64) -> f64 attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  %z = arith.constant 0.0 : f64
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> f64 {{
    %t = func.call @g(%x, %i, %a) : (memref<?xf64>, index, f64) -> f64
    %q = arith.addf %acc, %t : f64
    %q2 = arith.mulf %q, %a : f64
    scf.yield %q2 : f64
  }}
  %c2 = arith.constant 2 : index
  %t2 = func.call @g(%x, %c2, %r) : (memref<?xf64>, index, f64) -> f64
  return %t2 : f64
}}
"""


def test_calls_in_loops_and_after_overwrites():
    GradCheck(CALLER, "f", ["dup", "active"]).check([np.array([0.3, -0.5, 1.2]), 0.7])


def test_one_callee_derivative_per_signature():
    c = Compiled(CALLER + request("f", "rv", "reverse", ["dup", "active"], "active")
                 + request("f", "fw", "forward", ["dup", "dup"], "dup"))
    names = sorted(n for n in c.types if n.startswith("__adj_g"))
    # Forward: both calls share one function. Reverse: the call in the loop may see x
    # overwritten by later iterations (flag o100), the last call may not.
    assert names == ["__adj_g_fwd_dcd_dp", "__adj_g_rev_dca_ap_aug", "__adj_g_rev_dca_ap_o100_aug",
                     "__adj_g_rev_dca_ap_o100_rev", "__adj_g_rev_dca_ap_rev"]


def test_identical_requests_share_generated_functions():
    text = CALLER + request("f", "one", "forward", ["dup", "dup"], "dup", True) + \
        request("f", "two", "forward", ["dup", "dup"], "dup", True)
    c = Compiled(text)
    body = str(c.module).split("func.func @two(")[1].split("func.func")[0]
    assert "call @one(" in body
    x = np.array([0.3, -0.5, 1.2])
    dx = np.array([1.0, 0.0, 0.0])
    assert c("one", x.copy(), dx.copy(), 0.7, 0.0) == c("two", x.copy(), dx.copy(), 0.7, 0.0)


def test_const_call_is_plain_and_integer_results_pass_through():
    text = f"""
func.func private @count(%x: memref<?xf64>) -> i64 {{
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  %i = arith.index_cast %n : index to i64
  return %i : i64
}}
func.func private @h(%s: f64) -> (f64, i64) {{
  %e = math.exp %s : f64
  %k = arith.constant 7 : i64
  return %e, %k : f64, i64
}}
func.func @f(%x: memref<?xf64>, %a: f64) -> f64 attributes {{{ENTRY}}} {{
  %n = func.call @count(%x) : (memref<?xf64>) -> i64
  %fn = arith.sitofp %n : i64 to f64
  %e:2 = func.call @h(%a) : (f64) -> (f64, i64)
  %fk = arith.sitofp %e#1 : i64 to f64
  %p = arith.mulf %e#0, %fn : f64
  %q = arith.mulf %p, %fk : f64
  return %q : f64
}}
"""
    g = GradCheck(text, "f", ["const", "active"])
    (da,), _, _ = g.reverse([np.ones(3), 0.5], [None, None])
    assert da == np.exp(0.5) * 21
    assert "__adj_count" not in str(g.c.module)
    g.check([np.ones(3), 0.5])


def test_nested_calls():
    text = f"""
func.func private @sq(%x: f64) -> f64 {{
  %r = arith.mulf %x, %x : f64
  return %r : f64
}}
func.func private @mid(%x: f64, %y: f64) -> f64 {{
  %a = func.call @sq(%x) : (f64) -> f64
  %b = math.sin %y : f64
  %c = arith.mulf %a, %b : f64
  %d = func.call @sq(%c) : (f64) -> f64
  return %d : f64
}}
func.func @f(%x: f64, %y: f64) -> f64 attributes {{{ENTRY}}} {{
  %r = func.call @mid(%x, %y) : (f64, f64) -> f64
  %s = func.call @mid(%r, %x) : (f64, f64) -> f64
  return %s : f64
}}
"""
    GradCheck(text, "f", ["active", "active"]).check([0.6, 0.9])
    GradCheck(text, "f", ["const", "active"]).check([0.6, 0.9])


def test_callee_tapes_and_temporaries_inside_loops():
    # @pw's own tape (a stack buffer) is made once per iteration of @f's loop: @f's stacks
    # keep a copy of it, as they do of the temporary array @pw's reverse pass is given.
    text = f"""
func.func private @pw(%x: f64, %n: index, %buf: memref<?xf64>) -> f64 {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%a = %x) -> f64 {{
    %s = math.sin %a : f64
    %t = arith.mulf %s, %x : f64
    memref.store %t, %buf[%i] : memref<?xf64>
    scf.yield %t : f64
  }}
  return %r : f64
}}
func.func @f(%x: f64, %m: index) -> f64 attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %r = scf.for %i = %c0 to %m step %c1 iter_args(%a = %x) -> f64 {{
    %tmp = memref.alloc(%c3) : memref<?xf64>
    %p = func.call @pw(%a, %c3, %tmp) : (f64, index, memref<?xf64>) -> f64
    %q = memref.load %tmp[%c1] : memref<?xf64>
    %w = arith.mulf %p, %q : f64
    scf.yield %w : f64
  }}
  return %r : f64
}}
"""
    g = GradCheck(text, "f", ["active", "const"])
    for m in (0, 1, 3):
        g.check([0.4, m])
    tape = str(function(g.c.module, "rv_aug").attributes["adj.tape"])
    assert "elements of tape value 0 of func.call" in tape
