"""Running deeply recursive work on a thread with a large stack: the MLIR parser and printer
on IR nested thousands of regions deep (recursive C++, which overflows the 8 MiB main stack
at ~4,000 levels and crashes the process), and the code generator on expressions or call
chains thousands deep (recursive Python, past the default recursion limit of 1,000).

The stack is reserved, not committed: the pages a shallow run never touches cost nothing.
"""
from __future__ import annotations

import contextvars
import ctypes
import sys
import threading
from typing import Callable, TypeVar

T = TypeVar("T")

# Python frames of recursive compilation take up to a few KiB of C stack each (a call that
# passes through C: a `with` of an MLIR object, a callback), and MLIR's recursive parser
# ~2.5 KiB per nested region: 1 GiB covers 100,000 of either (guard.DEEP_RECURSION_LIMIT,
# opt.MAX_NESTING) with a margin.
STACK_BYTES = 1 << 30

_lock = threading.Lock()          # threading.stack_size is process-wide
_raised = 0                       # calls running with the raised recursion limit
_saved_limit = 0
_local = threading.local()


def call(fn: Callable[[], T], recursion_limit: int | None = None) -> T:
    """`fn()` on a new thread with a STACK_BYTES stack (and, with `recursion_limit`, the
    interpreter's recursion limit raised to it while such calls run), in a copy of the
    caller's context variables; returns its result or raises its exception. Called on such a
    thread, it calls `fn` there. Where no such thread can be made (the stack cannot be
    reserved), `fn` runs on the caller's thread, under the usual limit.

    Ctrl-C (a KeyboardInterrupt in the waiting thread) is passed on to the worker, raised in
    it at its next Python instruction (after the C++ call it may be in returns); the caller
    waits for it to stop, then raises KeyboardInterrupt."""
    if getattr(_local, "deep", False):
        return fn()
    box: dict[str, object] = {}
    context = contextvars.copy_context()
    done = threading.Event()

    def run() -> None:
        _local.deep = True
        try:
            box["result"] = context.run(fn)
        except BaseException as e:                      # handed to the caller
            box["error"] = e
        finally:
            done.set()

    if recursion_limit is not None:      # before the worker runs: it may recurse at once
        _raise_limit(recursion_limit)
    started: list[threading.Thread] = []
    try:
        _start(run, started)
        if started:
            _wait(done)
    except KeyboardInterrupt:            # in _start, say: the worker may be running
        if started:
            _stop(started[0], done)
        raise
    finally:
        if recursion_limit is not None:
            _restore_limit()
    if not started:
        return fn()
    if "error" in box:
        error = box.pop("error")
        raise error                                     # type: ignore[misc]
    return box["result"]                                # type: ignore[return-value]


def _start(run: Callable[[], None], started: list[threading.Thread]) -> None:
    """Starts `run` on a deep-stack thread, appended to `started` (nothing is appended
    where no such thread can be made)."""
    with _lock:
        previous = threading.stack_size()
        try:
            threading.stack_size(STACK_BYTES)
            worker = threading.Thread(target=run, name="adjit-deep-stack", daemon=True)
            started.append(worker)          # first: a Ctrl-C in start() must find it
            worker.start()
        except (ValueError, RuntimeError, MemoryError):    # no room for such a stack
            started.clear()
        finally:
            threading.stack_size(previous)


def _wait(done: threading.Event) -> None:
    # Not Thread.join: a KeyboardInterrupt in it marks a running thread as stopped (3.11).
    # With a timeout: a SIGINT that another thread received is seen within it.
    while not done.wait(0.1):
        pass


def _stop(worker: threading.Thread, done: threading.Event) -> None:
    """Raises KeyboardInterrupt in `worker` and waits until it is `done`; each Ctrl-C
    meanwhile is passed on again (once each: its cleanup runs undisturbed)."""
    for _ in range(10):             # start() may have been interrupted before it began
        if worker.ident is not None or done.is_set():
            break
        done.wait(0.1)
    if worker.ident is None:
        return
    while not done.is_set():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident),
                                                   ctypes.py_object(KeyboardInterrupt))
        try:
            _wait(done)
        except KeyboardInterrupt:
            continue


def _raise_limit(limit: int) -> None:
    global _raised, _saved_limit
    with _lock:
        if _raised == 0:
            _saved_limit = sys.getrecursionlimit()
        _raised += 1
        sys.setrecursionlimit(max(limit, sys.getrecursionlimit()))


def _restore_limit() -> None:
    global _raised
    with _lock:
        _raised -= 1
        if _raised == 0:
            sys.setrecursionlimit(_saved_limit)
