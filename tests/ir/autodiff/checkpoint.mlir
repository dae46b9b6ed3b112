// A checkpointed loop (adjit.checkpointed: scf.for marked adj.checkpoint) in reverse mode:
// its body becomes a step function; the augmented function copies the initial state (the
// arrays the step writes) onto the tape and runs the loop as it is, with no tape of its
// own; the reverse function runs the schedule's actions (runtime/native/checkpoint.cpp)
// in an scf.while: advance (primal steps), take a snapshot, restore, turn (the step's
// augmented then reverse function).
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

// The state: the two swapped arrays (the step writes %v, which holds either), the
// carried float; the parameter %c is a free Active scalar whose adjoint the turns add up.
// CHECK-LABEL: func.func @f(
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %[[E:.*]] = %{{.*}}) -> (memref<?xf64>, memref<?xf64>, f64)
// CHECK: %[[NEXT:.*]] = func.call @__adj_step_f(%{{.*}}) : (index, memref<?xf64>, memref<?xf64>, f64, f64) -> f64
// CHECK: scf.yield %{{.*}}, %{{.*}}, %[[NEXT]] : memref<?xf64>, memref<?xf64>, f64
// CHECK: } {adj.checkpoint = {snapshots = 3 : i64}}
func.func @f(%u0: memref<?xf64>, %v0: memref<?xf64>, %c: f64, %n: index) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f64
  %r:3 = scf.for %t = %c0 to %n step %c1 iter_args(%u = %u0, %v = %v0, %e = %z)
      -> (memref<?xf64>, memref<?xf64>, f64) {
    %len = memref.dim %u, %c0 : memref<?xf64>
    %s = scf.for %i = %c0 to %len step %c1 iter_args(%acc = %e) -> f64 {
      %x = memref.load %u[%i] : memref<?xf64>
      %y = math.sin %x : f64
      %w = arith.mulf %c, %y : f64
      memref.store %w, %v[%i] : memref<?xf64>
      %a = arith.addf %acc, %w : f64
      scf.yield %a : f64
    }
    scf.yield %v, %u, %s : memref<?xf64>, memref<?xf64>, f64
  } {adj.checkpoint = {snapshots = 3 : i64}}
  return %r#2 : f64
}
"adj.autodiff"() {sym_name = "df", fn = @f, mode = "reverse", activity = ["dup", "dup", "active", "const"], ret_activity = "active"} : () -> ()

// CHECK-LABEL: func.func private @__adj_step_f(
// CHECK-SAME: %{{.*}}: index, %[[U:.*]]: memref<?xf64>, %[[V:.*]]: memref<?xf64>, %{{.*}}: f64, %{{.*}}: f64) -> f64
// CHECK-SAME: adj.checkpoint_step
// CHECK: math.sin
// CHECK: memref.store %{{.*}}, %[[V]]

// Augmented: the initial state's two arrays copied onto the tape, then the loop as it is.
// CHECK-LABEL: func.func @df_aug(
// CHECK-DAG: memref.copy %{{.*}}, %[[S0:.*]] : memref<?xf64> to memref<?xf64>
// CHECK-DAG: memref.copy %{{.*}}, %[[S1:.*]] : memref<?xf64> to memref<?xf64>
// CHECK: scf.for
// CHECK: func.call @__adj_step_f(
// CHECK-NOT: _aug(
// CHECK: return

// Reverse: the schedule, its actions, the turn calling the step's derivative.
// CHECK-LABEL: func.func @df_rev(
// CHECK: %[[CTX:.*]] = call @adj_ckpt_new(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (i64, i64, i64, i64) -> i64
// CHECK: scf.while
// CHECK: func.call @adj_ckpt_next(%[[CTX]])
// CHECK: scf.condition
// CHECK: func.call @adj_ckpt_to(%[[CTX]])
// CHECK: func.call @__adj_step_f(
// CHECK: func.call @__adj___adj_step_f_rev_{{.*}}_aug(
// CHECK: func.call @__adj___adj_step_f_rev_{{.*}}_rev(
// CHECK: call @adj_ckpt_free(%[[CTX]]) : (i64) -> ()
