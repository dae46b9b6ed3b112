"""Reverse mode of loops whose body adds to the adjoint of a value from outside the loop at
several sites: the adjoint is split over one accumulator per site (reverse.py, LoopSlots),
summed after the loop. Against analytic derivatives and central differences, with sites
beyond MAX_SLOTS, sites that are nested regions or the loop's own yield, loops that do not
run, and the frontend's reduction pattern (parallel chunks, lanes, tail)."""
import numpy as np
import pytest

from ad_helpers import ENTRY, GradCheck
from adjit.passes.autodiff.rules.loop_slots import MAX_SLOTS


def _rev(g: GradCheck) -> str:
    """The text of the generated reverse function."""
    return str(g.c.module).split("func.func @rv_rev")[1].split("func.func")[0]


# out = a * sum_i (a x_i + [i even] b): a at two sites (the lanes), b at one; a is also used
# after the loop, so its adjoint so far is added to the slots' sum.
LANES = f"""
func.func @f(%a: f64, %b: f64, %x: memref<?xf64>, %n: index) -> f64 attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %zero = arith.constant 0.0 : f64
  %r:2 = scf.for %i = %c0 to %n step %c2 iter_args(%s0 = %zero, %s1 = %zero) -> (f64, f64) {{
    %x0 = memref.load %x[%i] : memref<?xf64>
    %i1 = arith.addi %i, %c1 : index
    %x1 = memref.load %x[%i1] : memref<?xf64>
    %p0 = arith.mulf %a, %x0 : f64
    %q0 = arith.addf %p0, %b : f64
    %p1 = arith.mulf %a, %x1 : f64
    %t0 = arith.addf %s0, %q0 : f64
    %t1 = arith.addf %s1, %p1 : f64
    scf.yield %t0, %t1 : f64, f64
  }}
  %sum = arith.addf %r#0, %r#1 : f64
  %out = arith.mulf %sum, %a : f64
  return %out : f64
}}
"""


