"""Custom derivative rules (`adjit.rules`), in Enzyme's form; rule_compiler.py compiles them.

A rule is Python code compiled like any `@adjit.func`, once per activity configuration:
`config` and the arguments' activities are compile-time facts (so `if config.needs_primal:`
and `x.dval is None` are decided while compiling). A function's rules are its own
(`Function.rules`, by kind). The autodiff pass asks for a rule through the provider that
rule_compiler.py makes (FunctionRules), and calls it instead of differentiating the function,
in every mode and for any activities, all-Const calls included (see shared/seeds/002).

Compiled rules follow the ABI of the functions the pass generates (passes/autodiff):
- forward:   (each arg's primal, its tangent if not const) -> (primal if needs_primal,
             tangent if the result is not const); with batched tangents (`config.width`
             N > 1, BatchDuplicated) N tangents per argument and result
- augmented: (each arg's primal, its shadow if an array and dup) -> (primal if needs_primal,
             tape values...)
- reverse:   (same as augmented, dret if the result is active, tape values...) ->
             (one adjoint per active argument)

What a rule returns is checked when it compiles; anything else is refused at the rule's
`return` line (the rule contract):
- forward: `(primal, tangent)` (with `config.width` N > 1, each `x.dval` is an N-tuple of
  tangents and the rule returns `(primal, (t0, ..., tN-1))`); the primal may be None where
  `config.needs_primal` is false
  (the caller uses only the tangent), the tangent where the result is Const (then it is
  unused). A function with no result: None (or nothing).
- augmented_primal: `AugmentedReturn(primal, shadow, tape)`; the primal may be None where
  `config.needs_primal` is false and is None for a function with no result; the shadow is
  None (functions return scalars, whose adjoint reaches the reverse rule as `dret`); the tape
  is None, a scalar or array, or a tuple of them.
- reverse: one entry per argument: the adjoint of each Active argument, None for each other
  one (Const, or an array, whose adjoint the rule adds into `x.dval`).
`config.needs_primal` is false exactly where no one reads the primal: forward mode where the
caller uses only the tangent (`return f(x)` under Forward), augmented where the call's result
is unused. A mode without its rules differentiates the body automatically and warns once;
an augmented_primal rule and a reverse rule come together (reverse mode refuses one alone, at
its def: rule_compiler.reverse_rules_unpaired).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..core.activity import Activity
from .functions import Function
from .source import parse_source


@dataclass(frozen=True)
class Config:
    """What a rule is asked for (Enzyme's RevConfig/FwdConfig)."""
    needs_primal: bool
    needs_shadow: bool
    overwritten: tuple
    width: int = 1        # forward: tangents per argument (BatchDuplicated's N)


class AugmentedReturn:
    """What an augmented-primal rule returns: (primal, shadow, tape)."""

    def __init__(self, primal, shadow, tape):
        self.primal, self.shadow, self.tape = primal, shadow, tape


class RuleArg:
    """An argument as a rule sees it: `.val`; `.dval`, its tangent (forward rules) or shadow
    array (augmented and reverse rules), None where it has none (Const; an Active scalar,
    whose adjoint a reverse rule returns); `.is_const` and `.activity` ("const", "active",
    "dup", "dupnoneed"), known at compile time like `.dval is None`."""

    def __init__(self, val, dval, activity: str = "const"):
        self.val = val
        self.dval = dval
        self.activity = activity
        self.is_const = activity == Activity.CONST


def _register(kind: str):
    def decorator_for(fn: Function):
        if not isinstance(fn, Function):
            raise TypeError(f"adjit.rules.{kind} takes an @adjit.func function, got {fn!r}")

        def decorator(rule: Callable) -> Callable:
            fn.rules[kind] = (rule, parse_source(rule))
            return rule
        return decorator
    return decorator_for


forward = _register("forward")
augmented_primal = _register("augmented")
reverse = _register("reverse")
