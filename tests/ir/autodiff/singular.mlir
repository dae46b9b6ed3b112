// Guards at singular points (passes/autodiff/rules/scalar.py): a rule whose partial can be inf or NaN
// gives 0 for a zero seed (strong zero), and pow's partials are 0 where their limits are;
// each guard replaces the product by 0 only where it is not finite (x - x != 0), so that
// where the partial is finite the rule stays the product (whose derivative a Hessian takes).
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

// sqrt: d / (2 sqrt(x)), 0 where the seed d is 0 (max(sqrt(x), 1.0) at x = 0 gives sqrt a
// zero adjoint; d / 0 would be NaN).
// CHECK-LABEL: func.func @sqrt_rev(
// CHECK-SAME: %[[X:.*]]: f64, %[[D:.*]]: f64) -> f64
// CHECK-DAG: %[[S:.*]] = math.sqrt %[[X]] : f64
// CHECK-DAG: %[[ZERO_D:.*]] = arith.cmpf oeq, %[[D]], %{{.*}} : f64
// CHECK: %[[TWICE:.*]] = arith.mulf %[[S]], %{{.*}} : f64
// CHECK: %[[Q:.*]] = arith.divf %[[D]], %[[TWICE]] : f64
// CHECK: %[[NAN1:.*]] = arith.subf %[[Q]], %[[Q]] : f64
// CHECK: %[[BAD1:.*]] = arith.cmpf une, %[[NAN1]], %{{.*}} : f64
// CHECK: %[[G1:.*]] = arith.andi %[[ZERO_D]], %[[BAD1]] : i1
// CHECK: %[[R:.*]] = arith.select %[[G1]], %{{.*}}, %[[Q]] : f64
// CHECK: return %[[R]] : f64
func.func @psqrt(%x: f64) -> f64 {
  %r = math.sqrt %x : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "sqrt", fn = @psqrt, mode = "reverse", activity = ["active"], ret_activity = "active"} : () -> ()

// The same guard in forward mode, on the tangent.
// CHECK-LABEL: func.func @sqrt_fwd(
// CHECK-SAME: %[[X:.*]]: f64, %[[T:.*]]: f64) -> f64
// CHECK: %[[ZERO_T:.*]] = arith.cmpf oeq, %[[T]], %{{.*}} : f64
// CHECK: %[[Q:.*]] = arith.divf %[[T]], %{{.*}} : f64
// CHECK: %[[NAN2:.*]] = arith.subf %[[Q]], %[[Q]] : f64
// CHECK: %[[BAD2:.*]] = arith.cmpf une, %[[NAN2]], %{{.*}} : f64
// CHECK: %[[G2:.*]] = arith.andi %[[ZERO_T]], %[[BAD2]] : i1
// CHECK: %[[R:.*]] = arith.select %[[G2]], %{{.*}}, %[[Q]] : f64
// CHECK: return %[[R]] : f64
"adj.autodiff"() {sym_name = "sqrt_fwd", fn = @psqrt, mode = "forward", activity = ["dup"], ret_activity = "dup"} : () -> ()

// log: d / x, guarded the same way.
// CHECK-LABEL: func.func @log_rev(
// CHECK-SAME: %[[X:.*]]: f64, %[[D:.*]]: f64) -> f64
// CHECK: %[[ZERO_D:.*]] = arith.cmpf oeq, %[[D]], %{{.*}} : f64
// CHECK: %[[Q:.*]] = arith.divf %[[D]], %[[X]] : f64
// CHECK: %[[NAN3:.*]] = arith.subf %[[Q]], %[[Q]] : f64
// CHECK: %[[BAD3:.*]] = arith.cmpf une, %[[NAN3]], %{{.*}} : f64
// CHECK: %[[G3:.*]] = arith.andi %[[ZERO_D]], %[[BAD3]] : i1
// CHECK: %[[R:.*]] = arith.select %[[G3]], %{{.*}}, %[[Q]] : f64
// CHECK: return %[[R]] : f64
func.func @plog(%x: f64) -> f64 {
  %r = math.log %x : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "log", fn = @plog, mode = "reverse", activity = ["active"], ret_activity = "active"} : () -> ()

