// The IRDL verifier: the attributes passes read are declared, so a missing one is a
// diagnostic at the op, not a crash in the pass.
// RUN: not adjit-opt %s 2>&1 | FileCheck %s

func.func @k() attributes {adj.kernel, adj.ndim = 1 : i64} {
  // CHECK: missing_attr.mlir:[[@LINE+1]]:8: error: 'adj.global_id' op attribute "dim" is expected but not provided
  %0 = "adj.global_id"() : () -> index
  return
}
