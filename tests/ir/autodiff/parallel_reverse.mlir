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

// The frontend's loop nests (arrays.for_each): parallel over rows, serial inside. Every
// access of x and y is at the iteration's own row: reversed in parallel.
// y[i, j] = sin(x[i, j])
func.func @rows(%x: memref<?x?xf64>, %y: memref<?x?xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?x?xf64>
  %m = memref.dim %x, %c1 : memref<?x?xf64>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    scf.for %j = %c0 to %m step %c1 {
      %v = memref.load %x[%i, %j] : memref<?x?xf64>
      %s = math.sin %v : f64
      memref.store %s, %y[%i, %j] : memref<?x?xf64>
    }
    scf.reduce
  }
  return
}
"adj.autodiff"() {sym_name = "rows_d", fn = @rows, mode = "reverse", activity = ["dup", "dup"], ret_activity = "const"} : () -> ()

// CHECK-LABEL: func.func @rows_d_rev(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?x?xf64>, %[[DX:[a-z0-9]+]]: memref<?x?xf64>
// CHECK: scf.parallel (%[[I:.*]]) =
// CHECK: scf.for
// CHECK: math.cos
// CHECK: memref.store %{{.*}}, %[[DX]][%[[I]], %{{.*}}]
// CHECK: scf.reduce
// CHECK-NEXT: }
// CHECK-NEXT: return

// A broadcast operand: y[i, j] = x[i, j] * b[j]. Every row adds into db[j]: each of the
// PRIVATE_CHUNKS chunks of rows adds into a copy of db of its own (one buffer of 16 copies),
// summed into db after the loop; x's adjoint stays at the row's own elements.
func.func @bias(%x: memref<?x?xf64>, %b: memref<?xf64>, %y: memref<?x?xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?x?xf64>
  %m = memref.dim %x, %c1 : memref<?x?xf64>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    scf.for %j = %c0 to %m step %c1 {
      %v = memref.load %x[%i, %j] : memref<?x?xf64>
      %w = memref.load %b[%j] : memref<?xf64>
      %p = arith.mulf %v, %w : f64
      memref.store %p, %y[%i, %j] : memref<?x?xf64>
    }
    scf.reduce
  }
  return
}
"adj.autodiff"() {sym_name = "bias_d", fn = @bias, mode = "reverse", activity = ["dup", "dup", "dup"], ret_activity = "const"} : () -> ()

// CHECK-LABEL: func.func @bias_d_rev(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?x?xf64>, %[[DX:[a-z0-9]+]]: memref<?x?xf64>, %[[B:[a-z0-9]+]]: memref<?xf64>, %[[DB:[a-z0-9]+]]: memref<?xf64>
// CHECK: %[[C16:.*]] = arith.constant 16 : index
// CHECK: %[[COPIES:.*]] = memref.alloc(%{{.*}}) : memref<?xf64>
// CHECK: scf.parallel (%[[C:.*]]) = (%{{.*}}) to (%[[C16]])
// CHECK: %[[MINE:.*]] = memref.reinterpret_cast %[[COPIES]]
// CHECK: scf.for
// CHECK: memref.store %{{.*}}, %[[MINE]][
// CHECK: memref.store %{{.*}}, %[[DX]][
// CHECK: scf.reduce
// CHECK: scf.for
// CHECK: memref.load %[[COPIES]]
// CHECK: memref.store %{{.*}}, %[[DB]][
// CHECK: return
