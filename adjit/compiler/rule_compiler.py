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
from .unit import CompileUnit
from ..core.errors import CompilationError, UserError
from ..lang.rules import AugmentedReturn, Config, RuleArg
from ..core.derivative_abi import DerivativeABI, DerivativeMode
from ..core.types import ArrayType, VecArrayType, VecType
from . import vectors as V
from .values import Array, Literal, PyObj, Scalar, Vec, VecArray


class RuleCodeGenerator(CodeGenerator):
    """Compiles a rule: binds config and annotated arguments, checks and flattens what the
    rule returns into the ABI's results."""

    def __init__(self, unit, rule, source, kind: str, arg_types: list, activity: list[str],
                 ret_activity: str, config: Config, symbol: str, primal_type, tape=None,
                 target: str = "the function", result_vec: VecType | None = None):
        """`arg_types`: the function's parameter types, a vector's VecType (the IR's
        parameters, and `activity`, are its components: compiler/vectors.py); `result_vec`:
        the type of its result where that is a vector (`primal_type` is then a
        component's)."""
        self.rule_kind, self.activity, self.ret_activity = kind, activity, ret_activity
        self.target = target
        self.user_arg_types, self.result_vec = list(arg_types), result_vec
        arg_types = V.flat_types(arg_types)
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
        return DerivativeABI(DerivativeMode.FORWARD if forward else DerivativeMode.REVERSE,
                             tuple(self.activity), self.ret_activity,
                             width=self.config.width if forward else 1)

    def _flat_inputs(self, arg_types: list) -> list:
        flat = self._abi().inputs(arg_types)
        if self.rule_kind == "reverse":
            if self.ret_activity == Activity.ACTIVE:    # (a vector result: one per component)
                flat += [self.primal_type] * (self.result_vec.size if self.result_vec else 1)
            flat.extend(self.tape_in[0] if self.tape_in else [])
        return flat

    def bind_params(self, args: list[ir.Value]) -> dict:
        names = [a.arg for a in self.src.tree.args.args]
        lead = 3 if self.rule_kind == "reverse" else 1
        if len(names) != lead + len(self.user_arg_types):
            want = "config, dret, tape" if lead == 3 else "config"
            raise self.error(self.src.tree, f"a {self.rule_kind} rule takes ({want}, then one "
                                            f"parameter per argument: "
                                            f"{len(self.user_arg_types)})")

        def value(v, t):
            return Array(v, t) if isinstance(t, ArrayType) else Scalar(v, t)

        it = iter(zip(args, self.arg_types))
        bound = {names[0]: PyObj(self.config)}
        rule_args = []
        abi = self._abi()
        for k, (first, t) in enumerate(zip(self._positions(), self.user_arg_types)):
            vals, dvals, acts = [], [], []
            for j in range(first, first + (t.size if isinstance(t, VecType) else 1)):
                vals.append(value(*next(it)))
                dval = None
                if abi.has_shadow(j):
                    # batched tangents (config.width N > 1): an N-tuple
                    lanes = [value(*next(it)) for _ in range(abi.width)]
                    dval = lanes[0] if abi.width == 1 else tuple(lanes)
                dvals.append(dval)
                acts.append(self.activity[j])
            if isinstance(t, VecType):
                rule_args.append(self._vector_arg(t, vals, dvals, acts))
            elif isinstance(t, VecArrayType):
                rule_args.append(RuleArg(VecArray(vals[0], t.vec), None if dvals[0] is None
                                         else VecArray(dvals[0], t.vec), acts[0]))
            else:
                rule_args.append(RuleArg(vals[0], dvals[0], acts[0]))
        if self.rule_kind == "reverse":
            n = self.result_vec.size if self.result_vec is not None else 1
            dret = ([value(*next(it)) for _ in range(n)]
                    if self.ret_activity == Activity.ACTIVE else None)
            if dret is not None and self.result_vec is not None:
                dret = [V.of_type(self.result_vec, dret)]
            bound[names[1]] = dret[0] if dret is not None else PyObj(None)
            bound[names[2]] = self._rebuild_tape([value(*p) for p in it])
        for name, ra in zip(names[lead:], rule_args):
            bound[name] = PyObj(ra)
        return bound

    def _positions(self) -> list[int]:
        """The position in `activity` (the IR's parameters) of each Python parameter's
        first one (a vector has one per component)."""
        out, pos = [], 0
        for t in self.user_arg_types:
            out.append(pos)
            pos += t.size if isinstance(t, VecType) else 1
        return out

    def _vector_arg(self, t: VecType, vals: list, dvals: list, acts: list) -> RuleArg:
        """A vector argument: its components' values, and their tangents or shadows as a
        vector where any has one (zero for a Const component: the autodiff pass finds
        activity per component, so `vec3(x, 0.0, 0.0)` has two Const ones). Its activity
        is its components' where they agree, else that of the non-Const ones."""
        live = [a for a in acts if a != Activity.CONST]
        act = live[0] if live else Activity.CONST
        val = V.of_type(t, vals)
        if all(d is None for d in dvals):
            return RuleArg(val, None, act)
        width = next(len(d) if isinstance(d, tuple) else 1 for d in dvals if d is not None)

        def lane(w):
            return V.of_type(t, [V.zero(v) if d is None else d[w] if isinstance(d, tuple)
                                 else d for v, d in zip(vals, dvals)])
        return RuleArg(val, lane(0) if width == 1 and not isinstance(
            next(d for d in dvals if d is not None), tuple) else tuple(map(lane, range(width))),
            act)

    def _rebuild_tape(self, values: list):
        if not self.tape_in:
            return PyObj(None)
        structure = self.tape_in[1]
        if structure == "none":
            return PyObj(None)
        values = V.regroup(values, self.tape_in[2])     # (vectors on the tape)
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
        if len(items) != len(self.user_arg_types):
            raise UserError(f"a reverse rule returns one entry per argument "
                            f"({len(self.user_arg_types)}), this one returns {len(items)}")
        names = self._param_names()
        out = []
        for k, (first, ut, g) in enumerate(zip(self._positions(), self.user_arg_types, items)):
            what = f"argument {k} ({names[k]})"
            if isinstance(ut, VecType):
                out += self._vector_adjoint(ut, first, g, what)
                continue
            act, t = self.activity[first], self.primal_arg_types[first]
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

    def _vector_adjoint(self, t: VecType, first: int, g, what: str) -> list:
        """The adjoints of a vector argument's Active components from the vector `g` the
        reverse rule gives for it (None where no component is Active)."""
        acts = self.activity[first:first + t.size]
        if not any(a == Activity.ACTIVE for a in acts):
            if not _is_none(g):
                raise UserError(f"a reverse rule gives None for {what}, which is not Active; "
                                f"this one gives {S.describe(g)}")
            return []
        if not (isinstance(g, Vec) and g.type.shape == t.shape):
            raise UserError(f"a reverse rule gives the adjoint of {what}, a {t!r}, as a "
                            f"{t!r}; this one gives {S.describe(g)}")
        return [S.cast(S.as_scalar(x, t.dtype), t.dtype)
                for x, a in zip(g.items, acts) if a == Activity.ACTIVE]

    def _result(self, v, what: str) -> list:
        """The primal (or a tangent) the rule gives, as the IR's results: a scalar, or a
        vector result's components."""
        if self.result_vec is None:
            return [self._scalar(v, what)]
        t = self.result_vec
        if _is_none(v):
            raise UserError(f"{what} is None, but the rule's config asks for it")
        if not (isinstance(v, Vec) and v.type.shape == t.shape):
            raise UserError(f"{what} must be a {t!r} ({self.target} returns one), got "
                            f"{S.describe(v)}")
        return list(V.of_type(t, v.items).items)

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
            out += self._result(primal, "the primal")
        if has_tangent and cfg.width == 1:
            out += self._result(tangent, "the tangent")
        elif has_tangent:
            if not isinstance(tangent, tuple) or len(tangent) != cfg.width:
                raise UserError(f"a forward rule of width {cfg.width} (config.width) returns "
                                f"(primal, (tangent 0, ..., tangent {cfg.width - 1})); this "
                                f"one's tangent is {_describe(tangent)}")
            lanes = [self._result(t, f"tangent {k}") for k, t in enumerate(tangent)]
            # (the ABI's order: each result's N tangents together)
            out += [lane[c] for c in range(len(lanes[0])) for lane in lanes]
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
            out += self._result(value.primal, "the primal")
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
            if not isinstance(t, (Scalar, Array, Vec)):
                raise UserError(f"a tape holds scalars, vectors and arrays, not "
                                f"{S.describe(t)}")
        items = [S.as_scalar(t) if isinstance(t, Literal) else t for t in items]
        # (a vector is its components on the tape; the layout regroups them for the
        # reverse rule)
        layout = [t.type if isinstance(t, Vec) else None for t in items]
        items = [x for t in items for x in (t.items if isinstance(t, Vec) else [t])]
        self.tape_out = ([t.type for t in items], structure, layout)
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


