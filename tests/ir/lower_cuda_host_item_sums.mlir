// --adj-lower-cuda-host of a launch that returns item sums: on the GPU the kernel fills its
// per-item buffers, and the sums run on the device too (reduction.sum_items_on_device): a
// launch per 4096-item chunk of each buffer into f64 partials (@__adj_item_sums_<T>), then a
// one-item launch adding the partials pairwise into one element (@__adj_pairwise_f64), which
// is all the host reads: not the buffers, which a host-side sum would pull across the bus.
// RUN: adjit-opt %s --adj-lower-cuda-host | FileCheck %s

func.func private @k(%a: f32, %x: memref<?xf32>, %ba: memref<?xf32>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %xi = memref.load %x[%i] : memref<?xf32>
  %v = arith.mulf %a, %xi : f32
  memref.store %v, %ba[%i] : memref<?xf32>
  return
}

func.func @run(%a: f32, %x: memref<?xf32>) -> f64 {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %ba = memref.alloc(%n) : memref<?xf32>
  %s = "adj.launch"(%n) ({
    func.call @k(%a, %x, %ba) : (f32, memref<?xf32>, memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @k} : (index) -> (f64)
  return %s : f64
}
// The launcher of @k, then of the chunk sums over ceil(n / 4096) items, then of the pairwise
// total over one item; the host loads the total's one element.
// CHECK-LABEL: func.func @run(
// CHECK: %[[BUF:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK: call @__adjit_launch__k__{{.*}}(%{{.*}}, %{{.*}}, %[[BUF]], %{{.*}})
// CHECK: %[[CHUNKS:.*]] = arith.ceildivui %{{.*}}, %{{.*}} : index
// CHECK: %[[PARTIAL:.*]] = memref.alloc(%[[CHUNKS]]) : memref<?xf64>
// CHECK: %[[TOTAL:.*]] = memref.alloc(%{{.*}}) : memref<?xf64>
// CHECK: call @__adjit_launch____adj_item_sums_f32__{{.*}}(%[[BUF]], %[[PARTIAL]], %[[CHUNKS]])
// CHECK: call @__adjit_launch____adj_pairwise_f64__{{.*}}(%[[PARTIAL]], %[[TOTAL]], %{{.*}})
// CHECK: %[[S:.*]] = memref.load %[[TOTAL]][%{{.*}}] : memref<?xf64>
// CHECK-NOT: scf.parallel
// CHECK: return %[[S]] : f64

// CHECK-LABEL: func.func private @__adj_item_sums_f32(
// CHECK-SAME: %{{[a-z0-9]+}}: memref<?xf32>, %[[P:[a-z0-9]+]]: memref<?xf64>)
// CHECK-SAME: attributes {adj.kernel, adj.ndim = 1 : i64}
// CHECK: scf.for {{.*}} -> (f64, f64, f64, f64)
// CHECK: arith.addf %{{.*}}, %{{.*}} fastmath<reassoc> : f64
// CHECK: memref.store %{{.*}}, %[[P]][%{{.*}}] : memref<?xf64>

// CHECK-LABEL: func.func private @__adj_pairwise_f64(
// CHECK: scf.while
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<?xf64>
