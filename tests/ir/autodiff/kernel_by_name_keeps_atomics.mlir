// A kernel's reverse mode requested by name keeps its ABI: the reverse kernel adds its item's
// adjoint of the element every item reads (%w[%k], %k a scalar argument) into %w's shadow
// with an atomic, and has no per-item output for it (the launch rule's private derivatives
// have one, whose sum the launch adds once: uniform_loads.py, kernel_reductions.mlir).
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

func.func private @k(%a: f32, %w: memref<?xf32>, %i0: i64, %x: memref<?xf32>, %y: memref<?xf32>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %k = arith.index_cast %i0 : i64 to index
  %wk = memref.load %w[%k] : memref<?xf32>
  %xi = memref.load %x[%i] : memref<?xf32>
  %ax = arith.mulf %a, %xi : f32
  %r = arith.mulf %ax, %wk : f32
  memref.store %r, %y[%i] : memref<?xf32>
  return
}
"adj.autodiff"() {sym_name = "plain", fn = @k, mode = "reverse", activity = ["active", "dup", "const", "const", "dup"], ret_activity = "const"} : () -> ()

// CHECK-LABEL: func.func @plain_rev(
// CHECK-SAME: %[[DA:[a-z0-9]+]]: memref<?xf32>)
// CHECK: memref.atomic_rmw addf
// CHECK: return
