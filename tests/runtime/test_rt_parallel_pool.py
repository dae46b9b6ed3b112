"""adjit's thread pool (runtime/native/parallel.cpp), which compiled code's parallel loops
run on (passes/parallel_for.py): each iteration runs exactly once, in contiguous, even chunks
(up to four per thread, taken dynamically); the pool grows to the threads a loop asks for;
loops from two threads at once, and loops in a forked child, run and give the same results.
tests/runtime/test_thread_pool_dynamic.py tests the dynamic part: results, contention, the
thread count."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from adjit.runtime import extension

BODY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
parallel_for = ctypes.CFUNCTYPE(None, BODY, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                ctypes.c_int64)(extension.address("adj_parallel_for"))
workers = ctypes.CFUNCTYPE(ctypes.c_int)(extension.address("adj_parallel_workers"))
CHUNKS_PER_THREAD = 4     # parallel.cpp
set_limit = ctypes.CFUNCTYPE(None, ctypes.c_int64)(extension.address("adj_set_thread_limit"))
set_backoff = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(extension.address("adj_set_backoff"))


@pytest.fixture(autouse=True)
def every_thread_every_time():
    """Loops here ask for up to 8 threads on any machine: no per-process limit
    (core/threads.py's thread_limit), and no backing off to serial loops when the machine is
    busy (as the one running the tests may be), while they run."""
    from adjit.core.threads import thread_limit
    set_limit(0)
    was = set_backoff(0)
    yield
    set_backoff(was)
    set_limit(thread_limit())


def blocks_of(n: int, threads: int, small: bool = False) -> list[tuple[int, int, int]]:
    """The (lo, hi, thread id) blocks a loop of n iterations ran as."""
    seen, lock = [], threading.Lock()

    def body(ctx, lo, hi):
        with lock:
            seen.append((lo, hi, threading.get_ident()))

    parallel_for(BODY(body), None, n, threads, small)
    return sorted(seen)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 64, 1000, 1 << 20])
@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_chunks_cover_the_range_once_evenly(n, threads):
    blocks = blocks_of(n, threads)
    # one block without threads; else up to CHUNKS_PER_THREAD per thread, none empty
    expected = 1 if min(n, threads) == 1 else min(n, min(n, threads) * CHUNKS_PER_THREAD)
    assert len(blocks) == (expected if n else 0)
    starts = [lo for lo, _, _ in blocks]
    ends = [hi for _, hi, _ in blocks]
    assert starts == [0, *ends[:-1]][:len(blocks)] and ends[-1:] == ([n] if n else [])
    sizes = [hi - lo for lo, hi, _ in blocks]
    assert not sizes or max(sizes) - min(sizes) <= 1           # even
    if min(n, threads) > 1:
        assert workers() >= min(n, threads) - 1


SMALL_SCRIPT = """
import ctypes, threading
from adjit.runtime import extension
BODY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
parallel_for = ctypes.CFUNCTYPE(None, BODY, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                ctypes.c_int64)(extension.address("adj_parallel_for"))
seen = []
def body(ctx, lo, hi):
    seen.append((lo, hi, threading.get_ident() == threading.main_thread().ident))
keep = BODY(body)
parallel_for(keep, None, 1000, 4, 1)
print(seen)
"""


def test_a_small_loop_runs_on_the_caller_while_the_workers_are_not_awake():
    # A new process has no workers: the small loop runs whole on the calling thread (and
    # starts them, for the next).
    done = subprocess.run([sys.executable, "-c", SMALL_SCRIPT], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[(0, 1000, True)]"


@pytest.mark.parametrize("n", [1, 5, 1000])
def test_a_small_loop_covers_the_range_once_either_way(n):
    for _ in range(20):      # some of these find the workers awake, some not
        blocks = blocks_of(n, 3, small=True)
        ends = [hi for _, hi, _ in blocks]
        assert [lo for lo, _, _ in blocks] == [0, *ends[:-1]] and ends[-1] == n


def test_loops_from_two_threads_at_once_each_run_whole():
    results, errors = {}, []

    def run(name):
        try:
            total = [0]
            lock = threading.Lock()

            def body(ctx, lo, hi):
                with lock:
                    total[0] += sum(range(lo, hi))

            keep = BODY(body)
            for _ in range(50):
                total[0] = 0
                parallel_for(keep, None, 10_000, 4, 0)
                assert total[0] == sum(range(10_000))
            results[name] = True
        except BaseException as e:       # reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 3


KERNEL_SCRIPT = """
import os, sys, numpy as np, adjit
from adjit.runtime import extension
import ctypes
workers = ctypes.CFUNCTYPE(ctypes.c_int)(extension.address("adj_parallel_workers"))

@adjit.kernel
def bump(x):
    i, j = adjit.index_nd()
    x[i, j] = x[i, j] + (i * 1000 + j)

def check(shape):
    x = np.zeros(shape, np.int64)
    bump(x, ndrange=shape)
    i, j = np.indices(shape)
    assert np.array_equal(x, i * 1000 + j), shape

for shape in [(1, 1), (3, 5), (1000, 7), (7, 1000), (5000, 300)]:
    check(shape)
print("parent", workers())
pid = os.fork()
if pid == 0:
    before = workers()
    for shape in [(5000, 300), (3, 5)]:
        check(shape)
    print("child", before, workers(), flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
assert status == 0, status
check((5000, 300))
print("parent again", workers())
"""


def test_kernels_in_a_process_and_its_forked_child(tmp_path):
    script = tmp_path / "kernels.py"
    script.write_text(KERNEL_SCRIPT)
    env = {**os.environ, "ADJIT_NUM_THREADS": "3", "ADJIT_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    # The caller and two workers; in the child none at first, then two of its own.
    assert done.stdout.splitlines() == ["parent 2", "child 0 2", "parent again 2"]
