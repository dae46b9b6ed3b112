"""How many threads compiled CPU code uses: a setting the passes compile for and the
runtime's thread pool runs with."""
from __future__ import annotations

import os


def default_num_threads() -> int:
    """ADJIT_NUM_THREADS, else every core this process may run on. Modules are compiled
    for it: each parallel loop is split into that many blocks (runtime/native/parallel.cpp)."""
    env = os.environ.get("ADJIT_NUM_THREADS")
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"ADJIT_NUM_THREADS must be a positive integer, got {env!r}") from None
        if n < 1:
            raise ValueError(f"ADJIT_NUM_THREADS must be a positive integer, got {env!r}")
        return n
    return len(os.sched_getaffinity(0))
