// The IRDL verifier: a launch's ndrange extents are index values.
// RUN: not adjit-opt %s 2>&1 | FileCheck %s

func.func @k() attributes {adj.kernel, adj.ndim = 1 : i64} {
  return
}

func.func @main(%n: i64) {
  // CHECK: launch_ndrange_type.mlir:[[@LINE+1]]:3: error: expected 'index' but got 'i64'
  "adj.launch"(%n) ({
    func.call @k() : () -> ()
    gpu.yield
  }) {kernel = @k} : (i64) -> ()
  return
}
