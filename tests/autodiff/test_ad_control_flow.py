"""scf.if, scf.for (static and dynamic trip counts, nested, zero trips), scf.while with a
data-dependent trip count, scf.parallel: forward and reverse against central differences."""
import numpy as np
import pytest

from ad_helpers import ENTRY, GradCheck

IF = f"""
func.func @f(%x: f64, %y: f64) -> f64 attributes {{{ENTRY}}} {{
  %c = arith.cmpf olt, %x, %y : f64
  %r = scf.if %c -> f64 {{
    %s = math.sin %x : f64
    %p = arith.mulf %s, %y : f64
    scf.yield %p : f64
  }} else {{
    %e = math.exp %y : f64
    scf.yield %e : f64
  }}
  %q = arith.mulf %r, %x : f64
  return %q : f64
}}
"""


@pytest.mark.parametrize("x, y", [(0.3, 1.1), (2.0, 1.1)])
def test_if_with_results(x, y):
    GradCheck(IF, "f", ["active", "active"]).check([x, y])


def test_if_without_else_writing_memory():
    text = f"""
func.func @f(%x: f64, %m: memref<?xf64>) -> f64 attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %z = arith.constant 0.0 : f64
  %c = arith.cmpf ogt, %x, %z : f64
  scf.if %c {{
    %t = arith.mulf %x, %x : f64
    memref.store %t, %m[%c0] : memref<?xf64>
  }}
  %v = memref.load %m[%c0] : memref<?xf64>
  %r = math.sin %v : f64
  return %r : f64
}}
"""
    g = GradCheck(text, "f", ["active", "dup"])
    g.check([0.7, np.array([0.4, 1.0])])
    g.check([-0.7, np.array([0.4, 1.0])])


LOOP = f"""
func.func @f(%x: f64, %lo: index, %hi: index) -> f64 attributes {{{ENTRY}}} {{
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f64
  %r:2 = scf.for %i = %lo to %hi step %c1 iter_args(%a = %x, %b = %one) -> (f64, f64) {{
    %s = math.sin %a : f64
    %t = arith.mulf %s, %b : f64
    %u = arith.addf %t, %x : f64
    %v = arith.mulf %b, %x : f64
    scf.yield %u, %v : f64, f64
  }}
  %q = arith.mulf %r#0, %r#1 : f64
  return %q : f64
}}
"""


@pytest.mark.parametrize("lo, hi", [(0, 5), (2, 3), (3, 3), (4, 1)])
def test_for_with_dynamic_trip_count(lo, hi):
    GradCheck(LOOP, "f", ["active", "const", "const"]).check([0.8, lo, hi])


def test_nested_static_loops_with_step():
    text = f"""
func.func @f(%x: f64) -> f64 attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c2 = arith.constant 2 : index
  %c7 = arith.constant 7 : index
  %r = scf.for %i = %c1 to %c7 step %c2 iter_args(%a = %x) -> f64 {{
    %inner = scf.for %j = %c0 to %c3 step %c1 iter_args(%b = %a) -> f64 {{
      %jj = arith.index_cast %j : index to i64
      %fj = arith.sitofp %jj : i64 to f64
      %t = arith.mulf %b, %fj : f64
      %s = math.cos %t : f64
      %u = arith.addf %s, %b : f64
      scf.yield %u : f64
    }}
    %w = arith.mulf %inner, %x : f64
    scf.yield %w : f64
  }}
  return %r : f64
}}
"""
    GradCheck(text, "f", ["active"]).check([0.3])


def test_loop_invariant_value_accumulates_over_iterations():
    text = f"""
func.func @f(%a: f64, %n: index) -> f64 attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f64
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %z) -> f64 {{
    %ii = arith.index_cast %i : index to i64
    %fi = arith.sitofp %ii : i64 to f64
    %t = arith.mulf %a, %fi : f64
    %e = math.sin %t : f64
    %u = arith.addf %s, %e : f64
    scf.yield %u : f64
  }}
  return %r : f64
}}
"""
    g = GradCheck(text, "f", ["active", "const"])
    (da,), _, _ = g.reverse([0.3, 6], [None, None])
    assert da == pytest.approx(sum(i * np.cos(0.3 * i) for i in range(6)), rel=1e-12)
    g.check([0.3, 6])


