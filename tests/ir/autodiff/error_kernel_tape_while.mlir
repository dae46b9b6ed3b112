// Values from inside an scf.while are refused in a kernel: its iteration count varies.
// RUN: not adjit-opt %s --adj-autodiff 2>&1 | FileCheck %s

func.func @while(%x: memref<?xf64>) attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %xi = memref.load %x[%i] : memref<?xf64>
  %one = arith.constant 1.0 : f64
  // CHECK: error_kernel_tape_while.mlir:[[@LINE+1]]:8: error: autodiff: a kernel's reverse pass needs values from inside this loop (a `while`, or a `for` with `break`), whose number of iterations may differ between work items, and a kernel's per-item tape has the same size for every item: differentiate the kernel in forward mode, or give the function with the loop a custom rule (adjit.rules)
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
