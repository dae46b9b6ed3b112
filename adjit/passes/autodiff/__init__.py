"""The autodiff pass: activity analysis, forward mode, split reverse mode with a tape.

`run_autodiff(module, rule_provider=None)` replaces every `adj.autodiff` request of `module`
with generated func.funcs (and differentiates the functions they call, once per signature).

Request (a declaration, anywhere in the module body):
    "adj.autodiff"() {sym_name = "NAME", fn = @f, mode = "forward" | "reverse",
                      activity = ["const" | "active" | "dup" | "dupnoneed", ... one per arg],
                      ret_activity = "const" | "active" | "dup" | "dupnoneed",
                      with_primal = true | false,                  (default false)
                      overwritten = [false, ...],                  (optional, default all false)
                      combined}                                    (optional, reverse mode)
`overwritten[k]`: the caller may change array argument k between the augmented and the reverse
call (leave false for Reverse, which runs them back to back; set true for split mode if user
code may write the arrays in between). Any other attribute of the request (`adj.entry`,
`llvm.emit_c_interface`...) is copied onto the generated functions; `adj.kernel`, `adj.ndim`
and `adj.func` are copied from @f.

ABI of the generated functions
------------------------------
forward, `@NAME`:
    params:  for each arg of f in order: its primal, then its tangent when its activity is not
             "const" (a scalar tangent has the arg's type; an array's is a shadow memref of the
             same type that receives the tangents of what f writes).
    results: f's results if with_primal; then, if ret_activity != "const", the tangent of each
             float result (and the shadow of each float array result), in order.
reverse, `@NAME_aug` then `@NAME_rev` (split mode):
    `@NAME_aug` params: for each arg: its primal, then its shadow memref if "dup"/"dupnoneed"
             ("active" scalars pass the primal only).
    `@NAME_aug` results: f's results if with_primal; then the tape values. It performs f's
             primal effects (arrays hold the primal results afterwards). Attribute `adj.tape`:
             one dictionary per tape value, {holds = "what", type = T}, in order. Tape memrefs
             are allocated by aug and owned by the caller, which frees them once no reverse call
             needs them; the reverse function only reads the tape, so a tape may be reused.
    `@NAME_rev` params: the same params as aug; then, if ret_activity == "active", one adjoint
             `dret` per float result of f; then the tape values.
    `@NAME_rev` results: one adjoint per "active" argument, in order. Shadow arrays receive
             accumulated adjoints (dx += ...); the adjoint of memory that f overwrote is zeroed.
    `@NAME` (a `combined` request, not for kernels): params: aug's, then rev's `dret`;
             results: f's results if with_primal, then the adjoints: aug then rev, the tape
             between them (what compiled code calls for a gradient).
    Reverse mode accepts "active" for float scalars only and "dup"/"dupnoneed"/"const" for
    arrays; "active" ret_activity needs float scalar results.
kernels (f marked `adj.kernel`, launched over an ndrange; they return nothing):
    forward: the same ABI as above, kept a kernel (`adj.kernel`, `adj.ndim`).
    `@NAME_aug(args..., tapes...)`: the tape values are memref params instead of results: one
             memref<?xT> per tape field, with `per_item` slots per work item (field entry of
             `adj.tape`); the caller allocates prod(ndrange) * per_item elements. Work item i
             uses slots [i * per_item, (i + 1) * per_item). per_item is an integer, or, when
             loops around taped values run a number of times given by the kernel's
             arguments, a string: an expression of them (core/tape_size.py), such as
             "(muli 2 (trip 0 (arg 2) 1))", 2 slots per iteration of a loop from 0 to
             argument 2 by 1.
             A loop whose bounds read an enclosing loop's variable (`range(k, n)`) sums over
             it: "(sum 0 0 4 1 (trip (iv 0) (arg 2) 1))".
    `@NAME_rev(args..., tapes..., dargs...)`: one memref<?xT> per "active" scalar argument,
             receiving that argument's adjoint from each work item at [adj.index] (the caller
             sums them); a private one (a launch rule's) then has one more per element
             that every item reads (uniform_loads.py), in Derivative.uniform_loads' order.
A kernel launch inside a differentiated function is differentiated by these kernels: forward
launches the forward kernel; the augmented pass allocates the per-item tapes, launches the
augmented kernel and keeps the tapes on its own tape; the reverse pass launches the reverse
kernel as an `adj.launch` that returns the f64 sums over items of its per-item outputs, the
adjoints of active scalar arguments (and of the elements every item reads, each added into
its shadow element), summed accurately by the lowering: passes/summation.py, lower_cpu.py.

Functions called from a differentiated function are differentiated with the same ABI, under
the names `__adj_<f>_<fwd|rev>_<activity letters>...` (private), and custom rules, where a
rule provider gives them, take their place: see rules/custom.py. Without a provider the pass
uses the rules the module declares (`adj.rule_for`, `adj.rule_kind`). Before reverse mode
differentiates a function, it inlines the calls in it that return arrays (in place: the
primal function is rewritten), since the ABI has no shadow for a returned array; calls with
custom rules and calls of recursive callees stay, and their arrays' shadows are refused.

The generated code frees nothing itself (the CPU pipeline's buffer deallocation does): the
tape arrays an augmented function returns belong to its caller.

The package by role, as Enzyme-MLIR separates its rules, analyses and the engine (no import
cycle among its modules: the callbacks upwards go through protocols.py's interfaces):
- here: driver.py (requests, reuse, naming; picks the generator by mode and kind of
  function), and the contracts its parts share: signature.py (what one derivative is for,
  its ABI) and protocols.py (what rules ask of generators, generators of the driver);
- generate/, the engine: the generators, which keep the traversal, the value maps and the
  adjoints: forward.py; reverse.py + augment.py + context.py + adjoints.py (split reverse
  mode), tape.py (where saved values live), prune.py (what the augmented function computes
  for nothing); kernel_tape.py (a kernel's reverse mode, per-item tapes) + dynamic_tape.py +
  gather.py; fixed_point_reverse.py (implicit differentiation of adj.fixed_point functions);
  inline_array_calls.py (calls returning arrays, before reverse mode);
- rules/, the per-op rules, forward, augmented and reverse side by side: scalar.py (the
  derivative table of scalar ops), memory_ops.py, call_ops.py, control_flow_ops.py
  (+ loop_slots.py, checkpoint.py), launch_ops.py; lookup.py (their table); custom.py (user
  rules that replace a function's derivative);
- analysis/: activity_analysis.py (which values get derivatives), overwritten.py (what may
  be overwritten), recompute.py (recompute or tape), uniform.py and uniform_loads.py (what
  every work item computes alike).
What is not about derivatives is in passes/: op_facts.py (what each op reads, writes,
aliases; pure or not), aliases.py, written.py (what a function may write), summation.py (the
sums over work items), ir_util.py.

Errors: malformed requests and what cannot be differentiated raise
`adjit.dialects.adj.AdjError(op, message)` naming the op.
"""
from __future__ import annotations

from mlir import ir

from ..registry import AdjPass
from .driver import Differentiator
from .rules.custom import RuleProvider, default_provider


def run_autodiff(module: ir.Operation, rule_provider: RuleProvider | None = None) -> None:
    """Replaces the `adj.autodiff` requests of `module` with generated functions, in place.

    Without a `rule_provider`, rules are the ones the module declares (default_provider).
    """
    module = module.operation
    Differentiator(module, rule_provider or default_provider(module)).run()


class AutodiffPass(AdjPass):
    """--adj-autodiff: run_autodiff with the rules the module declares."""
    name = "adj-autodiff"

    def apply(self, module: ir.Operation) -> None:
        run_autodiff(module)


__all__ = ["run_autodiff", "default_provider", "RuleProvider"]