_RULE_NAMES = {"augmented and reverse": "augmented_primal and reverse rules",
               "augmented": "an augmented_primal rule", "reverse": "a reverse rule"}


def reverse_rules_unpaired(target) -> CompilationError | None:
    """The error, at the rule's def, for a function with an augmented_primal rule or a reverse
    rule but not both: reverse mode needs the pair (the augmented rule's tape is the reverse
    rule's input), and differentiating the body instead would silently drop the one given."""
    have = {"augmented", "reverse"} & set(target.rules)
    if len(have) != 1:
        return None
    kind, = have
    name = target.__name__
    if kind == "reverse":
        message = (f"custom rules of {name}: this reverse rule has no augmented_primal rule; "
                   "reverse mode needs both (the augmented_primal rule runs in the forward "
                   "sweep and returns AugmentedReturn(primal, None, tape), whose tape the "
                   f"reverse rule receives): define @adjit.rules.augmented_primal({name}) "
                   "too, or remove this rule to differentiate the body")
    else:
        message = (f"custom rules of {name}: this augmented_primal rule has no reverse rule; "
                   f"reverse mode needs both: define @adjit.rules.reverse({name}) (taking "
                   "config, dret, tape and the arguments, returning their adjoints) too, or "
                   "remove this rule to differentiate the body")
    return target.rules[kind][1].error(None, message)


