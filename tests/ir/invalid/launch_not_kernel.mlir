// --adj-lower-cpu and --adj-lower-cuda-host: a launch must call a func.func marked adj.kernel.
// RUN: not adjit-opt %s --adj-lower-cpu 2>&1 | FileCheck %s
// RUN: not adjit-opt %s --adj-lower-cuda-host 2>&1 | FileCheck %s

func.func @helper() {
  return
}

func.func @main(%n: index) {
  // CHECK: launch_not_kernel.mlir:[[@LINE+1]]:3: error: adj.launch of @helper, which is not a func.func marked adj.kernel
  "adj.launch"(%n) ({
    func.call @helper() : () -> ()
    gpu.yield
  }) {kernel = @helper} : (index) -> ()
  return
}
