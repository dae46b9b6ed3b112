"""The profiler (`adjit.profile()`) and the compile log (`ADJIT_LOG=compile`): what the call
paths record, kept in this one module.

What records, and where:
- compiles: the compile service (api/service.py) opens a `compile_span` for every product
  its memo does not hold (loaded from the disk cache or compiled); the compiler marks its
  phases inside it with `phase(...)`: "frontend" (Python to adj IR: CompileUnit.add),
  "autodiff pass", "MLIR passes" (the lowering pipeline), "LLVM" (translation, the
  ExecutionEngine or the shared object's build), "disk cache" (records and shared objects
  looked up, loaded and written), "keys and fingerprints" (the disk key: hashes of the
  sources; a process's first reads the compiler's), "importing MLIR and the compiler" (a
  process's first compile). Each phase counts its own time (a callee's frontend nested in
  an autodiff pass's rule is frontend's), and the compile's time in none of them is
  "other" (the compiler's bookkeeping: units, entries, IR printed for the keys).
- launches and calls from Python (lang/functions.py): while a profile is open, the
  declarations' `__call__` is the Python path wrapped in `span` (the native dispatcher's
  methods are put back when the last profile closes, so that a call with no profile open
  runs exactly the code it ran before: `on_toggle`).
- derivatives (api/autodiff.py, api/transform_calls.py): each call of a compiled
  derivative's entry, named for its phase; the host sees one native call as one phase.

`ACTIVE` is None when no profile is open, and the Python call paths test it
(`if profiling.ACTIVE is not None:`), a global load; compiled code never does. A profile
records the whole process (every thread) while it is open; profiles may nest or overlap,
each getting every event made while it is open.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from typing import Any, Callable

from ..core.environment import read
from . import memory

# The recorder of the open profiles, or None: the one test on the Python call paths.
ACTIVE: _Recorder | None = None

_clock = time.perf_counter_ns
_local = threading.local()
_lock = threading.Lock()
_toggles: list[Callable[[bool], None]] = []

_compile_log = logging.getLogger("adjit.compile")


def log_categories() -> frozenset[str]:
    """The categories ADJIT_LOG names (a comma-separated list, empty when unset: "compile"
    logs each compile to the "adjit.compile" logger, stderr unless logging is configured);
    EnvironmentValueError naming the setting for an unknown one. Read at each compile, so
    that a change at run time holds."""
    return read("ADJIT_LOG")


def _logging_compiles() -> bool:
    if "compile" not in log_categories():
        return False
    if _compile_log.level == logging.NOTSET:
        _compile_log.setLevel(logging.INFO)
    if not _compile_log.hasHandlers():   # (logging not configured: stderr, one line each)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("adjit: %(message)s"))
        _compile_log.addHandler(handler)
    return True


def on_toggle(callback: Callable[[bool], None]) -> None:
    """Registers `callback(on)`, called when the first profile opens (True) and when the last
    one closes (False): how the declarations route their calls through the Python path
    while a profile is open (lang/functions.py)."""
    _toggles.append(callback)


class Event:
    """One recorded interval: `name`, `kind` ("compile", "compile phase", "launch", "call",
    "derivative"), start and duration in ns (perf_counter), the thread, its `args`, and its
    `self_ns` (the duration less that of the events nested in it on the same thread)."""
    __slots__ = ("name", "kind", "start", "dur", "self_ns", "tid", "args")

    def __init__(self, name: str, kind: str, start: int, dur: int, self_ns: int, tid: int,
                 args: dict):
        self.name, self.kind, self.start, self.dur = name, kind, start, dur
        self.self_ns, self.tid, self.args = self_ns, tid, args

    def __repr__(self) -> str:
        return f"<Event {self.kind} {self.name!r} {self.dur / 1e3:.1f} us>"


class _Frame:
    """An interval open on this thread: its start and the time of those nested in it."""
    __slots__ = ("start", "children", "phases", "args")

    def __init__(self, args: dict | None = None):
        self.start = _clock()
        self.children = 0
        self.phases: dict[str, int] | None = None
        self.args = args


def _stack() -> list[_Frame]:
    try:
        return _local.stack
    except AttributeError:
        _local.stack = []
        return _local.stack


def _close(frame: _Frame) -> tuple[int, int]:
    """(duration, own time) of `frame`, the last open on this thread, which it leaves."""
    stack = _stack()
    stack.pop()
    dur = _clock() - frame.start
    if stack:
        stack[-1].children += dur
    return dur, dur - frame.children


class _Recorder:
    """Gives each event to the open profiles."""

    def __init__(self) -> None:
        self.profiles: list[Profile] = []

    def add(self, event: Event) -> None:
        for p in self.profiles:
            p.events.append(event)


class span:
    """`with span(name, kind, **args):` records an event while a profile is open (the caller
    tests `ACTIVE` first); `args` may be added to before it closes (`span.args`)."""
    __slots__ = ("name", "kind", "args", "frame", "_memory")

    def __init__(self, name: str, kind: str, **args: Any):
        self.name, self.kind, self.args = name, kind, args

    def __enter__(self) -> span:
        self._memory = _memory_now()
        self.frame = _Frame()
        _stack().append(self.frame)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        dur, own = _close(self.frame)
        if exc_type is not None:
            self.args["raised"] = exc_type.__name__
        in_use, recomputed = _memory_now()
        if in_use != self._memory[0]:
            self.args["bytes_in_use_change"] = in_use - self._memory[0]
        if recomputed != self._memory[1]:
            self.args["checkpoint_steps_recomputed"] = recomputed - self._memory[1]
        recorder = ACTIVE
        if recorder is not None:
            recorder.add(Event(self.name, self.kind, self.frame.start, dur, own,
                               threading.get_ident(), self.args))


def _memory_now() -> tuple[int, int]:
    """(bytes adjit's allocator has in use, checkpointed loops' steps recomputed so far)."""
    a = memory._get()
    return a.in_use.value, a.recomputed()


def result_bytes(value: Any) -> int:
    """The bytes of the arrays in a call's result (a value or a tuple of them)."""
    items = value if isinstance(value, tuple) else (value,)
    return sum(getattr(v, "nbytes", 0) for v in items if hasattr(v, "__array_interface__"))


