// Every adj op parses, verifies and prints back; the printed form parses again.
// RUN: adjit-opt %s | FileCheck %s
// RUN: adjit-opt %s | adjit-opt | FileCheck %s
// RUN: adjit-opt %s --mlir-print-debuginfo | FileCheck %s --check-prefix=LOC

// CHECK-LABEL: func.func @k
// CHECK-SAME: attributes {adj.kernel, adj.ndim = 2 : i64}
func.func @k(%x: memref<?xf32>) attributes {adj.kernel, adj.ndim = 2 : i64} {
  // CHECK: "adj.index"() : () -> index
  // LOC: loc("{{.*}}roundtrip.mlir":[[@LINE+1]]:8)
  %i = "adj.index"() : () -> index
  // CHECK: "adj.global_id"() {dim = 1 : i64} : () -> index
  %g = "adj.global_id"() {dim = 1 : i64} : () -> index
  // CHECK: "adj.global_size"() {dim = 0 : i64} : () -> index
  %n = "adj.global_size"() {dim = 0 : i64} : () -> index
  %ok = arith.cmpi ult, %g, %n : index
  // CHECK: "adj.check"(%{{.*}}) {error = "IndexError", message = "index out of range"} : (i1) -> ()
  "adj.check"(%ok) {error = "IndexError", message = "index out of range"} : (i1) -> ()
  %v = arith.constant 1.0 : f32
  memref.store %v, %x[%i] : memref<?xf32>
  return
}

// CHECK-LABEL: func.func @main
func.func @main(%x: memref<?xf32>, %n: index) attributes {adj.entry, llvm.emit_c_interface} {
  // CHECK: "adj.launch"(%[[N:.*]], %[[N]]) ({
  // CHECK-NEXT: func.call @k(%{{.*}}) : (memref<?xf32>) -> ()
  // CHECK-NEXT: gpu.yield
  // CHECK-NEXT: }) {kernel = @k, workgroupsize = array<i64: 16, 16>} : (index, index) -> ()
  "adj.launch"(%n, %n) ({
    func.call @k(%x) : (memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @k, workgroupsize = array<i64: 16, 16>} : (index, index) -> ()
  // CHECK: "adj.sync"() : () -> ()
  "adj.sync"() : () -> ()
  return
}

// CHECK: "adj.autodiff"() {activity = ["dup"], fn = @k, mode = "reverse", ret_activity = "const", sym_name = "k_rev"} : () -> ()
"adj.autodiff"() {sym_name = "k_rev", fn = @k, mode = "reverse", activity = ["dup"], ret_activity = "const"} : () -> ()
