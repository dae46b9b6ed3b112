// --adj-lower-cpu of a kernel adding atomically into an array at indices that depend on the
// item (a histogram; passes/chunked_launch.py lower_privatised_launch). Where the private
// copies are small beside the work (parts * size * 4 <= items, parts * size <= 2^20; parts:
// 4 per thread, 8 for adjit-opt's 2 threads), checked at run time: zeroed f64 copies, an
// scf.parallel over the parts, each running its items in order through @hist__private (the
// atomic now a load, add and store into its copy at base + index), then one loop over the
// elements adding up the parts' copies and adding the sum into the array once. Otherwise the
// launch as written, with its atomics.
// RUN: adjit-opt %s --adj-lower-cpu | FileCheck %s

func.func private @hist(%x: memref<?xi64>, %w: memref<?xf32>, %h: memref<?xf32>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %b = memref.load %x[%i] : memref<?xi64>
  %k = arith.index_cast %b : i64 to index
  %v = memref.load %w[%i] : memref<?xf32>
  %old = memref.atomic_rmw addf %v, %h[%k] : (f32, memref<?xf32>) -> f32
  return
}
// CHECK-LABEL: func.func private @hist__private(
// CHECK-SAME: %[[H:[a-z0-9]+]]: memref<?xf32>, %[[BUF:[a-z0-9]+]]: memref<?xf64>, %[[BASE:[a-z0-9]+]]: index,
// CHECK-NOT: memref.atomic_rmw
// CHECK: %[[AT:.*]] = arith.addi %[[BASE]], %{{.*}} : index
// CHECK: %[[WIDE:.*]] = arith.extf %{{.*}} : f32 to f64
// CHECK: %[[OLD:.*]] = memref.load %[[BUF]][%[[AT]]] : memref<?xf64>
// CHECK: %[[NEW:.*]] = arith.addf %[[OLD]], %[[WIDE]] : f64
// CHECK: memref.store %[[NEW]], %[[BUF]][%[[AT]]] : memref<?xf64>
// CHECK-NOT: memref.atomic_rmw
// CHECK: return

// CHECK-LABEL: func.func @run(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?xi64>, %[[W:[a-z0-9]+]]: memref<?xf32>, %[[HIST:[a-z0-9]+]]: memref<?xf32>)
// CHECK: %[[PARTS:.*]] = arith.constant 8 : index
// CHECK: scf.if %{{.*}} {
// CHECK:   %[[COPIES:.*]] = memref.alloc(%{{.*}}) : memref<?xf64>
// CHECK:   scf.parallel
// CHECK:     memref.store %{{.*}}, %[[COPIES]]
// CHECK:   scf.parallel (%[[P:.*]]) = (%{{.*}}) to (%[[PARTS]])
// CHECK:     scf.for
// CHECK:       func.call @hist__private(%[[X]], %[[W]], %[[HIST]], %[[COPIES]], %{{.*}},
// CHECK:   scf.parallel (%[[E:.*]]) = (%{{.*}}) to (%{{.*}})
// CHECK:     %[[SUM:.*]] = scf.for {{.*}} -> (f64) {
// CHECK:       memref.load %[[COPIES]]
// CHECK:     %[[NARROW:.*]] = arith.truncf %[[SUM]] : f64 to f32
// CHECK:     %[[H0:.*]] = memref.load %[[HIST]]
// CHECK:     %[[H1:.*]] = arith.addf %[[H0]], %[[NARROW]] : f32
// CHECK:     memref.store %[[H1]], %[[HIST]]
// CHECK: } else {
// CHECK:   scf.parallel
// CHECK-NEXT: func.call @hist(%[[X]], %[[W]], %[[HIST]],
// CHECK: }
func.func @run(%x: memref<?xi64>, %w: memref<?xf32>, %h: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %m = memref.dim %x, %c0 : memref<?xi64>
  "adj.launch"(%m) ({
    func.call @hist(%x, %w, %h) : (memref<?xi64>, memref<?xf32>, memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @hist} : (index) -> ()
  return
}

// The target also read by the kernel: not privatised (its reads would see no adds).
func.func private @reads(%x: memref<?xi64>, %h: memref<?xf32>, %out: memref<?xf32>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %b = memref.load %x[%i] : memref<?xi64>
  %k = arith.index_cast %b : i64 to index
  %one = arith.constant 1.0 : f32
  %old = memref.atomic_rmw addf %one, %h[%k] : (f32, memref<?xf32>) -> f32
  %seen = memref.load %h[%k] : memref<?xf32>
  memref.store %seen, %out[%i] : memref<?xf32>
  return
}
// CHECK-LABEL: func.func @run_reads(
// CHECK-NOT: scf.if
// CHECK: scf.parallel
// CHECK-NEXT: func.call @reads(
// CHECK-NOT: @reads__private
func.func @run_reads(%x: memref<?xi64>, %h: memref<?xf32>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %m = memref.dim %x, %c0 : memref<?xi64>
  "adj.launch"(%m) ({
    func.call @reads(%x, %h, %out) : (memref<?xi64>, memref<?xf32>, memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @reads} : (index) -> ()
  return
}
