"""Kernels and launches: forward kernels, augmented/reverse kernels with per-item tapes, the
launch rule, adjoints of active scalar arguments summed over work items."""
import gc

import numpy as np
import pytest

from ad_helpers import ENTRY, Compiled, GradCheck, differentiate, function, request
from adjit.dialects.adj import AdjError
from adjit.runtime.memory import memory_stats

KERNEL = """
func.func private @k(%a: f64, %x: memref<?xf64>, %y: memref<?xf64>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %xi = memref.load %x[%i] : memref<?xf64>
  %yi = memref.load %y[%i] : memref<?xf64>
  %ax = arith.mulf %a, %xi : f64
  %s = math.sin %ax : f64
  %r = arith.addf %s, %yi : f64
  %r2 = arith.mulf %r, %yi : f64
  memref.store %r2, %y[%i] : memref<?xf64>
  return
}
"""


def launcher(kernel: str, args: str, types: str, extent: str = "%n") -> str:
    return f"""
func.func @run({args}) attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  "adj.launch"({extent}) ({{
    func.call @{kernel}({", ".join(a.split(":")[0] for a in args.split(", "))}) : ({types}) -> ()
    gpu.yield
  }}) {{kernel = @{kernel}}} : (index) -> ()
  return
}}
"""


RUN = KERNEL + launcher("k", "%a: f64, %x: memref<?xf64>, %y: memref<?xf64>",
                        "f64, memref<?xf64>, memref<?xf64>")


def test_launch_forward_and_reverse():
    g = GradCheck(RUN, "run", ["active", "dup", "dup"], ret="const")
    g.check([0.7, np.array([0.3, -0.5, 1.2]), np.array([1.0, 2.0, -0.4])])
    # The augmented kernel saves what each item needs in its slot: y[i], which the store
    # overwrites. x is only read, so it is read again, and the rest recomputed from both.
    (field,) = function(g.c.module, "__adj_k_rev_add_c_aug").attributes["adj.tape"]
    assert "per_item = 1" in str(field) and "result of memref.load" in str(field)


def test_kernel_request_abi():
    text = KERNEL + request("k", "dk", "reverse", ["active", "dup", "dup"], "const")
    c = Compiled(text)
    assert [str(t) for t in c.types["dk_aug"].inputs] == ["f64"] + ["memref<?xf64>"] * 5
    # args..., tape, then one per-item buffer for the active scalar
    assert [str(t) for t in c.types["dk_rev"].inputs] == ["f64"] + ["memref<?xf64>"] * 6
    text = KERNEL + request("k", "fk", "forward", ["dup", "dup", "dup"], "const")
    c = Compiled(text)
    assert len(c.types["fk"].inputs) == 6 and not c.types["fk"].results
    kernel = function(differentiate(text), "fk")
    assert "adj.kernel" in kernel.attributes and "adj.ndim" in kernel.attributes


def test_colliding_reads_accumulate():
    # Every item reads x[0]: the reverse kernel's shadow updates must not lose any.
    text = """
func.func private @k(%x: memref<?xf64>, %y: memref<?xf64>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : index
  %x0 = memref.load %x[%c0] : memref<?xf64>
  %xi = memref.load %x[%i] : memref<?xf64>
  %p = arith.mulf %x0, %xi : f64
  memref.store %p, %y[%i] : memref<?xf64>
  return
}
""" + launcher("k", "%x: memref<?xf64>, %y: memref<?xf64>", "memref<?xf64>, memref<?xf64>")
    g = GradCheck(text, "run", ["dup", "dup"], ret="const")
    x = np.linspace(0.5, 2.0, 64)
    w = np.ones(64)
    _, (dx, _), _ = g.reverse([x, np.zeros(64)], [np.zeros(64), w])
    expected = np.full(64, x[0])           # y_i = x_0 x_i
    expected[0] = x.sum() + x[0]
    np.testing.assert_allclose(dx, expected, rtol=1e-12)


