// --adj-lower-cpu: a launch body is exactly one func.call of the kernel, then gpu.yield.
// RUN: not adjit-opt %s --adj-lower-cpu 2>&1 | FileCheck %s

func.func @k() attributes {adj.kernel, adj.ndim = 1 : i64} {
  return
}

func.func @main(%n: index) {
  // CHECK: launch_no_call.mlir:[[@LINE+1]]:3: error: adj.launch body must be one func.call of the kernel and gpu.yield
  "adj.launch"(%n) ({
    gpu.yield
  }) {kernel = @k} : (index) -> ()
  return
}
