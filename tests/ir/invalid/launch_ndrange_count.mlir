// --adj-lower-cpu and --adj-lower-cuda-host: a launch gives one ndrange extent per kernel dimension.
// RUN: not adjit-opt %s --adj-lower-cpu 2>&1 | FileCheck %s
// RUN: not adjit-opt %s --adj-lower-cuda-host 2>&1 | FileCheck %s

func.func @k() attributes {adj.kernel, adj.ndim = 2 : i64} {
  return
}

func.func @main(%n: index) {
  // CHECK: launch_ndrange_count.mlir:[[@LINE+1]]:3: error: adj.launch gives 1 ndrange extents to a 2-D kernel @k
  "adj.launch"(%n) ({
    func.call @k() : () -> ()
    gpu.yield
  }) {kernel = @k} : (index) -> ()
  return
}
