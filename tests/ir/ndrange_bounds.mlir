// --adj-ndrange-bounds: the array indices that every work item of a kernel takes with its own
// id, found in the IR (top-level accesses of the kernel's arguments, and those under debug
// mode's bounds guards), as structured facts with the user's names (adj.source).
// RUN: adjit-opt %s --adj-ndrange-bounds | FileCheck %s

// CHECK-LABEL: func.func @copy2d(
// CHECK-SAME: adj.ndrange_bounds = [{arg = 0 : i64, dim = 0 : i64, id = 0 : i64, message = "kernel copy2d: ndrange[0] is larger than dimension 0 of argument 'u', which every work item indexes with its id (line 20)"}, {arg = 0 : i64, dim = 1 : i64, id = 1 : i64, {{.*}}}, {arg = 1 : i64, dim = 0 : i64, id = 0 : i64, {{.*}}}, {arg = 1 : i64, dim = 1 : i64, id = 1 : i64, message = "kernel copy2d: ndrange[1] is larger than dimension 1 of argument 'v', which every work item indexes with its id (line 21)"}]
func.func @copy2d(%u: memref<?x?xf32>, %v: memref<?x?xf32>) attributes {adj.kernel, adj.ndim = 2 : i64, adj.source = {name = "copy2d", args = ["u", "v"]}} {
  %i = "adj.global_id"() {dim = 0 : i64} : () -> index
  %j = "adj.global_id"() {dim = 1 : i64} : () -> index
  %i64 = arith.index_cast %i : index to i64
  %ii = arith.index_cast %i64 : i64 to index
  %x = memref.load %u[%ii, %j] : memref<?x?xf32> loc("model.py":20:5)
  memref.store %x, %v[%i, %j] : memref<?x?xf32> loc("model.py":21:5)
  return
}

// Under the user's `if` (or in a loop), an index is the kernel's to guard: no fact. Nor is a
// constant index, nor an index into a local array. A debug-mode guard's access counts.
// CHECK-LABEL: func.func @guarded(
// CHECK-SAME: adj.ndrange_bounds = [{arg = 1 : i64, dim = 0 : i64, id = 0 : i64, message = "kernel guarded: ndrange[0] is larger than dimension 0 of argument 'y'{{.*}}"}]
func.func @guarded(%x: memref<?xf64>, %y: memref<?xf64>, %c: i1) attributes {adj.kernel, adj.ndim = 1 : i64, adj.source = {name = "guarded", args = ["x", "y"]}} {
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : index
  %local = memref.alloca() : memref<4xf64>
  %z = scf.if %c -> f64 {
    %a = memref.load %x[%i] : memref<?xf64>
    scf.yield %a : f64
  } else {
    %b = memref.load %x[%c0] : memref<?xf64>
    scf.yield %b : f64
  }
  memref.store %z, %local[%i] : memref<4xf64>
  scf.if %c {
    memref.store %z, %y[%i] : memref<?xf64>
  } {adj.bounds_guard}
  return
}

// No such index: no attribute.
// CHECK-LABEL: func.func @none(
// CHECK-NOT: adj.ndrange_bounds
// CHECK: return
func.func @none(%x: memref<?xf64>) attributes {adj.kernel, adj.ndim = 1 : i64} {
  %c0 = arith.constant 0 : index
  %a = memref.load %x[%c0] : memref<?xf64>
  return
}
