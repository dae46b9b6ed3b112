// A parse error is a diagnostic at its position, not a Python traceback.
// RUN: not adjit-opt %s 2>&1 | FileCheck %s --implicit-check-not=Traceback

func.func @f() {
  // CHECK: syntax.mlir:[[@LINE+1]]:7: error: expected operation name in quotes
  %i = = "adj.index"() : () -> index
  return
}
