// adjit's passes inside --pass-pipeline, in order with upstream ones, with options.
// RUN: adjit-opt %s --pass-pipeline='builtin.module(adj-autodiff,adj-lower-cpu,canonicalize)' \
// RUN:   | FileCheck %s
// RUN: adjit-opt %s --pass-pipeline='builtin.module(adj-lower-cpu,canonicalize,adj-parallel-for)' \
// RUN:   --mlir-print-ir-after-all 2>&1 >/dev/null | FileCheck %s --check-prefix=ORDER
// RUN: adjit-opt %s --pass-pipeline='builtin.module(adj-lower-gpu{chip=sm_80})' --emit=ptx \
// RUN:   | FileCheck %s --check-prefix=PTX
// RUN: not adjit-opt %s --pass-pipeline='builtin.module(adj-lower-gpu{color=red})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BAD
// RUN: not adjit-opt %s --pass-pipeline='builtin.module(adj-lower-gpu{chip=foo})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=CHIP --implicit-check-not=Traceback

// CHECK-LABEL: func.func @main(
// CHECK: scf.parallel
// CHECK-NOT: adj.launch

// ORDER: // -----// IR Dump After adj-lower-cpu //----- //
// ORDER: // -----// IR Dump After Canonicalizer (canonicalize) //----- //
// ORDER: // -----// IR Dump After adj-parallel-for //----- //
// ORDER: call @__adj_launch___adj_par_main_0(

// PTX: .target sm_80

// BAD: error: adj-lower-gpu takes no option 'color' (its options: chip)

// CHIP: error: option chip of adj-lower-gpu must name an NVIDIA architecture such as sm_90, got 'foo'

func.func @k(%x: memref<?xf32>) attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %v = memref.load %x[%i] : memref<?xf32>
  %w = arith.addf %v, %v : f32
  memref.store %w, %x[%i] : memref<?xf32>
  return
}

func.func @main(%x: memref<?xf32>, %n: index) attributes {adj.entry} {
  "adj.launch"(%n) ({
    func.call @k(%x) : (memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @k} : (index) -> ()
  return
}
