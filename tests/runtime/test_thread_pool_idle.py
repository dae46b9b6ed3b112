"""Parallel loops after the pool's workers have gone to sleep (runtime/native/parallel.cpp;
issue 30, item 1: never slower than one thread). Waking a sleeping worker costs the caller a
syscall and the worker tens of us to arrive, so with the back-off on (the default) a loop
the pool has measured as short, or a lone small loop, runs on the caller and leaves the
workers asleep; loops in a burst wake them. Whoever runs them, every item runs exactly once
and results are those of one thread. No timing is asserted."""
from __future__ import annotations

import ctypes
import threading
import time

import numpy as np
import pytest

from adjit.core import threads as th
from adjit.runtime import extension

# the pool's share of the work depends on idle cores (conftest.py: run apart from -n)
pytestmark = pytest.mark.exclusive

BODY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
parallel_for = ctypes.CFUNCTYPE(None, BODY, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                ctypes.c_int64)(extension.address("adj_parallel_for"))
set_limit = ctypes.CFUNCTYPE(None, ctypes.c_int64)(extension.address("adj_set_thread_limit"))
set_backoff = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(extension.address("adj_set_backoff"))
workers = ctypes.CFUNCTYPE(ctypes.c_int)(extension.address("adj_parallel_workers"))
sleeping = ctypes.CFUNCTYPE(ctypes.c_int)(extension.address("adj_parallel_sleeping"))
wakes = ctypes.CFUNCTYPE(ctypes.c_int64)(extension.address("adj_parallel_wakes"))
set_wake_cost = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(
    extension.address("adj_set_wake_cost"))
set_handoff_cost = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(
    extension.address("adj_set_handoff_cost"))
PARALLEL, SMALL = 0, 1


@pytest.fixture
def pool_default():
    """Two threads whatever the machine, the back-off on (the default), and the wake cost
    put back after."""
    set_limit(0)
    was = set_backoff(1)
    cost = set_wake_cost(0)
    set_handoff_cost(0)    # handing off taken as free (until -1): the pool hands off any
                           # loop, as it did (Python bodies, under the GIL, are slower handed off)
    yield
    set_handoff_cost(-1)   # measured again
    set_wake_cost(cost)
    set_backoff(was)
    set_limit(th.thread_limit())


def wait_until_asleep(timeout: float = 10.0) -> None:
    """Until every worker sleeps on the futex (they poll ~100 us after a loop) and still does
    10 ms later: a worker woken by a poke counts as asleep until it runs, which can take a
    while on a loaded machine. The pause is also longer than the workers' polling (loops
    closer than that are a burst)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if workers() > 0 and sleeping() == workers():
            time.sleep(0.01)
            if sleeping() == workers():
                return
        time.sleep(0.002)
    raise AssertionError(f"{sleeping()} of {workers()} workers asleep after {timeout} s")


class Loop:
    """out[i] = i*i + 1 over [0, n), counting each item's runs and who ran which block. One
    callback kept for its lifetime: the pool knows a loop by its body's address."""

    def __init__(self):
        self.caller = threading.get_ident()
        self.cb = BODY(self.body)

    def body(self, ctx, lo, hi):
        idx = np.arange(lo, hi)
        self.out[lo:hi] = idx * idx + 1
        self.hits[lo:hi] += 1
        self.blocks.append((lo, hi, threading.get_ident() == self.caller))

    def __call__(self, n, threads=2, size=PARALLEL):
        self.out = np.zeros(n, np.int64)
        self.hits = np.zeros(n, np.int64)
        self.blocks = []
        parallel_for(self.cb, None, n, threads, size)
        assert (self.hits == 1).all(), "an item ran other than once"
        np.testing.assert_array_equal(self.out, np.arange(n, dtype=np.int64) ** 2 + 1)
        return sorted(self.blocks)


@pytest.mark.parametrize("size", [PARALLEL, SMALL])
@pytest.mark.parametrize("n", [1, 7, 1000, 40_000])
def test_loops_after_idle_gaps_run_every_item_once(pool_default, n, size):
    loop = Loop()
    loop(1000)                         # the worker started, whatever n
    loop(n, size=size)
    for gap in (0.0, 0.0001, 0.001, 0.005, None):    # None: until every worker sleeps
        if gap is None:
            wait_until_asleep()
        elif gap:
            time.sleep(gap)
        for _ in range(3):   # the first after the gap, then a burst
            blocks = loop(n, size=size)
            ends = [hi for _, hi, _ in blocks]
            assert [lo for lo, _, _ in blocks] == [0, *ends[:-1]] and ends[-1] == n


