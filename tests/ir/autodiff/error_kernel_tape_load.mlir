// A loop whose trip count is a value the item loads is refused: its tape could not be sized.
// RUN: not adjit-opt %s --adj-autodiff 2>&1 | FileCheck %s

func.func @by_load(%x: memref<?xf64>, %counts: memref<?xindex>) attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.load %counts[%i] : memref<?xindex>
  %xi = memref.load %x[%i] : memref<?xf64>
  // CHECK: error_kernel_tape_load.mlir:[[@LINE+1]]:8: error: autodiff: a kernel's reverse pass needs values from inside this loop, whose trip count may differ between work items
  %r = scf.for %j = %c0 to %n step %c1 iter_args(%a = %xi) -> f64 {
    %t = arith.mulf %a, %a : f64
    scf.yield %t : f64
  }
  memref.store %r, %x[%i] : memref<?xf64>
  return
}
"adj.autodiff"() {sym_name = "d2", fn = @by_load, mode = "reverse", activity = ["dup", "const"], ret_activity = "const"} : () -> ()
