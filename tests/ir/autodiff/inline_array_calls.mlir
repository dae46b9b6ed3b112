// Reverse mode inlines a call that returns an array before differentiating (it has no ABI for
// the shadow of a returned array); forward mode keeps the call. A callee with custom rules
// stays a call, so that its rules fire.
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

// @scaled returns a fresh array; @twice calls it, so inlining @twice brings a call of @scaled
// that is inlined in turn.
func.func private @scaled(%x: memref<?xf64>, %a: f64) -> memref<?xf64> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  %y = memref.alloc(%n) : memref<?xf64>
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %x[%i] : memref<?xf64>
    %w = arith.mulf %v, %a : f64
    memref.store %w, %y[%i] : memref<?xf64>
  }
  return %y : memref<?xf64>
}
func.func private @twice(%x: memref<?xf64>, %a: f64) -> memref<?xf64> {
  %y = func.call @scaled(%x, %a) : (memref<?xf64>, f64) -> memref<?xf64>
  %z = func.call @scaled(%y, %a) : (memref<?xf64>, f64) -> memref<?xf64>
  return %z : memref<?xf64>
}
// @ones has custom rules: its call stays; its result is const here, so it needs no shadow.
func.func private @ones(%n: index) -> memref<?xf64> {
  %y = memref.alloc(%n) : memref<?xf64>
  return %y : memref<?xf64>
}
func.func private @ones_aug(%n: index) -> memref<?xf64>
    attributes {adj.rule_for = @ones, adj.rule_kind = "augmented"} {
  %y = memref.alloc(%n) : memref<?xf64>
  return %y : memref<?xf64>
}
func.func private @ones_rev(%n: index)
    attributes {adj.rule_for = @ones, adj.rule_kind = "reverse"} {
  return
}
func.func @f(%x: memref<?xf64>, %a: f64) -> f64 {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf64>
  %o = func.call @ones(%n) : (index) -> memref<?xf64>
  %z = func.call @twice(%x, %a) : (memref<?xf64>, f64) -> memref<?xf64>
  %v = memref.load %z[%c0] : memref<?xf64>
  %u = memref.load %o[%c0] : memref<?xf64>
  %r = arith.mulf %v, %u : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "df", fn = @f, mode = "reverse", activity = ["dup", "active"], ret_activity = "active"} : () -> ()
"adj.autodiff"() {sym_name = "tf", fn = @f, mode = "forward", activity = ["dup", "dup"], ret_activity = "dup"} : () -> ()

// The primal itself is rewritten: @twice and both calls of @scaled are gone from @f, whose
// two loops of x * a are now its own (each with an allocation reverse mode shadows).
// CHECK-LABEL: func.func @f(
// CHECK: call @ones(
// CHECK-NOT: call
// CHECK: memref.alloc
// CHECK: scf.for
// CHECK: memref.alloc
// CHECK: scf.for
// CHECK-NOT: call
// CHECK: return

// CHECK-LABEL: func.func @df_aug(
// CHECK-NOT: @scaled
// CHECK-NOT: @twice
// CHECK: call @ones_aug(
// CHECK-NOT: @scaled
// CHECK-NOT: @twice
// CHECK-LABEL: func.func @df_rev(
// CHECK-NOT: @scaled
// CHECK-NOT: @twice
// CHECK: call @ones_rev(
// CHECK-NOT: @scaled
// CHECK-NOT: @twice
// CHECK: return

// Forward mode was generated from the inlined @f too (the request comes after), so it
// calls nothing either but @ones's automatic forward derivative.
// CHECK-LABEL: func.func @tf(
// CHECK-NOT: @scaled
// CHECK-NOT: @twice
// CHECK: return
