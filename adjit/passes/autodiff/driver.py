"""Turns `adj.autodiff` requests into generated functions, differentiating callees on demand.

The Differentiator owns the module's symbol table and the cache of generated derivatives
(Signature -> Derivative), so that a callee reached from several call sites or requests with
the same signature is generated once. Custom rules are looked up here, before any
automatic differentiation, since a rule replaces the automatic derivative everywhere.
The mode and the kind of function choose the generator: forward.py for forward mode,
reverse.py for reverse mode, kernel_tape.py for the reverse mode of a kernel.

The Differentiator is what the generators and rules call back (protocols.Host); only the
package's __init__ imports this module.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import func

from ...core.derivative_abi import DerivativeMode
from ...dialects.adj import (AUTODIFF, AdjError, AutodiffRequest, BOUNDS_ATTR,
                             FIXED_POINT_ATTR, FUNC_ATTR, KERNEL_ATTR, NDIM_ATTR, read_autodiff)
from ..ir_util import func_type, is_float, symbol_name
from ..written import WrittenArguments
from .generate.fixed_point_reverse import generate_fixed_point
from .generate.forward import generate_forward
from .generate.inline_array_calls import inline_array_calls
from .generate.kernel_tape import generate_kernel_reverse
from .generate.reverse import generate_reverse
from .rules.checkpoint import outline_checkpointed_loops
from .rules.custom import RuleProvider, lookup_rules
from .signature import Derivative, Signature, abi, check_signature

# Markers of the differentiated function that its derivatives keep.
KEPT_MARKERS = (KERNEL_ATTR, NDIM_ATTR, FUNC_ATTR)


class _Symbols(dict):
    """The module's top-level symbols by name. A name not yet in it is looked for in the
    module again: a rule provider adds functions while the pass runs (a rule compiled when
    asked, and the @funcs its body calls, which a higher-order derivative then
    differentiates like any other function)."""

    def __init__(self, body: ir.Block):
        super().__init__()
        self.body = body
        self._refresh()

    def _refresh(self) -> None:
        for op in self.body.operations:
            op = op.operation
            if "sym_name" in op.attributes and op.name != AUTODIFF:
                self.setdefault(symbol_name(op), op)

    def __missing__(self, name: str) -> ir.Operation:
        self._refresh()
        if not dict.__contains__(self, name):
            raise KeyError(name)
        return dict.__getitem__(self, name)

    def __contains__(self, name: object) -> bool:
        if not dict.__contains__(self, name):
            self._refresh()
        return dict.__contains__(self, name)

    def get(self, name: str, default=None):
        return self[name] if name in self else default


class Differentiator:
    """Generates the derivatives a module asks for (implements protocols.Host)."""

    def __init__(self, module: ir.Operation, rule_provider: RuleProvider):
        self.module = module
        self.body = module.regions[0].blocks[0]
        self.symbols: dict[str, ir.Operation] = _Symbols(self.body)
        self.rule_provider = rule_provider
        self.done: dict[Signature, Derivative] = {}
        self._in_progress: set[Signature] = set()
        # callee_writes(name): the argument positions of @name that it may write
        self.callee_writes = WrittenArguments(self.symbols)
        self._rules: dict[Signature, Derivative | None] = {}

    # -- requests ----------------------------------------------------------------------------
    def run(self) -> None:
        requests = [op.operation for op in self.body.operations
                    if op.operation.name == AUTODIFF]
        for op in requests:
            self.handle_request(op)
        for op in requests:
            op.erase()

    def handle_request(self, op: ir.Operation) -> None:
        request = read_autodiff(op)
        sig, name = self._signature(op, request), request.name
        extra, combined = request.extra, request.combined
        if combined and (sig.mode != DerivativeMode.REVERSE
                         or KERNEL_ATTR in self.symbols[sig.fn].attributes):
            raise AdjError(op, "a combined request is of reverse mode, for a function that is not "
                               "a kernel (a kernel's derivative is launched, per item)")
        names = ([name] if sig.mode == DerivativeMode.FORWARD else
                 [f"{name}_aug", f"{name}_rev"] + ([name] if combined else []))
        for n in names:
            if n in self.symbols:
                raise AdjError(op, f"autodiff request {name!r} would define @{n}, which exists")
        with op.location:
            # A launch rule's kernel derivative outputs per-item adjoints of the elements all
            # items read (uniform_loads.py), which a request by name does not expect.
            # Nor do they expect the gather kernels to run first (gather.py).
            if (sig in self.done and not self.done[sig].uniform_loads and
                    not self.done[sig].gathers):
                self._alias(self.done[sig], sig, name, extra)
            else:
                self.generate(sig, op, name, extra)
            if combined:
                self._combine(sig, name, extra)

    def _combine(self, sig: Signature, name: str, extra: dict[str, ir.Attribute]) -> None:
        """Defines @name(<aug's parameters>, <dret>) -> (<primal results if with_primal>,
        <adjoints>): the augmented function, then the reverse one on its tape (Enzyme's
        combined reverse mode), which compiled code calls for a gradient. The tape's memrefs
        are the caller's to free (buffer deallocation does it, as for any allocation)."""
        ftype = func_type(self.symbols[sig.fn])
        inputs, results = list(ftype.inputs), list(ftype.results)
        layout = abi(sig)
        params = layout.inputs(inputs)
        dret = layout.dret(results, is_float)
        aug, rev = self.lookup(f"{name}_aug"), self.lookup(f"{name}_rev")
        fn = self.new_function(name, params + dret,
                               layout.split_results(results, len(results))[0]
                               + layout.adjoints(inputs), self.symbols[sig.fn], extra)
        entry = fn.regions[0].blocks[0]
        args = list(entry.arguments)
        with ir.InsertionPoint(entry):
            first = func.CallOp(list(func_type(aug).results), ir.FlatSymbolRefAttr.get(
                f"{name}_aug"), args[:len(params)])
            primal, tape = layout.split_results(list(first.results), len(results))
            second = func.CallOp(list(func_type(rev).results), ir.FlatSymbolRefAttr.get(
                f"{name}_rev"), args + tape)
            func.ReturnOp(primal + list(second.results))

    def _signature(self, op: ir.Operation, request: AutodiffRequest) -> Signature:
        """The signature `request` (the op `op` read) asks for, checked against its function."""
        fn = self.symbols.get(request.fn)
        if fn is None or fn.name != "func.func":
            raise AdjError(op, f"autodiff of @{request.fn}, which is not a func.func in this "
                               "module")
        if len(fn.regions[0].blocks) == 0:
            raise AdjError(op, f"autodiff of @{request.fn}, which is a declaration without a "
                               "body")
        n_args = len(func_type(fn).inputs)
        overwritten = (False,) * n_args if request.overwritten is None else request.overwritten
        if len(overwritten) != n_args:
            raise AdjError(op, f"adj.autodiff `overwritten` has {len(overwritten)} entries for "
                               f"{n_args} arguments")
        sig = Signature(fn=request.fn, mode=request.mode, activity=request.activity,
                        ret_activity=request.ret_activity, with_primal=request.with_primal,
                        overwritten=overwritten, width=request.width)
        check_signature(op, fn, sig)
        return sig

    # -- generation --------------------------------------------------------------------------
    def derivative(self, sig: Signature, at: ir.Operation) -> Derivative:
        """The functions implementing `sig` (generated now if new), for a call site `at`."""
        if sig in self.done:
            return self.done[sig]
        if sig in self._in_progress:
            raise AdjError(at, f"autodiff: @{sig.fn} is recursive, which is not supported")
        fn = self.symbols.get(sig.fn)
        if fn is None or len(fn.regions[0].blocks) == 0:
            if self.rules(sig, at) is None:
                raise AdjError(at, f"autodiff: @{sig.fn} has no body to differentiate and no "
                                   f"custom rule")
        with at.location:
            return self.generate(sig, at, sig.mangled(), {})

    def generate(self, sig: Signature, at: ir.Operation, name: str,
                 extra: dict[str, ir.Attribute]) -> Derivative:
        ruled = self.rules(sig, at)
        if ruled is not None:
            if name != sig.mangled():
                self._alias(ruled, sig, name, extra)
            self.done[sig] = ruled
            return ruled
        self._in_progress.add(sig)
        fn = self.symbols[sig.fn]
        if sig.mode == DerivativeMode.FORWARD:
            result = Derivative(forward=symbol_name(generate_forward(self, fn, sig, name, extra)))
        elif FIXED_POINT_ATTR in fn.attributes:     # implicitly, not through its iterations
            result = generate_fixed_point(self, fn, sig, name, extra)
        else:
            inline_array_calls(self, fn, sig)
            outline_checkpointed_loops(self, fn)
            generate = (generate_kernel_reverse if KERNEL_ATTR in fn.attributes
                        else generate_reverse)
            result = generate(self, fn, sig, name, extra)
        if BOUNDS_ATTR in fn.attributes:
            self._carry_bounds(fn, sig, [result.forward, result.aug, result.rev])
        self._in_progress.discard(sig)
        self.done[sig] = result
        return result

    def _carry_bounds(self, fn: ir.Operation, sig: Signature, names: list[str | None]) -> None:
        """A kernel's derivative kernels index its arrays as it does, over the same items: they
        get its ndrange facts (passes/ndrange_bounds.py), each argument's position moved to
        where it stands among their parameters (core/derivative_abi.py), so that every launch
        of them is checked too."""
        position = abi(sig).primal_positions()
        facts = []
        for a in ir.ArrayAttr(fn.attributes[BOUNDS_ATTR]):
            fact = ir.DictAttr(a)
            entries = {key: fact[key] for key in ("dim", "id", "message", "scale", "offset")
                       if key in fact}
            entries["arg"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                position[ir.IntegerAttr(fact["arg"]).value])
            facts.append(ir.DictAttr.get(entries))
        for name in names:
            if name is not None:
                self.lookup(name).attributes[BOUNDS_ATTR] = ir.ArrayAttr.get(facts)

    def rules(self, sig: Signature, at: ir.Operation) -> Derivative | None:
        """The custom rules for `sig`, if the provider has them (asked once per signature:
        a provider may compile a rule when asked)."""
        if sig not in self._rules:
            self._rules[sig] = lookup_rules(self, sig, at)
        return self._rules[sig]

    def has_rules(self, sig: Signature, at: ir.Operation) -> bool:
        return self.rules(sig, at) is not None

    def lookup(self, name: str) -> ir.Operation | None:
        """The module's symbol `name`, including functions a rule provider just added."""
        return self.symbols.get(name)

    def _alias(self, d: Derivative, sig: Signature, name: str,
               extra: dict[str, ir.Attribute]) -> None:
        """Defines the requested names for already generated functions: thin wrappers (which
        inlining removes), or copies for kernels, which a launch must call directly."""
        pairs = [(name, d.forward)] if sig.mode == DerivativeMode.FORWARD else [
            (f"{name}_aug", d.aug), (f"{name}_rev", d.rev)]
        for new, old in pairs:
            target = self.lookup(old)
            if KERNEL_ATTR in target.attributes:
                copy = target.clone(ir.InsertionPoint(self.body))
                copy.attributes["sym_name"] = ir.StringAttr.get(new)
                if "sym_visibility" in copy.attributes:
                    del copy.attributes["sym_visibility"]
                for key, value in extra.items():
                    copy.attributes[key] = value
                self.symbols[new] = copy
                continue
            ftype = func_type(target)
            wrapper = self.new_function(new, list(ftype.inputs), list(ftype.results),
                                        target, extra)
            entry = wrapper.regions[0].blocks[0]
            with ir.InsertionPoint(entry):
                call = func.CallOp(list(ftype.results), ir.FlatSymbolRefAttr.get(old),
                                   list(entry.arguments))
                func.ReturnOp(list(call.results))

    def new_function(self, name: str, inputs: list[ir.Type], results: list[ir.Type],
                     template: ir.Operation, extra: dict[str, ir.Attribute],
                     private: bool = False) -> ir.Operation:
        """An empty func.func (entry block only) at the end of the module."""
        with ir.InsertionPoint(self.body):
            fn = func.FuncOp(name, ir.FunctionType.get(inputs, results),
                             visibility="private" if private else None)
        fn.add_entry_block()
        for key in KEPT_MARKERS:
            if key in template.attributes:
                fn.attributes[key] = template.attributes[key]
        for key, value in extra.items():
            fn.attributes[key] = value
        self.symbols[name] = fn.operation
        return fn.operation

    def set_signature(self, fn: ir.Operation, inputs: list[ir.Type],
                      results: list[ir.Type]) -> None:
        fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))
