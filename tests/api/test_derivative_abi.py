"""core/derivative_abi.py: the one layout of generated derivatives' parameters and results,
which the pass (signature.py) and the frontend (entries, rules, launches) both use."""
from __future__ import annotations

import pytest

from adjit.core.activity import Activity
from adjit.core.derivative_abi import DerivativeABI, Mode

C, A, D, N = Activity.CONST, Activity.ACTIVE, Activity.DUP, Activity.DUPNONEED
TYPES = ["f64", "memref", "i64", "memref"]


def is_float(t: str) -> bool:
    return t == "f64"


def test_forward_interleaves_a_tangent_after_each_non_const_argument():
    abi = DerivativeABI(Mode.FORWARD, (A, D, C, N), ret_activity=D, with_primal=True)
    assert abi.inputs(TYPES) == ["f64", "f64", "memref", "memref", "i64", "memref", "memref"]
    assert abi.primal_positions() == [0, 2, 4, 5]
    assert abi.shadow_positions() == [1, 3, None, 6]
    assert abi.flatten(["x", "u", "n", "v"], ["dx", "du", None, "dv"]) == \
        ["x", "dx", "u", "du", "n", "v", "dv"]
    assert abi.forward_results(["f64", "i64"], is_float) == ["f64", "i64", "f64"]
    assert DerivativeABI(Mode.FORWARD, (A,)).forward_results(["f64"], is_float) == []


def test_reverse_shadows_only_duplicated_arguments():
    abi = DerivativeABI(Mode.REVERSE, (A, D, C, N), ret_activity=A)
    assert abi.inputs(TYPES) == ["f64", "memref", "memref", "i64", "memref", "memref"]
    assert abi.shadow_positions() == [None, 2, None, 5]
    assert abi.dret(["f64", "i64"], is_float) == ["f64"]
    assert abi.reverse_inputs(TYPES, ["f64"], is_float, tape=["t0", "t1"]) == \
        abi.inputs(TYPES) + ["f64", "t0", "t1"]
    assert abi.adjoints(TYPES) == ["f64"]
    assert DerivativeABI(Mode.REVERSE, (A, D, C, N)).dret(["f64"], is_float) == []


def test_strings_from_ir_attributes_become_the_enums():
    abi = DerivativeABI("reverse", ("active", "dup"), "const")
    assert abi.mode is Mode.REVERSE and abi.activity == (A, D) and abi == \
        DerivativeABI(Mode.REVERSE, (A, D))
    with pytest.raises(ValueError):
        DerivativeABI("sideways", ())
