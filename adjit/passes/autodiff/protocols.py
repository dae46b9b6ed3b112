"""What the parts of the autodiff pass ask of each other, as typing.Protocols.

The pass is layered: the driver (driver.py) calls the generators (generate/: forward.py,
augment.py, reverse.py, kernel_tape.py), which call the per-op rules (rules/: memory_ops.py,
call_ops.py, control_flow_ops.py, launch_ops.py), and all of them call back up: a call's
rule asks the driver for the callee's derivative, a loop's rule asks its generator to emit
the loop's body.
Those call-backs go through the interfaces here, not through the classes, so that no
module imports one above it (tests/api/test_import_layers.py checks there is no import
cycle): the Differentiator implements `Host`, ReverseContext implements `Shared`, and the
generators implement `ForwardGenerator`, `AugmentedGenerator` and `ReverseGenerator`.

A rule is a function `rule(gen, op)` that emits, at the insertion point, what `op` becomes
in one generated function; `OpRules` groups an op's three (rules/lookup.py holds the table).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Protocol

from mlir import ir

if TYPE_CHECKING:
    from .analysis.activity_analysis import ActivityAnalysis
    from .analysis.overwritten import Writes
    from .signature import Derivative, Signature
    from .generate.tape import Key, StackReader, Stacks, TapePlan


class Host(Protocol):
    """The module being differentiated, as the generators and rules see it (driver.py's
    Differentiator)."""
    module: ir.Operation
    body: ir.Block                         # the module's block, where new functions go
    symbols: dict[str, ir.Operation]
    # (function, kind, activities, result activity, config) -> rule symbol: rules/custom.py
    rule_provider: Callable[[str, str, list[str], str, dict], "str | None"]

    def callee_writes(self, name: str) -> set[int]:
        """The positions of @name's array arguments that it may write."""

    def derivative(self, sig: "Signature", at: ir.Operation) -> "Derivative":
        """The functions implementing `sig`, generated now if new, for a call site `at`."""

    def rules(self, sig: "Signature", at: ir.Operation) -> "Derivative | None":
        """The custom rules for `sig`, if any."""

    def has_rules(self, sig: "Signature", at: ir.Operation) -> bool: ...

    def lookup(self, name: str) -> ir.Operation | None:
        """The module's symbol `name`, including functions a rule provider just added."""

    def new_function(self, name: str, inputs: list[ir.Type], results: list[ir.Type],
                     template: ir.Operation, extra: dict[str, ir.Attribute],
                     private: bool = False) -> ir.Operation:
        """An empty func.func (entry block only) at the end of the module."""

    def set_signature(self, fn: ir.Operation, inputs: list[ir.Type],
                      results: list[ir.Type]) -> None: ...


class Shared(Protocol):
    """What the augmented and the reverse generator of one function share (context.py's
    ReverseContext)."""
    diff: Host
    fn: ir.Operation
    sig: "Signature"
    kernel: bool
    entry: ir.Block
    act: "ActivityAnalysis"
    writes: "Writes"
    plan: "TapePlan"

    def operand_activity(self, at: ir.Operation,
                         operands) -> tuple[tuple[str, ...], tuple[bool, ...]]: ...

    def call_info(self, op: ir.Operation) -> tuple["Signature", "Derivative"]: ...

    def joined(self, v: ir.Value) -> bool: ...

    def sites(self, v: ir.Value) -> list[ir.Value] | None: ...


