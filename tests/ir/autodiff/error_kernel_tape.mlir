// A kernel's per-item tape must have the same size for every item: values needed from a loop
// whose trip count depends on the work item (its index, or a value it loads) are refused, at
// the loop (loops over the kernel's arguments are taped: kernel_runtime_loops.mlir).
// RUN: not adjit-opt %s --adj-autodiff 2>&1 | FileCheck %s

func.func @by_index(%x: memref<?xf64>, %m: index) attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.addi %m, %i : index
  %xi = memref.load %x[%i] : memref<?xf64>
  // CHECK: error_kernel_tape.mlir:[[@LINE+1]]:8: error: autodiff: a kernel's reverse pass needs values from inside this loop, whose trip count may differ between work items (it depends on the item's index or on values it loads): every item's tape has the same size; loop to a count the kernel's arguments give (skipping extra steps with an `if`), differentiate in forward mode, or give the function a custom rule (adjit.rules)
  %r = scf.for %j = %c0 to %n step %c1 iter_args(%a = %xi) -> f64 {
    %t = arith.mulf %a, %a : f64
    scf.yield %t : f64
  }
  memref.store %r, %x[%i] : memref<?xf64>
  return
}
"adj.autodiff"() {sym_name = "d1", fn = @by_index, mode = "reverse", activity = ["dup", "const"], ret_activity = "const"} : () -> ()
