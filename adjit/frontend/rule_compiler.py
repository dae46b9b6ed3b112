"""Compiling custom derivative rules (rules.py), once per activity configuration, for the
autodiff pass, which asks for them through the rule provider here, `FunctionRules` (see
rules.py for the ABI and for what a rule must return: what it returns is checked here, at the
rule's `return`).

A compiled rule's symbol spells out what it was compiled for (function symbol, kind,
activities, config), so it is the same in every process (the disk cache keys on the module
text) and two configurations never share one; its `adj.rule_key` attribute says the same in
full, so that an existing symbol is reused only when it is that rule.
"""
from __future__ import annotations

import ast
import warnings

from mlir import ir

from ..core.activity import Activity
from . import scalar_ops as S
from .codegen import CodeGenerator
from .compiler import CompileUnit
from ..core.errors import UserError
from .rules import AugmentedReturn, Config, RuleArg
from ..core.derivative_abi import DerivativeABI, Mode
from ..core.types import ArrayType
from .values import Array, Literal, PyObj, Scalar


class RuleCodeGenerator(CodeGenerator):
    """Compiles a rule: binds config and annotated arguments, checks and flattens what the
    rule returns into the ABI's results."""

    def __init__(self, unit, rule, source, kind: str, arg_types: list, activity: list[str],
                 ret_activity: str, config: Config, symbol: str, primal_type, tape=None,
                 target: str = "the function"):
        self.rule_kind, self.activity, self.ret_activity = kind, activity, ret_activity
        self.target = target
        # A function with no result has no primal to give, whatever the pass asks.
        if primal_type is None and config.needs_primal:
            config = Config(False, config.needs_shadow, config.overwritten, config.width)
        self.config, self.primal_type, self.tape_in = config, primal_type, tape
        self.tape_out: object = None
        self.primal_arg_types = arg_types
        flat = self._flat_inputs(arg_types)
        super().__init__(unit, rule, source, "rule", flat, symbol)

    def _abi(self) -> DerivativeABI:
        """The layout of the derivative this rule implements (a forward rule's is forward
        mode's; augmented and reverse rules take the reverse mode's)."""
        forward = self.rule_kind == "forward"
        return DerivativeABI(Mode.FORWARD if forward else Mode.REVERSE,
                             tuple(self.activity), self.ret_activity,
                             width=self.config.width if forward else 1)

    def _flat_inputs(self, arg_types: list) -> list:
        flat = self._abi().inputs(arg_types)
        if self.rule_kind == "reverse":
            if self.ret_activity == Activity.ACTIVE:
                flat.append(self.primal_type)
            flat.extend(self.tape_in[0] if self.tape_in else [])
        return flat

    def bind_params(self, args: list[ir.Value]) -> dict:
        names = [a.arg for a in self.src.tree.args.args]
        lead = 3 if self.rule_kind == "reverse" else 1
        if len(names) != lead + len(self.activity):
            want = "config, dret, tape" if lead == 3 else "config"
            raise self.error(self.src.tree, f"a {self.rule_kind} rule takes ({want}, then one "
                                            f"parameter per argument: {len(self.activity)})")

        def value(v, t):
            return Array(v, t) if isinstance(t, ArrayType) else Scalar(v, t)

        it = iter(zip(args, self.arg_types))
        bound = {names[0]: PyObj(self.config)}
        rule_args = []
        abi = self._abi()
        for k, act in enumerate(self.activity):
            val = value(*next(it))
            dval = None
            if abi.has_shadow(k):
                # batched tangents (config.width N > 1): an N-tuple
                lanes = [value(*next(it)) for _ in range(abi.width)]
                dval = lanes[0] if abi.width == 1 else tuple(lanes)
            rule_args.append(RuleArg(val, dval, act))
        if self.rule_kind == "reverse":
            dret = value(*next(it)) if self.ret_activity == Activity.ACTIVE else None
            bound[names[1]] = dret if dret is not None else PyObj(None)
            bound[names[2]] = self._rebuild_tape([value(*p) for p in it])
        for name, ra in zip(names[lead:], rule_args):
            bound[name] = PyObj(ra)
        return bound

    def _rebuild_tape(self, values: list):
        if not self.tape_in:
            return PyObj(None)
        structure = self.tape_in[1]
        if structure == "none":
            return PyObj(None)
        if structure == "one":
            return values[0]
        return tuple(values)

    def returned_items(self, value, node: ast.Return) -> list:
        """What the rule returns, checked against what its kind and config ask for (the
        rule contract in rules.py), as the ABI's results."""
        kind = self.rule_kind
        if kind == "forward":
            return self._forward_items(value)
        if kind == "augmented":
            return self._augmented_items(value)
        items = list(value) if isinstance(value, tuple) else [value]
        if len(items) != len(self.activity):
            raise UserError(f"a reverse rule returns one entry per argument "
                            f"({len(self.activity)}), this one returns {len(items)}")
        names = self._param_names()
        out = []
        for k, (act, t, g) in enumerate(zip(self.activity, self.primal_arg_types, items)):
            what = f"argument {k} ({names[k]})"
            if act == Activity.ACTIVE:
                if _is_none(g):
                    raise UserError(f"a reverse rule gives the adjoint of {what}, which is "
                                    f"Active; this one gives None")
                out.append(S.cast(self._scalar(g, f"the adjoint of {what}"), t))
            elif not _is_none(g):
                why = (f"is an array: its adjoint goes into {names[k]}.dval"
                       if act != Activity.CONST else "is Const")
                raise UserError(f"a reverse rule gives None for {what}, which {why}; this "
                                f"one gives {S.describe(g)}")
        return out

    def _forward_items(self, value) -> list:
        cfg = self.config
        if self.primal_type is None:
            if not all(_is_none(v) for v in (value if isinstance(value, tuple) else (value,))):
                raise UserError(f"{self.target} returns nothing, so its forward rule returns "
                                f"None; this one returns {_describe(value)}")
            return []
        has_tangent = self.ret_activity != Activity.CONST
        items = list(value) if isinstance(value, tuple) else [value]
        if len(items) == 2:
            primal, tangent = items
        elif len(items) == 1 and not (cfg.needs_primal and has_tangent):
            primal, tangent = (items[0], None) if cfg.needs_primal else (None, items[0])
        else:
            raise UserError(f"a forward rule returns (primal, tangent); this one returns "
                            f"{len(items)} values")
        out = []
        if cfg.needs_primal:
            out.append(self._scalar(primal, "the primal"))
        if has_tangent and cfg.width == 1:
            out.append(self._scalar(tangent, "the tangent"))
        elif has_tangent:
            if not isinstance(tangent, tuple) or len(tangent) != cfg.width:
                raise UserError(f"a forward rule of width {cfg.width} (config.width) returns "
                                f"(primal, (tangent 0, ..., tangent {cfg.width - 1})); this "
                                f"one's tangent is {_describe(tangent)}")
            out += [self._scalar(t, f"tangent {k}") for k, t in enumerate(tangent)]
        return out

    def _augmented_items(self, value) -> list:
        cfg = self.config
        if not isinstance(value, AugmentedReturn):
            raise UserError("an augmented_primal rule returns "
                            "adjit.rules.AugmentedReturn(primal, shadow, tape)")
        if self.primal_type is None and not _is_none(value.primal):
            raise UserError(f"{self.target} returns nothing, so the primal of its "
                            f"AugmentedReturn is None; this one is {S.describe(value.primal)}")
        if not _is_none(value.shadow):
            raise UserError(f"the shadow of an AugmentedReturn is None ({self.target} returns "
                            f"a scalar, whose adjoint comes to the reverse rule as dret); "
                            f"this one is {S.describe(value.shadow)}")
        out = []
        if cfg.needs_primal:
            out.append(self._scalar(value.primal, "the primal"))
        tape = value.tape
        if _is_none(tape):
            items, structure = [], "none"
        elif isinstance(tape, tuple):
            items, structure = list(tape), "tuple"
        else:
            items, structure = [tape], "one"
        for t in items:
            if isinstance(t, Literal):
                t = S.as_scalar(t)
            if not isinstance(t, (Scalar, Array)):
                raise UserError(f"a tape holds scalars and arrays, not {S.describe(t)}")
        items = [S.as_scalar(t) if isinstance(t, Literal) else t for t in items]
        self.tape_out = ([t.type for t in items], structure)
        return out + items

    def _param_names(self) -> list[str]:
        lead = 3 if self.rule_kind == "reverse" else 1
        return [a.arg for a in self.src.tree.args.args][lead:]

    def _scalar(self, v, what: str) -> Scalar:
        if _is_none(v):
            raise UserError(f"{what} is None, but the rule's config asks for it")
        if isinstance(v, Literal):
            return S.as_scalar(v, self.primal_type if what != "the adjoint" else None)
        if not isinstance(v, Scalar):
            raise UserError(f"{what} must be a scalar, got {S.describe(v)}")
        return v


