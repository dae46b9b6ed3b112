// Launches on views of unknown innermost stride (unit_stride.py, in --adj-lower-cpu): when
// every such argument's last stride is 1 at run time, the launch runs @k__unit, the kernel
// with those parameters typed strided<[..., 1]>, whose entry casts fold into its loads and
// stores (unit-stride addressing that LLVM vectorises); otherwise the kernel as it was.
// RUN: adjit-opt %s --pass-pipeline='builtin.module(adj-lower-cpu,canonicalize)' | FileCheck %s

func.func private @shift(%u: memref<?xf32, strided<[?], offset: ?>>, %v: memref<?xf32, strided<[?], offset: ?>>, %w: memref<?xf32>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.global_id"() {dim = 0 : i64} : () -> index
  %a = memref.load %u[%i] : memref<?xf32, strided<[?], offset: ?>>
  %b = memref.load %w[%i] : memref<?xf32>
  %c = arith.addf %a, %b : f32
  memref.store %c, %v[%i] : memref<?xf32, strided<[?], offset: ?>>
  return
}
func.func @run(%u: memref<?xf32, strided<[?], offset: ?>>, %v: memref<?xf32, strided<[?], offset: ?>>, %w: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %w, %c0 : memref<?xf32>
  "adj.launch"(%n) ({
    func.call @shift(%u, %v, %w) : (memref<?xf32, strided<[?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>, memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @shift} : (index) -> ()
  return
}

// CHECK-LABEL: func.func @run(
// CHECK-SAME: %[[U:[a-z0-9]+]]: memref<?xf32, strided<[?], offset: ?>>, %[[V:[a-z0-9]+]]: memref<?xf32, strided<[?], offset: ?>>, %[[W:[a-z0-9]+]]: memref<?xf32>)
// CHECK-DAG: %{{.*}}, %{{.*}}, %{{.*}}, %[[US:.*]] = memref.extract_strided_metadata %[[U]]
// CHECK-DAG: %{{.*}}, %{{.*}}, %{{.*}}, %[[VS:.*]] = memref.extract_strided_metadata %[[V]]
// CHECK-DAG: %[[UONE:.*]] = arith.cmpi eq, %[[US]], %{{.*}} : index
// CHECK-DAG: %[[VONE:.*]] = arith.cmpi eq, %[[VS]], %{{.*}} : index
// CHECK: %[[BOTH:.*]] = arith.andi
// CHECK: scf.if %[[BOTH]] {
// CHECK-DAG: %[[UC:.*]] = memref.cast %[[U]] : memref<?xf32, strided<[?], offset: ?>> to memref<?xf32, strided<[1], offset: ?>>
// CHECK-DAG: %[[VC:.*]] = memref.cast %[[V]] : memref<?xf32, strided<[?], offset: ?>> to memref<?xf32, strided<[1], offset: ?>>
// CHECK: scf.parallel
// CHECK-NEXT: func.call @shift__unit(%[[UC]], %[[VC]], %[[W]], %{{.*}}, %{{.*}})
// CHECK: } else {
// CHECK: scf.parallel
// CHECK-NEXT: func.call @shift(%[[U]], %[[V]], %[[W]], %{{.*}}, %{{.*}})

// The twin addresses both views with unit stride (its casts folded away).
// CHECK-LABEL: func.func private @shift__unit(
// CHECK-SAME: memref<?xf32, strided<[1], offset: ?>>, %{{.*}}: memref<?xf32, strided<[1], offset: ?>>, %{{.*}}: memref<?xf32>, %{{.*}}: index, %{{.*}}: index)
// CHECK-NOT: memref.cast
// CHECK: memref.load %{{.*}} : memref<?xf32, strided<[1], offset: ?>>
// CHECK: memref.store %{{.*}} : memref<?xf32, strided<[1], offset: ?>>
// CHECK: return
