// A kernel with a loop whose runs differ between items is run twice in reverse mode (to size
// each item's tape, then to fill it: dynamic_tape.py). Where the number of runs depends on an
// array the kernel writes, the two passes could disagree: refused at the load it depends on.
// RUN: not adjit-opt %s --adj-autodiff 2>&1 | FileCheck %s

func.func @while(%x: memref<?xf64>) attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  // CHECK: error_kernel_dynamic_written.mlir:[[@LINE+1]]:9: error: autodiff: how many times a loop of this kernel runs depends on this value, which the kernel itself changes, and a kernel whose loops run a different number of times per work item is run twice (to size each item's tape, then to fill it): read the loop's bounds from an array the kernel does not write, or differentiate in forward mode
  %xi = memref.load %x[%i] : memref<?xf64>
  %one = arith.constant 1.0 : f64
  %r = scf.while (%a = %xi) : (f64) -> f64 {
    %c = arith.cmpf olt, %a, %one : f64
    scf.condition(%c) %a : f64
  } do {
  ^bb0(%b: f64):
    %t = arith.mulf %b, %b : f64
    scf.yield %t : f64
  }
  memref.store %r, %x[%i] : memref<?xf64>
  return
}
"adj.autodiff"() {sym_name = "d4", fn = @while, mode = "reverse", activity = ["dup"], ret_activity = "const"} : () -> ()