WHILE = f"""
func.func @f(%x0: f64, %a: f64) -> f64 attributes {{{ENTRY}}} {{
  %ten = arith.constant 10.0 : f64
  %one = arith.constant 1.0 : f64
  %r:2 = scf.while (%x = %x0, %k = %one) : (f64, f64) -> (f64, f64) {{
    %c = arith.cmpf olt, %x, %ten : f64
    %s = math.sin %x : f64
    %xs = arith.addf %x, %s : f64
    scf.condition(%c) %xs, %k : f64, f64
  }} do {{
  ^bb0(%y: f64, %k2: f64):
    %m = arith.mulf %y, %a : f64
    %p = arith.addf %m, %one : f64
    %kk = arith.mulf %k2, %a : f64
    scf.yield %p, %kk : f64, f64
  }}
  %q = arith.mulf %r#0, %r#1 : f64
  return %q : f64
}}
"""


@pytest.mark.parametrize("x0", [0.5, 1.3, 2.0, 11.0])
def test_while_with_data_dependent_trip_count(x0):
    g = GradCheck(WHILE, "f", ["active", "active"])
    g.check([x0, 1.7])
    # A tape serves any number of reverse calls.
    once, _, _ = g.reverse([x0, 1.7], [None, None], repeats=1)
    twice, _, _ = g.reverse([x0, 1.7], [None, None], repeats=3)
    assert once == twice


def test_while_nested_in_for():
    text = f"""
func.func @f(%x: f64, %n: index) -> f64 attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %lim = arith.constant 3.0 : f64
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%a = %x) -> f64 {{
    %w = scf.while (%y = %a) : (f64) -> f64 {{
      %c = arith.cmpf olt, %y, %lim : f64
      scf.condition(%c) %y : f64
    }} do {{
    ^bb0(%z: f64):
      %e = math.exp %z : f64
      %s = arith.addf %z, %e : f64
      scf.yield %s : f64
    }}
    %d = arith.divf %w, %lim : f64
    %t = math.sqrt %d : f64
    scf.yield %t : f64
  }}
  return %r : f64
}}
"""
    GradCheck(text, "f", ["active", "const"]).check([-1.5, 4])


def test_parallel_loop_reduction_to_partials():
    # The frontend's reduction pattern: chunks in parallel, partial sums, then a sum.
    text = f"""
func.func @f(%a: f64, %x: memref<?xf64>) -> f64 attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  %chunks = arith.ceildivui %n, %c2 : index
  %part = memref.alloc(%chunks) : memref<?xf64>
  scf.parallel (%k) = (%c0) to (%chunks) step (%c1) {{
    %lo = arith.muli %k, %c2 : index
    %hi0 = arith.addi %lo, %c2 : index
    %hi = arith.minui %hi0, %n : index
    %z = arith.constant 0.0 : f64
    %s = scf.for %i = %lo to %hi step %c1 iter_args(%acc = %z) -> f64 {{
      %v = memref.load %x[%i] : memref<?xf64>
      %av = arith.mulf %a, %v : f64
      %sq = arith.mulf %av, %av : f64
      %t = arith.addf %acc, %sq : f64
      scf.yield %t : f64
    }}
    memref.store %s, %part[%k] : memref<?xf64>
    scf.reduce
  }}
  %z = arith.constant 0.0 : f64
  %r = scf.for %k = %c0 to %chunks step %c1 iter_args(%acc = %z) -> f64 {{
    %p = memref.load %part[%k] : memref<?xf64>
    %t = arith.addf %acc, %p : f64
    scf.yield %t : f64
  }}
  return %r : f64
}}
"""
    x = np.array([0.5, -1.0, 2.0, 0.25, 3.0])
    g = GradCheck(text, "f", ["active", "const"])
    assert "scf.parallel" in str(g.c.module).split("func.func @rv_rev")[1]
    (da,), _, _ = g.reverse([0.7, x], [None, None])
    assert da == pytest.approx(2 * 0.7 * np.sum(x * x), rel=1e-12)
    g.check([0.7, x])
    GradCheck(text, "f", ["active", "dup"]).check([0.7, x])


