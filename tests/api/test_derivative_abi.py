"""core/derivative_abi.py: the one layout of generated derivatives' parameters and results,
which the pass (signature.py) and the frontend (entries, rules, launches) both use."""
from __future__ import annotations

import numpy as np
import pytest

from adjit.core.activity import Activity
from adjit.core.derivative_abi import DerivativeABI, DerivativeEntries, DerivativeMode
from adjit.core.types import f64

C, A, D, N = Activity.CONST, Activity.ACTIVE, Activity.DUP, Activity.DUPNONEED
TYPES = ["f64", "memref", "i64", "memref"]


def is_float(t: str) -> bool:
    return t == "f64"


def test_forward_interleaves_a_tangent_after_each_non_const_argument():
    abi = DerivativeABI(DerivativeMode.FORWARD, (A, D, C, N), ret_activity=D, with_primal=True)
    assert abi.inputs(TYPES) == ["f64", "f64", "memref", "memref", "i64", "memref", "memref"]
    assert abi.primal_positions() == [0, 2, 4, 5]
    assert abi.shadow_positions() == [1, 3, None, 6]
    assert abi.flatten(["x", "u", "n", "v"], ["dx", "du", None, "dv"]) == \
        ["x", "dx", "u", "du", "n", "v", "dv"]
    assert abi.forward_results(["f64", "i64"], is_float) == ["f64", "i64", "f64"]
    assert DerivativeABI(DerivativeMode.FORWARD, (A,)).forward_results(["f64"], is_float) == []


def test_reverse_shadows_only_duplicated_arguments():
    abi = DerivativeABI(DerivativeMode.REVERSE, (A, D, C, N), ret_activity=A)
    assert abi.inputs(TYPES) == ["f64", "memref", "memref", "i64", "memref", "memref"]
    assert abi.shadow_positions() == [None, 2, None, 5]
    assert abi.dret(["f64", "i64"], is_float) == ["f64"]
    assert abi.reverse_inputs(TYPES, ["f64"], is_float, tape=["t0", "t1"]) == \
        abi.inputs(TYPES) + ["f64", "t0", "t1"]
    assert abi.adjoints(TYPES) == ["f64"]
    assert DerivativeABI(DerivativeMode.REVERSE, (A, D, C, N)).dret(["f64"], is_float) == []


def test_strings_from_ir_attributes_become_the_enums():
    abi = DerivativeABI("reverse", ("active", "dup"), "const")
    assert abi.mode is DerivativeMode.REVERSE and abi.activity == (A, D) and abi == \
        DerivativeABI(DerivativeMode.REVERSE, (A, D))
    with pytest.raises(ValueError):
        DerivativeABI("sideways", ())


def test_results_read_primal_first_then_the_rest():
    fwd = DerivativeABI(DerivativeMode.FORWARD, (D, C), ret_activity=D, with_primal=True, width=2)
    assert fwd.split_results(["y", "t0", "t1"], 1) == (["y"], ["t0", "t1"])
    assert fwd.lanes(["t0", "t1", "u0", "u1"]) == [("t0", "t1"), ("u0", "u1")]
    rev = DerivativeABI(DerivativeMode.REVERSE, (A, D, A, C), ret_activity=A)
    assert rev.split_results(["g0", "g2"], 1) == ([], ["g0", "g2"])   # (no primal asked)
    assert rev.per_argument(["g0", "g2"], absent="-") == ("g0", "-", "g2", "-")
    assert DerivativeABI.from_record(fwd.to_record()) == fwd


class _Entries(DerivativeEntries):
    """A compiled derivative's entries as Python sees them: a primal f64 result."""

    def __init__(self, abi, calls):
        self.abi, self.results, self.calls = abi, [f64], calls


def test_entries_call_each_mode_by_the_layout():
    got = []
    calls = {"fwd": lambda *a: (2.0, 3.0),
             "rev_all": lambda *a: got.append(a) or (2.0, 5.0),
             "aug": lambda *a: (2.0, "tape0", "tape1"),
             "rev": lambda *a: got.append(a) or 7.0}
    fwd = _Entries(DerivativeABI(DerivativeMode.FORWARD, (D,), D, with_primal=True), calls)
    assert fwd.forward(["x", "dx"]) == ([2.0], [(3.0,)])
    rev = _Entries(DerivativeABI(DerivativeMode.REVERSE, (C, A), A, with_primal=True), calls)
    assert rev.reverse(["n", "x"]) == ([2.0], (None, 5.0))
    assert got[-1] == ("n", "x", 1.0) and type(got[-1][-1]) is np.float64  # (the result's dret)
    assert rev.split_forward(["n", "x"]) == ([2.0], ["tape0", "tape1"])
    assert rev.split_reverse(["n", "x"], 0.5, ["tape0", "tape1"]) == (None, 7.0)
    assert got[-1] == ("n", "x", 0.5, "tape0", "tape1")
