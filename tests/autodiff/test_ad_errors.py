"""Malformed requests and what the pass cannot differentiate: AdjError naming the op."""
import pytest
from mlir import ir

from ad_helpers import differentiate, request
from adjit.dialects.adj import AdjError
from adjit.passes.autodiff import run_autodiff

F = """
func.func @f(%x: f64, %m: memref<?xf64>, %k: i64) -> f64 {
  %r = arith.mulf %x, %x : f64
  return %r : f64
}
"""


@pytest.mark.parametrize("req, message", [
    ('"adj.autodiff"() {sym_name = "d", fn = @g, mode = "forward", activity = [], '
     'ret_activity = "dup"} : () -> ()', "@g, which is not a func.func"),
    (request("f", "d", "sideways", ["active", "const", "const"], "active"),
     "mode must be"),
    (request("f", "d", "reverse", ["active", "const"], "active"), "2 activities for 3 arguments"),
    (request("f", "d", "reverse", ["active", "active", "const"], "active"),
     "is an array .* not \"active\""),
    (request("f", "d", "reverse", ["dup", "const", "const"], "active"),
     "is a scalar .* not 'dup'"),
    (request("f", "d", "forward", ["dup", "const", "dup"], "dup"),
     "argument 2 of @f has type i64, which is not differentiable"),
    (request("f", "d", "reverse", ["active", "const", "const"], "dup"),
     "must be \"active\" or \"const\""),
    (request("f", "d", "forward", ["sometimes", "const", "const"], "dup"),
     "activity 'sometimes' of argument 0"),
    ("func.func @d_rev() {\n  return\n}\n" +
     request("f", "d", "reverse", ["active", "const", "const"], "active"),
     "would define @d_rev, which exists"),
])
def test_malformed_requests(req, message):
    with pytest.raises(AdjError, match=message) as info:
        differentiate(F + req)
    assert info.value.op.name == "adj.autodiff"


def test_request_built_without_a_mode():
    # The dialect's verifier refuses this when parsing; a request built in Python is checked
    # by the pass.
    module = differentiate(F)
    with module.context, ir.Location.unknown():
        with ir.InsertionPoint(module.body):
            op = ir.Operation.create("adj.autodiff", attributes={
                "sym_name": ir.StringAttr.get("d"), "fn": ir.FlatSymbolRefAttr.get("f"),
                "activity": ir.ArrayAttr.get([ir.StringAttr.get("const")] * 3),
                "ret_activity": ir.StringAttr.get("const")})
        with pytest.raises(AdjError, match="lacks attribute `mode`") as info:
            run_autodiff(module.operation)
    assert info.value.op == op


def test_op_without_rule_is_named():
    text = """
func.func @f(%x: f64) -> f64 {
  %s, %c = math.sincos %x : f64
  %r = arith.mulf %s, %c : f64
  return %r : f64
}
""" + request("f", "d", "reverse", ["active"], "active")
    with pytest.raises(AdjError, match="no derivative rule for math.sincos") as info:
        differentiate(text)
    assert info.value.op.name == "math.sincos"


def test_integer_code_is_never_active():
    text = """
func.func @f(%x: f64) -> f64 {
  %b = arith.bitcast %x : f64 to i64
  %c = arith.bitcast %b : i64 to f64
  %r = arith.mulf %c, %x : f64
  return %r : f64
}
""" + request("f", "d", "forward", ["dup"], "dup")
    # The bitcast's integer result cuts the chain: no derivative flows through it.
    assert "bitcast" not in str(differentiate(text)).split("func.func @d")[1].split("return")[0] \
        .split("arith.mulf")[1]


def test_recursion_is_refused():
    text = """
func.func @f(%x: f64, %n: i64) -> f64 {
  %z = arith.constant 0 : i64
  %c = arith.cmpi sgt, %n, %z : i64
  %r = scf.if %c -> f64 {
    %one = arith.constant 1 : i64
    %m = arith.subi %n, %one : i64
    %y = func.call @f(%x, %m) : (f64, i64) -> f64
    %p = arith.mulf %y, %x : f64
    scf.yield %p : f64
  } else {
    scf.yield %x : f64
  }
  return %r : f64
}
""" + request("f", "d", "reverse", ["active", "const"], "active")
    with pytest.raises(AdjError, match="recursive") as info:
        differentiate(text)
    assert info.value.op.name == "func.call"


def test_non_addf_atomic_on_a_differentiated_array():
    text = """
func.func @f(%x: f64, %m: memref<?xf64>) {
  %c0 = arith.constant 0 : index
  %o = memref.atomic_rmw maximumf %x, %m[%c0] : (f64, memref<?xf64>) -> f64
  return
}
""" + request("f", "d", "reverse", ["active", "dup"], "const")
    with pytest.raises(AdjError, match="only addf") as info:
        differentiate(text)
    assert info.value.op.name == "memref.atomic_rmw"