def test_parallel_loop_needing_saved_values_runs_sequentially():
    text = f"""
func.func @f(%x: memref<?xf64>, %y: memref<?xf64>) attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {{
    %v = memref.load %x[%i] : memref<?xf64>
    %e = math.exp %v : f64
    %s = math.sin %e : f64
    memref.store %s, %x[%i] : memref<?xf64>
    memref.store %e, %y[%i] : memref<?xf64>
    scf.reduce
  }}
  return
}}
"""
    g = GradCheck(text, "f", ["dup", "dup"], ret="const")
    g.check([np.array([0.1, 0.2, -0.3]), np.zeros(3)])


NEW_ARRAY_EACH_STEP = f"""
// y = x.copy(); for: y = sin(y) * 0.5 + x (a new array each step); return sum(y * y)
func.func @f(%x: memref<?xf64>, %steps: index) -> f64 attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %half = arith.constant 0.5 : f64
  %n = memref.dim %x, %c0 : memref<?xf64>
  %y0 = memref.alloc(%n) : memref<?xf64>
  memref.copy %x, %y0 : memref<?xf64> to memref<?xf64>
  %y = scf.for %t = %c0 to %steps step %c1 iter_args(%cur = %y0) -> memref<?xf64> {{
    %next = memref.alloc(%n) : memref<?xf64>
    scf.parallel (%i) = (%c0) to (%n) step (%c1) {{
      %v = memref.load %cur[%i] : memref<?xf64>
      %s = math.sin %v : f64
      %h = arith.mulf %s, %half : f64
      %xi = memref.load %x[%i] : memref<?xf64>
      %w = arith.addf %h, %xi : f64
      memref.store %w, %next[%i] : memref<?xf64>
      scf.reduce
    }}
    scf.yield %next : memref<?xf64>
  }}
  %z = arith.constant 0.0 : f64
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> f64 {{
    %v = memref.load %y[%i] : memref<?xf64>
    %sq = arith.mulf %v, %v : f64
    %a = arith.addf %acc, %sq : f64
    scf.yield %a : f64
  }}
  return %r : f64
}}
"""


@pytest.mark.parametrize("steps", [0, 1, 3])
def test_loop_making_a_new_array_each_iteration(steps):
    # Which buffer the loop carries is not one of a few known ones: the reversed loop threads
    # the shadow of each iteration's array back to the iteration that made it.
    GradCheck(NEW_ARRAY_EACH_STEP, "f", ["dup", "const"]).check([np.linspace(0.1, 1.0, 4), steps])


def test_if_choosing_between_a_new_and_an_old_array():
    text = f"""
func.func @f(%x: memref<?xf64>, %a: f64) -> f64 attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  %zero = arith.constant 0.0 : f64
  %c = arith.cmpf ogt, %a, %zero : f64
  %y = scf.if %c -> memref<?xf64> {{
    %t = memref.alloc(%n) : memref<?xf64>
    scf.for %i = %c0 to %n step %c1 {{
      %v = memref.load %x[%i] : memref<?xf64>
      %m = arith.mulf %v, %a : f64
      memref.store %m, %t[%i] : memref<?xf64>
    }}
    scf.yield %t : memref<?xf64>
  }} else {{
    scf.yield %x : memref<?xf64>
  }}
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> f64 {{
    %v = memref.load %y[%i] : memref<?xf64>
    %e = math.exp %v : f64
    %s = arith.addf %acc, %e : f64
    scf.yield %s : f64
  }}
  return %r : f64
}}
"""
    g = GradCheck(text, "f", ["dup", "active"])
    g.check([np.array([0.3, -0.2, 0.5]), 0.7])
    g.check([np.array([0.3, -0.2, 0.5]), -0.7])