def test_static_loop_in_kernel_uses_slots_per_iteration():
    text = """
func.func private @k(%x: memref<?xf64>, %y: memref<?xf64>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %xi = memref.load %x[%i] : memref<?xf64>
  %r = scf.for %j = %c0 to %c3 step %c1 iter_args(%a = %xi) -> f64 {
    %s = math.sin %a : f64
    %t = arith.mulf %s, %a : f64
    scf.yield %t : f64
  }
  memref.store %r, %y[%i] : memref<?xf64>
  return
}
""" + launcher("k", "%x: memref<?xf64>, %y: memref<?xf64>", "memref<?xf64>, memref<?xf64>")
    g = GradCheck(text, "run", ["dup", "dup"], ret="const")
    g.check([np.array([0.3, -0.5, 1.2]), np.zeros(3)])
    # One slot per iteration for the loop-carried value; sin is recomputed from it.
    assert "per_item = 3" in str(g.c.module)


def test_item_dependent_loop_in_a_kernel_gets_a_packed_tape():
    # (A loop over a kernel argument %n has fixed slots: test_ad_kernel_runtime_loops.py; one
    # over m + i runs a different number of times per item: its values go to a packed stack
    # sized by a counting pass, dynamic_tape.py.) The loop's bound does not depend on x, so
    # the in-place update is accepted.
    text = """
func.func private @k(%x: memref<?xf64>, %m: index) attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.addi %m, %i : index
  %xi = memref.load %x[%i] : memref<?xf64>
  %r = scf.for %j = %c0 to %n step %c1 iter_args(%a = %xi) -> f64 {
    %t = arith.mulf %a, %a : f64
    scf.yield %t : f64
  }
  memref.store %r, %x[%i] : memref<?xf64>
  return
}
""" + launcher("k", "%x: memref<?xf64>, %m: index", "memref<?xf64>, index")
    g = GradCheck(text, "run", ["dup", "const"], ret="const")
    g.check([np.array([0.9, 1.1, 0.7, 1.05, 0.95]), 1])
    module = str(g.c.module)
    assert "_count(" in module and "@__adj_tape_chunk_offsets" in module
    assert 'dynamic = "stack"' in module


BLUR_STEPS = f"""
func.func private @blur(%u: memref<?xf64>, %v: memref<?xf64>, %c: f64)
    attributes {{adj.kernel, adj.ndim = 1 : i64}} {{
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %u, %c0 : memref<?xf64>
  %nm1 = arith.subi %n, %c1 : index
  %ip = arith.addi %i, %c1 : index
  %j = arith.minui %ip, %nm1 : index
  %a = memref.load %u[%i] : memref<?xf64>
  %b = memref.load %u[%j] : memref<?xf64>
  %s = arith.OP %a, %b : f64
  %m = arith.mulf %s, %c : f64
  memref.store %m, %v[%i] : memref<?xf64>
  return
}}
// simulate(): u = x.copy(); v = empty; for steps: blur(u, v); u, v = v, u
func.func @run(%x: memref<?xf64>, %c: f64, %steps: index) -> f64 attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  %u0 = memref.alloc(%n) : memref<?xf64>
  memref.copy %x, %u0 : memref<?xf64> to memref<?xf64>
  %v0 = memref.alloc(%n) : memref<?xf64>
  %r:2 = scf.for %t = %c0 to %steps step %c1 iter_args(%u = %u0, %v = %v0)
      -> (memref<?xf64>, memref<?xf64>) {{
    "adj.launch"(%n) ({{
      func.call @blur(%u, %v, %c) : (memref<?xf64>, memref<?xf64>, f64) -> ()
      gpu.yield
    }}) {{kernel = @blur}} : (index) -> ()
    scf.yield %v, %u : memref<?xf64>, memref<?xf64>
  }}
  %e = memref.load %r#0[%c0] : memref<?xf64>
  return %e : f64
}}
"""


