// --adj-split-interior on a 2-D nest (passes/interior.py, _row_loops): a guard on the row
// (`0 < i < n - 1`, i the outer loop's counter) is invariant in the loop over the row, so the
// inner loop's split leaves it, and LLVM ran such guards (five in a gather kernel) as masked
// vector code. The outer loop is split first, on the compares of its counter anywhere in its
// body; then each copy of the inner loop on its own. The interior rows' interior columns
// compare nothing.
// RUN: adjit-opt %s --adj-split-interior | FileCheck %s

// CHECK-LABEL: func.func @rows(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?x?xf32>, %[[N:[a-z0-9]+]]: index, %[[M:[a-z0-9]+]]: index)
// The first border rows, each split in three on the column guard:
// CHECK: scf.for %[[I0:.*]] = %{{.*}} to %[[A:[a-z0-9_]+]] step
// CHECK:   scf.for
// CHECK:     arith.cmpi slt, %[[I0]]
// CHECK:   scf.for
// CHECK:     arith.cmpi slt, %[[I0]]
// CHECK-NOT: arith.cmpi slt, %[[I0]]
// CHECK:   scf.for
// CHECK:     arith.cmpi slt, %[[I0]]
// The interior rows: the middle copy of their inner loop compares nothing.
// CHECK: scf.for %[[I1:.*]] = %[[A]] to %[[B:[a-z0-9_]+]] step
// CHECK:   scf.for
// CHECK:     arith.cmpi
// CHECK:   scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NOT: arith.cmpi
// CHECK:     memref.store
// CHECK-NEXT: }
// CHECK:   scf.for
// CHECK:     arith.cmpi
// The last border rows:
// CHECK: scf.for %[[I2:.*]] = %[[B]] to %[[N]] step
// CHECK: arith.cmpi slt, %[[I2]]
// CHECK: return
func.func @rows(%x: memref<?x?xf32>, %n: index, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %nm1 = arith.subi %n, %c1 : index
  %mm1 = arith.subi %m, %c1 : index
  %v = arith.constant 1.0 : f32
  scf.for %i = %c0 to %n step %c1 {
    scf.for %j = %c0 to %m step %c1 {
      %a = arith.cmpi slt, %c0, %i : index
      %b = arith.cmpi slt, %i, %nm1 : index
      %c = arith.cmpi slt, %c0, %j : index
      %d = arith.cmpi slt, %j, %mm1 : index
      %ab = arith.andi %a, %b : i1
      %cd = arith.andi %c, %d : i1
      %all = arith.andi %ab, %cd : i1
      scf.if %all {
        memref.store %v, %x[%i, %j] : memref<?x?xf32>
      }
    }
  }
  return
}
