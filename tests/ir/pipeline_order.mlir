// Passes run in command-line order, each dumped to stderr by --mlir-print-ir-after-all.
// RUN: adjit-opt %s --adj-lower-cpu --pass-pipeline='builtin.module(canonicalize)' \
// RUN:   --mlir-print-ir-after-all 2>&1 >/dev/null | FileCheck %s
// RUN: adjit-opt %s --pass-pipeline='builtin.module(canonicalize)' --adj-lower-cpu \
// RUN:   --mlir-print-ir-after-all 2>&1 >/dev/null | FileCheck %s --check-prefix=SWAP

// CHECK: // -----// IR Dump After adj-lower-cpu //----- //
// CHECK: scf.parallel
// CHECK: // -----// IR Dump After Canonicalizer (canonicalize) //----- //
// SWAP: // -----// IR Dump After Canonicalizer (canonicalize) //----- //
// SWAP: "adj.launch"
// SWAP: // -----// IR Dump After adj-lower-cpu //----- //

func.func @k() attributes {adj.kernel, adj.ndim = 1 : i64} {
  return
}

func.func @main(%n: index) {
  "adj.launch"(%n) ({
    func.call @k() : () -> ()
    gpu.yield
  }) {kernel = @k} : (index) -> ()
  return
}