// log2: (d / ln 2) / x (not d / (x ln 2), which overflows to 0 near the largest x), guarded
// the same way: a zero seed at x = 0 is 0, not NaN.
// CHECK-LABEL: func.func @log2_rev(
// CHECK-SAME: %[[X:.*]]: f64, %[[D:.*]]: f64) -> f64
// CHECK: %[[ZERO_D:.*]] = arith.cmpf oeq, %[[D]], %{{.*}} : f64
// CHECK: %[[INV_LN2:.*]] = arith.constant 1.44269504
// CHECK: %[[DS:.*]] = arith.mulf %[[D]], %[[INV_LN2]] : f64
// CHECK: %[[Q:.*]] = arith.divf %[[DS]], %[[X]] : f64
// CHECK: %[[NAN10:.*]] = arith.subf %[[Q]], %[[Q]] : f64
// CHECK: %[[BAD10:.*]] = arith.cmpf une, %[[NAN10]], %{{.*}} : f64
// CHECK: %[[G10:.*]] = arith.andi %[[ZERO_D]], %[[BAD10]] : i1
// CHECK: %[[R:.*]] = arith.select %[[G10]], %{{.*}}, %[[Q]] : f64
// CHECK: return %[[R]] : f64
func.func @plog2(%x: f64) -> f64 {
  %r = math.log2 %x : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "log2", fn = @plog2, mode = "reverse", activity = ["active"], ret_activity = "active"} : () -> ()

// a^b: d/da = b a^(b-1) is 0 where b == 0 (0 * 0^-1 is NaN; a^0 is constant), d/db = a^b ln a
// is 0 where a == 0; each then guarded for a zero seed. a^(b-1) is a^b / a where a^b is a
// normal number and a != 0 (accuracy, rules.py's _pow_base), pow(a, b - 1) elsewhere: at
// a = 0 that is 0^(b-1), inf for b = 0, which the b == 0 guard turns into 0.
// CHECK-LABEL: func.func @pow_rev(
// CHECK-SAME: %[[A:.*]]: f64, %[[B:.*]]: f64, %[[D:.*]]: f64) -> (f64, f64)
// CHECK: %[[Y:.*]] = math.powf %[[A]], %[[B]] : f64
// CHECK: %[[ZERO_D:.*]] = arith.cmpf oeq, %[[D]], %{{.*}} : f64
// CHECK: %[[NONZERO_A:.*]] = arith.cmpf one, %[[A]], %{{.*}} : f64
// CHECK: %[[NORMAL:.*]] = arith.andi %{{.*}}, %[[NONZERO_A]] : i1
// CHECK: %[[YA:.*]] = arith.divf %[[Y]], %[[A]] : f64
// CHECK: %[[BM1:.*]] = arith.subf %[[B]], %{{.*}} : f64
// CHECK: %[[PM1:.*]] = math.powf %[[A]], %[[BM1]] : f64
// CHECK: %[[P:.*]] = arith.select %[[NORMAL]], %[[YA]], %[[PM1]] : f64
// CHECK: %[[ZERO_B:.*]] = arith.cmpf oeq, %[[B]], %{{.*}} : f64
// CHECK: %[[BP:.*]] = arith.mulf %[[B]], %[[P]] : f64
// CHECK: %[[DBP:.*]] = arith.mulf %[[D]], %[[BP]] : f64
// CHECK: %[[NAN4:.*]] = arith.subf %[[DBP]], %[[DBP]] : f64
// CHECK: %[[BAD4:.*]] = arith.cmpf une, %[[NAN4]], %{{.*}} : f64
// CHECK: %[[G4:.*]] = arith.andi %[[ZERO_B]], %[[BAD4]] : i1
// CHECK: %[[GB:.*]] = arith.select %[[G4]], %{{.*}}, %[[DBP]] : f64
// CHECK: %[[NAN5:.*]] = arith.subf %[[GB]], %[[GB]] : f64
// CHECK: %[[BAD5:.*]] = arith.cmpf une, %[[NAN5]], %{{.*}} : f64
// CHECK: %[[G5:.*]] = arith.andi %[[ZERO_D]], %[[BAD5]] : i1
// CHECK: %[[DA:.*]] = arith.select %[[G5]], %{{.*}}, %[[GB]] : f64
// CHECK: %[[ZERO_A:.*]] = arith.cmpf oeq, %[[A]], %{{.*}} : f64
// CHECK: %[[L:.*]] = math.log %[[A]] : f64
// CHECK: %[[YL:.*]] = arith.mulf %[[Y]], %[[L]] : f64
// CHECK: %[[DYL:.*]] = arith.mulf %[[D]], %[[YL]] : f64
// CHECK: %[[NAN6:.*]] = arith.subf %[[DYL]], %[[DYL]] : f64
// CHECK: %[[BAD6:.*]] = arith.cmpf une, %[[NAN6]], %{{.*}} : f64
// CHECK: %[[G6:.*]] = arith.andi %[[ZERO_A]], %[[BAD6]] : i1
// CHECK: %[[GA:.*]] = arith.select %[[G6]], %{{.*}}, %[[DYL]] : f64
// CHECK: %[[DB:.*]] = arith.select %{{.*}}, %{{.*}}, %[[GA]] : f64
// CHECK: return %[[DA]], %[[DB]] : f64, f64
func.func @ppow(%a: f64, %b: f64) -> f64 {
  %r = math.powf %a, %b : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "pow", fn = @ppow, mode = "reverse", activity = ["active", "active"], ret_activity = "active"} : () -> ()

