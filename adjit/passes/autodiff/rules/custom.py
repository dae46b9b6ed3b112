"""Custom derivative rules: user functions that replace the automatic derivative of a function.

A rule provider maps (function, kind, activities, result activity, config) to the symbol of a
func.func already in the module that implements that kind with exactly the ABI of the
generated function it replaces (package docstring). Kinds: "forward", "augmented" (its results
after the primal ones are its tape, whatever they are) and "reverse" (takes that tape). A mode
with no rule is differentiated automatically; an augmented rule needs its reverse rule.

Rules fire at every call of the function in every mode, with any activities, including calls
where everything is const (Enzyme PR 1371: a synchronize inside such a rule must still run), so
the activity analysis treats calls of a function with rules as always needing derivative code.

`default_provider` (what adjit-opt uses) finds func.funcs marked `adj.rule_for = @f` and
`adj.rule_kind = "forward" | "augmented" | "reverse"`; optional `adj.rule_activity` (array of
strings), `adj.rule_ret_activity` and `adj.rule_needs_primal` (bool) restrict a rule to one
activity signature or config; a forward rule is of width 1 (one tangent per argument) unless
`adj.rule_width` says how many it takes (config["width"]; at a width it has no rule for, the
function is differentiated automatically).

`config["needs_primal"]` is false exactly where no one reads the primal result: the request
says so (`with_primal = false`) and, at a call, the caller reads the result only through its
own return, which does not return the primal (call_primal). A call is then given the
primal-less ABI only where a rule of that ABI exists; otherwise it keeps the primal (an
automatic derivative computes it anyway, and one derivative then serves all call sites).
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

from mlir import ir

from ....core.activity import SHADOWED
from ....core.derivative_abi import DerivativeMode
from ....dialects.adj import AdjError
from ...ir_util import func_type, symbol_name, symbol_ref
from ..signature import Derivative, Signature, adjoint_types, aug_inputs, dret_types, forward_abi

if TYPE_CHECKING:
    from ..protocols import Host

RuleProvider = Callable[[str, str, list[str], str, dict], "str | None"]
RULE_FOR = "adj.rule_for"
RULE_KIND = "adj.rule_kind"
RULE_ACTIVITY = "adj.rule_activity"
RULE_RET_ACTIVITY = "adj.rule_ret_activity"
RULE_NEEDS_PRIMAL = "adj.rule_needs_primal"
RULE_WIDTH = "adj.rule_width"


def default_provider(module: ir.Operation) -> RuleProvider:
    """Rules declared in `module` by attributes on func.funcs."""
    marked = [op.operation for op in module.regions[0].blocks[0].operations
              if op.operation.name == "func.func" and RULE_FOR in op.operation.attributes]

    def provide(fn: str, kind: str, activity: list[str], ret_activity: str,
                config: dict) -> str | None:
        for op in marked:
            if symbol_ref(op.attributes[RULE_FOR]) != fn:
                continue
            if ir.StringAttr(op.attributes[RULE_KIND]).value != kind:
                continue
            if RULE_ACTIVITY in op.attributes and [
                    ir.StringAttr(a).value for a in ir.ArrayAttr(op.attributes[RULE_ACTIVITY])
            ] != list(activity):
                continue
            if RULE_RET_ACTIVITY in op.attributes and ir.StringAttr(
                    op.attributes[RULE_RET_ACTIVITY]).value != ret_activity:
                continue
            if RULE_NEEDS_PRIMAL in op.attributes and ir.BoolAttr(
                    op.attributes[RULE_NEEDS_PRIMAL]).value != config["needs_primal"]:
                continue
            width = (ir.IntegerAttr(op.attributes[RULE_WIDTH]).value
                     if RULE_WIDTH in op.attributes else 1)
            if width != config["width"]:
                continue
            return symbol_name(op)
        return None

    return provide


def call_primal(diff: "Host", sig: Signature, needed: bool,
                at: ir.Operation) -> Signature:
    """`sig` (a call site's, with_primal true) without the primal where the caller does not
    need it and a rule of that ABI does the call: the rule sees config.needs_primal false
    and may skip computing it. Otherwise the primal stays (module docstring)."""
    if needed:
        return sig
    lean = dataclasses.replace(sig, with_primal=False)
    return lean if lookup_rules(diff, lean, at, strict=False) is not None else sig


def rule_config(sig: Signature) -> dict:
    return {"needs_primal": sig.with_primal,
            "needs_shadow": sig.ret_activity in SHADOWED,
            "overwritten": list(sig.overwritten),
            "width": sig.width}


def lookup_rules(diff: "Host", sig: Signature, at: ir.Operation,
                 strict: bool = True) -> Derivative | None:
    """The rule functions for `sig`, checked against the ABI they replace; None if no rule
    (or, not `strict`, if the rules have another ABI)."""
    provider = diff.rule_provider
    config = rule_config(sig)
    args = (sig.fn, list(sig.activity), sig.ret_activity, config)
    if sig.mode == DerivativeMode.FORWARD:
        name = provider(sig.fn, "forward", *args[1:])
        if name is None:
            return None
        rule = _rule_function(diff, name, at)
        inputs, results = forward_abi(_ftype(diff, sig, at), sig)
        if not _check(at, name, "forward", func_type(rule), inputs, results, strict=strict):
            return None
        return Derivative(forward=name)
    aug = provider(sig.fn, "augmented", *args[1:])
    rev = provider(sig.fn, "reverse", *args[1:])
    if aug is None and rev is None:
        return None
    if aug is None or rev is None:
        have, missing = (("a reverse", "an augmented_primal") if aug is None
                         else ("an augmented_primal", "a reverse"))
        raise AdjError(at, f"custom rules of @{sig.fn}: {have} rule without {missing} rule; "
                           "reverse mode needs both (the augmented_primal rule's tape is the "
                           "reverse rule's input): define the missing one")
    ftype = _ftype(diff, sig, at)
    inputs = aug_inputs(ftype, sig)
    primal = list(ftype.results) if sig.with_primal else []
    aug_type = func_type(_rule_function(diff, aug, at))
    if not _check(at, aug, "augmented", aug_type, inputs, primal, prefix_only=True,
                  strict=strict):
        return None
    tape = list(aug_type.results)[len(primal):]
    rev_inputs = inputs + dret_types(ftype, sig) + tape
    if not _check(at, rev, "reverse", func_type(_rule_function(diff, rev, at)), rev_inputs,
                  adjoint_types(ftype, sig), strict=strict):
        return None
    return Derivative(aug=aug, rev=rev, tape=tape)


def _ftype(diff: "Host", sig: Signature, at: ir.Operation) -> ir.FunctionType:
    fn = diff.symbols.get(sig.fn)
    if fn is None:
        raise AdjError(at, f"custom rules for @{sig.fn}, which is not defined")
    return func_type(fn)


def _rule_function(diff: "Host", name: str, at: ir.Operation) -> ir.Operation:
    rule = diff.symbols.get(name)
    if rule is None:   # a provider may compile the rule into the module when asked
        rule = next((op.operation for op in diff.body.operations
                     if "sym_name" in op.operation.attributes
                     and symbol_name(op.operation) == name), None)
        if rule is not None:
            diff.symbols[name] = rule
    if rule is None or rule.name != "func.func":
        raise AdjError(at, f"custom rule @{name} is not a func.func in this module")
    return rule


def _types(ts) -> str:
    return "(" + ", ".join(str(t) for t in ts) + ")"


def _check(at: ir.Operation, name: str, kind: str, got: ir.FunctionType,
           inputs: list[ir.Type], results: list[ir.Type], prefix_only: bool = False,
           strict: bool = True) -> bool:
    """Whether the rule has the ABI; if not, an error (or, not `strict`, False)."""
    got_in, got_out = list(got.inputs), list(got.results)
    bad_out = got_out[:len(results)] != results if prefix_only else got_out != results
    if got_in != inputs or bad_out or len(got_out) < len(results):
        if not strict:
            return False
        want = f"{_types(inputs)} -> {_types(results)}{' + tape' if prefix_only else ''}"
        raise AdjError(at, f"custom {kind} rule @{name} has type {_types(got_in)} -> "
                           f"{_types(got_out)}, but the call needs {want}")
    return True
