// Caching versus recomputation, and the tape layout (adj.tape on the generated functions).
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

// x[i] = x[i] * x[i], then both the old and the new value are used again. Both loads of x
// read memory that a store overwrites (this iteration's, or a later one's), so both values are
// taped (two f64 stack entries per iteration); y is never written, so the reverse pass reads
// y[i] again instead.
func.func @pinplace(%x: memref<?xf64>, %y: memref<?xf64>) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  %z = arith.constant 0.0 : f64
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> f64 {
    %v = memref.load %x[%i] : memref<?xf64>
    %w = arith.mulf %v, %v : f64
    memref.store %w, %x[%i] : memref<?xf64>
    %u = memref.load %x[%i] : memref<?xf64>
    %b = memref.load %y[%i] : memref<?xf64>
    %s = arith.mulf %u, %b : f64
    %t = arith.mulf %s, %v : f64
    %q = arith.addf %acc, %t : f64
    scf.yield %q : f64
  }
  return %r : f64
}
"adj.autodiff"() {sym_name = "inplace", fn = @pinplace, mode = "reverse", activity = ["dup", "dup"], ret_activity = "active"} : () -> ()

// CHECK-LABEL: func.func @inplace_aug(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?xf64>, %{{.*}}: memref<?xf64>, %[[Y:[a-z0-9]+]]: memref<?xf64>, %{{.*}}: memref<?xf64>) -> (memref<?xf64>, index)
// CHECK-SAME: adj.tape = [{holds = "f64 stack, per run of its block: result of memref.load at loc({{.*}}caching.mlir{{.*}}:14:10); result of memref.load at loc({{.*}}caching.mlir{{.*}}:17:10)", type = memref<?xf64>}, {holds = "f64 stack: number of values", type = index}]
// CHECK: scf.for
// CHECK: %[[V:.*]] = memref.load %[[X]]
// CHECK: %[[U:.*]] = memref.load %[[X]]
// CHECK: memref.store %[[U]], %{{.*}}[%{{.*}}] : memref<?xf64>
// CHECK: memref.store %[[V]], %{{.*}}[%{{.*}}] : memref<?xf64>
// CHECK: scf.yield

// The reverse pass pops both, reads y[i] again, accumulates into the shadows, and zeroes the
// adjoint of the overwritten element of x after reading it.
// CHECK-LABEL: func.func @inplace_rev(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?xf64>, %[[DX:[a-z0-9]+]]: memref<?xf64>, %[[Y:[a-z0-9]+]]: memref<?xf64>, %[[DY:[a-z0-9]+]]: memref<?xf64>, %[[D:[a-z0-9]+]]: f64, %[[STACK:[a-z0-9]+]]: memref<?xf64>, %{{.*}}: index)
// CHECK: scf.for
// CHECK: memref.load %[[STACK]]
// CHECK: memref.load %[[STACK]]
// CHECK: memref.load %[[Y]][%[[I:.*]]] : memref<?xf64>
// CHECK: memref.store %{{.*}}, %[[DY]][%[[I]]] : memref<?xf64>
// CHECK: memref.store %{{.*}}, %[[DX]][%[[I]]] : memref<?xf64>
// CHECK: memref.load %[[DX]][%[[I]]] : memref<?xf64>
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0.0
// CHECK-NEXT: memref.store %[[ZERO]], %[[DX]][%[[I]]] : memref<?xf64>
// CHECK: memref.store %{{.*}}, %[[DX]][%[[I]]] : memref<?xf64>
// CHECK: return

// Straight-line code: a value the reverse pass cannot recompute is a scalar tape value,
// returned by the augmented function after the primal result; what depends only on it and
// on arguments (v * x, exp of that) is recomputed rather than taped.
func.func @pscalars(%x: f64, %m: memref<?xf64>) -> f64 {
  %c0 = arith.constant 0 : index
  %v = memref.load %m[%c0] : memref<?xf64>
  %p = arith.mulf %v, %x : f64
  memref.store %p, %m[%c0] : memref<?xf64>
  %e = math.exp %p : f64
  return %e : f64
}
"adj.autodiff"() {sym_name = "scalars", fn = @pscalars, mode = "reverse", activity = ["active", "dup"], ret_activity = "active", with_primal = true} : () -> ()

// CHECK-LABEL: func.func @scalars_aug(
// CHECK-SAME: -> (f64, f64)
// CHECK-SAME: adj.tape = [{holds = "result of memref.load at {{.*}}", type = f64}]
// CHECK: %[[V:.*]] = memref.load
// CHECK: %[[E:.*]] = math.exp
// CHECK: return %[[E]], %[[V]] : f64, f64
// CHECK-LABEL: func.func @scalars_rev(
// CHECK-SAME: %[[X:[a-z0-9]+]]: f64, %{{.*}}: memref<?xf64>, %{{.*}}: memref<?xf64>, %[[D:[a-z0-9]+]]: f64, %[[V:[a-z0-9]+]]: f64) -> f64
// CHECK: %[[P:.*]] = arith.mulf %[[V]], %[[X]] : f64
// CHECK: math.exp %[[P]] : f64