class compile_span:
    """`with compile_span(describe):` around a product the compile service does not hold
    in memory: a "compile" event (with a profile open) and a line of the compile log (with
    ADJIT_LOG=compile), named `describe()` (called only then), each saying its phases'
    times and its notes (`note`: `disk_cache`, "hit" or "miss", which the service sets)."""
    __slots__ = ("describe", "frame", "log")

    def __init__(self, describe: Callable[[], str]):
        self.describe = describe
        self.frame: _Frame | None = None

    def __enter__(self) -> compile_span:
        self.log = _logging_compiles()
        if ACTIVE is not None or self.log:
            self.frame = _Frame({})
            self.frame.phases = {}
            _stack().append(self.frame)
        return self

    def note(self, **args: Any) -> None:
        if self.frame is not None:
            self.frame.args.update(args)

    def __exit__(self, exc_type, exc, tb) -> None:
        frame = self.frame
        if frame is None:
            return
        dur, own = _close(frame)
        phases = {**frame.phases, "other": own}
        args = {**frame.args, **{f"{k} (ms)": round(v / 1e6, 3) for k, v in phases.items()}}
        if exc_type is not None:
            args["failed"] = exc_type.__name__
        description = self.describe()
        recorder = ACTIVE
        if recorder is not None:
            recorder.add(Event(description, "compile", frame.start, dur, own,
                               threading.get_ident(), args))
        if self.log:
            spent = ", ".join(f"{k} {v / 1e6:.1f} ms" for k, v in phases.items() if v)
            how = ("loaded from the disk cache" if frame.args.get("disk_cache") == "hit"
                   else "compiled")
            notes = "".join(f"; {k.replace('_', ' ')}: {v}" for k, v in frame.args.items())
            failed = f"; failed: {exc_type.__name__}" if exc_type is not None else ""
            _compile_log.info("%s: %s in %.1f ms (%s%s)%s", description, how, dur / 1e6,
                              spent, notes, failed)