def _warn_automatic(target, kind: str) -> None:
    """Says, once per function and mode, that a mode without its rules differentiates the
    body of a function that has rules for the other mode (transposing a forward rule, as
    JAX does for custom_jvp, is not implemented)."""
    mode = "forward" if kind == "forward" else "reverse"
    if (id(target), mode) in _WARNED:
        return
    _WARNED.add((id(target), mode))
    if mode == "forward":      # (what it has: reverse_rules_unpaired refuses a lone one)
        has = _RULE_NAMES[" and ".join(sorted(set(target.rules) & {"augmented", "reverse"}))]
        missing = "a forward rule"
    else:
        has, missing = "a forward rule", "augmented_primal and reverse rules"
    src = target.source
    # At the function's def, where Python prints it.
    warnings.warn_explicit(f"{target.__name__} ({src.filename}:{src.first_line}) has {has} "
                           f"only: {mode} mode differentiates its body automatically (give "
                           f"it {missing} to replace that)", UserWarning, src.filename,
                           src.first_line)


class FunctionRules:
    """The autodiff pass's rule provider (passes/autodiff/rules/custom.RuleProvider) for the
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
            if kind != "forward":
                unpaired = reverse_rules_unpaired(target)
                if unpaired is not None:
                    raise unpaired
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
            if ("adj.rule_key" in op.attributes and
                    ir.StringAttr(op.attributes["adj.rule_key"]).value == rule_key):
                return name            # this rule, compiled for this configuration before
            k += 1                     # a symbol of another origin: never reuse it
            name = f"{base}_{k}"
        primal_type = results[0] if results else None
        layout = unit.vector_results.get(fn_symbol) or [None]
        if len(layout) > 1:
            raise UserError(f"custom rules of {target.__name__}: a function with rules returns "
                            "one scalar or one vector")
        gen = RuleCodeGenerator(unit, rule, source, kind, list(arg_types), activity,
                                ret_activity, cfg, name, primal_type, self._tapes.get(ident),
                                target.__name__, layout[0])
        with unit.ctx:
            fn = unit.add(gen)
            fn.operation.attributes["adj.rule_key"] = ir.StringAttr.get(rule_key)
        if kind == "augmented":
            self._tapes[ident] = gen.tape_out or ([], "none", [])
        return name
