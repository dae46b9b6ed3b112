// Custom rules (adj.rule_for / adj.rule_kind) replace the automatic derivative at every call,
// and fire even when every argument and the result are const (Enzyme PR 1371, seed 002).
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

func.func private @sync(%flags: memref<?xi32>) {
  return
}
func.func private @sync_aug(%flags: memref<?xi32>)
    attributes {adj.rule_for = @sync, adj.rule_kind = "augmented"} {
  return
}
func.func private @sync_rev(%flags: memref<?xi32>)
    attributes {adj.rule_for = @sync, adj.rule_kind = "reverse"} {
  return
}
func.func private @square(%x: f64) -> f64 {
  %r = arith.mulf %x, %x : f64
  return %r : f64
}
func.func private @square_fwd(%x: f64, %dx: f64) -> (f64, f64)
    attributes {adj.rule_for = @square, adj.rule_kind = "forward"} {
  %r = arith.mulf %x, %x : f64
  %two = arith.constant 2.0 : f64
  %t = arith.mulf %two, %x : f64
  %d = arith.mulf %t, %dx : f64
  return %r, %d : f64, f64
}
func.func @f(%x: f64, %flags: memref<?xi32>) -> f64 {
  func.call @sync(%flags) : (memref<?xi32>) -> ()
  %s = func.call @square(%x) : (f64) -> f64
  return %s : f64
}
"adj.autodiff"() {sym_name = "df", fn = @f, mode = "reverse", activity = ["active", "const"], ret_activity = "active"} : () -> ()
"adj.autodiff"() {sym_name = "tf", fn = @f, mode = "forward", activity = ["dup", "const"], ret_activity = "dup"} : () -> ()

// Reverse: the all-const call of @sync goes through its rules in both halves; @square has no
// reverse rules, so it is differentiated automatically.
// CHECK-LABEL: func.func @df_aug(
// CHECK: call @sync_aug(%{{.*}}) : (memref<?xi32>) -> ()
// CHECK: call @__adj_square_rev_a_ap_aug(
// CHECK-LABEL: func.func @df_rev(
// CHECK: call @__adj_square_rev_a_ap_rev(
// CHECK: call @sync_rev(%{{.*}}) : (memref<?xi32>) -> ()

// Forward: @square's forward rule; @sync has no forward rule and is called as it is.
// CHECK-LABEL: func.func @tf(
// CHECK: call @sync(%{{.*}}) : (memref<?xi32>) -> ()
// CHECK: call @square_fwd(%{{.*}}, %{{.*}}) : (f64, f64) -> (f64, f64)
