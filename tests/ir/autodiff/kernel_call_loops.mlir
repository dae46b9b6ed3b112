// A kernel calling a function that runs a loop: reverse mode inlines the call into the kernel
// first (inline_array_calls.py), so the loop's values take per-item tape slots, here
// "(trip 0 (arg 2) 1)" f64 slots (the loop runs %n times, a kernel argument), where the
// callee's own reverse pass would have kept them on an array tape a kernel cannot hold. The
// kernel's primal body is rewritten with the loop in place of the call.
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

func.func private @powers(%x: f64, %n: index) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f64
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%p = %one) -> f64 {
    %q = arith.mulf %p, %x : f64
    %s = math.sin %q : f64
    scf.yield %s : f64
  }
  return %r : f64
}
func.func private @k(%x: memref<?xf64>, %y: memref<?xf64>, %n: index)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %xi = memref.load %x[%i] : memref<?xf64>
  %v = func.call @powers(%xi, %n) : (f64, index) -> f64
  memref.store %v, %y[%i] : memref<?xf64>
  return
}
"adj.autodiff"() {sym_name = "dk", fn = @k, mode = "reverse", activity = ["dup", "dup", "const"], ret_activity = "const"} : () -> ()

// CHECK-LABEL: func.func private @k(
// CHECK-NOT: call @powers
// CHECK: scf.for
// CHECK: math.sin
// CHECK: return

// CHECK-LABEL: func.func @dk_aug(
// CHECK-SAME: adj.tape = [{holds = "f64 values per work item: argument 1 of a block of scf.for {{.*}}", per_item = "(trip 0 (arg 2) 1)", type = memref<?xf64>}]
// CHECK-NOT: call
// CHECK: scf.for
// CHECK: return

// CHECK-LABEL: func.func @dk_rev(
// CHECK-NOT: call
// CHECK: scf.for
// CHECK: math.cos
// CHECK: return
