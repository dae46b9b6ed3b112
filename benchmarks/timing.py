"""Timing shared by the benchmark scripts."""
from __future__ import annotations

import time
from typing import Callable


def best_of(fn: Callable[[], object], repeat: int = 7, warmup: bool = True) -> float:
    """Best wall time of `repeat` calls, in seconds (after one untimed call if `warmup`)."""
    if warmup:
        fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best
