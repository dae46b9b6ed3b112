// A stencil's border guard as the frontend writes `0 < i < n - 1 and 0 < j < m - 1`: the
// short-circuit `and` is an scf.if yielding an i1. Its branches are pure arithmetic on the
// item's ids and the array's sizes, so the reverse kernel recomputes it instead of reading
// it from a per-item i1 tape: the heat step, linear, saves nothing at all (issue 9 item 4,
// bench G2 256^2 x 50: 26.3 float32 states of gradient memory before, 6.0 after).
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

func.func private @heat(%u: memref<?x?xf32>, %v: memref<?x?xf32>)
    attributes {adj.kernel, adj.ndim = 2 : i64} {
  %i = "adj.global_id"() {dim = 0 : i64} : () -> index
  %i64 = arith.index_cast %i : index to i64
  %j = "adj.global_id"() {dim = 1 : i64} : () -> index
  %j64 = arith.index_cast %j : index to i64
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %u, %c0 : memref<?x?xf32>
  %m = memref.dim %u, %c1 : memref<?x?xf32>
  %n64 = arith.index_cast %n : index to i64
  %m64 = arith.index_cast %m : index to i64
  %z = arith.constant 0 : i64
  %one = arith.constant 1 : i64
  %a = arith.cmpi slt, %z, %i64 : i64
  %n1 = arith.subi %n64, %one : i64
  %b = arith.cmpi slt, %i64, %n1 : i64
  %ab = arith.andi %a, %b : i1
  %inside = scf.if %ab -> (i1) {
    %c = arith.cmpi slt, %z, %j64 : i64
    %m1 = arith.subi %m64, %one : i64
    %d = arith.cmpi slt, %j64, %m1 : i64
    %cd = arith.andi %c, %d : i1
    scf.yield %cd : i1
  } else {
    scf.yield %ab : i1
  }
  scf.if %inside {
    %im = arith.subi %i, %c1 : index
    %ip = arith.addi %i, %c1 : index
    %jm = arith.subi %j, %c1 : index
    %jp = arith.addi %j, %c1 : index
    %uc = memref.load %u[%i, %j] : memref<?x?xf32>
    %un = memref.load %u[%im, %j] : memref<?x?xf32>
    %us = memref.load %u[%ip, %j] : memref<?x?xf32>
    %uw = memref.load %u[%i, %jm] : memref<?x?xf32>
    %ue = memref.load %u[%i, %jp] : memref<?x?xf32>
    %s1 = arith.addf %un, %us : f32
    %s2 = arith.addf %s1, %uw : f32
    %s3 = arith.addf %s2, %ue : f32
    %k4 = arith.constant 4.0 : f32
    %c4 = arith.mulf %k4, %uc : f32
    %lap = arith.subf %s3, %c4 : f32
    %kd = arith.constant 0.1 : f32
    %dl = arith.mulf %kd, %lap : f32
    %r = arith.addf %uc, %dl : f32
    memref.store %r, %v[%i, %j] : memref<?x?xf32>
  } else {
    %uc = memref.load %u[%i, %j] : memref<?x?xf32>
    memref.store %uc, %v[%i, %j] : memref<?x?xf32>
  }
  return
}
func.func @step(%u: memref<?x?xf32>, %v: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %u, %c0 : memref<?x?xf32>
  %m = memref.dim %u, %c1 : memref<?x?xf32>
  "adj.launch"(%n, %m) ({
    func.call @heat(%u, %v) : (memref<?x?xf32>, memref<?x?xf32>) -> ()
    gpu.yield
  }) {kernel = @heat} : (index, index) -> ()
  return
}
"adj.autodiff"() {sym_name = "grad", fn = @step, mode = "reverse", activity = ["dup", "dup"], ret_activity = "const"} : () -> ()

// The augmented kernel takes the primal and shadow arrays only: no tape parameter, an
// empty tape.
// CHECK-LABEL: func.func private @__adj_heat_rev_dd_c_aug(
// CHECK-SAME: %{{[a-z0-9]+}}: memref<?x?xf32>, %{{[a-z0-9]+}}: memref<?x?xf32>, %{{[a-z0-9]+}}: memref<?x?xf32>, %{{[a-z0-9]+}}: memref<?x?xf32>)
// CHECK-SAME: attributes {adj.kernel, adj.ndim = 2 : i64, adj.tape = []}
// CHECK-NOT: memref<?xi1>
// CHECK: return

// The reverse kernel recomputes the guard from its own ids and sizes: an scf.if yielding
// the i1 again, then the branch on it.
// CHECK-LABEL: func.func private @__adj_heat_rev_dd_c_rev(
// CHECK-SAME: %{{[a-z0-9]+}}: memref<?x?xf32>, %{{[a-z0-9]+}}: memref<?x?xf32>, %{{[a-z0-9]+}}: memref<?x?xf32>, %{{[a-z0-9]+}}: memref<?x?xf32>)
// CHECK-SAME: adj.tape = []
// CHECK-NOT: memref<?xi1>
// CHECK: "adj.global_id"() {dim = 1 : i64}
// CHECK: %[[G:.*]] = scf.if %{{.*}} -> (i1)
// CHECK-NEXT: arith.cmpi slt
// CHECK: scf.yield
// CHECK: scf.if %[[G]]
// CHECK-NOT: memref<?xi1>
// CHECK: return

// The function's augmented half allocates no per-item tape for the launch.
// CHECK-LABEL: func.func @grad_aug(
// CHECK-SAME: attributes {adj.tape = []}
// CHECK-NOT: memref.alloc
// CHECK: "adj.launch"
