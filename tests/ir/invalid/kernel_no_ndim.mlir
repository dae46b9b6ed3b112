// RUN: not adjit-opt %s --adj-lower-cpu 2>&1 | FileCheck %s

// CHECK: kernel_no_ndim.mlir:[[@LINE+1]]:1: error: a kernel needs an integer attribute adj.ndim
func.func @k() attributes {adj.kernel} {
  return
}
