// A call returning an array whose shadow reverse mode needs is refused, at the call, when it
// cannot be inlined: here its callee has custom rules, which must keep firing at the call.
// RUN: not adjit-opt %s --adj-autodiff 2>&1 | FileCheck %s

func.func private @copy(%x: memref<?xf64>) -> memref<?xf64> {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  %y = memref.alloc(%n) : memref<?xf64>
  memref.copy %x, %y : memref<?xf64> to memref<?xf64>
  return %y : memref<?xf64>
}
func.func private @copy_aug(%x: memref<?xf64>, %dx: memref<?xf64>) -> memref<?xf64>
    attributes {adj.rule_for = @copy, adj.rule_kind = "augmented"} {
  %y = func.call @copy(%x) : (memref<?xf64>) -> memref<?xf64>
  return %y : memref<?xf64>
}
func.func private @copy_rev(%x: memref<?xf64>, %dx: memref<?xf64>)
    attributes {adj.rule_for = @copy, adj.rule_kind = "reverse"} {
  return
}
func.func @f(%x: memref<?xf64>) -> f64 {
  %c0 = arith.constant 0 : index
  // CHECK: error_array_call.mlir:[[@LINE+1]]:8: error: autodiff: reverse mode cannot make a shadow for an array that a call returns (such calls are inlined unless the callee is recursive, has custom rules or has several blocks)
  %y = func.call @copy(%x) : (memref<?xf64>) -> memref<?xf64>
  %v = memref.load %y[%c0] : memref<?xf64>
  return %v : f64
}
"adj.autodiff"() {sym_name = "df", fn = @f, mode = "reverse", activity = ["dup"], ret_activity = "active"} : () -> ()
