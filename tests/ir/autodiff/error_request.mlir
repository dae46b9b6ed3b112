// A malformed request is a diagnostic at the request: an array cannot be "active" in
// reverse mode (its shadow receives the gradient: "dup").
// RUN: not adjit-opt %s --adj-autodiff 2>&1 | FileCheck %s

func.func @f(%x: memref<?xf64>) -> f64 {
  %c0 = arith.constant 0 : index
  %v = memref.load %x[%c0] : memref<?xf64>
  return %v : f64
}
// CHECK: error_request.mlir:[[@LINE+1]]:1: error: argument 0 of @f is an array (memref<?xf64>): in reverse mode it must be "dup", "dupnoneed" or "const", not "active"
"adj.autodiff"() {sym_name = "df", fn = @f, mode = "reverse", activity = ["active"], ret_activity = "active"} : () -> ()
