// A kernel's per-item tape has a fixed size: values needed from a loop whose trip count is
// only known at run time are refused, at the loop.
// RUN: not adjit-opt %s --adj-autodiff 2>&1 | FileCheck %s

func.func @k(%x: memref<?xf64>, %n: index) attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %xi = memref.load %x[%i] : memref<?xf64>
  // CHECK: error_kernel_tape.mlir:[[@LINE+1]]:8: error: autodiff: a kernel's reverse pass needs values from inside this loop, whose trip count is not a constant
  %r = scf.for %j = %c0 to %n step %c1 iter_args(%a = %xi) -> f64 {
    %t = arith.mulf %a, %a : f64
    scf.yield %t : f64
  }
  memref.store %r, %x[%i] : memref<?xf64>
  return
}
"adj.autodiff"() {sym_name = "dk", fn = @k, mode = "reverse", activity = ["dup", "const"], ret_activity = "const"} : () -> ()
