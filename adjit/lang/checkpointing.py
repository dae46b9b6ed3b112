"""`adjit.checkpointed`: a loop whose reverse pass keeps a few states instead of every step's
(checkpointing), for long time loops in bounded memory. MLIR-free: codegen reads the
schedule off the object and marks the loop's scf.for (`adj.checkpoint`), which the autodiff
pass outlines and reverses by the schedule (passes/autodiff/rules/checkpoint.py). What a
call compiles to is compiler/lang_calls.py's.

    for t in adjit.checkpointed(range(steps), snapshots=8):     # Revolve, 8 states
    for t in adjit.checkpointed(range(steps), every=32):        # a state every 32 steps
    for t in adjit.checkpointed(range(steps), max_bytes=1 << 28)  # as many as fit
    while adjit.checkpointed(t < t_end, snapshots=8):           # steps not known ahead
    for t in adjit.checkpointed(range(steps), snapshots=8, spill=True)  # (device="cuda")

`spill=True` (a constant) keeps the working snapshots of a `device="cuda"` derivative in
host memory (pinned) instead of device memory; the schedule and the results are the same,
and on the CPU it changes nothing.

Outside compiled code it is the range (or the condition) itself, so that the function runs
in Python too. A while loop's step count is known once it ran: the reverse pass reverses
that many steps by the same schedules (the augmented pass counts them).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import UserError

SCHEDULES = ("snapshots", "every", "max_bytes")


@dataclass(frozen=True)
class Checkpointed:
    """What `adjit.checkpointed(range(...) or a condition, ...)` is in compiled code: the
    range (a RangeValue) or the while loop's condition (a scalar), and its schedule (one of
    SCHEDULES, a positive constant), and whether its working snapshots are spilled to host
    memory (`spill=`: a device="cuda" derivative's; adj.checkpoint's `spill` key)."""
    range: object
    schedule: str
    value: int
    spill: bool = False


def checked_schedule(snapshots, every, max_bytes) -> tuple[str, int]:
    given = {k: v for k, v in (("snapshots", snapshots), ("every", every),
                               ("max_bytes", max_bytes)) if v is not None}
    if len(given) != 1:
        raise UserError("adjit.checkpointed(range(...), ...) takes one of snapshots= (Revolve: "
                        "at most that many states kept), every= (a state every that many "
                        f"steps) or max_bytes= (as many states as fit); got {sorted(given) or 'none'}")
    (name, value), = given.items()
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"adjit.checkpointed: {name}= must be a positive integer constant, got "
                        f"{value!r}")
    # Past the step count a schedule means the step count (the pass clamps it to that at run
    # time); past CAP (no loop runs 2**62 steps, no memory holds 2**62 bytes) it is CAP, so
    # that it fits the code's 64-bit integers.
    return name, min(value, CAP)


CAP = 1 << 62


def checkpointed(iterable, snapshots: int | None = None, every: int | None = None,
                 max_bytes: int | None = None, spill: bool = False):
    """A `range` (or a while loop's condition) whose loop, in an @adjit.jit function, is
    reversed by checkpointing: the
    reverse pass keeps at most `snapshots` states of what the loop carries and writes
    (Revolve's binomial schedule: the fewest steps run again for that many), or one every
    `every` steps (and each segment's states while it is reversed), or as many as
    `max_bytes` holds. A `snapshots` or `every` past the loop's step count (a `max_bytes`
    past its states' size) is the same as the step count: every state kept. `spill=True`: with device="cuda", the working snapshots live in
    host memory rather than device memory (copied device<->host; the same schedule and
    results). From Python: `iterable` itself (`spill` ignored)."""
    try:
        checked_schedule(snapshots, every, max_bytes)
        checked_spill(spill)
    except UserError as e:
        raise ValueError(str(e)) from None
    return iterable


def checked_spill(value) -> bool:
    if not isinstance(value, bool):
        raise UserError(f"adjit.checkpointed: spill= must be True or False (a constant), got "
                        f"{value!r}")
    return value
