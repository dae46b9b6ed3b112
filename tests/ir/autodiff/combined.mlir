// A `combined` reverse request: one function that compiled code calls for a gradient, the
// augmented function then the reverse one on its tape (a call of `adjit.grad(f)` inside an
// @adjit.jit function compiles to one). And a request of a function the pass generated itself
// (a derivative of a derivative: forward over reverse, a Hessian-vector product).
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

func.func @f(%x: f64, %u: memref<?xf64>) -> f64 {
  %c0 = arith.constant 0 : index
  %a = memref.load %u[%c0] : memref<?xf64>
  %s = math.sin %x : f64
  %y = arith.mulf %s, %a : f64
  return %y : f64
}
"adj.autodiff"() {sym_name = "g", fn = @f, mode = "reverse", activity = ["active", "dup"], ret_activity = "active", with_primal = true, combined} : () -> ()
// The second derivative: forward mode of @g, which the first request defines.
"adj.autodiff"() {sym_name = "hv", fn = @g, mode = "forward", activity = ["dup", "const", "const", "const"], ret_activity = "dup"} : () -> ()

// CHECK-LABEL: func.func @g_aug(
// CHECK-LABEL: func.func @g_rev(
// CHECK-LABEL: func.func @g(
// CHECK-SAME: %[[X:[a-z0-9]+]]: f64, %[[U:[a-z0-9]+]]: memref<?xf64>, %[[DU:[a-z0-9]+]]: memref<?xf64>, %[[D:[a-z0-9]+]]: f64) -> (f64, f64)
// CHECK-NEXT: %[[AUG:[0-9]+]]{{(:[0-9]+)?}} = call @g_aug(%[[X]], %[[U]], %[[DU]])
// CHECK-NEXT: %[[DX:.*]] = call @g_rev(%[[X]], %[[U]], %[[DU]], %[[D]]{{.*}}) : ({{.*}}) -> f64
// CHECK-NEXT: return %[[AUG]]{{(#0)?}}, %[[DX]] : f64, f64
// The forward derivative of @g: the tangent of its results along dx.
// CHECK-LABEL: func.func @hv(
// CHECK-SAME: %{{[a-z0-9]+}}: f64, %{{[a-z0-9]+}}: f64, %{{[a-z0-9]+}}: memref<?xf64>, %{{[a-z0-9]+}}: memref<?xf64>, %{{[a-z0-9]+}}: f64) -> (f64, f64)
// CHECK: call @__adj_g_aug_fwd_
// CHECK: call @__adj_g_rev_fwd_

