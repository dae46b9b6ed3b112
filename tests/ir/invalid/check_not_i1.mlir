// The IRDL verifier: adj.check takes an i1.
// RUN: not adjit-opt %s 2>&1 | FileCheck %s

func.func @f(%x: i32) {
  // CHECK: check_not_i1.mlir:[[@LINE+1]]:3: error: expected 'i1' but got 'i32'
  "adj.check"(%x) {error = "IndexError", message = "m"} : (i32) -> ()
  return
}