def note(**args: Any) -> None:
    """Adds `args` to the innermost compile open on this thread (none: nothing)."""
    for frame in reversed(getattr(_local, "stack", ())):
        if frame.phases is not None:
            frame.args.update(args)
            return


class phase:
    """`with phase(name):` inside a compile: its time goes to phase `name` of the innermost
    compile open on this thread (less that of what is nested in it), and with a profile
    open a "compile phase" event. Nothing happens outside a compile."""
    __slots__ = ("name", "frame")

    def __init__(self, name: str):
        self.name = name
        self.frame: _Frame | None = None

    def __enter__(self) -> phase:
        stack = getattr(_local, "stack", None)
        if stack:      # (a compile is open on this thread: compile_span made the stack)
            self.frame = _Frame()
            stack.append(self.frame)
        return self

    def __exit__(self, *exc) -> None:
        frame = self.frame
        if frame is None:
            return
        dur, own = _close(frame)
        for open_frame in reversed(_stack()):
            if open_frame.phases is not None:
                open_frame.phases[self.name] = open_frame.phases.get(self.name, 0) + own
                break
        recorder = ACTIVE
        if recorder is not None:
            recorder.add(Event(self.name, "compile phase", frame.start, dur, own,
                               threading.get_ident(), {}))


class Table(str):
    """A profile's summary (Profile.table): text, shown as itself at an interactive prompt."""

    def __repr__(self) -> str:
        return str(self)


