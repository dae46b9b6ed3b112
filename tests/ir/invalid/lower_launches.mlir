// What --adj-lower-cpu and --adj-lower-cuda-host refuse in launches: a diagnostic at the
// op. One case per part (--split-input-file).
// RUN: adjit-opt %s --split-input-file --verify-diagnostics --adj-lower-cpu
// RUN: adjit-opt %s --split-input-file --verify-diagnostics --adj-lower-cuda-host

// A launch gives one ndrange extent per kernel dimension.
func.func @k() attributes {adj.kernel, adj.ndim = 2 : i64} {
  return
}

func.func @main(%n: index) {
  // expected-error @+1 {{adj.launch gives 1 ndrange extents to a 2-D kernel @k}}
  "adj.launch"(%n) ({
    func.call @k() : () -> ()
    gpu.yield
  }) {kernel = @k} : (index) -> ()
  return
}

// -----

// A launch body is exactly one func.call of the kernel, then gpu.yield.
func.func @k() attributes {adj.kernel, adj.ndim = 1 : i64} {
  return
}

func.func @main(%n: index) {
  // expected-error @+1 {{adj.launch body must be one func.call of the kernel and gpu.yield}}
  "adj.launch"(%n) ({
    gpu.yield
  }) {kernel = @k} : (index) -> ()
  return
}

// -----

// A launch must call a func.func marked adj.kernel.
func.func @helper() {
  return
}

func.func @main(%n: index) {
  // expected-error @+1 {{adj.launch of @helper, which is not a func.func marked adj.kernel}}
  "adj.launch"(%n) ({
    func.call @helper() : () -> ()
    gpu.yield
  }) {kernel = @helper} : (index) -> ()
  return
}