def _is_none(v) -> bool:
    return isinstance(v, PyObj) and v.obj is None


def _describe(value) -> str:
    if isinstance(value, tuple):
        return f"({', '.join(S.describe(v) for v in value)})"
    return S.describe(value)


def rule_symbol(fn_symbol: str, kind: str, activity: list[str], ret_activity: str,
                cfg: Config) -> str:
    """The symbol of `fn_symbol`'s `kind` rule compiled for these activities and config:
    a spelling of all of them (so the same in every process, and one per configuration)."""
    acts = "".join(Activity(a).letter for a in activity) or "0"
    flags = ("p" if cfg.needs_primal else "") + ("s" if cfg.needs_shadow else "")
    name = f"{fn_symbol}__rule_{kind}_{acts}_{Activity(ret_activity).letter}{flags}"
    if any(cfg.overwritten):
        name += "_o" + "".join("1" if o else "0" for o in cfg.overwritten)
    if cfg.width != 1:
        name += f"_w{cfg.width}"
    return name


# Functions whose reverse (or forward) mode was told to differentiate the body automatically
# because only rules for the other mode exist: warned once per function and mode.
_WARNED: set[tuple[int, str]] = set()


def _warn_automatic(target, kind: str) -> None:
    """Says, once per function and mode, that a mode without its rules differentiates the
    body of a function that has rules for the other mode (transposing a forward rule, as
    JAX does for custom_jvp, is not implemented)."""
    mode = "forward" if kind == "forward" else "reverse"
    if (id(target), mode) in _WARNED:
        return
    _WARNED.add((id(target), mode))
    has, missing = ("augmented_primal and reverse rules", "a forward rule") \
        if mode == "forward" else ("a forward rule", "augmented_primal and reverse rules")
    src = target.source
    # At the function's def, where Python prints it.
    warnings.warn_explicit(f"{target.__name__} ({src.filename}:{src.first_line}) has {has} "
                           f"only: {mode} mode differentiates its body automatically (give "
                           f"it {missing} to replace that)", UserWarning, src.filename,
                           src.first_line)


