// Activity analysis: no derivative code for values that do not depend on an active input
// or cannot reach an active output; integer and boolean code is never active.
// RUN: adjit-opt %s --adj-autodiff | FileCheck %s

func.func @f(%x: f64, %c: f64, %n: i64, %m: memref<?xf64>) -> f64 {
  // Depends only on the const argument: computed, never differentiated.
  %k = math.exp %c : f64
  // Active, but feeds nothing that is returned: useless, so no adjoint code for it.
  %dead = math.sin %x : f64
  %c0 = arith.constant 0 : index
  memref.store %dead, %m[%c0] : memref<?xf64>
  // Integer code: never active.
  %nf = arith.sitofp %n : i64 to f64
  %y = arith.mulf %x, %k : f64
  %z = arith.mulf %y, %nf : f64
  %t = math.tanh %z : f64
  return %t : f64
}
"adj.autodiff"() {sym_name = "df", fn = @f, mode = "reverse", activity = ["active", "const", "const", "const"], ret_activity = "active"} : () -> ()

// The reverse pass recomputes what it needs from the arguments (nothing is taped), and has
// no code for sin (its result is useless) nor for exp (its input is const): the only math.exp
// after exp(c) is the one inside tanh's derivative.
// CHECK-LABEL: func.func @df_rev(
// CHECK-SAME: %[[X:[a-z0-9]+]]: f64, %[[C:[a-z0-9]+]]: f64, %[[N:[a-z0-9]+]]: i64, %{{.*}}: memref<?xf64>, %[[D:[a-z0-9]+]]: f64) -> f64
// CHECK-SAME: adj.tape = []
// CHECK-NEXT: %[[K:.*]] = math.exp %[[C]] : f64
// CHECK-NEXT: %[[Y:.*]] = arith.mulf %[[X]], %[[K]] : f64
// CHECK-NEXT: %[[NF:.*]] = arith.sitofp %[[N]] : i64 to f64
// CHECK-NEXT: %[[Z:.*]] = arith.mulf %[[Y]], %[[NF]] : f64
// tanh'(z) = sech^2(z) = 4t / (1 + t)^2 with t = exp(-2|z|) (rules.py's _sech2): made from
// z itself, so tanh(z) is not recomputed either.
// CHECK-NEXT: %[[M2:.*]] = arith.constant -2.0
// CHECK-NEXT: %[[AZ:.*]] = math.absf %[[Z]] : f64
// CHECK-NEXT: %[[E:.*]] = arith.mulf %[[M2]], %[[AZ]] : f64
// CHECK-NEXT: %[[T:.*]] = math.exp %[[E]] : f64
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1.0
// CHECK-NEXT: %[[U:.*]] = arith.addf %[[ONE]], %[[T]] : f64
// CHECK-NEXT: %[[FOUR:.*]] = arith.constant 4.0
// CHECK-NEXT: %[[NUM:.*]] = arith.mulf %[[FOUR]], %[[T]] : f64
// CHECK-NEXT: %[[U2:.*]] = arith.mulf %[[U]], %[[U]] : f64
// CHECK-NEXT: %[[DT:.*]] = arith.divf %[[NUM]], %[[U2]] : f64
// CHECK-NEXT: %[[DZ:.*]] = arith.mulf %[[D]], %[[DT]] : f64
// CHECK-NEXT: %[[DY:.*]] = arith.mulf %[[DZ]], %[[NF]] : f64
// CHECK-NEXT: %[[DX:.*]] = arith.mulf %[[DY]], %[[K]] : f64
// CHECK-NEXT: return %[[DX]] : f64
"adj.autodiff"() {sym_name = "fwd", fn = @f, mode = "forward", activity = ["dup", "const", "const", "const"], ret_activity = "dup"} : () -> ()

// Forward mode: tangents only along x -> y -> z -> t: no tangent for exp(c) or sin(x).
// CHECK-LABEL: func.func @fwd(
// CHECK-SAME: %[[X:[a-z0-9]+]]: f64, %[[DX:[a-z0-9]+]]: f64, %{{.*}}: f64, %{{.*}}: i64, %{{.*}}: memref<?xf64>) -> f64
// CHECK: %[[K:.*]] = math.exp
// CHECK-NEXT: math.sin %[[X]]
// CHECK-NOT: math.cos
// CHECK: %[[NF:.*]] = arith.sitofp
// CHECK-NEXT: arith.mulf %[[X]], %[[K]] : f64
// CHECK-NEXT: %[[DY:.*]] = arith.mulf %[[DX]], %[[K]] : f64
// CHECK-NEXT: arith.mulf %{{.*}}, %[[NF]] : f64
// CHECK-NEXT: %[[DZ:.*]] = arith.mulf %[[DY]], %[[NF]] : f64
// CHECK-NEXT: math.tanh
// CHECK-NOT: math.cos
// CHECK: return
