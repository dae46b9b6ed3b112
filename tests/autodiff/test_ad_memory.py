"""Loads, stores, atomics, copies and temporaries: shadows accumulate adjoints, stored-over
adjoints are zeroed, values read from memory that is later overwritten are cached."""
import numpy as np

from ad_helpers import ENTRY, Compiled, GradCheck, function, request

IN_PLACE = f"""
func.func @f(%x: memref<?xf64>, %y: memref<?xf64>) -> f64 attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  %z = arith.constant 0.0 : f64
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> f64 {{
    // x[i] = x[i] * x[i], then x[i] and the old value are both used again.
    %v = memref.load %x[%i] : memref<?xf64>
    %w = arith.mulf %v, %v : f64
    memref.store %w, %x[%i] : memref<?xf64>
    %u = memref.load %x[%i] : memref<?xf64>
    %s = math.sin %u : f64
    %t = arith.mulf %s, %v : f64
    memref.store %t, %y[%i] : memref<?xf64>
    %q = arith.addf %acc, %t : f64
    scf.yield %q : f64
  }}
  return %r : f64
}}
"""


def test_in_place_update_then_more_uses():
    g = GradCheck(IN_PLACE, "f", ["dup", "dup"])
    x = np.array([0.3, -0.5, 1.2])
    g.check([x, np.zeros(3)])
    # With no seed on the arrays' final values, dx is d(sum_i sin(x_i^2) x_i)/dx.
    _, (dx, dy), _ = g.reverse([x, np.zeros(3)], [np.zeros(3), np.zeros(3)])
    np.testing.assert_allclose(dx, np.cos(x * x) * 2 * x * x + np.sin(x * x), rtol=1e-12)
    np.testing.assert_array_equal(dy, 0.0)


def test_overwritten_reads_are_cached():
    # The reverse pass needs x[i] as it was read, which the store overwrites: it is stacked.
    text = IN_PLACE + request("f", "rv2", "reverse", ["dup", "dup"], "active")
    c = Compiled(text)
    tape = str(function(c.module, "rv2_aug").attributes["adj.tape"])
    assert "f64 stack, per run of its block: result of memref.load" in tape


def test_stored_over_element_gets_zero_adjoint():
    text = f"""
func.func @f(%x: memref<?xf64>, %a: f64) -> f64 attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %v = memref.load %x[%c0] : memref<?xf64>
  %w = arith.mulf %v, %a : f64
  memref.store %a, %x[%c0] : memref<?xf64>
  return %w : f64
}}
"""
    g = GradCheck(text, "f", ["dup", "active"])
    _, (dx,), _ = g.reverse([np.array([2.0, 3.0]), 0.5], [np.array([10.0, 20.0]), None])
    # d/dx0 of (x0 * a + 10 * a): a; x[1] untouched keeps its seed.
    np.testing.assert_allclose(dx, [0.5, 20.0])
    g.check([np.array([2.0, 3.0]), 0.5])


def test_atomic_add():
    text = f"""
func.func @f(%x: memref<?xf64>, %y: memref<?xf64>) attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  scf.for %i = %c0 to %n step %c1 {{
    %v = memref.load %x[%i] : memref<?xf64>
    %s = math.sin %v : f64
    %old = memref.atomic_rmw addf %s, %y[%c0] : (f64, memref<?xf64>) -> f64
    %o2 = arith.mulf %old, %v : f64
    memref.store %o2, %y[%c1] : memref<?xf64>
  }}
  return
}}
"""
    g = GradCheck(text, "f", ["dup", "dup"], ret="const")
    g.check([np.array([0.3, -0.5, 1.2]), np.array([0.5, 0.0])])


def test_copy_and_temporaries():
    text = f"""
func.func @f(%x: memref<?xf64>, %a: f64) -> f64 attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  %t = memref.alloc(%n) : memref<?xf64>
  memref.copy %x, %t : memref<?xf64> to memref<?xf64>
  %z = arith.constant 0.0 : f64
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> f64 {{
    %tmp = memref.alloc() : memref<1xf64>
    %v = memref.load %t[%i] : memref<?xf64>
    %av = arith.mulf %a, %v : f64
    memref.store %av, %tmp[%c0] : memref<1xf64>
    %w = memref.load %tmp[%c0] : memref<1xf64>
    %e = math.exp %w : f64
    memref.store %e, %t[%i] : memref<?xf64>
    %q = arith.addf %acc, %e : f64
    scf.yield %q : f64
  }}
  %u = memref.load %t[%c0] : memref<?xf64>
  %s = arith.mulf %r, %u : f64
  return %s : f64
}}
"""
    GradCheck(text, "f", ["dup", "active"]).check([np.array([0.3, -0.5, 1.2]), 0.7])


def test_two_dimensional_arrays():
    text = f"""
func.func @f(%m: memref<?x?xf64>, %v: memref<?xf64>, %out: memref<?xf64>) attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %rows = memref.dim %m, %c0 : memref<?x?xf64>
  %cols = memref.dim %m, %c1 : memref<?x?xf64>
  scf.for %i = %c0 to %rows step %c1 {{
    %z = arith.constant 0.0 : f64
    %s = scf.for %j = %c0 to %cols step %c1 iter_args(%acc = %z) -> f64 {{
      %a = memref.load %m[%i, %j] : memref<?x?xf64>
      %b = memref.load %v[%j] : memref<?xf64>
      %p = arith.mulf %a, %b : f64
      %t = arith.addf %acc, %p : f64
      scf.yield %t : f64
    }}
    %th = math.tanh %s : f64
    memref.store %th, %out[%i] : memref<?xf64>
  }}
  return
}}
"""
    rng = np.random.default_rng(1)
    GradCheck(text, "f", ["dup", "dup", "dup"], ret="const").check(
        [rng.standard_normal((3, 2)), rng.standard_normal(2), np.zeros(3)])


SCALE = f"""
func.func @f(%x: memref<?xf64>, %y: memref<?xf64>) attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  scf.for %i = %c0 to %n step %c1 {{
    %v = memref.load %x[%i] : memref<?xf64>
    %s = arith.mulf %v, %v : f64
    memref.store %s, %y[%i] : memref<?xf64>
  }}
  return
}}
"""


def test_overwritten_flag_caches_argument_reads():
    # Split mode where the caller may change x between the two halves.
    base = GradCheck(SCALE, "f", ["dup", "dup"], ret="const")
    safe = GradCheck(SCALE, "f", ["dup", "dup"], ret="const", overwritten=[True, True])
    assert "memref<?xf64>, index" not in str(base.c.types["rv_aug"])
    assert "index" in str(safe.c.types["rv_aug"])   # a stack of the x[i] read
    x, w = np.array([0.5, -2.0]), np.array([1.0, 3.0])
    flat = [x.copy(), np.zeros(2), np.zeros(2), w.copy()]
    tape = safe.c("rv_aug", *flat)
    flat[0][:] = 100.0   # the caller overwrites x
    safe.c("rv_rev", *flat, *tape)
    np.testing.assert_allclose(flat[1], 2 * x * w)