class FunctionRules:
    """The autodiff pass's rule provider (passes/autodiff/custom_rules.RuleProvider) for the
    functions compiled into `unit`: the symbol of a function's `kind` rule compiled (into
    `unit`, once per configuration) for the activities and config asked, or None where the
    function has no such rule (it is differentiated automatically)."""

    def __init__(self, unit: CompileUnit):
        self.unit = unit
        # An augmented rule's tape (types, structure), which its reverse rule takes.
        self._tapes: dict[tuple, tuple] = {}

    def __call__(self, fn_symbol: str, kind: str, activity: list[str], ret_activity: str,
                 config: dict) -> str | None:
        unit = self.unit
        found = unit.functions.get(fn_symbol)
        if found is None:
            return None
        target, arg_types, results = found
        if kind not in target.rules:
            others = {"forward"} if kind != "forward" else {"augmented", "reverse"}
            if others & set(target.rules):
                _warn_automatic(target, kind)
            return None
        rule, source = target.rules[kind]
        cfg = Config(bool(config.get("needs_primal", True)),
                     bool(config.get("needs_shadow", False)),
                     tuple(config.get("overwritten", ())),
                     int(config.get("width", 1)))
        ident = (fn_symbol, tuple(activity), ret_activity, cfg)
        rule_key = repr((kind, target.pyfn.__qualname__, ident))
        base = name = rule_symbol(fn_symbol, kind, activity, ret_activity, cfg)
        existing = {ir.StringAttr(op.attributes["sym_name"]).value: op
                    for op in unit.module.body.operations if "sym_name" in op.attributes}
        k = 0
        while name in existing:
            op = existing[name]
            if "adj.rule_key" in op.attributes and \
                    ir.StringAttr(op.attributes["adj.rule_key"]).value == rule_key:
                return name            # this rule, compiled for this configuration before
            k += 1                     # a symbol of another origin: never reuse it
            name = f"{base}_{k}"
        primal_type = results[0] if results else None
        gen = RuleCodeGenerator(unit, rule, source, kind, list(arg_types), activity,
                                ret_activity, cfg, name, primal_type, self._tapes.get(ident),
                                target.__name__)
        with unit.ctx:
            fn = unit.add(gen)
            fn.operation.attributes["adj.rule_key"] = ir.StringAttr.get(rule_key)
        if kind == "augmented":
            self._tapes[ident] = gen.tape_out or ([], "none")
        return name
