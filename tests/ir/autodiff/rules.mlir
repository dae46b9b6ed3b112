// The rule table, op by op, in both modes: forward tangents and reverse adjoints.
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

// d sin(x) = cos(x) dx (0 where dx == 0, even where cos is NaN: singular.mlir)
// CHECK-LABEL: func.func @sin_fwd(
// CHECK-SAME: %[[X:.*]]: f64, %[[DX:.*]]: f64) -> f64
// CHECK: %[[C:.*]] = math.cos %[[X]] : f64
// CHECK: %[[T:.*]] = arith.mulf %[[DX]], %[[C]] : f64
// CHECK: %[[G:.*]] = arith.select %{{.*}}, %{{.*}}, %[[T]] : f64
// CHECK: return %[[G]] : f64
func.func @psin(%x: f64) -> f64 {
  %r = math.sin %x : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "sin_fwd", fn = @psin, mode = "forward", activity = ["dup"], ret_activity = "dup"} : () -> ()

// CHECK-LABEL: func.func @sin_rev(
// CHECK-SAME: %[[X:.*]]: f64, %[[D:.*]]: f64) -> f64
// CHECK: %[[C:.*]] = math.cos %[[X]] : f64
// CHECK: %[[A:.*]] = arith.mulf %[[D]], %[[C]] : f64
// CHECK: %[[G:.*]] = arith.select %{{.*}}, %{{.*}}, %[[A]] : f64
// CHECK: return %[[G]] : f64
"adj.autodiff"() {sym_name = "sin", fn = @psin, mode = "reverse", activity = ["active"], ret_activity = "active"} : () -> ()

// x * y: the product rule, each operand's partial read from the other.
// CHECK-LABEL: func.func @mul_fwd(
// CHECK-SAME: %[[X:.*]]: f64, %[[DX:.*]]: f64, %[[Y:.*]]: f64, %[[DY:.*]]: f64) -> (f64, f64)
// CHECK: %[[P:.*]] = arith.mulf %[[X]], %[[Y]] : f64
// CHECK: %[[A:.*]] = arith.mulf %[[DX]], %[[Y]] : f64
// CHECK: %[[B:.*]] = arith.mulf %[[DY]], %[[X]] : f64
// CHECK: %[[T:.*]] = arith.addf %[[A]], %[[B]] : f64
// CHECK: return %[[P]], %[[T]] : f64, f64
func.func @pmul(%x: f64, %y: f64) -> f64 {
  %r = arith.mulf %x, %y : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "mul_fwd", fn = @pmul, mode = "forward", activity = ["dup", "dup"], ret_activity = "dup", with_primal = true} : () -> ()

// CHECK-LABEL: func.func @mul_rev(
// CHECK-SAME: %[[X:.*]]: f64, %[[Y:.*]]: f64, %[[D:.*]]: f64) -> (f64, f64)
// CHECK-DAG: %[[DX:.*]] = arith.mulf %[[D]], %[[Y]] : f64
// CHECK-DAG: %[[DY:.*]] = arith.mulf %[[D]], %[[X]] : f64
// CHECK: return %[[DX]], %[[DY]] : f64, f64
"adj.autodiff"() {sym_name = "mul", fn = @pmul, mode = "reverse", activity = ["active", "active"], ret_activity = "active"} : () -> ()

// x / y: d/dy = -d * (x / y) / y reads the result, which the reverse pass recomputes.
// CHECK-LABEL: func.func @div_rev(
// CHECK-SAME: %[[X:.*]]: f64, %[[Y:.*]]: f64, %[[D:.*]]: f64) -> (f64, f64)
// (Each partial is guarded for a zero seed: singular.mlir.)
// CHECK-DAG: %[[Q:.*]] = arith.divf %[[X]], %[[Y]] : f64
// CHECK-DAG: %[[DX0:.*]] = arith.divf %[[D]], %[[Y]] : f64
// CHECK-DAG: %[[DQ:.*]] = arith.mulf %[[D]], %[[Q]] : f64
// CHECK-DAG: %[[DX:.*]] = arith.select %{{.*}}, %{{.*}}, %[[DX0]] : f64
// CHECK: %[[R:.*]] = arith.divf %[[DQ]], %[[Y]] : f64
// CHECK: %[[DY0:.*]] = arith.negf %[[R]] : f64
// CHECK: %[[DY:.*]] = arith.select %{{.*}}, %{{.*}}, %[[DY0]] : f64
// CHECK: return %[[DX]], %[[DY]] : f64, f64
func.func @pdiv(%x: f64, %y: f64) -> f64 {
  %r = arith.divf %x, %y : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "div", fn = @pdiv, mode = "reverse", activity = ["active", "active"], ret_activity = "active"} : () -> ()

// exp: the derivative is the result itself.
// CHECK-LABEL: func.func @exp_rev(
// CHECK: %[[E:.*]] = math.exp %{{.*}} : f64
// CHECK: arith.mulf %{{.*}}, %[[E]] : f64
func.func @pexp(%x: f64) -> f64 {
  %r = math.exp %x : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "exp", fn = @pexp, mode = "reverse", activity = ["active"], ret_activity = "active"} : () -> ()

// select: the adjoint goes to the chosen operand; the condition is not differentiated.
// CHECK-LABEL: func.func @select_rev(
// CHECK-SAME: %[[C:.*]]: i1, %[[A:.*]]: f64, %[[B:.*]]: f64, %[[D:.*]]: f64) -> (f64, f64)
// CHECK-DAG: %[[Z:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-DAG: %[[DA:.*]] = arith.select %[[C]], %[[D]], %[[Z]] : f64
// CHECK-DAG: %[[DB:.*]] = arith.select %[[C]], %{{.*}}, %[[D]] : f64
// CHECK: return %[[DA]], %[[DB]] : f64, f64
func.func @pselect(%c: i1, %a: f64, %b: f64) -> f64 {
  %r = arith.select %c, %a, %b : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "select", fn = @pselect, mode = "reverse", activity = ["const", "active", "active"], ret_activity = "active"} : () -> ()

// Float casts map the adjoint back to the operand's width.
// CHECK-LABEL: func.func @widen_rev(
// CHECK-SAME: %{{.*}}: f32, %[[D:.*]]: f64) -> f32
// CHECK: %[[T:.*]] = arith.truncf %[[D]] : f64 to f32
// CHECK: return %[[T]] : f32
func.func @pwiden(%x: f32) -> f64 {
  %r = arith.extf %x : f32 to f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "widen", fn = @pwiden, mode = "reverse", activity = ["active"], ret_activity = "active"} : () -> ()

// floor has a zero derivative: no adjoint code, the argument's adjoint is 0.
// CHECK-LABEL: func.func @floor_rev(
// CHECK-NOT: math.
// CHECK: %[[Z:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT: return %[[Z]] : f64
func.func @pfloor(%x: f64) -> f64 {
  %r = math.floor %x : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "floor", fn = @pfloor, mode = "reverse", activity = ["active"], ret_activity = "active"} : () -> ()

// powf: both partials; the exponent's reads log(base).
// CHECK-LABEL: func.func @pow_rev(
// CHECK-SAME: %[[A:.*]]: f64, %[[B:.*]]: f64, %[[D:.*]]: f64) -> (f64, f64)
// CHECK-DAG: math.powf %[[A]], %{{.*}} : f64
// CHECK-DAG: math.log %[[A]] : f64
func.func @ppow(%a: f64, %b: f64) -> f64 {
  %r = math.powf %a, %b : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "pow", fn = @ppow, mode = "reverse", activity = ["active", "active"], ret_activity = "active"} : () -> ()
