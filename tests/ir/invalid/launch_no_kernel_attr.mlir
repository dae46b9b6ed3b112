// RUN: not adjit-opt %s 2>&1 | FileCheck %s

func.func @f(%n: index) {
  // CHECK: launch_no_kernel_attr.mlir:[[@LINE+1]]:3: error: 'adj.launch' op attribute "kernel" is expected but not provided
  "adj.launch"(%n) ({
    gpu.yield
  }) : (index) -> ()
  return
}