def test_a_lone_small_loop_after_a_pause_wakes_no_one_and_a_burst_does(pool_default):
    loop = Loop()
    loop(1000, size=PARALLEL)          # starts the worker
    wait_until_asleep()
    before = wakes()
    assert loop(1000, size=SMALL) == [(0, 1000, True)]
    assert wakes() == before, "a lone small loop woke the sleeping workers"
    # Loops straight after one another (within the workers' ~100 us of polling: a burst)
    # wake them for the next. Whether two Python calls come that close depends on the
    # machine's load, so many are tried.
    count = [0]

    def tick(ctx, lo, hi):
        count[0] += hi - lo

    cb = BODY(tick)
    # Waking pays only for loops longer than it (WAKE_PAYS wake costs): the wake cost the
    # pool measured above, with Python bodies and the GIL, can be longer than a tick. 0:
    # unknown, so worth trying.
    set_wake_cost(0)
    for _ in range(200):
        parallel_for(cb, None, 64, 2, SMALL)
    assert count[0] == 200 * 64
    assert wakes() > before


def test_a_burst_of_loops_too_short_to_hand_off_wakes_no_one_and_stays_on_the_caller(
        pool_default):
    # A loop the pool has measured shorter than handing it off costs (here: the hand-off is
    # taken to cost 1000 s, so every measured loop is) runs whole on the caller, even with
    # the workers awake, and a burst of such loops pokes no sleeping worker.
    loop = Loop()
    for _ in range(3):
        loop(4000)                     # the worker started, the loop measured
    wait_until_asleep()
    set_handoff_cost(10**12)
    before = wakes()
    for _ in range(200):               # a burst (the calls follow within microseconds)
        assert loop(64) == [(0, 64, True)]
        assert loop(64, size=SMALL) == [(0, 64, True)]
    assert wakes() == before, "a burst of loops too short to hand off woke the workers"
    assert sleeping() == workers()
    # Awake workers take their share while handing off is taken as free...
    set_handoff_cost(0)
    set_wake_cost(0)
    blocks = loop(4000)
    assert wakes() == before + 1 and len(blocks) == 8
    # ...but a loop too short to hand off still runs on the caller while they poll.
    set_handoff_cost(10**12)
    assert loop(4000) == [(0, 4000, True)]


def test_a_loop_measured_shorter_than_a_wake_leaves_the_workers_asleep(pool_default):
    loop = Loop()
    for _ in range(3):
        loop(4000)                     # the pool measures it
    wait_until_asleep()
    set_wake_cost(10**12)              # waking is taken to cost 1000 s: never worth it
    before = wakes()
    assert loop(4000) == [(0, 4000, True)]      # whole, on the caller
    assert wakes() == before and sleeping() == workers()
    set_wake_cost(0)                   # unknown: the pool wakes them and measures again
    time.sleep(0.001)
    blocks = loop(4000)
    assert wakes() == before + 1 and len(blocks) == 8


def test_the_back_off_off_keeps_waking_for_every_loop(pool_default):
    # Tests of the chunking (and benchmarks comparing thread counts) turn the back-off off:
    # then the pool wakes the workers for every loop, as before.
    set_backoff(0)
    loop = Loop()
    loop(4000)
    wait_until_asleep()
    set_wake_cost(10**12)
    before = wakes()
    assert len(loop(4000)) == 8
    assert wakes() == before + 1


def test_a_compiled_kernel_after_idle_gaps_agrees_with_numpy(pool_default):
    import adjit

    @adjit.kernel
    def expk(x, y):
        i = adjit.index()
        y[i] = np.exp(x[i])

    x = np.linspace(-3.0, 3.0, 262_144).astype(np.float32)
    expected = np.empty_like(x)
    set_limit(1)
    expk(x, expected, ndrange=x.shape)
    set_limit(0)
    np.testing.assert_allclose(expected, np.exp(x), rtol=2e-6)
    for gap in (0.0, 0.0001, 0.001, 0.005, None, 0.0):
        if gap is None:
            wait_until_asleep()
        elif gap:
            time.sleep(gap)
        y = np.full_like(x, np.nan)
        expk(x, y, ndrange=x.shape)
        assert y.dtype == np.float32
        np.testing.assert_array_equal(y, expected)
