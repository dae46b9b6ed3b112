// A loop over a kernel argument nested in an item-dependent loop is refused at the outer
// loop: the slots of the inner one would still differ between items.
// RUN: not adjit-opt %s --adj-autodiff 2>&1 | FileCheck %s

func.func @nested(%x: memref<?xf64>, %m: index) attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %xi = memref.load %x[%i] : memref<?xf64>
  // CHECK: error_kernel_tape_nested.mlir:[[@LINE+1]]:8: error: autodiff: a kernel's reverse pass needs values from inside this loop, whose trip count may differ between work items
  %r = scf.for %j = %c0 to %i step %c1 iter_args(%a = %xi) -> f64 {
    %s = scf.for %k = %c0 to %m step %c1 iter_args(%b = %a) -> f64 {
      %t = arith.mulf %b, %b : f64
      scf.yield %t : f64
    }
    scf.yield %s : f64
  }
  memref.store %r, %x[%i] : memref<?xf64>
  return
}
"adj.autodiff"() {sym_name = "d3", fn = @nested, mode = "reverse", activity = ["dup", "const"], ret_activity = "const"} : () -> ()
