// The augmented pass keeps the primal's effects on memory that outlives it and what the tape
// needs, and drops the rest: without with_primal, the result's computation and the local
// buffer that only fed it (the reverse pass needs neither: d(v + x)/dv = 1).
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

func.func @pf(%x: f64, %out: memref<?xf64>) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %part = memref.alloc(%c1) : memref<?xf64>
  %sq = arith.mulf %x, %x : f64
  memref.store %sq, %part[%c0] : memref<?xf64>
  %e = math.exp %x : f64
  memref.store %e, %out[%c0] : memref<?xf64>
  %v = memref.load %part[%c0] : memref<?xf64>
  %r = arith.addf %v, %x : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "nop", fn = @pf, mode = "reverse", activity = ["active", "dup"], ret_activity = "active", with_primal = false} : () -> ()
"adj.autodiff"() {sym_name = "wp", fn = @pf, mode = "reverse", activity = ["active", "dup"], ret_activity = "active", with_primal = true} : () -> ()

// CHECK-LABEL: func.func @nop_aug(
// CHECK-SAME: %[[X:[a-z0-9]+]]: f64, %[[OUT:[a-z0-9]+]]: memref<?xf64>, %{{.*}}: memref<?xf64>) attributes {adj.tape = []}
// CHECK-NOT: memref.alloc
// CHECK: %[[E:.*]] = math.exp %[[X]] : f64
// CHECK-NEXT: memref.store %[[E]], %[[OUT]][%{{.*}}] : memref<?xf64>
// CHECK-NEXT: return

// With the primal, everything stays.
// CHECK-LABEL: func.func @wp_aug(
// CHECK: memref.alloc
// CHECK: math.exp
// CHECK: %[[V:.*]] = memref.load
// CHECK: %[[R:.*]] = arith.addf %[[V]]
// CHECK: return %[[R]] : f64
