// An integer atomic counter in a differentiated kernel (issue 8.9): integer arrays have no
// shadow, so the atomic is inactive: the augmented kernel runs it (once), the reverse kernel
// does not redo it, and nothing asks for an addf.
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

func.func private @k(%x: memref<?xf64>, %y: memref<?xf64>, %count: memref<?xi32>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : index
  %one = arith.constant 1 : i32
  %xi = memref.load %x[%i] : memref<?xf64>
  %s = math.sin %xi : f64
  memref.store %s, %y[%i] : memref<?xf64>
  %old = memref.atomic_rmw addi %one, %count[%c0] : (i32, memref<?xi32>) -> i32
  return
}
func.func @run(%x: memref<?xf64>, %y: memref<?xf64>, %count: memref<?xi32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  "adj.launch"(%n) ({
    func.call @k(%x, %y, %count) : (memref<?xf64>, memref<?xf64>, memref<?xi32>) -> ()
    gpu.yield
  }) {kernel = @k} : (index) -> ()
  return
}
"adj.autodiff"() {sym_name = "grad", fn = @run, mode = "reverse", activity = ["dup", "dup", "const"], ret_activity = "const"} : () -> ()
"adj.autodiff"() {sym_name = "tangent", fn = @run, mode = "forward", activity = ["dup", "dup", "const"], ret_activity = "const"} : () -> ()

// The count stays a Const argument of every derivative kernel (no shadow after it).
// CHECK-LABEL: func.func private @__adj_k_rev_ddc_c_aug(
// CHECK-SAME: %{{[a-z0-9]+}}: memref<?xf64>, %{{[a-z0-9]+}}: memref<?xf64>, %{{[a-z0-9]+}}: memref<?xf64>, %{{[a-z0-9]+}}: memref<?xf64>, %[[C:[a-z0-9]+]]: memref<?xi32>)
// CHECK: memref.atomic_rmw addi %{{.*}}, %[[C]][%{{.*}}] : (i32, memref<?xi32>) -> i32
// CHECK-NOT: memref.atomic_rmw addi
// CHECK: return

// CHECK-LABEL: func.func private @__adj_k_rev_ddc_c_rev(
// CHECK-NOT: memref.atomic_rmw addi
// CHECK: return

// CHECK-LABEL: func.func private @__adj_k_fwd_ddc_c(
// CHECK: memref.atomic_rmw addi
// CHECK-NOT: memref.atomic_rmw addi
// CHECK: return
