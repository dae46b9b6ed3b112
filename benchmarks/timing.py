"""Timing shared by the benchmark scripts."""
from __future__ import annotations

import statistics
import time
from typing import Callable

import adjit


def best_of(fn: Callable[[], object], repeat: int = 7, warmup: bool = True) -> float:
    """Best wall time of `repeat` calls, in seconds (after one untimed call if `warmup`).
    The timed calls start once the process's background builds for the disk cache are
    done (adjit.wait_for_builds): calls made while one runs compete with it for a core
    (measured: a 3 ms loss took 7.5 ms then)."""
    if warmup:
        fn()
    adjit.wait_for_builds()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def median_of(fn: Callable[[], object], repeat: int = 21, warmup: bool = True) -> float:
    """Median wall time of `repeat` calls, in seconds, timed as best_of times them."""
    if warmup:
        fn()
    adjit.wait_for_builds()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def extra_bytes(fn: Callable[[], object]) -> int:
    """Most bytes adjit held during one call of `fn` above those it held before the call
    (adjit.memory_stats after adjit.reset_peak_memory): temporaries and tapes."""
    adjit.reset_peak_memory()
    before = adjit.memory_stats()["bytes_in_use"]
    fn()
    return adjit.memory_stats()["peak_bytes"] - before