@pytest.mark.parametrize("n", [0, 2, 6])
def test_lanes_each_get_an_accumulator(n):
    x = np.array([0.5, -1.0, 2.0, 0.25, 3.0, -0.75])
    g = GradCheck(LANES, "f", ["active", "active", "const", "const"])
    a, b = 0.7, -1.3
    (da, db), _, _ = g.reverse([a, b, x, n], [None, None, None, None])
    s = a * np.sum(x[:n]) + b * (n // 2)
    assert da == pytest.approx(s + a * np.sum(x[:n]), rel=1e-12)
    assert db == pytest.approx(a * (n // 2), rel=1e-12)
    g.check([a, b, x, n])


def test_lanes_loop_carries_one_accumulator_per_site():
    g = GradCheck(LANES, "f", ["active", "active", "const", "const"])
    rev = _rev(g)
    # The loop-carried adjoints of %s0 and %s1, then a's two slots and b's one.
    assert "scf.for" in rev and "-> (f64, f64, f64, f64, f64)" in rev


# Seven sites of a, more than MAX_SLOTS (dealt round robin), among them an scf.if and the
# loop's yield of a itself: u = (sin(a i) + a) a - a, times a again if i > 0; s += u a + p;
# p = a (see _many_sites).
MANY_SITES = f"""
func.func @f(%a: f64, %n: index) -> f64 attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f64
  %half = arith.constant 0.5 : f64
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %zero, %p = %half) -> (f64, f64) {{
    %ii = arith.index_cast %i : index to i64
    %c = arith.sitofp %ii : i64 to f64
    %u1 = arith.mulf %a, %c : f64
    %u2 = math.sin %u1 : f64
    %u3 = arith.addf %u2, %a : f64
    %u4 = arith.mulf %u3, %a : f64
    %u5 = arith.subf %u4, %a : f64
    %odd = arith.cmpf ogt, %c, %half : f64
    %u6 = scf.if %odd -> f64 {{
      %m = arith.mulf %u5, %a : f64
      scf.yield %m : f64
    }} else {{
      scf.yield %u5 : f64
    }}
    %u7 = arith.mulf %u6, %a : f64
    %u8 = arith.addf %u7, %p : f64
    %t = arith.addf %s, %u8 : f64
    scf.yield %t, %a : f64, f64
  }}
  %out = arith.addf %r#0, %r#1 : f64
  return %out : f64
}}
"""


def _many_sites(a, n):
    s, p = 0.0, 0.5
    for i in range(n):
        u = (np.sin(a * i) + a) * a - a
        u = u * a if i > 0.5 else u
        s, p = s + u * a + p, a
    return s + p


@pytest.mark.parametrize("n", [0, 1, 5])
def test_more_sites_than_slots(n):
    assert MAX_SLOTS < 7, "the test needs more sites than slots"
    g = GradCheck(MANY_SITES, "f", ["active", "const"])
    (da,), _, _ = g.reverse([0.4, n], [None, None])
    h = 1e-6
    assert da == pytest.approx((_many_sites(0.4 + h, n) - _many_sites(0.4 - h, n)) / (2 * h),
                               rel=1e-7)
    g.check([0.4, n])


# The condition region and the body both use a (in while loops, the condition region and the
# body's yield are one site).
WHILE = f"""
func.func @f(%x0: f64, %a: f64) -> f64 attributes {{{ENTRY}}} {{
  %ten = arith.constant 10.0 : f64
  %r = scf.while (%x = %x0) : (f64) -> f64 {{
    %ax = arith.mulf %a, %x : f64
    %c = arith.cmpf olt, %ax, %ten : f64
    %y = arith.addf %x, %a : f64
    scf.condition(%c) %y : f64
  }} do {{
  ^bb0(%y: f64):
    %m = arith.mulf %y, %a : f64
    %s = math.sin %a : f64
    %p = arith.addf %m, %s : f64
    %q = arith.addf %p, %a : f64
    scf.yield %q : f64
  }}
  return %r : f64
}}
"""


@pytest.mark.parametrize("x0", [0.5, 2.0, 30.0])
def test_while_with_several_sites(x0):
    GradCheck(WHILE, "f", ["active", "active"]).check([x0, 1.3])


# An scf.parallel whose iterations need a saved value is reversed as a sequential loop: its
# body's sites get accumulators too.
SEQUENTIAL = f"""
func.func @f(%a: f64, %x: memref<?xf64>) attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {{
    %v = memref.load %x[%i] : memref<?xf64>
    %e = math.exp %v : f64
    %s = arith.mulf %e, %a : f64
    %t = math.sin %s : f64
    %u = arith.addf %t, %a : f64
    %w = arith.mulf %u, %a : f64
    memref.store %w, %x[%i] : memref<?xf64>
    scf.reduce
  }}
  return
}}
"""


def test_parallel_loop_reversed_sequentially():
    g = GradCheck(SEQUENTIAL, "f", ["active", "dup"], ret="const")
    assert "scf.parallel" not in _rev(g)
    g.check([0.6, np.array([0.1, 0.2, -0.3, 1.5])])


# The frontend's reduction: chunks in parallel; in a chunk, LANES lanes then a tail; here
# sum((a x + b - y)^2) with 4-element chunks and 2 lanes.
REDUCTION = f"""
func.func @f(%a: f64, %b: f64, %x: memref<?xf64>, %y: memref<?xf64>) -> f64
    attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f64
  %n = memref.dim %x, %c0 : memref<?xf64>
  %chunks = arith.ceildivui %n, %c4 : index
  %part = memref.alloc(%chunks) : memref<?xf64>
  scf.parallel (%k) = (%c0) to (%chunks) step (%c1) {{
    %lo = arith.muli %k, %c4 : index
    %hi0 = arith.addi %lo, %c4 : index
    %hi = arith.minui %hi0, %n : index
    %len = arith.subi %hi, %lo : index
    %pairs = arith.divui %len, %c2 : index
    %even = arith.muli %pairs, %c2 : index
    %full = arith.addi %lo, %even : index
    %l:2 = scf.for %i = %lo to %full step %c2 iter_args(%s0 = %zero, %s1 = %zero) -> (f64, f64) {{
      %x0 = memref.load %x[%i] : memref<?xf64>
      %y0 = memref.load %y[%i] : memref<?xf64>
      %ax0 = arith.mulf %a, %x0 : f64
      %b0 = arith.addf %ax0, %b : f64
      %d0 = arith.subf %b0, %y0 : f64
      %q0 = arith.mulf %d0, %d0 : f64
      %t0 = arith.addf %s0, %q0 : f64
      %i1 = arith.addi %i, %c1 : index
      %x1 = memref.load %x[%i1] : memref<?xf64>
      %y1 = memref.load %y[%i1] : memref<?xf64>
      %ax1 = arith.mulf %a, %x1 : f64
      %b1 = arith.addf %ax1, %b : f64
      %d1 = arith.subf %b1, %y1 : f64
      %q1 = arith.mulf %d1, %d1 : f64
      %t1 = arith.addf %s1, %q1 : f64
      scf.yield %t0, %t1 : f64, f64
    }}
    %lanes = arith.addf %l#0, %l#1 : f64
    %s = scf.for %i = %full to %hi step %c1 iter_args(%acc = %lanes) -> f64 {{
      %xv = memref.load %x[%i] : memref<?xf64>
      %yv = memref.load %y[%i] : memref<?xf64>
      %ax = arith.mulf %a, %xv : f64
      %bx = arith.addf %ax, %b : f64
      %d = arith.subf %bx, %yv : f64
      %q = arith.mulf %d, %d : f64
      %t = arith.addf %acc, %q : f64
      scf.yield %t : f64
    }}
    memref.store %s, %part[%k] : memref<?xf64>
    scf.reduce
  }}
  %r = scf.for %k = %c0 to %chunks step %c1 iter_args(%acc = %zero) -> f64 {{
    %p = memref.load %part[%k] : memref<?xf64>
    %t = arith.addf %acc, %p : f64
    scf.yield %t : f64
  }}
  return %r : f64
}}
"""


@pytest.mark.parametrize("n", [0, 1, 4, 7, 11])
def test_reduction_pattern_matches_analytic(n):
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    a, b = 0.7, -0.2
    g = GradCheck(REDUCTION, "f", ["active", "active", "const", "const"])
    (da, db), _, _ = g.reverse([a, b, x, y], [None] * 4)
    r = a * x + b - y
    assert da == pytest.approx(2 * np.sum(r * x), rel=1e-12, abs=1e-15)
    assert db == pytest.approx(2 * np.sum(r), rel=1e-12, abs=1e-15)
    g.check([a, b, x, y])
    GradCheck(REDUCTION, "f", ["active", "const", "dup", "const"]).check([a, b, x, y])
