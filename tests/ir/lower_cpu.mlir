// --adj-lower-cpu: kernels take their work-item ids and sizes as parameters, a launch becomes
// an scf.parallel that calls the kernel, adj.sync is dropped, and each adj.check stores its
// number (1, 2, ... in the module's adj.error_table) into the error cell when it fails.
// RUN: adjit-opt %s --adj-lower-cpu | FileCheck %s --implicit-check-not='"adj.'

// CHECK: module attributes {adj.error_table = ["IndexError\1Findex out of range (at {{.*}}lower_cpu.mlir:26)", "ValueError\1Fnegative (at {{.*}}lower_cpu.mlir:40)"]}
// CHECK: memref.global "public" @__adj_error : memref<1xi64> = dense<0>

// CHECK-LABEL: func.func @k(
// CHECK-SAME: %[[X:.*]]: memref<?xf32>, %[[I0:.*]]: index, %[[I1:.*]]: index, %[[N0:.*]]: index, %[[N1:.*]]: index)
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
  // CHECK:   %[[CELL:.*]] = memref.get_global @__adj_error : memref<1xi64>
  // CHECK:   %[[ONE:.*]] = arith.constant 1 : i64
  // CHECK:   memref.store %[[ONE]], %[[CELL]][%{{.*}}] : memref<1xi64>
  // CHECK: }
  "adj.check"(%ok) {error = "IndexError", message = "index out of range"} : (i1) -> ()
  %v = arith.constant 1.0 : f32
  // CHECK: memref.store %{{.*}}, %[[X]][%[[LIN]]] : memref<?xf32>
  memref.store %v, %x[%i] : memref<?xf32>
  return
}

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.*]]: memref<?xf32>, %[[N:.*]]: index, %[[S:.*]]: f32)
func.func @main(%x: memref<?xf32>, %n: index, %s: f32) attributes {adj.entry, llvm.emit_c_interface} {
  // CHECK: %[[TWO:.*]] = arith.constant 2 : i64
  // CHECK: memref.store %[[TWO]]
  %zero = arith.constant 0.0 : f32
  %ok = arith.cmpf oge, %s, %zero : f32
  "adj.check"(%ok) {error = "ValueError", message = "negative"} : (i1) -> ()
  // CHECK: scf.parallel (%[[A:.*]], %[[B:.*]]) = (%[[C0:.*]], %[[C0]]) to (%[[N]], %[[N]]) step (%[[C1:.*]], %[[C1]]) {
  // CHECK-NEXT: func.call @k(%[[X]], %[[A]], %[[B]], %[[N]], %[[N]]) : (memref<?xf32>, index, index, index, index) -> ()
  // CHECK-NEXT: scf.reduce
  "adj.launch"(%n, %n) ({
    func.call @k(%x) : (memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @k} : (index, index) -> ()
  // CHECK: return
  "adj.sync"() : () -> ()
  return
}
