// Control flow in both modes: scf.for (dynamic and static trip counts), scf.if with results,
// scf.while with a data-dependent trip count.
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

func.func @ploop(%x: f64, %n: index) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%a = %x) -> f64 {
    %s = math.sin %a : f64
    %t = arith.mulf %s, %x : f64
    scf.yield %t : f64
  }
  return %r : f64
}
"adj.autodiff"() {sym_name = "loop_fwd", fn = @ploop, mode = "forward", activity = ["dup", "const"], ret_activity = "dup"} : () -> ()
"adj.autodiff"() {sym_name = "loop", fn = @ploop, mode = "reverse", activity = ["active", "const"], ret_activity = "active"} : () -> ()

// Forward: the tangent is carried beside the primal.
// CHECK-LABEL: func.func @loop_fwd(
// CHECK-SAME: %[[X:[a-z0-9]+]]: f64, %[[DX:[a-z0-9]+]]: f64, %[[N:[a-z0-9]+]]: index)
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[N]] step %{{.*}} iter_args(%[[A:.*]] = %[[X]], %[[DA:.*]] = %[[DX]]) -> (f64, f64)
// CHECK: math.cos %[[A]]
// CHECK: scf.yield %{{.*}}, %{{.*}} : f64, f64

// Augmented: the loop-carried value goes on the f64 stack once per iteration (sin(a) is
// recomputed from it, not taped); the stack is threaded through the loop and returned.
// CHECK-LABEL: func.func @loop_aug(
// CHECK-SAME: -> (memref<?xf64>, index)
// CHECK: %[[BUF:.*]] = memref.alloc(%{{.*}}) : memref<?xf64>
// CHECK: %[[R:.*]]:3 = scf.for {{.*}} iter_args(%[[A:.*]] = %{{.*}}, %[[B:.*]] = %[[BUF]], %[[S:.*]] = %{{.*}}) -> (f64, memref<?xf64>, index)
// CHECK: %[[G:.*]] = scf.if
// CHECK: memref.store %[[A]], %[[G]][%[[S]]] : memref<?xf64>
// CHECK: return %[[R]]#1, %[[R]]#2 : memref<?xf64>, index

// Reverse: the same iterations backwards (i = n - 1 - j), popping what aug pushed; x's
// adjoint is carried through the loop, the loop-carried adjoint too.
// CHECK-LABEL: func.func @loop_rev(
// CHECK-SAME: %[[X:[a-z0-9]+]]: f64, %[[N:[a-z0-9]+]]: index, %[[D:[a-z0-9]+]]: f64, %[[STACK:[a-z0-9]+]]: memref<?xf64>, %[[SIZE:[a-z0-9]+]]: index) -> f64
// CHECK: %[[P:.*]] = memref.alloca() : memref<index>
// CHECK: memref.store %[[SIZE]], %[[P]][] : memref<index>
// CHECK: %[[R:.*]]:2 = scf.for %{{.*}} iter_args(%[[DA:.*]] = %[[D]], %[[DXC:.*]] = %{{.*}}) -> (f64, f64)
// CHECK: %[[PTR:.*]] = memref.load %[[P]][] : memref<index>
// CHECK-NEXT: %[[TOP:.*]] = arith.subi %[[PTR]], %{{.*}} : index
// CHECK-NEXT: memref.store %[[TOP]], %[[P]][] : memref<index>
// CHECK-NEXT: %[[A:.*]] = memref.load %[[STACK]][%[[TOP]]] : memref<?xf64>
// CHECK-NEXT: math.sin %[[A]]
// CHECK: math.cos %[[A]]
// CHECK: scf.yield
// CHECK: %[[DX:.*]] = arith.addf %[[R]]#1, %[[R]]#0 : f64
// CHECK: return %[[DX]] : f64

func.func @pbranch(%x: f64, %y: f64) -> f64 {
  %c = arith.cmpf olt, %x, %y : f64
  %r = scf.if %c -> f64 {
    %s = math.sin %x : f64
    scf.yield %s : f64
  } else {
    %e = math.exp %y : f64
    scf.yield %e : f64
  }
  return %r : f64
}
"adj.autodiff"() {sym_name = "branch", fn = @pbranch, mode = "reverse", activity = ["active", "active"], ret_activity = "active"} : () -> ()

// The condition is recomputed from the arguments; each branch returns both adjoints.
// CHECK-LABEL: func.func @branch_rev(
// CHECK-SAME: %[[X:[a-z0-9]+]]: f64, %[[Y:[a-z0-9]+]]: f64, %[[D:[a-z0-9]+]]: f64) -> (f64, f64)
// CHECK: %[[C:.*]] = arith.cmpf olt, %[[X]], %[[Y]] : f64
// CHECK: %[[R:.*]]:2 = scf.if %[[C]] -> (f64, f64) {
// CHECK: math.cos %[[X]]
// CHECK: } else {
// CHECK: math.exp %[[Y]]
// CHECK: }
// CHECK: return %[[R]]#0, %[[R]]#1 : f64, f64

func.func @pgrow(%x0: f64, %a: f64) -> f64 {
  %ten = arith.constant 10.0 : f64
  %r = scf.while (%x = %x0) : (f64) -> f64 {
    %c = arith.cmpf olt, %x, %ten : f64
    scf.condition(%c) %x : f64
  } do {
  ^bb0(%y: f64):
    %m = arith.mulf %y, %a : f64
    scf.yield %m : f64
  }
  return %r : f64
}
"adj.autodiff"() {sym_name = "grow", fn = @pgrow, mode = "reverse", activity = ["active", "active"], ret_activity = "active"} : () -> ()

// Augmented: an iteration counter rides along the while; its final value is on the tape.
// CHECK-LABEL: func.func @grow_aug(
// CHECK-SAME: -> (index, memref<?xf64>, index)
// CHECK-SAME: holds = "iteration count of scf.while
// CHECK: %[[W:.*]]:4 = scf.while (%{{.*}} = %{{.*}}, %[[K:.*]] = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) : (f64, index, memref<?xf64>, index)
// CHECK: arith.addi %{{.*}}, %{{.*}} : index
// CHECK: return %[[W]]#1, %[[W]]#2, %[[W]]#3 : index, memref<?xf64>, index

// Reverse: an scf.for over the recorded count.
// CHECK-LABEL: func.func @grow_rev(
// CHECK-SAME: %{{.*}}: f64, %{{.*}}: f64, %[[D:[a-z0-9]+]]: f64, %[[COUNT:[a-z0-9]+]]: index, %{{.*}}: memref<?xf64>, %{{.*}}: index) -> (f64, f64)
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[COUNT]] step
