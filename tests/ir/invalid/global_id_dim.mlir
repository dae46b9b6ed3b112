// --adj-lower-cpu: adj.global_id names a dimension of the kernel's ndrange.
// RUN: not adjit-opt %s --adj-lower-cpu 2>&1 | FileCheck %s

func.func @k() attributes {adj.kernel, adj.ndim = 1 : i64} {
  // CHECK: global_id_dim.mlir:[[@LINE+1]]:8: error: adj.global_id dim 1 is out of range for a 1-D kernel
  %g = "adj.global_id"() {dim = 1 : i64} : () -> index
  return
}
