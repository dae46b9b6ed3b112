// --adj-split-interior (passes/interior.py, run by the CPU pipeline on the scf.for nests
// that async-parallel-for leaves): an innermost step-1 loop whose body compares iv + c with
// a loop-invariant bound runs as three loops, the middle one with those compares true.
// RUN: adjit-opt %s --adj-split-interior | FileCheck %s

// The guard 0 < j + 1 < m - 1 (in i64, through an index cast, the bound computed inside the
// loop): it holds from j = 0 (0 - 1 + 1) on, and up to (excluding) m - 1 - 1 = m - 2.
// CHECK-LABEL: func.func @guarded(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?xf32>, %[[LB:[a-z0-9]+]]: index, %[[UB:[a-z0-9]+]]: index, %[[M:[a-z0-9]+]]: index)
// The bound m - 1, recomputed before the loop, clamped to +-2^62:
// CHECK: %[[M64:.*]] = arith.index_cast %[[M]] : index to i64
// CHECK: %[[B:.*]] = arith.subi %[[M64]], %{{.*}} : i64
// CHECK: arith.index_cast %[[B]] : i64 to index
// CHECK: arith.minsi
// CHECK: arith.maxsi
// The first border, the interior, the last border, in that order:
// CHECK: scf.for %[[J0:.*]] = %[[LB]] to %[[A:[a-z0-9_]+]] step
// CHECK:   arith.cmpi sgt
// CHECK:   scf.if
// CHECK: scf.for %[[J1:.*]] = %[[A]] to %[[END:[a-z0-9_]+]] step
// CHECK-NOT: arith.cmpi
// CHECK:   memref.store
// CHECK: }
// CHECK: scf.for %{{.*}} = %[[END]] to %[[UB]] step
// CHECK:   arith.cmpi sgt
// CHECK: return
func.func @guarded(%x: memref<?xf32>, %lb: index, %ub: index, %m: index) {
  %c1 = arith.constant 1 : index
  %one = arith.constant 1 : i64
  %zero = arith.constant 0 : i64
  %two = arith.constant 2.0 : f32
  scf.for %j = %lb to %ub step %c1 {
    %jp = arith.addi %j, %c1 : index
    %j64 = arith.index_cast %jp : index to i64
    %m64 = arith.index_cast %m : index to i64
    %hi = arith.subi %m64, %one : i64
    %a = arith.cmpi sgt, %j64, %zero : i64
    %b = arith.cmpi slt, %j64, %hi : i64
    %in = arith.andi %a, %b : i1
    scf.if %in {
      %v = memref.load %x[%jp] : memref<?xf32>
      %w = arith.mulf %v, %two : f32
      memref.store %w, %x[%j] : memref<?xf32>
    }
  }
  return
}

// Compares the split cannot use stay, and the loop with them: both sides vary (j < k[j]),
// an unsigned compare, a loop with a result, a step other than 1.
// CHECK-LABEL: func.func @left_alone(
// CHECK-COUNT-3: scf.for
// CHECK-NOT: scf.for
// CHECK: return
func.func @left_alone(%x: memref<?xindex>, %n: index, %s: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %z = arith.constant 0.0 : f32
  scf.for %j = %c0 to %n step %c1 {
    %k = memref.load %x[%j] : memref<?xindex>
    %lt = arith.cmpi slt, %j, %k : index
    %u = arith.cmpi ult, %j, %n : index
    %both = arith.andi %lt, %u : i1
    scf.if %both {
      memref.store %c0, %x[%j] : memref<?xindex>
    }
  }
  %r = scf.for %j = %c0 to %n step %c1 iter_args(%acc = %z) -> f32 {
    %lt = arith.cmpi slt, %j, %n : index
    %v = arith.select %lt, %s, %z : f32
    %acc2 = arith.addf %acc, %v : f32
    scf.yield %acc2 : f32
  }
  scf.for %j = %c0 to %n step %c2 {
    %lt = arith.cmpi sgt, %j, %c0 : index
    scf.if %lt {
      memref.store %c0, %x[%j] : memref<?xindex>
    }
  }
  return %r : f32
}

// A compare that holds only near the first border (j < 1) bounds the interior to [lb, 1):
// correct for any lb, empty when lb >= 1.
// CHECK-LABEL: func.func @border_only(
// CHECK: %[[C1:.*]] = arith.constant 1 : index
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for
func.func @border_only(%x: memref<?xf32>, %lb: index, %ub: index) {
  %c1 = arith.constant 1 : index
  %two = arith.constant 2.0 : f32
  scf.for %j = %lb to %ub step %c1 {
    %first = arith.cmpi slt, %j, %c1 : index
    scf.if %first {
      memref.store %two, %x[%j] : memref<?xf32>
    }
  }
  return
}
