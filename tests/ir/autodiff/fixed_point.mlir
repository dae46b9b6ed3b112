// A fixed-point function (adj.fixed_point: adjit.fixed_point) in reverse mode is
// differentiated implicitly, not through its loop: the augmented function runs it and keeps
// x*; the reverse one runs the step's augmented pass (Const in the parameters) once, asks
// its reverse pass for step'(x*) (== 1: the step holds x, and x* is x0), then iterates
// lambda <- xbar + (d step/d x)^T lambda (the reverse pass alone, on that one tape) in an
// scf.while to the primal's tolerance, then one more reverse pass, Active in the parameter,
// gives its adjoint.
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

// x <- cos(a x) + 0.5
func.func private @step(%x: f64, %a: f64) -> f64 {
  %ax = arith.mulf %a, %x : f64
  %c = math.cos %ax : f64
  %h = arith.constant 0.5 : f64
  %r = arith.addf %c, %h : f64
  return %r : f64
}
func.func private @solve(%x0: f64, %a: f64) -> f64
    attributes {adj.fixed_point = {step = @step, tol = 1.0e-12 : f64, max_iter = 100 : i64}} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 100 : index
  %tol = arith.constant 1.0e-12 : f64
  %true = arith.constant true
  %r:2 = scf.while (%x = %x0, %k = %c0, %go = %true) : (f64, index, i1) -> (f64, index) {
    %more = arith.cmpi slt, %k, %n : index
    %c = arith.andi %go, %more : i1
    scf.condition(%c) %x, %k : f64, index
  } do {
  ^bb0(%x: f64, %k: index):
    %y = func.call @step(%x, %a) : (f64, f64) -> f64
    %d = arith.subf %y, %x : f64
    %ad = math.absf %d : f64
    %g = arith.cmpf ugt, %ad, %tol : f64
    %k1 = arith.addi %k, %c1 : index
    scf.yield %y, %k1, %g : f64, index, i1
  }
  return %r#0 : f64
}
"adj.autodiff"() {sym_name = "dsolve", fn = @solve, mode = "reverse", activity = ["const", "active"], ret_activity = "active"} : () -> ()

// CHECK-LABEL: func.func @dsolve_aug(
// CHECK-SAME: %[[X0:.*]]: f64, %[[A:.*]]: f64) -> f64
// CHECK: %[[XS:.*]] = call @solve(%[[X0]], %[[A]]) : (f64, f64) -> f64
// CHECK: return %[[XS]] : f64

// The adjoint iteration: the step's reverse pass in x (Const in a), to the same tolerance,
// its augmented pass once, before the loop.
// CHECK-LABEL: func.func @dsolve_rev(
// CHECK-SAME: %{{.*}}: f64, %[[A:.*]]: f64, %[[XBAR:.*]]: f64, %[[XS:.*]]: f64) -> f64
// CHECK: call @__adj_step_rev_ac_a_aug(%[[XS]], %[[A]])
// CHECK: %[[SLOPE:.*]] = call @__adj_step_rev_ac_a_rev(%[[XS]], %[[A]], %{{.*}})
// CHECK: %[[HELD:.*]] = arith.cmpf oeq, %[[SLOPE]], %{{.*}} : f64
// CHECK: scf.while
// CHECK-NOT: __adj_step_rev_ac_a_aug
// CHECK: call @__adj_step_rev_ac_a_rev(%[[XS]], %[[A]], %{{.*}})
// CHECK: arith.addf %[[XBAR]], %{{.*}} : f64
// CHECK: arith.select %[[HELD]]
// CHECK: arith.cmpf ugt, %{{.*}}, %{{.*}} : f64
// The parameter's adjoint: one reverse pass, Active in a, seeded with lambda.
// CHECK: call @__adj_step_rev_ca_a_aug(%[[XS]], %[[A]])
// CHECK: %[[GA:.*]] = call @__adj_step_rev_ca_a_rev(%[[XS]], %[[A]], %{{.*}})
// CHECK: return %[[GA]] : f64
// No reverse pass of the loop itself.
// CHECK-NOT: __adj_solve
