// Rows of a stacked array (memory.py `_other_rows`): a loop that reads row t and writes row
// t + 1 of a C-contiguous array never overwrites a row it read (its variable only grows), so
// the launch's input is not "overwritten" (o01): the augmented kernel tapes nothing and the
// reverse kernel reads row t itself. Reading row t + 1 and writing row t is overwritten by
// the next iteration (o11): the input's values are taped (in place: tape_in_place.mlir).
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

func.func private @sq(%u: memref<?xf64, strided<[?], offset: ?>>, %v: memref<?xf64, strided<[?], offset: ?>>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.global_id"() {dim = 0 : i64} : () -> index
  %a = memref.load %u[%i] : memref<?xf64, strided<[?], offset: ?>>
  %b = arith.mulf %a, %a : f64
  memref.store %b, %v[%i] : memref<?xf64, strided<[?], offset: ?>>
  return
}
// u_all[t + 1] = sq(u_all[t]): row t is never written again.
func.func @forward(%all: memref<?x?xf64>, %s: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %all, %c1 : memref<?x?xf64>
  scf.for %t = %c0 to %s step %c1 {
    %t1 = arith.addi %t, %c1 : index
    %u = memref.subview %all[%t, 0] [1, %n] [1, 1] : memref<?x?xf64> to memref<?xf64, strided<[1], offset: ?>>
    %v = memref.subview %all[%t1, 0] [1, %n] [1, 1] : memref<?x?xf64> to memref<?xf64, strided<[1], offset: ?>>
    %uc = memref.cast %u : memref<?xf64, strided<[1], offset: ?>> to memref<?xf64, strided<[?], offset: ?>>
    %vc = memref.cast %v : memref<?xf64, strided<[1], offset: ?>> to memref<?xf64, strided<[?], offset: ?>>
    "adj.launch"(%n) ({
      func.call @sq(%uc, %vc) : (memref<?xf64, strided<[?], offset: ?>>, memref<?xf64, strided<[?], offset: ?>>) -> ()
      gpu.yield
    }) {kernel = @sq} : (index) -> ()
  }
  return
}
"adj.autodiff"() {sym_name = "dforward", fn = @forward, mode = "reverse", activity = ["dup", "const"], ret_activity = "const"} : () -> ()

// u_all[t] = sq(u_all[t + 1]): the next iteration writes the row this one read.
func.func @backward(%all: memref<?x?xf64>, %s: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %all, %c1 : memref<?x?xf64>
  scf.for %t = %c0 to %s step %c1 {
    %t1 = arith.addi %t, %c1 : index
    %u = memref.subview %all[%t1, 0] [1, %n] [1, 1] : memref<?x?xf64> to memref<?xf64, strided<[1], offset: ?>>
    %v = memref.subview %all[%t, 0] [1, %n] [1, 1] : memref<?x?xf64> to memref<?xf64, strided<[1], offset: ?>>
    %uc = memref.cast %u : memref<?xf64, strided<[1], offset: ?>> to memref<?xf64, strided<[?], offset: ?>>
    %vc = memref.cast %v : memref<?xf64, strided<[1], offset: ?>> to memref<?xf64, strided<[?], offset: ?>>
    "adj.launch"(%n) ({
      func.call @sq(%uc, %vc) : (memref<?xf64, strided<[?], offset: ?>>, memref<?xf64, strided<[?], offset: ?>>) -> ()
      gpu.yield
    }) {kernel = @sq} : (index) -> ()
  }
  return
}
"adj.autodiff"() {sym_name = "dbackward", fn = @backward, mode = "reverse", activity = ["dup", "const"], ret_activity = "const"} : () -> ()

// CHECK-LABEL: func.func private @__adj_sq_rev_dd_c_o01_aug(
// CHECK-SAME: %{{[a-z0-9]+}}: memref<?xf64, strided<[?], offset: ?>>, %{{[a-z0-9]+}}: memref<?xf64, strided<[?], offset: ?>>, %{{[a-z0-9]+}}: memref<?xf64, strided<[?], offset: ?>>, %{{[a-z0-9]+}}: memref<?xf64, strided<[?], offset: ?>>)
// CHECK-SAME: adj.tape = []
// CHECK-LABEL: func.func private @__adj_sq_rev_dd_c_o01_rev(
// CHECK-SAME: %[[U:[a-z0-9]+]]: memref<?xf64, strided<[?], offset: ?>>, %{{[a-z0-9]+}}: memref<?xf64, strided<[?], offset: ?>>, %{{[a-z0-9]+}}: memref<?xf64, strided<[?], offset: ?>>, %{{[a-z0-9]+}}: memref<?xf64, strided<[?], offset: ?>>)
// CHECK: memref.load %[[U]]
// CHECK-LABEL: func.func @dforward_aug(
// CHECK-SAME: adj.tape = []
// CHECK-LABEL: func.func @dforward_rev(
// CHECK-SAME: adj.tape = []

// CHECK-LABEL: func.func private @__adj_sq_rev_dd_c_o11_aug(
// CHECK-SAME: memref<?xf64, strided<[1], offset: ?>>)
// CHECK-LABEL: func.func @dbackward_aug(
// CHECK-SAME: {holds = "f64 arrays kept in place {{.*}}"
