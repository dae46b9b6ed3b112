// An op with no derivative rule on the active path is a diagnostic at that op.
// RUN: not adjit-opt %s --adj-autodiff 2>&1 | FileCheck %s

func.func @f(%x: f64) -> f64 {
  // CHECK: error_no_rule.mlir:[[@LINE+1]]:12: error: autodiff: no derivative rule for math.sincos
  %s, %c = math.sincos %x : f64
  %r = arith.mulf %s, %c : f64
  return %r : f64
}
"adj.autodiff"() {sym_name = "df", fn = @f, mode = "reverse", activity = ["active"], ret_activity = "active"} : () -> ()
