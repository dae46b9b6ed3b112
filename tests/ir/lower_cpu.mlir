// --adj-lower-cpu: kernels take their work-item ids and sizes as parameters, a launch becomes
// an scf.parallel that calls the kernel, adj.sync is dropped, and each adj.check stores its
// number (1, 2, ... in the module's adj.error_table) into the call's error cell if it fails first:
// a last memref<1xi64> parameter of every function the module defines, passed on by every call
// (and so captured by the launch's loop body), never a global, so that concurrent calls and
// the workers of each launch report into the cell of their own call.
// RUN: adjit-opt %s --adj-lower-cpu | FileCheck %s --implicit-check-not='"adj.' --implicit-check-not=memref.global

// CHECK: module attributes {adj.error_table = ["IndexError\1Findex out of range (at {{.*}}lower_cpu.mlir:27)", "ValueError\1Fnegative (at {{.*}}lower_cpu.mlir:41)"]}

// CHECK-LABEL: func.func @k(
// CHECK-SAME: %[[X:.*]]: memref<?xf32>, %[[I0:.*]]: index, %[[I1:.*]]: index, %[[N0:.*]]: index, %[[N1:.*]]: index, %[[KCELL:.*]]: memref<1xi64>)
func.func @k(%x: memref<?xf32>) attributes {adj.kernel, adj.ndim = 2 : i64} {
  // adj.index is row-major: i0 * n1 + i1.
  // CHECK: %[[ROW:.*]] = arith.muli %[[I0]], %[[N1]] : index
  // CHECK: %[[LIN:.*]] = arith.addi %[[ROW]], %[[I1]] : index
  %i = "adj.index"() : () -> index
  %g = "adj.global_id"() {dim = 1 : i64} : () -> index
  %n = "adj.global_size"() {dim = 0 : i64} : () -> index
  // CHECK: %[[OK:.*]] = arith.cmpi ult, %[[I1]], %[[N0]] : index
  %ok = arith.cmpi ult, %g, %n : index
  // CHECK: %[[FAILED:.*]] = arith.xori %[[OK]], %{{.*}} : i1
  // CHECK: scf.if %[[FAILED]] {
  // CHECK:   %[[ONE:.*]] = arith.constant 1 : i64
  // CHECK:   memref.store %[[ONE]], %[[KCELL]][%{{.*}}] : memref<1xi64>
  // CHECK: }
  "adj.check"(%ok) {error = "IndexError", message = "index out of range"} : (i1) -> ()
  %v = arith.constant 1.0 : f32
  // CHECK: memref.store %{{.*}}, %[[X]][%[[LIN]]] : memref<?xf32>
  memref.store %v, %x[%i] : memref<?xf32>
  return
}

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.*]]: memref<?xf32>, %[[N:.*]]: index, %[[S:.*]]: f32, %[[CELL:.*]]: memref<1xi64>)
func.func @main(%x: memref<?xf32>, %n: index, %s: f32) attributes {adj.entry, llvm.emit_c_interface} {
  // CHECK: %[[TWO:.*]] = arith.constant 2 : i64
  // CHECK: memref.store %[[TWO]], %[[CELL]][%{{.*}}] : memref<1xi64>
  %zero = arith.constant 0.0 : f32
  %ok = arith.cmpf oge, %s, %zero : f32
  "adj.check"(%ok) {error = "ValueError", message = "negative"} : (i1) -> ()
  // CHECK: scf.parallel (%[[A:.*]], %[[B:.*]]) = (%[[C0:.*]], %[[C0]]) to (%[[N]], %[[N]]) step (%[[C1:.*]], %[[C1]]) {
  // CHECK-NEXT: func.call @k(%[[X]], %[[A]], %[[B]], %[[N]], %[[N]], %[[CELL]]) : (memref<?xf32>, index, index, index, index, memref<1xi64>) -> ()
  // CHECK-NEXT: scf.reduce
  "adj.launch"(%n, %n) ({
    func.call @k(%x) : (memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @k} : (index, index) -> ()
  // CHECK: return
  "adj.sync"() : () -> ()
  return
}

// Every defined function takes the cell, even one without checks (it may call one that has),
// and every call of one passes the caller's cell on, recursive calls included; a declaration
// (code outside the module) keeps its signature and its calls.
// CHECK-LABEL: func.func @helper(
// CHECK-SAME: %[[V:.*]]: f32, %[[HCELL:.*]]: memref<1xi64>) -> f32
func.func @helper(%v: f32) -> f32 {
  // CHECK: %[[E:.*]] = call @ext(%[[V]]) : (f32) -> f32
  %e = func.call @ext(%v) : (f32) -> f32
  // CHECK: call @helper(%[[E]], %[[HCELL]]) {no_inline} : (f32, memref<1xi64>) -> f32
  %r = func.call @helper(%e) {no_inline} : (f32) -> f32
  return %r : f32
}
// CHECK: func.func private @ext(f32) -> f32
func.func private @ext(f32) -> f32