class Profile:
    """What ``with adjit.profile() as p:`` recorded: every compile (with its phases and
    whether the disk cache had it), every launch and call from Python, every call of a
    compiled derivative, in every thread, from the ``with`` to its end.

    ``p.events`` holds them (`Event`: name, kind, start and duration in ns, thread, args);
    ``p.table()`` is a summary by total time, ``p.save(path)`` writes a Chrome/Perfetto
    trace. Profiles may nest or overlap (each records what happens while it is open).
    While one is open, calls take the Python path (~10 us a call, not the native ~0.4 us);
    with none open, nothing is recorded and calls cost what they did.

    Example:
        ::

            import numpy as np
            import adjit

            @adjit.kernel
            def scale(x: adjit.Array[adjit.f64, 1], y: adjit.Array[adjit.f64, 1]):
                i = adjit.index()
                y[i] = 2.0 * x[i]

            x, y = np.arange(4.0), np.zeros(4)
            with adjit.profile() as p:
                for _ in range(3):
                    scale(x, y, ndrange=4)
            print(p.table())
            launches = [e for e in p.events if e.kind == "launch"]
            assert len(launches) == 3 and launches[0].args["ndrange"] == [4]
    """

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.start = self.end = 0
        self.memory_at_start = self.memory_at_end = 0

    def __enter__(self) -> Profile:
        global ACTIVE
        with _lock:
            self.memory_at_start = memory._get().in_use.value
            self.start = _clock()
            first = ACTIVE is None
            recorder = ACTIVE if ACTIVE is not None else _Recorder()
            recorder.profiles.append(self)
            ACTIVE = recorder
            if first:
                for toggle in _toggles:
                    toggle(True)
        return self

    def __exit__(self, *exc) -> None:
        global ACTIVE
        with _lock:
            self.end = _clock()
            self.memory_at_end = memory._get().in_use.value
            recorder = ACTIVE
            if recorder is not None and self in recorder.profiles:
                recorder.profiles.remove(self)
                if not recorder.profiles:
                    ACTIVE = None
                    for toggle in _toggles:
                        toggle(False)

    def rows(self) -> list[dict]:
        """The table's rows: per (name, kind), the count, total (ns, an event's own time plus
        what is nested in it), self (ns, without what is nested) and mean, by total time."""
        by: dict[tuple[str, str], dict] = {}
        for e in self.events:
            row = by.setdefault((e.name, e.kind), {"name": e.name, "kind": e.kind,
                                                   "count": 0, "total": 0, "self": 0})
            row["count"] += 1
            row["total"] += e.dur
            row["self"] += e.self_ns
        rows = sorted(by.values(), key=lambda r: -r["total"])
        for r in rows:
            r["mean"] = r["total"] // r["count"]
        return rows

    def table(self, file=None) -> str:
        """A summary, one row per name and kind (name, kind, count, total, self, mean, % of
        the profile's wall time), by total time, then the memory: its text (a str that an
        interactive prompt shows as the table), printed to `file` too when given.

        An event's total includes the events nested in it (a launch's includes the compile
        its first call made; a compile's, its phases); self leaves them out."""
        wall = max((self.end or _clock()) - self.start, 1)
        rows = self.rows()
        width = min(max([len(r["name"]) for r in rows] + [4]), 60)
        lines = [f"{'name':<{width}}  {'kind':<13} {'count':>6} {'total ms':>10} "
                 f"{'self ms':>10} {'mean ms':>10} {'%':>6}"]
        for r in rows:
            name = r["name"] if len(r["name"]) <= width else r["name"][:width - 1] + "…"
            lines.append(f"{name:<{width}}  {r['kind']:<13} {r['count']:>6} "
                         f"{r['total'] / 1e6:>10.3f} {r['self'] / 1e6:>10.3f} "
                         f"{r['mean'] / 1e6:>10.3f} {100 * r['total'] / wall:>6.1f}")
        results = [e.args["result_bytes"] for e in self.events if "result_bytes" in e.args]
        tapes = [e.args["tape_bytes"] for e in self.events if "tape_bytes" in e.args]
        recomputed = sum(e.args.get("checkpoint_steps_recomputed", 0) for e in self.events
                         if e.kind == "derivative")
        lines.append(f"wall time {wall / 1e6:.3f} ms; results: {len(results)} arrays, "
                     f"{sum(results)} bytes; tapes: {len(tapes)}, {sum(tapes)} bytes; "
                     f"adjit's bytes in use {self.memory_at_start} -> "
                     f"{self.memory_at_end if self.end else memory._get().in_use.value}"
                     + (f"; checkpointed steps recomputed: {recomputed}" if recomputed
                        else ""))
        text = Table("\n".join(lines))
        if file is not None:
            print(text, file=file)
        return text

    def trace(self) -> dict:
        """The events in Chrome's trace event format (what `save` writes): complete events
        ("ph": "X"), times in microseconds from the profile's start, `cat` the kind."""
        pid = os.getpid()
        events = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                   "args": {"name": "adjit"}}]
        for e in sorted(self.events, key=lambda e: (e.start, -e.dur)):
            events.append({"name": e.name, "cat": e.kind, "ph": "X", "pid": pid,
                           "tid": e.tid, "ts": (e.start - self.start) / 1e3,
                           "dur": e.dur / 1e3, "args": e.args})
        return {"traceEvents": events, "displayTimeUnit": "ms"}

    def save(self, path: str) -> None:
        """Writes the trace (Chrome's JSON trace event format) to `path` (a str or
        os.PathLike): open it in https://ui.perfetto.dev or chrome://tracing."""
        with open(path, "w") as f:
            json.dump(self.trace(), f, default=str)


def profile() -> Profile:
    """A profiler: ``with adjit.profile() as p:`` records every compile (frontend, autodiff
    pass, MLIR passes, LLVM, disk cache hit or miss, per specialisation), every launch and
    call from Python (kernel, ndrange, threads, device, time) and every call of a compiled
    derivative (forward mode; reverse mode's augmented forward and reverse sweep, one call
    or two), with the bytes of results and tapes. ``p.table()`` summarises by total time,
    ``p.save("trace.json")`` writes a Chrome/Perfetto trace. docs/tutorials/debugging.md,
    "The profiler".

    Example:
        ::

            import numpy as np
            import adjit

            @adjit.jit
            def energy(x):
                return adjit.sum(x * x)

            with adjit.profile() as p:
                g = adjit.grad(energy)(np.arange(3.0))
            print(g)                                   # [0. 2. 4.]
            kinds = {e.kind for e in p.events}
            assert "derivative" in kinds
            header = p.table().splitlines()[0]
            assert header.split()[:3] == ["name", "kind", "count"]
    """
    return Profile()
