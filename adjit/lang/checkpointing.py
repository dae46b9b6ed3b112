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
    past its states' size) is the same as the step count: every state kept.

    A state is what the loop carries and writes (its arrays, whose values at the step's
    start the reverse pass needs): arrays made before the loop (swapped with
    ``u, v = v, u``), or a state each step makes anew (``u = step(u)``), which the loop
    copies into an array it carries (of the same shape at every step). The steps run again are counted by
    :func:`adjit.memory_stats`'s ``checkpoint_steps_recomputed``, per process (under MPI,
    each rank counts its own).

    Args:
        iterable: ``range(...)``, or a while loop's condition
            (``while adjit.checkpointed(t < t_end, snapshots=8):``).
        snapshots: Revolve: at most this many states kept.
        every: a state kept every this many steps.
        max_bytes: Revolve with as many snapshots as this many bytes hold (at least one):
            ``max_bytes // state``, where a state is the bytes of the arrays the loop
            carries and writes plus 8 per carried scalar. It bounds the kept states only;
            the rest of the derivative's memory (one step's own tape, the arguments'
            shadows) is not counted in it.
        spill: with ``device="cuda"``, the working snapshots live in host memory rather than
            device memory (copied device<->host; the same schedule and results).

    Give exactly one of ``snapshots``, ``every`` and ``max_bytes``, a positive integer
    constant.

    Returns:
        From Python, ``iterable`` itself (so the function runs in Python too).

    Raises:
        ValueError: none or several of the three, or one that is not a positive integer
            ("adjit.checkpointed(range(...), ...) takes one of snapshots= (Revolve: at most
            that many states kept), every= (a state every that many steps) or max_bytes=
            (as many states as fit); got ['every', 'snapshots']"); ``spill`` not a bool.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import Array, f64

            @adjit.jit
            def simulate(u0: Array[f64, 1], steps: int) -> f64:
                u = u0.copy()
                v = adjit.empty_like(u)
                for t in adjit.checkpointed(range(steps), snapshots=4):
                    for i in range(u.shape[0]):
                        v[i] = u[i] + 0.1 * adjit.sin(u[i])
                    u, v = v, u                  # the state lives in u and v
                return adjit.sum(u * u)

            u0 = np.linspace(0.0, 1.0, 8)
            before = adjit.memory_stats()["checkpoint_steps_recomputed"]
            g = adjit.grad(simulate)(u0, 100)
            print(adjit.memory_stats()["checkpoint_steps_recomputed"] - before)  # steps rerun
            assert adjit.check_grad(simulate, u0, 100) < 1e-4   # finite differences agree
    """
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
