// --adj-lower-cpu of a kernel that adds into one element every item shares, atomically
// (passes/chunked_launch.py): the launch becomes an scf.parallel over 4096-item chunks; each
// chunk sums its items' values, returned by a copy of the kernel (@k__atomic_sums, the atomic
// gone), in f64 into a partial; after the loop the partials are added pairwise and the sum,
// rounded once, is added into the element (no atomic: the launch is over). Kernels whose
// atomic's old value is used, or whose target is also read, keep one atomic an item; one whose
// index depends on the item: lower_cpu_atomic_private.mlir.
// RUN: adjit-opt %s --adj-lower-cpu | FileCheck %s

func.func private @k(%x: memref<?xf32>, %out: memref<?xf32>, %j: index)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : index
  %xi = memref.load %x[%i] : memref<?xf32>
  %sq = arith.mulf %xi, %xi : f32
  %old = memref.atomic_rmw addf %sq, %out[%c0] : (f32, memref<?xf32>) -> f32
  %old2 = memref.atomic_rmw addf %xi, %out[%j] : (f32, memref<?xf32>) -> f32
  return
}
// CHECK-LABEL: func.func private @k__atomic_sums(
// CHECK-SAME: -> (f32, f32)
// CHECK-NOT: memref.atomic_rmw
// CHECK: return

// CHECK-LABEL: func.func @run(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?xf32>, %[[OUT:[a-z0-9]+]]: memref<?xf32>, %[[J:[a-z0-9]+]]: index)
// CHECK: %[[CHUNKS:.*]] = arith.ceildivui %{{.*}}, %{{.*}} : index
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%[[CHUNKS]])
// CHECK: %[[S:.*]]:2 = scf.for {{.*}} -> (f64, f64) {
// CHECK-NEXT: %[[V:.*]]:2 = func.call @k__atomic_sums(
// CHECK-NEXT: arith.extf %[[V]]#0 : f32 to f64
// CHECK-NEXT: arith.addf {{.*}} fastmath<reassoc> : f64
// CHECK: memref.store %[[S]]#0
// CHECK: memref.store %[[S]]#1
// CHECK: scf.reduce
// CHECK: scf.while
// CHECK: %[[T0:.*]] = arith.truncf %{{.*}} : f64 to f32
// CHECK: %[[OLD0:.*]] = memref.load %[[OUT]][%{{.*}}]
// CHECK-NEXT: %[[NEW0:.*]] = arith.addf %[[OLD0]], %[[T0]] : f32
// CHECK-NEXT: memref.store %[[NEW0]], %[[OUT]]
// CHECK: scf.while
// CHECK: %[[T1:.*]] = arith.truncf %{{.*}} : f64 to f32
// CHECK: %[[OLD1:.*]] = memref.load %[[OUT]][%[[J]]]
// CHECK-NEXT: %[[NEW1:.*]] = arith.addf %[[OLD1]], %[[T1]] : f32
// CHECK-NEXT: memref.store %[[NEW1]], %[[OUT]][%[[J]]]
// CHECK-NOT: memref.atomic_rmw
// CHECK: return
func.func @run(%x: memref<?xf32>, %out: memref<?xf32>, %j: index) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  "adj.launch"(%n) ({
    func.call @k(%x, %out, %j) : (memref<?xf32>, memref<?xf32>, index) -> ()
    gpu.yield
  }) {kernel = @k} : (index) -> ()
  return
}

// An integer counter: summed in its own type.
func.func private @count(%x: memref<?xf32>, %n: memref<?xi64>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %c0 = arith.constant 0 : index
  %one = arith.constant 1 : i64
  %old = memref.atomic_rmw addi %one, %n[%c0] : (i64, memref<?xi64>) -> i64
  return
}
// CHECK-LABEL: func.func @run_count(
// CHECK: scf.for {{.*}} -> (i64) {
// CHECK: func.call @count__atomic_sums(
// CHECK-NEXT: arith.addi
// CHECK: scf.while
// CHECK: %[[TOTAL:.*]] = scf.if
// CHECK: } else {
// CHECK: %[[OLD:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<?xi64>
// CHECK-NEXT: %[[NEW:.*]] = arith.addi %[[OLD]], %[[TOTAL]] : i64
// CHECK-NEXT: memref.store %[[NEW]]
// CHECK-NOT: memref.atomic_rmw
// CHECK: return
func.func @run_count(%x: memref<?xf32>, %n: memref<?xi64>) {
  %c0 = arith.constant 0 : index
  %m = memref.dim %x, %c0 : memref<?xf32>
  "adj.launch"(%m) ({
    func.call @count(%x, %n) : (memref<?xf32>, memref<?xi64>) -> ()
    gpu.yield
  }) {kernel = @count} : (index) -> ()
  return
}

// The old value used: one atomic an item, as written.
func.func private @ticket(%t: memref<?xi64>, %out: memref<?xi64>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %c0 = arith.constant 0 : index
  %one = arith.constant 1 : i64
  %old = memref.atomic_rmw addi %one, %t[%c0] : (i64, memref<?xi64>) -> i64
  memref.store %old, %out[%i] : memref<?xi64>
  return
}
// CHECK-LABEL: func.func @run_ticket(
// CHECK: scf.parallel
// CHECK-NEXT: func.call @ticket(
// CHECK-NOT: @ticket__atomic_sums
func.func @run_ticket(%t: memref<?xi64>, %out: memref<?xi64>) {
  %c0 = arith.constant 0 : index
  %m = memref.dim %out, %c0 : memref<?xi64>
  "adj.launch"(%m) ({
    func.call @ticket(%t, %out) : (memref<?xi64>, memref<?xi64>) -> ()
    gpu.yield
  }) {kernel = @ticket} : (index) -> ()
  return
}