def test_launches_in_a_loop_over_swapped_arrays_forward():
    c = Compiled(BLUR_STEPS.replace("OP", "addf") +
                 request("run", "fw", "forward", ["dup", "dup", "const"], "dup", True))
    x, c_ = np.array([1.0, 2.0, 3.0, 4.0]), 0.5
    primal, tangent = c("fw", x, np.array([1.0, 0.0, 0.0, 0.0]), c_, 1.0, 3)
    # u0 after 3 steps: c^3 (x0 + 3 x1 + 3 x2 + x3)
    assert primal == pytest.approx(c_**3 * (1 + 6 + 9 + 4))
    assert tangent == pytest.approx(c_**3 * 1 + 3 * c_**2 * 20)


@pytest.mark.parametrize("steps", [0, 1, 2, 3])
def test_launches_in_a_loop_over_swapped_arrays_reverse(steps):
    # A nonlinear blur: each launch's augmented kernel saves u's reads in a per-item tape,
    # which the loop's stacks keep; the reverse pass finds which buffer u and v were.
    g = GradCheck(BLUR_STEPS.replace("OP", "mulf"), "run", ["dup", "active", "const"])
    g.check([np.array([1.0, 1.2, 0.7, 0.9]), 0.8, steps])


def test_tapes_and_temporaries_are_freed():
    # The augmented pass's stacks grow and are handed over; the reverse pass's pops of arrays,
    # shadows of temporaries and per-item buffers are its own: none may leak.
    def in_use() -> int:
        gc.collect()
        return memory_stats()["bytes_in_use"]

    g = GradCheck(BLUR_STEPS.replace("OP", "mulf"), "run", ["dup", "active", "const"])
    args, weights = [np.array([1.0, 1.2, 0.7, 0.9]), 0.8, 40], [np.zeros(4), None, None]
    g.reverse(args, weights)
    before = in_use()
    for _ in range(20):
        g.reverse(args, weights, repeats=2)
    assert in_use() == before


def test_two_dimensional_ndrange_with_an_active_scalar():
    text = f"""
func.func private @k2(%a: f64, %m: memref<?x?xf64>, %out: memref<?x?xf64>)
    attributes {{adj.kernel, adj.ndim = 2 : i64}} {{
  %i = "adj.global_id"() {{dim = 0 : i64}} : () -> index
  %j = "adj.global_id"() {{dim = 1 : i64}} : () -> index
  %v = memref.load %m[%i, %j] : memref<?x?xf64>
  %s = arith.mulf %v, %v : f64
  %e = math.sin %a : f64
  %r = arith.mulf %s, %e : f64
  memref.store %r, %out[%i, %j] : memref<?x?xf64>
  return
}}
func.func @run(%a: f64, %m: memref<?x?xf64>, %out: memref<?x?xf64>) attributes {{{ENTRY}}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %rows = memref.dim %m, %c0 : memref<?x?xf64>
  %cols = memref.dim %m, %c1 : memref<?x?xf64>
  "adj.launch"(%rows, %cols) ({{
    func.call @k2(%a, %m, %out) : (f64, memref<?x?xf64>, memref<?x?xf64>) -> ()
    gpu.yield
  }}) {{kernel = @k2}} : (index, index) -> ()
  return
}}
"""
    rng = np.random.default_rng(3)
    g = GradCheck(text, "run", ["active", "dup", "dup"], ret="const")
    m, w = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    (da,), (dm, _), _ = g.reverse([0.4, m, np.zeros((3, 4))], [None, np.zeros((3, 4)), w])
    assert da == pytest.approx(np.sum(w * m * m) * np.cos(0.4), rel=1e-12)
    np.testing.assert_allclose(dm, 2 * m * w * np.sin(0.4), rtol=1e-12)
    g.check([0.4, m, np.zeros((3, 4))])
