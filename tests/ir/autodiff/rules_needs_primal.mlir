// config.needs_primal: a call whose result the caller reads only through a return that does
// not return the primal (Forward, Reverse: with_primal = false) goes to a rule without the
// primal where one exists (adj.rule_needs_primal = false); where the caller reads the result,
// to the rule with it. Without a primal-less rule the call keeps the primal.
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

func.func private @cube(%x: f64) -> f64 {
  %s = arith.mulf %x, %x : f64
  %r = arith.mulf %s, %x : f64
  return %r : f64
}
// The tangent 3 x^2 dx, with the primal and without.
func.func private @cube_fwd(%x: f64, %dx: f64) -> (f64, f64) attributes {
    adj.rule_for = @cube, adj.rule_kind = "forward", adj.rule_needs_primal = true} {
  %p = func.call @cube(%x) : (f64) -> f64
  %t = func.call @cube_tangent(%x, %dx) : (f64, f64) -> f64
  return %p, %t : f64, f64
}
func.func private @cube_tangent(%x: f64, %dx: f64) -> f64 attributes {
    adj.rule_for = @cube, adj.rule_kind = "forward", adj.rule_needs_primal = false} {
  %three = arith.constant 3.0 : f64
  %s = arith.mulf %x, %x : f64
  %a = arith.mulf %three, %s : f64
  %t = arith.mulf %a, %dx : f64
  return %t : f64
}
// Reverse: the augmented rules tape x; one gives the primal first, the other does not.
func.func private @cube_aug(%x: f64) -> (f64, f64) attributes {
    adj.rule_for = @cube, adj.rule_kind = "augmented", adj.rule_needs_primal = true} {
  %p = func.call @cube(%x) : (f64) -> f64
  return %p, %x : f64, f64
}
func.func private @cube_aug_lean(%x: f64) -> f64 attributes {
    adj.rule_for = @cube, adj.rule_kind = "augmented", adj.rule_needs_primal = false} {
  return %x : f64
}
func.func private @cube_rev(%x: f64, %dret: f64, %tape: f64) -> f64 attributes {
    adj.rule_for = @cube, adj.rule_kind = "reverse"} {
  %t = func.call @cube_tangent(%tape, %dret) : (f64, f64) -> f64
  return %t : f64
}

func.func @only_cube(%x: f64) -> f64 {
  %c = func.call @cube(%x) : (f64) -> f64
  return %c : f64
}
func.func @cube_squared(%x: f64) -> f64 {
  %c = func.call @cube(%x) : (f64) -> f64
  %r = arith.mulf %c, %c : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "t_only", fn = @only_cube, mode = "forward", activity = ["dup"], ret_activity = "dup"} : () -> ()
"adj.autodiff"() {sym_name = "tp_only", fn = @only_cube, mode = "forward", activity = ["dup"], ret_activity = "dup", with_primal = true} : () -> ()
"adj.autodiff"() {sym_name = "t_squared", fn = @cube_squared, mode = "forward", activity = ["dup"], ret_activity = "dup"} : () -> ()
"adj.autodiff"() {sym_name = "g_only", fn = @only_cube, mode = "reverse", activity = ["active"], ret_activity = "active"} : () -> ()
"adj.autodiff"() {sym_name = "g_squared", fn = @cube_squared, mode = "reverse", activity = ["active"], ret_activity = "active"} : () -> ()

// Forward, tangent only: the call's result is only returned, so no primal is asked for.
// CHECK-LABEL: func.func @t_only(
// CHECK-NOT: call @cube_fwd
// CHECK: %[[T:.*]] = call @cube_tangent(%{{.*}}, %{{.*}}) : (f64, f64) -> f64
// CHECK-NEXT: return %[[T]] : f64

// Forward with the primal: the rule with the primal.
// CHECK-LABEL: func.func @tp_only(
// CHECK: %{{.*}}:2 = call @cube_fwd(%{{.*}}, %{{.*}}) : (f64, f64) -> (f64, f64)

// The caller squares the result: the rule with the primal.
// CHECK-LABEL: func.func @t_squared(
// CHECK: %{{.*}}:2 = call @cube_fwd(%{{.*}}, %{{.*}}) : (f64, f64) -> (f64, f64)

// Reverse: the augmented pass of @only_cube returns no primal, so the lean rule; of
// @cube_squared, the one with the primal (the square reads it).
// CHECK-LABEL: func.func @g_only_aug(
// CHECK: call @cube_aug_lean(%{{.*}}) : (f64) -> f64
// CHECK-LABEL: func.func @g_only_rev(
// CHECK: call @cube_rev(
// CHECK-LABEL: func.func @g_squared_aug(
// CHECK: call @cube_aug(%{{.*}}) : (f64) -> (f64, f64)
