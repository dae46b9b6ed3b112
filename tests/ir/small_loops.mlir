// --adj-serialise-small-loops (passes/small_loops.py, run by the CPU pipeline before
// async-parallel-for when it uses more than one thread): an outermost scf.parallel whose
// iterations have a static cost gets a serial twin, taken when iterations <= min(2^17,
// 2^23 / cost); the parallel loop stays for larger trip counts. Cost: ops (math 10, divisions
// 4), constant-trip scf.for bodies multiplied, the dearer scf.if branch; unknown (the loop
// left alone) with a run-time trip count, a call or a nested scf.parallel.
// RUN: adjit-opt %s --adj-serialise-small-loops | FileCheck %s

// 2-D, 4 ops an iteration (load, mulf, store + addf): min(2^17, 2^23 / 4) = 131072.
// CHECK-LABEL: func.func @stencil(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?x?xf32>, %[[N:[a-z0-9]+]]: index, %[[M:[a-z0-9]+]]: index)
// CHECK: %[[T0:.*]] = arith.ceildivsi
// CHECK: %[[T1:.*]] = arith.ceildivsi
// CHECK: %[[ITEMS:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CHECK: %[[LIMIT:.*]] = arith.constant 131072 : index
// CHECK: %[[SMALL:.*]] = arith.cmpi ule, %[[ITEMS]], %[[LIMIT]] : index
// CHECK: scf.if %[[SMALL]] {
// CHECK-NEXT: scf.for %[[I:.*]] = %{{.*}} to %[[N]] step
// CHECK-NEXT: scf.for %[[J:.*]] = %{{.*}} to %[[M]] step
// CHECK-NEXT: memref.load %[[X]][%[[I]], %[[J]]]
// CHECK: memref.store %{{.*}}, %[[X]][%[[I]], %[[J]]]
// CHECK: } else {
// CHECK-NEXT: scf.parallel (%[[PI:.*]], %[[PJ:.*]]) =
// CHECK-NEXT: memref.load %[[X]][%[[PI]], %[[PJ]]]
// CHECK: scf.reduce
func.func @stencil(%x: memref<?x?xf32>, %n: index, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %two = arith.constant 2.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %m) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<?x?xf32>
    %w = arith.mulf %v, %two : f32
    %u = arith.addf %w, %v : f32
    memref.store %u, %x[%i, %j] : memref<?x?xf32>
    scf.reduce
  }
  return
}

// A transcendental and a constant-trip inner loop of 100: cost 100 * (exp 10 + mulf 1) + load
// + store = 1102 (yields and constants are free).
// min(2^17, 2^23 / 1102) = 7612.
// CHECK-LABEL: func.func @heavy(
// CHECK: arith.constant 7612 : index
// CHECK: scf.if
func.func @heavy(%x: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c100 = arith.constant 100 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %v = memref.load %x[%i] : memref<?xf32>
    %r = scf.for %k = %c0 to %c100 step %c1 iter_args(%s = %v) -> (f32) {
      %e = math.exp %s : f32
      %t = arith.mulf %e, %s : f32
      scf.yield %t : f32
    }
    memref.store %r, %x[%i] : memref<?xf32>
    scf.reduce
  }
  return
}

// A loop of run-time trip count inside (adjit.sum's chunks): cost unknown, left parallel.
// CHECK-LABEL: func.func @chunks(
// CHECK-NOT: scf.if
// CHECK: scf.parallel
// CHECK-NOT: scf.if
// CHECK: return
func.func @chunks(%x: memref<?xf32>, %out: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4096 = arith.constant 4096 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%c) = (%c0) to (%n) step (%c1) {
    %lo = arith.muli %c, %c4096 : index
    %hi = arith.addi %lo, %c4096 : index
    %s = scf.for %k = %lo to %hi step %c1 iter_args(%a = %zero) -> (f32) {
      %v = memref.load %x[%k] : memref<?xf32>
      %b = arith.addf %a, %v : f32
      scf.yield %b : f32
    }
    memref.store %s, %out[%c] : memref<?xf32>
    scf.reduce
  }
  return
}

// A call left after inlining: unknown, left parallel.
func.func private @opaque(f32) -> f32
// CHECK-LABEL: func.func @calls(
// CHECK-NOT: scf.if
// CHECK: return
func.func @calls(%x: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %v = memref.load %x[%i] : memref<?xf32>
    %r = func.call @opaque(%v) : (f32) -> f32
    memref.store %r, %x[%i] : memref<?xf32>
    scf.reduce
  }
  return
}
