// A call returning an array of a recursive callee is not inlined (inlining would not end),
// so reverse mode refuses the shadow of its array, at the call.
// RUN: not adjit-opt %s --adj-autodiff 2>&1 | FileCheck %s

func.func private @rep(%x: memref<?xf64>, %k: index) -> memref<?xf64> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %done = arith.cmpi eq, %k, %c0 : index
  %r = scf.if %done -> memref<?xf64> {
    scf.yield %x : memref<?xf64>
  } else {
    %k1 = arith.subi %k, %c1 : index
    %y = func.call @rep(%x, %k1) : (memref<?xf64>, index) -> memref<?xf64>
    scf.yield %y : memref<?xf64>
  }
  return %r : memref<?xf64>
}
func.func @f(%x: memref<?xf64>, %k: index) -> f64 {
  %c0 = arith.constant 0 : index
  // CHECK: error_array_call_recursive.mlir:[[@LINE+1]]:8: error: autodiff: reverse mode cannot make a shadow for an array that a call returns (such calls are inlined unless the callee is recursive
  %y = func.call @rep(%x, %k) : (memref<?xf64>, index) -> memref<?xf64>
  %v = memref.load %y[%c0] : memref<?xf64>
  return %v : f64
}
"adj.autodiff"() {sym_name = "df", fn = @f, mode = "reverse", activity = ["dup", "const"], ret_activity = "active"} : () -> ()
