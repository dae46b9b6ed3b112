// Batched tangents (`width` N > 1, Enzyme's BatchDuplicated): one pass over the primal
// carries N tangents, the lanes: N scalars per float, N shadow arrays per array. Each table
// op's tangent is the width-1 rule once per lane (CSE merges the partial the lanes share);
// scalars rather than vector values, so that LLVM vectorises a kernel's item loop as at
// width 1.
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s
// RUN: adjit-opt %s --pass-pipeline="builtin.module(adj-autodiff,cse)" | FileCheck %s --check-prefix=CSE

// N scalar tangents in, one rule per lane, N out.
// CHECK-LABEL: func.func @sin_w3(
// CHECK-SAME: %[[X:[^:]*]]: f64, %[[D0:[^:]*]]: f64, %[[D1:[^:]*]]: f64, %[[D2:[^:]*]]: f64) -> (f64, f64, f64)
// CHECK: %[[T0:.*]] = arith.mulf %[[D0]], %{{.*}} : f64
// CHECK: %[[G0:.*]] = arith.select %{{.*}}, %{{.*}}, %[[T0]] : f64
// CHECK: %[[T1:.*]] = arith.mulf %[[D1]], %{{.*}} : f64
// CHECK: %[[G1:.*]] = arith.select %{{.*}}, %{{.*}}, %[[T1]] : f64
// CHECK: %[[T2:.*]] = arith.mulf %[[D2]], %{{.*}} : f64
// CHECK: %[[G2:.*]] = arith.select %{{.*}}, %{{.*}}, %[[T2]] : f64
// CHECK: return %[[G0]], %[[G1]], %[[G2]] : f64, f64, f64
// After CSE the lanes share one cos(x).
// CSE-LABEL: func.func @sin_w3(
// CSE-COUNT-1: math.cos
// CSE-NOT: math.cos
// CSE: return
func.func @psin(%x: f64) -> f64 {
  %r = math.sin %x : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "sin_w3", fn = @psin, mode = "forward", activity = ["dup"], ret_activity = "dup", width = 3 : i64} : () -> ()

// Arrays: each argument is followed by its N shadows; a load reads every lane's shadow, a
// store writes every lane's; a loop carries N tangents; a call goes to the callee's
// derivative of the same width.
// CHECK-LABEL: func.func @axpy_w2(
// CHECK-SAME: %[[A:[^:]*]]: f64, %[[DA0:[^:]*]]: f64, %[[DA1:[^:]*]]: f64, %[[X:[^:]*]]: memref<?xf64>, %[[DX0:[^:]*]]: memref<?xf64>, %[[DX1:[^:]*]]: memref<?xf64>, %[[Y:[^:]*]]: memref<?xf64>, %[[DY0:[^:]*]]: memref<?xf64>, %[[DY1:[^:]*]]: memref<?xf64>, %{{.*}}: index) -> (f64, f64)
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (f64, f64, f64)
// CHECK: %[[V:.*]] = memref.load %[[X]]
// CHECK: %[[T0:.*]] = memref.load %[[DX0]]
// CHECK: %[[T1:.*]] = memref.load %[[DX1]]
// CHECK: arith.mulf %[[DA0]], %[[V]] : f64
// CHECK: arith.mulf %[[DA1]], %[[V]] : f64
// CHECK: arith.mulf %[[T0]], %[[A]] : f64
// CHECK: arith.mulf %[[T1]], %[[A]] : f64
// CHECK: %[[E:.*]] = math.exp
// CHECK: %[[S0:.*]] = arith.select
// CHECK: %[[S1:.*]] = arith.select
// CHECK: memref.store %[[E]], %[[Y]]
// CHECK: memref.store %[[S0]], %[[DY0]]
// CHECK: memref.store %[[S1]], %[[DY1]]
// CHECK: scf.yield %{{.*}}, %{{.*}}, %{{.*}} : f64, f64, f64
// CHECK: call @__adj_psin_fwd_d_dp_w2(%{{.*}}, %{{.*}}, %{{.*}}) : (f64, f64, f64) -> (f64, f64, f64)
func.func @axpy(%a: f64, %x: memref<?xf64>, %y: memref<?xf64>, %n: index) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f64
  %s = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> f64 {
    %v = memref.load %x[%i] : memref<?xf64>
    %w = arith.mulf %a, %v : f64
    %e = math.exp %w : f64
    memref.store %e, %y[%i] : memref<?xf64>
    %t = arith.addf %acc, %e : f64
    scf.yield %t : f64
  }
  %q = func.call @psin(%s) : (f64) -> f64
  return %q : f64
}
"adj.autodiff"() {sym_name = "axpy_w2", fn = @axpy, mode = "forward", activity = ["dup", "dup", "dup", "const"], ret_activity = "dup", width = 2 : i64} : () -> ()
// CHECK-LABEL: func.func private @__adj_psin_fwd_d_dp_w2(
// CHECK-SAME: -> (f64, f64, f64)

// A custom forward rule declares its width (adj.rule_width): it replaces the automatic
// derivative at that width only; at width 1 the body is differentiated.
// CHECK-LABEL: func.func @uses_rule_w2(
// CHECK: call @square_fwd_w2(
// CHECK-LABEL: func.func @uses_rule_w1(
// CHECK-NOT: call @square_fwd_w2
// CHECK: return
func.func private @square(%x: f64) -> f64 {
  %r = arith.mulf %x, %x : f64
  return %r : f64
}
func.func private @square_fwd_w2(%x: f64, %d0: f64, %d1: f64) -> (f64, f64, f64)
    attributes {adj.rule_for = @square, adj.rule_kind = "forward", adj.rule_width = 2 : i64} {
  %r = arith.mulf %x, %x : f64
  %two = arith.constant 2.0 : f64
  %t = arith.mulf %two, %x : f64
  %a = arith.mulf %t, %d0 : f64
  %b = arith.mulf %t, %d1 : f64
  return %r, %a, %b : f64, f64, f64
}
func.func @g(%x: f64) -> f64 {
  %s = func.call @square(%x) : (f64) -> f64
  return %s : f64
}
"adj.autodiff"() {sym_name = "uses_rule_w2", fn = @g, mode = "forward", activity = ["dup"], ret_activity = "dup", width = 2 : i64} : () -> ()
"adj.autodiff"() {sym_name = "uses_rule_w1", fn = @g, mode = "forward", activity = ["dup"], ret_activity = "dup"} : () -> ()
