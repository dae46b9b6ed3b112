"""Each GPU launch reads its own errors (issue 19.5 on the GPU): a kernel with checks takes
its launch's error cell as a hidden parameter (passes/lower_gpu.py), and the launcher passes
each thread's own cell (runtime/cuda.py). Behind the fake driver (fake_driver.py), a stand-in
for a compiled kernel with a division check stores the check's number into the cell it was
given when its divisor is 0, then gives up the GIL, so that other threads' launches run
between its store and the launcher's read: with one cell per kernel (a module global, as
before) valid launches raised others' errors and failing ones returned silently."""
from __future__ import annotations

import ctypes
import threading
import time

import numpy as np
import pytest

from adjit.runtime import cuda
from adjit.core.kernel import GpuKernel, Param
from fake_driver import device_view, error_cell, install, slots

DIVIDE = GpuKernel(name="divide", entry="divide", ptx="// fake divide", chip="sm_90",
                   params=(Param("memref", "f64", 1), Param("scalar", "i64")), ndim=1,
                   checks=(("ZeroDivisionError", "integer division by zero (divide.py:3)"),),
                   written=(0,))
NWORDS = 5 + 1 + 1          # x, n, the extent: then the error cell's 5 words


def divide(api, params, grid, block):
    """x[i] += i // n (x float64, n int64)."""
    words = slots(params, NWORDS)
    x, n, items = words[1], ctypes.c_int64(words[5]).value, words[6]
    cell = error_cell(params, NWORDS)
    api.cells.add((threading.get_ident(), cell.ctypes.data))
    if n == 0:
        cell[0] = 1
    else:
        xs = device_view(x, items, np.float64)
        xs += np.arange(items) // n
    time.sleep(0)            # let other threads launch before this launch's cell is read


@pytest.fixture
def fake(monkeypatch):
    api = install(monkeypatch, {"divide": divide})
    api.cells = set()
    return api


def test_a_failing_launch_raises_and_the_next_valid_one_does_not(fake):
    x = np.zeros(4)
    with pytest.raises(ZeroDivisionError, match="divide.py:3"):
        cuda.launch(DIVIDE, [x, 0], 4)
    cuda.launch(DIVIDE, [x, 2], 4)
    np.testing.assert_array_equal(x, [0, 0, 1, 1])


def test_8_threads_mixing_failing_and_valid_launches_get_exactly_their_own_errors(fake):
    threads, calls = 8, 1250                   # 10,000 launches of the one kernel
    results: dict[int, list] = {}
    start = threading.Barrier(threads)

    def work(t: int) -> None:
        rng = np.random.default_rng(t)
        got = []
        start.wait()
        for _ in range(calls):
            n = int(rng.integers(0, 3))        # a third of the launches fail
            x = np.zeros(8)
            try:
                cuda.launch(DIVIDE, [x, n], 8)
                got.append((n, "ok", x.tolist()))
            except ZeroDivisionError:
                got.append((n, "error", None))
        results[t] = got

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sorted(results) == list(range(threads))          # no thread died
    failed = 0
    for t, got in results.items():
        assert len(got) == calls
        for n, outcome, x in got:
            if n == 0:
                assert outcome == "error"
                failed += 1
            else:
                assert outcome == "ok" and x == (np.arange(8) // n).tolist()
    assert 0 < failed < threads * calls
    # Each thread launched with its own cell.
    by_thread: dict[int, set] = {}
    for ident, address in fake.cells:
        by_thread.setdefault(ident, set()).add(address)
    cells = [a for addresses in by_thread.values() for a in addresses]
    assert len(by_thread) == threads and len(cells) == len(set(cells)) == threads


def test_host_program_launches_get_the_cell_of_their_thread(fake):
    """launch_words (a host program's launches: it packs the kernel's words but the cell's)."""
    def launch_words(x: np.ndarray, n: int) -> None:
        words = np.array([x.ctypes.data, x.ctypes.data, 0, x.size, 1, n, x.size], np.int64)
        cuda.launch_words(DIVIDE, words.ctypes.data, NWORDS, x.size, 256)

    errors = []

    def work(t: int) -> None:
        for k in range(200):
            n = (t + k) % 2
            try:
                launch_words(np.zeros(4), n)
                errors.append(n == 0)          # a silent failure
            except ZeroDivisionError:
                errors.append(n != 0)          # someone else's error

    workers = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(errors) == 1600 and not any(errors)
    with pytest.raises(RuntimeError, match="takes 7 parameter words, the host program gave 12"):
        cuda.launch_words(DIVIDE, 0, 12, 4, 256)


def test_an_interrupted_read_leaves_no_stale_error(fake, monkeypatch):
    """Ctrl-C after the failing kernel, before its cell is read (issue 19.6): the cell is
    cleared before the thread's next launch, which then succeeds."""
    sync = fake.cuStreamSynchronize
    calls = []

    def interrupted_once(stream):
        calls.append(stream)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return sync(stream)

    monkeypatch.setattr(fake, "cuStreamSynchronize", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        cuda.launch(DIVIDE, [np.zeros(4), 0], 4)
    x = np.zeros(4)
    cuda.launch(DIVIDE, [x, 1], 4)
    np.testing.assert_array_equal(x, np.arange(4))