// a^n, n an integer: 0 where n == 0.
// CHECK-LABEL: func.func @fpowi_rev(
// CHECK-SAME: %[[A:.*]]: f64, %[[N:.*]]: i32, %[[D:.*]]: f64) -> f64
// CHECK: %[[ZERO_N:.*]] = arith.cmpi eq, %[[N]], %{{.*}} : i32
// CHECK: %[[NAN7:.*]] = arith.subf %{{.*}}, %{{.*}} : f64
// CHECK: %[[BAD7:.*]] = arith.cmpf une, %[[NAN7]], %{{.*}} : f64
// CHECK: %[[G7:.*]] = arith.andi %[[ZERO_N]], %[[BAD7]] : i1
// CHECK: %[[G:.*]] = arith.select %[[G7]], %{{.*}}, %{{.*}} : f64
// CHECK: %[[R:.*]] = arith.select %{{.*}}, %{{.*}}, %[[G]] : f64
// CHECK: return %[[R]] : f64
func.func @pfpowi(%a: f64, %n: i32) -> f64 {
  %r = math.fpowi %a, %n : f64, i32
  return %r : f64
}
"adj.autodiff"() {sym_name = "fpowi", fn = @pfpowi, mode = "reverse", activity = ["active", "const"], ret_activity = "active"} : () -> ()

// Division: both partials guarded (d / y, and -(d x/y) / y, at y = 0).
// CHECK-LABEL: func.func @div_rev(
// CHECK-SAME: %[[X:.*]]: f64, %[[Y:.*]]: f64, %[[D:.*]]: f64) -> (f64, f64)
// CHECK: %[[Z1:.*]] = arith.cmpf oeq, %[[D]], %{{.*}} : f64
// CHECK: %[[Q:.*]] = arith.divf %[[D]], %[[Y]] : f64
// CHECK: %[[NAN8:.*]] = arith.subf %[[Q]], %[[Q]] : f64
// CHECK: %[[BAD8:.*]] = arith.cmpf une, %[[NAN8]], %{{.*}} : f64
// CHECK: %[[G8:.*]] = arith.andi %[[Z1]], %[[BAD8]] : i1
// CHECK: %[[DX:.*]] = arith.select %[[G8]], %{{.*}}, %[[Q]] : f64
// CHECK: %[[Z2:.*]] = arith.cmpf oeq, %[[D]], %{{.*}} : f64
// CHECK: %[[N:.*]] = arith.negf %{{.*}} : f64
// CHECK: %[[NAN9:.*]] = arith.subf %[[N]], %[[N]] : f64
// CHECK: %[[BAD9:.*]] = arith.cmpf une, %[[NAN9]], %{{.*}} : f64
// CHECK: %[[G9:.*]] = arith.andi %[[Z2]], %[[BAD9]] : i1
// CHECK: %[[DY:.*]] = arith.select %[[G9]], %{{.*}}, %[[N]] : f64
// CHECK: return %[[DX]], %[[DY]] : f64, f64
func.func @pdiv(%x: f64, %y: f64) -> f64 {
  %r = arith.divf %x, %y : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "div", fn = @pdiv, mode = "reverse", activity = ["active", "active"], ret_activity = "active"} : () -> ()

// Not guarded: a product (its partial is the other operand: the cost would fall on the most
// frequent rule) and ops with bounded partials such as tanh.
// CHECK-LABEL: func.func @mul_rev(
// CHECK-NEXT: %[[A:.*]] = arith.mulf
// CHECK-NEXT: %[[B:.*]] = arith.mulf
// CHECK-NEXT: return %[[A]], %[[B]] : f64, f64
func.func @pmul(%x: f64, %y: f64) -> f64 {
  %r = arith.mulf %x, %y : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "mul", fn = @pmul, mode = "reverse", activity = ["active", "active"], ret_activity = "active"} : () -> ()

// CHECK-LABEL: func.func @tanh_rev(
// CHECK-NOT: arith.select
// CHECK: return
func.func @ptanh(%x: f64) -> f64 {
  %r = math.tanh %x : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "tanh", fn = @ptanh, mode = "reverse", activity = ["active"], ret_activity = "active"} : () -> ()
