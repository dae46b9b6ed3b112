// Reverse mode of a loop whose body adds to the adjoint of a value from outside it at several
// sites: one accumulator per site (up to MAX_SLOTS = 4, then round robin), all loop-carried,
// summed once after the loop; a single site keeps the one accumulator it always had.
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

// Two lanes, as in an unrolled reduction: a is used in both, b in lane 0 only; out = a * sum.
func.func @plane(%a: f64, %b: f64, %x: memref<?xf64>, %n: index) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %zero = arith.constant 0.0 : f64
  %r:2 = scf.for %i = %c0 to %n step %c2 iter_args(%s0 = %zero, %s1 = %zero) -> (f64, f64) {
    %x0 = memref.load %x[%i] : memref<?xf64>
    %i1 = arith.addi %i, %c1 : index
    %x1 = memref.load %x[%i1] : memref<?xf64>
    %p0 = arith.mulf %a, %x0 : f64
    %q0 = arith.addf %p0, %b : f64
    %p1 = arith.mulf %a, %x1 : f64
    %t0 = arith.addf %s0, %q0 : f64
    %t1 = arith.addf %s1, %p1 : f64
    scf.yield %t0, %t1 : f64, f64
  }
  %sum = arith.addf %r#0, %r#1 : f64
  %out = arith.mulf %sum, %a : f64
  return %out : f64
}
"adj.autodiff"() {sym_name = "lanes", fn = @plane, mode = "reverse", activity = ["active", "active", "const", "const"], ret_activity = "active"} : () -> ()

// The loop carries the lanes' adjoints, then a's two accumulators (from zero) and b's one (from
// b's adjoint so far, here zero). Each lane adds into its own accumulator of a, reassociably
// (the running sums: LLVM vectorises the loop only if it may reorder them).
// CHECK-LABEL: func.func @lanes_rev(
// CHECK-SAME: %[[A:[a-z0-9]+]]: f64, %{{[a-z0-9]+}}: f64, %{{[a-z0-9]+}}: memref<?xf64>, %{{[a-z0-9]+}}: index, %[[D:[a-z0-9]+]]: f64, %[[SUM:[a-z0-9]+]]: f64) -> (f64, f64)
// CHECK: %[[DS:.*]] = arith.mulf %[[D]], %[[A]] : f64
// CHECK: %[[SOFAR:.*]] = arith.mulf %[[D]], %[[SUM]] : f64
// CHECK: %[[R:.*]]:5 = scf.for {{.*}} iter_args(%[[S0:[a-z0-9]+]] = %[[DS]], %[[S1:[a-z0-9]+]] = %[[DS]], %[[A0:[a-z0-9]+]] = %cst{{[_0-9]*}}, %[[A1:[a-z0-9]+]] = %cst{{[_0-9]*}}, %[[B0:[a-z0-9]+]] = %cst{{[_0-9]*}}) -> (f64, f64, f64, f64, f64)
// CHECK-DAG: %[[C1:.*]] = arith.mulf %[[S1]], %{{.*}} : f64
// CHECK-DAG: %[[C0:.*]] = arith.mulf %[[S0]], %{{.*}} : f64
// CHECK: %[[N0:.*]] = arith.addf %[[A0]], %[[C0]] fastmath<reassoc> : f64
// CHECK-NEXT: %[[N1:.*]] = arith.addf %[[A1]], %[[C1]] fastmath<reassoc> : f64
// CHECK-NEXT: %[[NB:.*]] = arith.addf %[[B0]], %[[S0]] fastmath<reassoc> : f64
// CHECK-NEXT: scf.yield %[[S0]], %[[S1]], %[[N0]], %[[N1]], %[[NB]] : f64, f64, f64, f64, f64
// After the loop: a's adjoint so far, then each accumulator; b's single one as it is.
// CHECK: %[[T:.*]] = arith.addf %[[SOFAR]], %[[R]]#2 : f64
// CHECK-NEXT: %[[DA:.*]] = arith.addf %[[T]], %[[R]]#3 : f64
// CHECK-NEXT: return %[[DA]], %[[R]]#4 : f64, f64

// Five sites of a, four accumulators: the fifth site shares the first one's, and the two
// contributions are added together before they join the loop-carried value.
func.func @pwide(%a: f64, %x: memref<?xf64>, %n: index) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f64
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %zero) -> f64 {
    %v = memref.load %x[%i] : memref<?xf64>
    %u0 = arith.mulf %a, %v : f64
    %u1 = arith.mulf %a, %u0 : f64
    %u2 = arith.mulf %a, %u1 : f64
    %u3 = arith.mulf %a, %u2 : f64
    %u4 = arith.mulf %a, %u3 : f64
    %t = arith.addf %s, %u4 : f64
    scf.yield %t : f64
  }
  return %r : f64
}
"adj.autodiff"() {sym_name = "wide", fn = @pwide, mode = "reverse", activity = ["active", "const", "const"], ret_activity = "active"} : () -> ()

// CHECK-LABEL: func.func @wide_rev(
// CHECK: %[[R:.*]]:5 = scf.for {{.*}} iter_args(%[[DT:[a-z0-9]+]] = %{{.*}}, %[[W0:[a-z0-9]+]] = %cst{{[_0-9]*}}, %[[W1:[a-z0-9]+]] = %cst{{[_0-9]*}}, %[[W2:[a-z0-9]+]] = %cst{{[_0-9]*}}, %[[W3:[a-z0-9]+]] = %cst{{[_0-9]*}}) -> (f64, f64, f64, f64, f64)
// CHECK: %[[C4:.*]] = arith.mulf %[[DT]], %{{.*}} : f64
// CHECK: %[[P0:.*]] = arith.addf %[[C4]], %{{.*}} : f64
// CHECK-NEXT: %[[N0:.*]] = arith.addf %[[W0]], %[[P0]] fastmath<reassoc> : f64
// CHECK-NEXT: %[[N1:.*]] = arith.addf %[[W1]], %{{.*}} fastmath<reassoc> : f64
// CHECK-NEXT: %[[N2:.*]] = arith.addf %[[W2]], %{{.*}} fastmath<reassoc> : f64
// CHECK-NEXT: %[[N3:.*]] = arith.addf %[[W3]], %{{.*}} fastmath<reassoc> : f64
// CHECK-NEXT: scf.yield %[[DT]], %[[N0]], %[[N1]], %[[N2]], %[[N3]] : f64, f64, f64, f64, f64
// CHECK: %[[T1:.*]] = arith.addf %[[R]]#1, %[[R]]#2 : f64
// CHECK-NEXT: %[[T2:.*]] = arith.addf %[[T1]], %[[R]]#3 : f64
// CHECK-NEXT: %[[T3:.*]] = arith.addf %[[T2]], %[[R]]#4 : f64
// CHECK-NEXT: return %[[T3]] : f64
