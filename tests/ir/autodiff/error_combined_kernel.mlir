// A combined request (aug then rev in one function) is refused for a kernel: a kernel's
// derivative is launched over the items, with per-item tapes the caller allocates.
// RUN: not adjit-opt %s --adj-autodiff 2>&1 | FileCheck %s

func.func @k(%x: memref<?xf64>) attributes {adj.kernel, adj.ndim = 1 : i64} {
  return
}
// CHECK: error_combined_kernel.mlir:[[@LINE+1]]:1: error: a combined request is of reverse mode, for a function that is not a kernel
"adj.autodiff"() {sym_name = "dk", fn = @k, mode = "reverse", activity = ["dup"], ret_activity = "const", combined} : () -> ()
