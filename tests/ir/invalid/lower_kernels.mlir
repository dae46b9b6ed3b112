// What --adj-lower-cpu refuses in kernels: a diagnostic at the op. One case per part
// (--split-input-file).
// RUN: adjit-opt %s --split-input-file --verify-diagnostics --adj-lower-cpu

// adj.global_id names a dimension of the kernel's ndrange.
func.func @k() attributes {adj.kernel, adj.ndim = 1 : i64} {
  // expected-error @+1 {{adj.global_id dim 1 is out of range for a 1-D kernel}}
  %g = "adj.global_id"() {dim = 1 : i64} : () -> index
  return
}

// -----

// expected-error @+1 {{a kernel needs an integer attribute adj.ndim}}
func.func @k() attributes {adj.kernel} {
  return
}
