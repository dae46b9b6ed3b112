// --adj-lower-cpu of a launch that returns item sums (adj.launch's results: the sums over work
// items, in f64, of the per-item buffers that are the call's last arguments). Where the kernel stores
// each buffer's element once, at the top of its body, at its own index, the launch becomes an
// scf.parallel over 4096-item chunks whose items are summed in f64 as they are computed, by a
// copy of the kernel that returns those values (`@<kernel>__item_sums`, without the buffer
// parameters): the buffers are never written nor read. Otherwise (@guarded, which stores in
// an scf.if) the kernel fills the buffers and they are summed afterwards.
// RUN: adjit-opt %s --adj-lower-cpu | FileCheck %s

func.func private @k(%a: f32, %x: memref<?xf32>, %ba: memref<?xf32>, %bb: memref<?xf64>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %xi = memref.load %x[%i] : memref<?xf32>
  %v = arith.mulf %a, %xi : f32
  memref.store %v, %ba[%i] : memref<?xf32>
  %w = arith.extf %xi : f32 to f64
  memref.store %w, %bb[%i] : memref<?xf64>
  return
}

// The summing copy: no buffer parameters, no stores, the values returned.
// CHECK-LABEL: func.func private @k__item_sums(
// CHECK-SAME: %{{[a-z0-9]+}}: f32, %{{[a-z0-9]+}}: memref<?xf32>, %{{[a-z0-9]+}}: index, %{{[a-z0-9]+}}: index) -> (f32, f64)
// CHECK-NOT: memref.store
// CHECK: return %{{.*}}, %{{.*}} : f32, f64

// CHECK-LABEL: func.func @run(
// CHECK-SAME: %[[A:[a-z0-9]+]]: f32, %[[X:[a-z0-9]+]]: memref<?xf32>
func.func @run(%a: f32, %x: memref<?xf32>) -> (f64, f64) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %ba = memref.alloc(%n) : memref<?xf32>
  %bb = memref.alloc(%n) : memref<?xf64>
  %s:2 = "adj.launch"(%n) ({
    func.call @k(%a, %x, %ba, %bb) : (f32, memref<?xf32>, memref<?xf32>, memref<?xf64>) -> ()
    gpu.yield
  }) {kernel = @k} : (index) -> (f64, f64)
  return %s#0, %s#1 : f64, f64
}
// CHECK: %[[N:.*]] = memref.dim %[[X]]
// CHECK: %[[ITEMS:.*]] = arith.muli %{{.*}}, %[[N]] : index
// CHECK: %[[C4096:.*]] = arith.constant 4096 : index
// CHECK: %[[CHUNKS:.*]] = arith.ceildivui %[[ITEMS]], %[[C4096]] : index
// CHECK: %[[PA:.*]] = memref.alloc(%[[CHUNKS]]) : memref<?xf64>
// CHECK: %[[PB:.*]] = memref.alloc(%[[CHUNKS]]) : memref<?xf64>
// CHECK: scf.parallel (%[[C:.*]]) = (%{{.*}}) to (%[[CHUNKS]])
// CHECK: %[[LO:.*]] = arith.muli %[[C]], %{{.*}} : index
// CHECK: %[[HI:.*]] = arith.minui %{{.*}}, %[[ITEMS]] : index
// CHECK: %[[SUMS:.*]]:2 = scf.for %[[I:.*]] = %[[LO]] to %[[HI]] step %{{.*}} iter_args(%[[SA:.*]] = %{{.*}}, %[[SB:.*]] = %{{.*}}) -> (f64, f64) {
// CHECK-NEXT: %[[V:.*]]:2 = func.call @k__item_sums(%[[A]], %[[X]], %[[I]], %[[N]]) : (f32, memref<?xf32>, index, index) -> (f32, f64)
// CHECK-NEXT: %[[W:.*]] = arith.extf %[[V]]#0 : f32 to f64
// CHECK-NEXT: %[[NA:.*]] = arith.addf %[[SA]], %[[W]] fastmath<reassoc> : f64
// CHECK-NEXT: %[[NB:.*]] = arith.addf %[[SB]], %[[V]]#1 fastmath<reassoc> : f64
// CHECK-NEXT: scf.yield %[[NA]], %[[NB]] : f64, f64
// CHECK: memref.store %[[SUMS]]#0, %[[PA]][%[[C]]]
// CHECK: memref.store %[[SUMS]]#1, %[[PB]][%[[C]]]
// The chunks' partials, pairwise (the sums are f64).
// CHECK: scf.while
// CHECK: memref.load %[[PA]]
// CHECK: %[[TA:.*]] = scf.if
// CHECK: scf.while
// CHECK: memref.load %[[PB]]
// CHECK: %[[TB:.*]] = scf.if
// CHECK: return %[[TA]], %[[TB]] : f64, f64

func.func private @guarded(%x: memref<?xf32>, %b: memref<?xf32>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %xi = memref.load %x[%i] : memref<?xf32>
  %zero = arith.constant 0.0 : f32
  %pos = arith.cmpf ogt, %xi, %zero : f32
  scf.if %pos {
    memref.store %xi, %b[%i] : memref<?xf32>
  } else {
    memref.store %zero, %b[%i] : memref<?xf32>
  }
  return
}

// CHECK-LABEL: func.func @run_guarded(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?xf32>
// CHECK: %[[B:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK: scf.parallel
// CHECK-NEXT: func.call @guarded(%[[X]], %[[B]], %{{.*}}, %{{.*}})
// CHECK: memref.load %[[B]]
// CHECK: arith.extf %{{.*}} : f32 to f64
func.func @run_guarded(%x: memref<?xf32>) -> f64 {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %b = memref.alloc(%n) : memref<?xf32>
  %s = "adj.launch"(%n) ({
    func.call @guarded(%x, %b) : (memref<?xf32>, memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @guarded} : (index) -> f64
  return %s : f64
}
// CHECK-NOT: @guarded__item_sums
