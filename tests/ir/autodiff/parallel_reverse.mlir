// Reverse mode of scf.parallel: reversed in parallel when no two iterations add into the
// same shadow element: loads at the iteration's own index (the frontend's element-wise
// loops); a load at another index (a neighbour) makes the reversal a sequential loop.
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

// y[i] = sin(x[i])
func.func @map(%x: memref<?xf64>, %y: memref<?xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %v = memref.load %x[%i] : memref<?xf64>
    %s = math.sin %v : f64
    memref.store %s, %y[%i] : memref<?xf64>
    scf.reduce
  }
  return
}
"adj.autodiff"() {sym_name = "map_d", fn = @map, mode = "reverse", activity = ["dup", "dup"], ret_activity = "const"} : () -> ()

// CHECK-LABEL: func.func @map_d_rev(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?xf64>, %[[DX:[a-z0-9]+]]: memref<?xf64>, %[[Y:[a-z0-9]+]]: memref<?xf64>, %[[DY:[a-z0-9]+]]: memref<?xf64>
// CHECK: scf.parallel (%[[I:.*]]) =
// CHECK: memref.load %[[DY]][%[[I]]]
// CHECK: math.cos
// CHECK: memref.load %[[DX]][%[[I]]]
// CHECK: memref.store %{{.*}}, %[[DX]][%[[I]]]
// CHECK-NOT: scf.for

// y[i] = x[i + 1]: iterations i and i + 1 would both add into dx[i + 1].
func.func @shift(%x: memref<?xf64>, %y: memref<?xf64>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %j = arith.addi %i, %c1 : index
    %v = memref.load %x[%j] : memref<?xf64>
    memref.store %v, %y[%i] : memref<?xf64>
    scf.reduce
  }
  return
}
"adj.autodiff"() {sym_name = "shift_d", fn = @shift, mode = "reverse", activity = ["dup", "dup", "const"], ret_activity = "const"} : () -> ()

// CHECK-LABEL: func.func @shift_d_rev(
// CHECK-NOT: scf.parallel
// CHECK: scf.for
// CHECK: return
