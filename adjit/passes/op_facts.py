"""What each op does besides its derivative: one row per op name (or per dialect, for arith,
math and index, whose ops are all pure): the arrays it reads and writes, how they alias,
whether it is pure, has effects or is a loop, and how derivatives flow through it. Consulted
by the analyses that must agree on it: alias classes (aliases.py), what a function may write
(written.py), and in the autodiff pass activity (analysis/activity_analysis.py: how
derivatives flow through memory), what may be overwritten (analysis/overwritten.py), the
recompute-or-tape policy (analysis/recompute.py: what may run again), pruning
(generate/prune.py: what must stay) and the parallel reversal's safety check
(rules/control_flow_ops.py).

The derivatives themselves are the autodiff pass's: scalar ops in rules/scalar.py's table (one
row each), memory ops, calls, control flow and launches in their family's module
(rules/lookup.py). An op with no row here is an unknown: not pure, no effect, its arrays all
one alias class (as a view's), derivatives flowing through it only if it has a derivative
rule.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpFacts:
    # Operand positions of arrays whose elements it reads / writes (or frees).
    reads: tuple[int, ...] = ()
    writes: tuple[int, ...] = ()
    # What it writes is its callee's business (written.WrittenArguments): a call, a launch.
    calls: bool = False
    # How its arrays alias: "all" one class (views, casts, selects: the default for
    # unknown ops); "results": each array result may be any array operand, the operands
    # staying distinct (a call); "none": its results are fresh or not arrays.
    aliases: str = "all"
    # Result 0 is a view of operand 0's memory: its shadow is the same view of the shadow.
    view: bool = False
    # Running it again gives the same results, provided the arrays it reads (`reads`) are
    # not written in between; no effect.
    pure: bool = False
    # An effect the caller may see though no result of it is used (pruning keeps it).
    effects: bool = False
    # How derivatives flow through it, as (source, target) pairs: "vK" the value operand K,
    # "mK" the memory of array operand K, "rK" result K. Varied sources vary the targets;
    # useful targets make the sources useful (activity_analysis.py).
    flows: tuple[tuple[str, str], ...] = ()
    # Its derivative code reads or writes the shadows of the arrays it touches, so it is
    # relevant whenever one of them has a shadow (activity_analysis.ActivityAnalysis.relevant).
    mirrors: bool = False
    # Its reverse adds into shadow elements that any iteration of a loop around it may also
    # add into (a load's adjoint goes to the element read, not the iteration's own).
    shared_adds: bool = False
    # A loop: its body may run again after itself (overwritten.may_run_after).
    loop: bool = False


_VIEW = OpFacts(view=True, pure=True)

FACTS: dict[str, OpFacts] = {
    # memory
    "memref.load": OpFacts(reads=(0,), aliases="none", pure=True, flows=(("m0", "r0"),),
                           mirrors=True, shared_adds=True),
    "memref.store": OpFacts(writes=(1,), aliases="none", flows=(("v0", "m1"),),
                            mirrors=True),
    "memref.atomic_rmw": OpFacts(reads=(1,), writes=(1,), aliases="none",
                                 flows=(("v0", "m1"), ("m1", "r0")), mirrors=True,
                                 shared_adds=True),
    "memref.copy": OpFacts(reads=(0,), writes=(1,), aliases="none", flows=(("m0", "m1"),),
                           mirrors=True, shared_adds=True),
    "memref.alloc": OpFacts(aliases="none", mirrors=True),
    "memref.alloca": OpFacts(aliases="none", mirrors=True),
    "memref.dealloc": OpFacts(writes=(0,), aliases="none", effects=True),
    "memref.dim": OpFacts(aliases="none", pure=True),
    # (which array a carried one is: checkpoint.py's steps; reads no element)
    "memref.extract_aligned_pointer_as_index": OpFacts(aliases="none", pure=True),
    "memref.collapse_shape": _VIEW,
    "memref.expand_shape": _VIEW,
    "memref.cast": _VIEW,
    "memref.subview": _VIEW,
    "memref.reinterpret_cast": _VIEW,
    # calls and launches
    "func.call": OpFacts(calls=True, aliases="results", effects=True, mirrors=True,
                         shared_adds=True),
    "adj.launch": OpFacts(calls=True, effects=True, mirrors=True, shared_adds=True),
    "adj.sync": OpFacts(effects=True),
    "adj.check": OpFacts(effects=True),
    # (no derivative: printing happens where the primal runs, once)
    "adj.print": OpFacts(effects=True),
    # work items
    "adj.index": OpFacts(pure=True),
    "adj.global_id": OpFacts(pure=True),
    "adj.global_size": OpFacts(pure=True),
    # control flow
    "scf.for": OpFacts(loop=True),
    "scf.while": OpFacts(loop=True),
    "scf.parallel": OpFacts(loop=True),
    "scf.forall": OpFacts(loop=True),
}

# Dialects whose every op is pure (their derivatives, where they have one: rules/scalar.py).
PURE_DIALECTS: dict[str, OpFacts] = {d: OpFacts(pure=True) for d in ("arith", "math", "index")}

_UNKNOWN = OpFacts()


def facts(name: str) -> OpFacts:
    """The row of op `name` (its dialect's, for a pure dialect's op)."""
    row = FACTS.get(name)
    if row is None:
        row = PURE_DIALECTS.get(name.split(".")[0], _UNKNOWN)
    return row


def names(**fact) -> tuple[str, ...]:
    """The op names whose rows have the given facts, in table order: names(view=True)."""
    return tuple(n for n, row in FACTS.items()
                 if all(getattr(row, k) == v for k, v in fact.items()))


VIEW_OPS = names(view=True)
LOOPS = names(loop=True)
