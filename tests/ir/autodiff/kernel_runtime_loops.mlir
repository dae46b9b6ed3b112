// Kernels whose loops around taped values run a number of times known only at launch: each
// item's tape size (per_item) is an expression of the kernel's arguments, written in the
// adj.tape attribute as an s-expression (passes/autodiff/analysis/uniform.py); the kernels compute
// their slots from it, and the launch rule computes it from the launch's operands to size the
// tapes. Sizes with constant loop bounds stay integers (kernels.mlir).
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

// Symplectic Euler over `steps` time steps: each step tapes p (sin's argument) and q (dt's
// adjoint reads dt * q's q): 2 slots per step.
func.func private @integrate(%x: memref<?xf64>, %v: memref<?xf64>, %steps: i64, %dt: f64)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p0 = memref.load %x[%i] : memref<?xf64>
  %q0 = memref.load %v[%i] : memref<?xf64>
  %n = arith.index_cast %steps : i64 to index
  %r:2 = scf.for %j = %c0 to %n step %c1 iter_args(%p = %p0, %q = %q0) -> (f64, f64) {
    %s = math.sin %p : f64
    %ds = arith.mulf %dt, %s : f64
    %q1 = arith.subf %q, %ds : f64
    %dq = arith.mulf %dt, %q1 : f64
    %p1 = arith.addf %p, %dq : f64
    scf.yield %p1, %q1 : f64, f64
  }
  memref.store %r#0, %x[%i] : memref<?xf64>
  memref.store %r#1, %v[%i] : memref<?xf64>
  return
}
func.func @run(%x: memref<?xf64>, %v: memref<?xf64>, %steps: i64, %dt: f64) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  "adj.launch"(%n) ({
    func.call @integrate(%x, %v, %steps, %dt) : (memref<?xf64>, memref<?xf64>, i64, f64) -> ()
    gpu.yield
  }) {kernel = @integrate} : (index) -> ()
  return
}
"adj.autodiff"() {sym_name = "grad", fn = @run, mode = "reverse", activity = ["dup", "dup", "const", "active"], ret_activity = "const"} : () -> ()

// The augmented kernel: per_item says 2 * trip count; the slot of the k-th step's value of
// the key at base b is item * per_item + b + k, per_item computed once at entry.
// CHECK-LABEL: func.func private @__adj_integrate_rev_ddca_c_aug(
// CHECK-SAME: %[[STEPS:[a-z0-9]+]]: i64, %{{.*}}: f64, %[[T:[a-z0-9]+]]: memref<?xf64, strided<[1], offset: ?>>)
// CHECK-SAME: adj.tape = [{holds = "f64 values per work item: result of arith.subf {{.*}}; argument 1 of a block of scf.for {{.*}}", per_item = "(muli 2 (trip 0 (arg 2) 1))", type = memref<?xf64, strided<[1], offset: ?>>}]
// CHECK: %[[ITEM:.*]] = "adj.index"()
// CHECK: arith.index_cast %[[STEPS]] : i64 to index
// CHECK: %[[PER:.*]] = arith.muli
// CHECK: scf.for %[[J:[a-z0-9]+]] =
// CHECK: %[[Q1:.*]] = arith.subf
// CHECK: arith.subi %[[J]]
// CHECK: %[[AT0:.*]] = arith.muli %[[ITEM]], %[[PER]] : index
// CHECK: %[[AT:.*]] = arith.addi %[[AT0]], %{{.*}} : index
// CHECK: memref.store %[[Q1]], %[[T]][%[[AT]]] : memref<?xf64, strided<[1], offset: ?>>
// CHECK: memref.store %{{.*}}, %[[T]][%{{.*}}] : memref<?xf64, strided<[1], offset: ?>>
// CHECK: scf.yield

// The reverse kernel reads its item's slots back, computing per_item from its own %steps.
// CHECK-LABEL: func.func private @__adj_integrate_rev_ddca_c_rev(
// CHECK-SAME: per_item = "(muli 2 (trip 0 (arg 2) 1))"
// CHECK: scf.for
// CHECK: memref.load %{{.*}}[%{{.*}}] : memref<?xf64, strided<[1], offset: ?>>
// CHECK: memref.load %{{.*}}[%{{.*}}] : memref<?xf64, strided<[1], offset: ?>>

// The launch rule sizes the tape from the launch's %steps: items * 2 * max(0, ceil((steps - 0) / 1)).
// CHECK-LABEL: func.func @grad_aug(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?xf64>, %{{.*}}: memref<?xf64>, %{{.*}}: memref<?xf64>, %{{.*}}: memref<?xf64>, %[[STEPS:[a-z0-9]+]]: i64, %{{.*}}: f64)
// CHECK: %[[DIM:.*]] = memref.dim %[[X]]
// CHECK: %[[ITEMS:.*]] = arith.muli %{{.*}}, %[[DIM]] : index
// CHECK: %[[N:.*]] = arith.index_cast %[[STEPS]] : i64 to index
// CHECK: %[[SPAN:.*]] = arith.subi %[[N]], %{{.*}} : index
// CHECK: %[[DIV:.*]] = arith.ceildivsi %[[SPAN]], %{{.*}} : index
// CHECK: %[[TRIP:.*]] = arith.maxsi %[[DIV]], %{{.*}} : index
// CHECK: %[[PER:.*]] = arith.muli %{{.*}}, %[[TRIP]] : index
// CHECK: %[[SIZE:.*]] = arith.muli %[[ITEMS]], %[[PER]] : index
// CHECK: %[[BUF:.*]] = memref.alloc(%[[SIZE]]) : memref<?xf64>
// CHECK: %[[TAPE:.*]] = memref.cast %[[BUF]]
// CHECK: "adj.launch"
// CHECK: func.call @__adj_integrate_rev_ddca_c_aug(%{{.*}}, %[[TAPE]])

// Nested loops multiply their trip counts; a key of the outer body only takes the outer's.
// The inner loop's trip count comes from an array's size (dim 1 0: size 0 of argument 1).
func.func @nested(%x: memref<?xf64>, %w: memref<?xf64>, %outer: i32)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %xi = memref.load %x[%i] : memref<?xf64>
  %no = arith.index_cast %outer : i32 to index
  %ni = memref.dim %w, %c0 : memref<?xf64>
  %r = scf.for %j = %c1 to %no step %c2 iter_args(%a = %xi) -> f64 {
    %s = scf.for %k = %c0 to %ni step %c1 iter_args(%b = %a) -> f64 {
      %t = math.sin %b : f64
      scf.yield %t : f64
    }
    %u = arith.mulf %s, %s : f64
    scf.yield %u : f64
  }
  memref.store %r, %x[%i] : memref<?xf64>
  return
}
"adj.autodiff"() {sym_name = "dnested", fn = @nested, mode = "reverse", activity = ["dup", "const", "const"], ret_activity = "const"} : () -> ()

// CHECK-LABEL: func.func @dnested_aug(
// CHECK-SAME: per_item = "(addi (trip 1 (arg 2) 2) (muli (trip 1 (arg 2) 2) (trip 0 (dim 1 0) 1)))"
// CHECK: memref.dim %arg2, %{{.*}} : memref<?xf64>
// CHECK: arith.ceildivsi

// A kernel with constant loop bounds keeps an integer per_item (kernels.mlir).
