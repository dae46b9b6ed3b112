// A triangular loop in a kernel's reverse mode (issue 8.10): the inner loop's lower bound is
// the outer loop's variable. Every item's tape has the same size, a sum over the outer loop of
// the inner trip counts, written (sum 0 lb ub step body) with the outer variable (iv 0): the
// launch computes it with an scf.for; each saved value's slot is the iterations before it.
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

func.func private @k(%a: memref<?xf64>, %out: memref<?xf64>, %n: index)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f64
  %r = scf.for %k = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f64) {
    %s = scf.for %k2 = %k to %n step %c1 iter_args(%b = %acc) -> (f64) {
      %ak = memref.load %a[%k2] : memref<?xf64>
      %t = arith.addf %b, %ak : f64
      %u = math.sin %t : f64
      scf.yield %u : f64
    }
    scf.yield %s : f64
  }
  memref.store %r, %out[%i] : memref<?xf64>
  return
}
func.func @run(%a: memref<?xf64>, %out: memref<?xf64>, %n: index) {
  %c0 = arith.constant 0 : index
  %m = memref.dim %out, %c0 : memref<?xf64>
  "adj.launch"(%m) ({
    func.call @k(%a, %out, %n) : (memref<?xf64>, memref<?xf64>, index) -> ()
    gpu.yield
  }) {kernel = @k} : (index) -> ()
  return
}
"adj.autodiff"() {sym_name = "grad", fn = @run, mode = "reverse", activity = ["dup", "dup", "const"], ret_activity = "const"} : () -> ()

// CHECK-LABEL: func.func private @__adj_k_rev_ddc_c_aug(
// CHECK-SAME: per_item = "(sum 0 0 4 1 (trip (iv 0) (arg 2) 1))"
// CHECK: scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step
// CHECK: scf.for %[[K2:.*]] = %[[K]] to %{{.*}} step
// The slot: the iterations of k2 for each k' < k, then k2 - k.
// CHECK: scf.for %[[KP:.*]] = %{{.*}} to %[[K]] step %{{.*}} iter_args
// CHECK: arith.subi %{{.*}}, %[[KP]] : index
// CHECK: scf.yield
// CHECK: arith.subi %[[K2]], %[[K]] : index
// CHECK: memref.store

// CHECK-LABEL: func.func @grad_aug(
// The per-item size, summed over the outer loop's 4 iterations, times the items.
// CHECK: %[[SLOTS:.*]] = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (index)
// CHECK: %[[ALL:.*]] = arith.muli %{{.*}}, %[[SLOTS]] : index
// CHECK: memref.alloc(%[[ALL]]) : memref<?xf64>
