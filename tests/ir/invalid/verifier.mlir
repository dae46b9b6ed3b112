// What the IRDL verifier and the parser refuse: a diagnostic at the op, not a crash in a
// pass or a Python traceback. One case per part (--split-input-file).
// RUN: adjit-opt %s --split-input-file --verify-diagnostics

// adj.check takes an i1.
func.func @f(%x: i32) {
  // expected-error @+1 {{expected 'i1' but got 'i32'}}
  "adj.check"(%x) {error = "IndexError", message = "m"} : (i32) -> ()
  return
}

// -----

// A launch's ndrange extents are index values.
func.func @k() attributes {adj.kernel, adj.ndim = 1 : i64} {
  return
}

func.func @main(%n: i64) {
  // expected-error @+1 {{expected 'index' but got 'i64'}}
  "adj.launch"(%n) ({
    func.call @k() : () -> ()
    gpu.yield
  }) {kernel = @k} : (i64) -> ()
  return
}

// -----

// A launch names its kernel.
func.func @f(%n: index) {
  // expected-error @+1 {{'adj.launch' op attribute "kernel" is expected but not provided}}
  "adj.launch"(%n) ({
    gpu.yield
  }) : (index) -> ()
  return
}

// -----

// The attributes passes read are declared, so a missing one is a diagnostic at the op.
func.func @k() attributes {adj.kernel, adj.ndim = 1 : i64} {
  // expected-error @+1 {{'adj.global_id' op attribute "dim" is expected but not provided}}
  %0 = "adj.global_id"() : () -> index
  return
}

// -----

// A parse error is a diagnostic at its position.
func.func @f() {
  // expected-error @+1 {{expected operation name in quotes}}
  %i = = "adj.index"() : () -> index
  return
}
