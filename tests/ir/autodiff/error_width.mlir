// Batched tangents are of forward mode: a reverse request of width > 1 is a diagnostic at
// the request.
// RUN: not adjit-opt %s --adj-autodiff 2>&1 | FileCheck %s

func.func @f(%x: f64) -> f64 {
  %r = arith.mulf %x, %x : f64
  return %r : f64
}
// CHECK: error_width.mlir:[[@LINE+1]]:1: error: autodiff width must be 1, or more in forward mode (batched tangents); got 4 in reverse mode
"adj.autodiff"() {sym_name = "df", fn = @f, mode = "reverse", activity = ["active"], ret_activity = "active", width = 4 : i64} : () -> ()
