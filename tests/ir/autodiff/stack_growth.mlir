// Growth of the augmented function's stacks (tape.py `_reserve`, augment.py `runs_left`).
// A block of loops with trip counts pushes every iteration: a stack that must grow there
// grows once to what the remaining runs need (size + per-run need * runs left, at least 9/8
// of the capacity), not to twice its capacity; elsewhere (a branch) it doubles.
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

func.func @pone(%x: f64, %n: index) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%a = %x) -> f64 {
    %s = math.sin %a : f64
    %t = arith.mulf %s, %x : f64
    scf.yield %t : f64
  }
  return %r : f64
}
"adj.autodiff"() {sym_name = "one", fn = @pone, mode = "reverse", activity = ["active", "const"], ret_activity = "active"} : () -> ()


// One loop: runs left = N - t, N the trip count, t = (i - lb) / step, computed where the
// stack grows.
// CHECK-LABEL: func.func @one_aug(
// CHECK: scf.for %[[IV:[a-z0-9_]+]] = %[[LB:[a-z0-9_]+]] to %{{[a-z0-9_]+}} step %[[ST:[a-z0-9_]+]] iter_args(%{{[a-z0-9_]+}} = %{{[a-z0-9_]+}}, %[[BUF:[a-z0-9_]+]] = %{{[a-z0-9_]+}}, %[[SIZE:[a-z0-9_]+]] = %{{[a-z0-9_]+}})
// CHECK: %[[NEED:.*]] = arith.addi %[[SIZE]], %{{.*}} : index
// CHECK: %[[CAP:.*]] = memref.dim %[[BUF]]
// CHECK: %[[GROW:.*]] = arith.cmpi ugt, %[[NEED]], %[[CAP]] : index
// CHECK-NEXT: scf.if %[[GROW]]
// CHECK-NEXT: %[[PER:.*]] = arith.subi %[[NEED]], %[[SIZE]] : index
// CHECK: %[[N:.*]] = arith.maxsi
// CHECK-NEXT: %[[OFF:.*]] = arith.subi %[[IV]], %[[LB]] : index
// CHECK-NEXT: %[[T:.*]] = arith.divui %[[OFF]], %[[ST]] : index
// CHECK-NEXT: %[[RUNS:.*]] = arith.subi %[[N]], %[[T]] : index
// CHECK-NEXT: %[[ALL:.*]] = arith.muli %[[PER]], %[[RUNS]] : index
// CHECK-NEXT: %[[PLAN:.*]] = arith.addi %[[SIZE]], %[[ALL]] : index
// CHECK-NEXT: %[[ATLEAST:.*]] = arith.maxui %[[PLAN]], %[[NEED]] : index
// CHECK-NEXT: %[[C8:.*]] = arith.constant 8 : index
// CHECK-NEXT: %[[EIGHTH:.*]] = arith.divui %[[CAP]], %[[C8]] : index
// CHECK-NEXT: %[[MORE:.*]] = arith.addi %[[CAP]], %[[EIGHTH]] : index
// CHECK-NEXT: %[[NEW:.*]] = arith.maxui %[[ATLEAST]], %[[MORE]] : index
// CHECK-NEXT: memref.alloc(%[[NEW]]) : memref<?xf64>
// CHECK-NOT: arith.muli %[[CAP]]
// CHECK: return

func.func @pnest(%x: f64, %n: index, %m: index) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%a = %x) -> f64 {
    %q = scf.for %j = %c1 to %m step %c2 iter_args(%b = %a) -> f64 {
      %s = math.sin %b : f64
      scf.yield %s : f64
    }
    scf.yield %q : f64
  }
  return %r : f64
}
"adj.autodiff"() {sym_name = "nest", fn = @pnest, mode = "reverse", activity = ["active", "const", "const"], ret_activity = "active"} : () -> ()


// Nested loops: (N_j - t_j) + (N_i - 1 - t_i) * N_j runs left.
// CHECK-LABEL: func.func @nest_aug(
// CHECK: scf.for %[[I:[a-z0-9_]+]] = %[[LBI:[a-z0-9_]+]] to
// CHECK: scf.for %[[J:[a-z0-9_]+]] = %[[LBJ:[a-z0-9_]+]] to %{{[a-z0-9_]+}} step %[[STJ:[a-z0-9_]+]] iter_args(%{{[a-z0-9_]+}} = %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} = %{{[a-z0-9_]+}}, %[[SIZE:[a-z0-9_]+]] = %{{[a-z0-9_]+}})
// CHECK: scf.if
// CHECK-NEXT: %[[PER:.*]] = arith.subi %{{.*}}, %[[SIZE]] : index
// CHECK: %[[NJ:.*]] = arith.maxsi
// CHECK-NEXT: %[[OJ:.*]] = arith.subi %[[J]], %[[LBJ]] : index
// CHECK-NEXT: %[[TJ:.*]] = arith.divui %[[OJ]], %[[STJ]] : index
// CHECK-NEXT: %[[INNER:.*]] = arith.subi %[[NJ]], %[[TJ]] : index
// CHECK: %[[NI:.*]] = arith.maxsi
// CHECK-NEXT: %[[OI:.*]] = arith.subi %[[I]], %[[LBI]] : index
// CHECK-NEXT: %[[TI:.*]] = arith.divui %[[OI]], %{{.*}} : index
// CHECK: %[[NI1:.*]] = arith.subi %[[NI]], %{{.*}} : index
// CHECK-NEXT: %[[LATER:.*]] = arith.subi %[[NI1]], %[[TI]] : index
// CHECK-NEXT: %[[OUTER:.*]] = arith.muli %[[LATER]], %[[NJ]] : index
// CHECK-NEXT: %[[RUNS:.*]] = arith.addi %[[INNER]], %[[OUTER]] : index
// CHECK-NEXT: arith.muli %[[PER]], %[[RUNS]] : index
// CHECK: return

func.func @pbranchy(%x: f64, %m: memref<?xf64>, %n: index) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%a = %x) -> f64 {
    %c = arith.cmpf olt, %a, %x : f64
    %y = scf.if %c -> f64 {
      %v = memref.load %m[%i] : memref<?xf64>
      %t = arith.mulf %v, %a : f64
      memref.store %a, %m[%i] : memref<?xf64>
      scf.yield %t : f64
    } else {
      scf.yield %a : f64
    }
    scf.yield %y : f64
  }
  return %r : f64
}
"adj.autodiff"() {sym_name = "branchy", fn = @pbranchy, mode = "reverse", activity = ["active", "const", "const"], ret_activity = "active"} : () -> ()

// A push in a branch may not run every iteration: that stack doubles there; the loop body's
// own push (a, which the reversed condition needs) is planned.
// CHECK-LABEL: func.func @branchy_aug(
// CHECK: scf.if %{{.*}} -> (f64, memref<?xf64>, index) {
// CHECK: memref.load
// CHECK: %[[CAP:.*]] = memref.dim
// CHECK: scf.if
// CHECK-NEXT: %[[C2:.*]] = arith.constant 2 : index
// CHECK-NEXT: %[[TWICE:.*]] = arith.muli %[[CAP]], %[[C2]] : index
// CHECK-NEXT: arith.maxui %[[TWICE]]
// CHECK: } else {
// CHECK: scf.if
// CHECK-NEXT: %[[PER:.*]] = arith.subi
// CHECK: arith.divui
// CHECK-NEXT: %[[RUNS:.*]] = arith.subi
// CHECK-NEXT: arith.muli %[[PER]], %[[RUNS]] : index
// CHECK: return
