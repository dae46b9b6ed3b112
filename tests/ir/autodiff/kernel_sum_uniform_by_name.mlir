// A kernel's reverse mode requested by name with `adj.sum_uniform` (the GPU launcher's
// request, frontend/derivative.py kernel_derivative_unit): the reverse kernel gets the launch
// rule's per-item output of the element every item reads (%w[%k], %k a scalar argument:
// uniform_loads.py), after the Active scalar's, stores its item's adjoint there instead of an
// atomic add into %w's shadow, and records the element (argument 1 at index "(arg 2)") in
// `adj.uniform_loads` for the launcher. Without the attribute the request keeps its ABI.
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
"adj.autodiff"() {sym_name = "summed", fn = @k, mode = "reverse", activity = ["active", "dup", "const", "const", "dup"], ret_activity = "const", adj.sum_uniform} : () -> ()
"adj.autodiff"() {sym_name = "plain", fn = @k, mode = "reverse", activity = ["active", "dup", "const", "const", "dup"], ret_activity = "const"} : () -> ()

// CHECK-LABEL: func.func @summed_rev(
// CHECK-SAME: %[[DA:[a-z0-9]+]]: memref<?xf32>, %[[DW:[a-z0-9]+]]: memref<?xf32>)
// CHECK-SAME: adj.uniform_loads = [{arg = 1 : i64, at = ["(arg 2)"]}]
// CHECK-NOT: memref.atomic_rmw
// CHECK: memref.store %{{.*}}, %[[DA]][%[[ITEM:.*]]] : memref<?xf32>
// CHECK-NEXT: memref.store %{{.*}}, %[[DW]][%[[ITEM]]] : memref<?xf32>
// CHECK-NEXT: return

// CHECK-LABEL: func.func @plain_rev(
// CHECK-SAME: %[[DA:[a-z0-9]+]]: memref<?xf32>)
// CHECK-NOT: adj.uniform_loads
// CHECK: memref.atomic_rmw addf
// CHECK: return
