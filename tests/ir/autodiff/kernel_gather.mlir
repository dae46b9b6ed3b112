// The reverse of a 5-point stencil behind border guards, in gather form (gather.py): the
// item of element [e0, e1] of du visits the items e - c that read it, for each offset c of
// u's loads, evaluates their partials there under the same guard, and adds the sum into
// du[e0, e1] with one load/add/store: no atomics. The reverse kernel then runs without the
// gathered adds: it zeroes dv[i, j] after reading it, which the gather launch cannot do
// (other items read dv[i, j] there).
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

func.func private @heat(%u: memref<?x?xf32>, %v: memref<?x?xf32>)
    attributes {adj.kernel, adj.ndim = 2 : i64} {
  %i = "adj.global_id"() {dim = 0 : i64} : () -> index
  %j = "adj.global_id"() {dim = 1 : i64} : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %u, %c0 : memref<?x?xf32>
  %m = memref.dim %u, %c1 : memref<?x?xf32>
  %n1 = arith.subi %n, %c1 : index
  %m1 = arith.subi %m, %c1 : index
  %a = arith.cmpi ugt, %i, %c0 : index
  %b = arith.cmpi ult, %i, %n1 : index
  %c = arith.cmpi ugt, %j, %c0 : index
  %d = arith.cmpi ult, %j, %m1 : index
  %ab = arith.andi %a, %b : i1
  %cd = arith.andi %c, %d : i1
  %inside = arith.andi %ab, %cd : i1
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

// The reverse kernel: it reads dv[i, j] and zeroes it; no atomic is left on du.
// CHECK-LABEL: func.func private @__adj_heat_rev_dd_c_rev(
// CHECK-SAME: %{{[a-z0-9]+}}: memref<?x?xf32>, %[[DU:[a-z0-9]+]]: memref<?x?xf32>, %{{[a-z0-9]+}}: memref<?x?xf32>, %[[DV:[a-z0-9]+]]: memref<?x?xf32>
// CHECK-NOT: memref.atomic_rmw
// CHECK: memref.load %[[DV]]
// CHECK-NOT: memref.atomic_rmw
// CHECK: memref.store %{{.*}}, %[[DV]]
// CHECK-NOT: memref.atomic_rmw
// CHECK: return

// The gather kernel: the reverse kernel's parameters, then the ndrange's extents; an
// accumulator, then per offset (the centre, then the four neighbours, in load order) the
// item t = e - c, checked inside the ndrange, and the partial added into the accumulator.
// CHECK-LABEL: func.func private @__adj_heat_rev_dd_c_gather0(
// CHECK-SAME: %{{[a-z0-9]+}}: memref<?x?xf32>, %[[DU:[a-z0-9]+]]: memref<?x?xf32>, %{{[a-z0-9]+}}: memref<?x?xf32>, %[[DV:[a-z0-9]+]]: memref<?x?xf32>, %[[N0:[a-z0-9]+]]: index, %[[N1:[a-z0-9]+]]: index)
// CHECK-SAME: attributes {adj.kernel, adj.ndim = 2 : i64}
// CHECK-NOT: memref.atomic_rmw
// CHECK: %[[E0:.*]] = "adj.global_id"() {dim = 0 : i64}
// CHECK: %[[E1:.*]] = "adj.global_id"() {dim = 1 : i64}
// CHECK: %[[ACC:.*]] = memref.alloca() : memref<f32>
// CHECK: arith.cmpi slt, %[[E0]], %[[N0]] : index
// CHECK: arith.cmpi slt, %[[E1]], %[[N1]] : index
// CHECK: scf.if
// CHECK: memref.load %[[DV]]
// CHECK: memref.store %{{.*}}, %[[ACC]][] : memref<f32>
// Item (e0 + 1, e1) read u at its (i - 1, j): offset -1 of dimension 0, t0 = e0 - (-1).
// CHECK: %[[T0:.*]] = arith.subi %[[E0]], %c-1 : index
// CHECK: arith.cmpi sge, %[[T0]], %{{.*}} : index
// CHECK: arith.cmpi slt, %[[T0]], %[[N0]] : index
// CHECK: scf.if
// CHECK: memref.store %{{.*}}, %[[ACC]][] : memref<f32>
// CHECK: arith.subi %[[E0]], %c1 : index
// CHECK: memref.store %{{.*}}, %[[ACC]][] : memref<f32>
// CHECK: arith.subi %[[E1]], %c-1{{.*}} : index
// CHECK: memref.store %{{.*}}, %[[ACC]][] : memref<f32>
// CHECK: arith.subi %[[E1]], %c1{{.*}} : index
// CHECK: memref.store %{{.*}}, %[[ACC]][] : memref<f32>
// CHECK-NOT: memref.atomic_rmw
// CHECK-NOT: memref.store %{{.*}}, %[[DV]]
// CHECK: %[[OLD:.*]] = memref.load %[[DU]][%[[E0]], %[[E1]]]
// CHECK: %[[SUM:.*]] = memref.load %[[ACC]][]
// CHECK: %[[NEW:.*]] = arith.addf %[[OLD]], %[[SUM]] : f32
// CHECK: memref.store %[[NEW]], %[[DU]][%[[E0]], %[[E1]]]
// CHECK-NEXT: return

// The launch rule: the gather kernel over u's shape with the ndrange passed on, then the
// reverse kernel over the ndrange.
// CHECK-LABEL: func.func @grad_rev(
// CHECK-SAME: %[[U:[a-z0-9]+]]: memref<?x?xf32>
// CHECK: arith.muli
// CHECK: %[[S0:.*]] = memref.dim %[[U]], %c0{{.*}} : memref<?x?xf32>
// CHECK: %[[S1:.*]] = memref.dim %[[U]], %c1{{.*}} : memref<?x?xf32>
// CHECK-NEXT: "adj.launch"(%[[S0]], %[[S1]]) ({
// CHECK-NEXT: func.call @__adj_heat_rev_dd_c_gather0({{.*}}, %[[N0:.*]], %[[N1:.*]]) :
// CHECK: "adj.sync"
// CHECK-NEXT: "adj.launch"(%[[N0]], %[[N1]]) ({
// CHECK-NEXT: func.call @__adj_heat_rev_dd_c_rev(
// CHECK: "adj.sync"