class ForwardGenerator(Protocol):
    """forward.py's ForwardGen: the primal's clone (`vmap`) with tangents beside it."""
    diff: Host
    fn: ir.Operation
    sig: "Signature"
    act: "ActivityAnalysis"
    vmap: dict[ir.Value, ir.Value]
    width: int                             # tangents per value (batched: > 1)
    # tangent of a float (a tuple of `width` lanes if width > 1), shadows (one per lane) of
    # an array
    tan: dict[ir.Value, "ir.Value | tuple | list[ir.Value]"]

    def block(self, block: ir.Block) -> None:
        """Emits `block`'s ops but its terminator."""

    def arith(self, op: ir.Operation) -> None:
        """`op` and its tangent from the derivative table (rules/scalar.py)."""

    def tangent(self, v: ir.Value): ...

    def tangent_or_zero(self, v: ir.Value): ...

    def pack(self, lanes: list[ir.Value]):
        """A float's tangent from its lanes."""

    def lanes(self, t) -> list[ir.Value]:
        """A float's tangent as its lanes."""

    def shadows(self, v: ir.Value) -> list[ir.Value] | None:
        """An array's shadows, one per lane."""

    def carried(self, v: ir.Value) -> bool:
        """Whether control flow carries a tangent (or shadows) next to `v`."""

    def derivatives_of(self, v: ir.Value) -> list[ir.Value]:
        """A float's tangent lanes (zero if inactive), an array's shadows: what control flow
        carries and calls pass next to `v`."""

    def derivative_types(self, v: ir.Value) -> list[ir.Type]: ...

    def bind(self, v: ir.Value, values, keep: bool = True) -> None:
        """Takes `v`'s derivatives, as derivatives_of gives them, from an iterator."""


class AugmentedGenerator(Protocol):
    """augment.py's AugGen: the primal's clone (`vmap`) saving what the tape plan asks."""
    ctx: Shared
    vmap: dict[ir.Value, ir.Value]
    extra: dict["Key", ir.Value]           # values the primal never names (tape.py's keys)
    shadow_params: dict[ir.Value, ir.Value]
    stacks: "Stacks"
    # Loops that run their body a known number of times: (iv, lb, ub, step) of the clone.
    counted: dict[ir.Operation, tuple[ir.Value, ...]]

    def block(self, block: ir.Block) -> None:
        """Emits `block`'s ops but its terminator, then saves its planned keys."""

    def threaded(self, op: ir.Operation) -> list[ir.Value]:
        """The stack state that `op`'s regions thread, if they push."""

    def runs_left(self, block: ir.Block) -> Any:
        """What emits how many more times `block` ends (a hint for stack growth), or None."""

    def aug_shadow(self, v: ir.Value, callee: str, position: int) -> ir.Value: ...


class ReverseGenerator(Protocol):
    """reverse.py's RevGen: the primal body backwards, adjoints accumulated per region."""
    ctx: Shared
    act: "ActivityAnalysis"
    scope: Any                             # adjoints.Scope: the reversed block being emitted
    stacks: "StackReader"                  # the tape's stacks (tape.py)

    def primal(self, v: ir.Value) -> ir.Value:
        """`v` in the reverse function: recomputed or taken from the tape (recompute.py)."""

    def materialize(self, key: "Key") -> ir.Value: ...

    def shadow(self, m: ir.Value) -> ir.Value: ...

    def get_adj(self, v: ir.Value) -> ir.Value | None: ...

    def add_adj(self, v: ir.Value, contribution: ir.Value | None) -> None: ...

    def set_adj(self, v: ir.Value, value: ir.Value | None) -> None: ...

    def arith(self, op: ir.Operation) -> None:
        """The adjoints of a table op's operands (rules/scalar.py)."""

    def accumulate(self, shadow: ir.Value, indices: list[ir.Value], d: ir.Value) -> None:
        """shadow[indices] += d (atomically in a kernel)."""

    def outer(self, region_op: ir.Operation) -> list[ir.Value]:
        """What a reversed region threads the adjoints of."""

    def enter(self, block: ir.Block) -> Any:
        """Opens the reversed `block` at the insertion point; its Scope."""

    def leave(self) -> None: ...

    def reverse_block(self, block: ir.Block) -> None: ...

    def open_frame(self, outer: list[ir.Value], carried: list[list[ir.Value | None]],
                   slot_of: dict | None = None) -> None: ...

    def close_frame(self, outer: list[ir.Value]) -> list[ir.Value | None]: ...

    def checkpoint(self) -> Any:
        """The generator's state, to return to with rollback()."""

    def rollback(self, state: Any) -> None: ...


Rule = Callable[[Any, ir.Operation], None]


class OpRules(NamedTuple):
    """An op's derivative in each generated function; None: the op is cloned as it is
    (augmented), or has no rule there (forward, reverse: an error if the op is active)."""
    forward: Rule | None = None
    augmented: Rule | None = None
    reverse: Rule | None = None
