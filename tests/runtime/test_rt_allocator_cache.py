"""The allocator's cache of large blocks (runtime/memory.py): a freed block of CACHE_MIN_BYTES or
more is kept (at most CACHE_SLOTS blocks, CACHE_LIMIT_BYTES in all) and handed to a later
allocation it fits, best fit among capacities in [size, 2 size); memory_stats counts live
blocks only; release_cached_memory() frees the kept ones; threads (Python's and the async
runtime's workers) share it without locks."""
from __future__ import annotations

import os
import random
import threading

import numpy as np
import pytest

from adjit.core.types import ArrayType, i64, index
from adjit.runtime import memory
from adjit.runtime.memory import (CACHE_LIMIT_BYTES, CACHE_MIN_BYTES, CACHE_SLOTS, allocate,
                                  memory_stats, release_cached_memory, reset_peak_memory)
from rt_helpers import bytes_in_use

MiB = 1 << 20


def cached() -> int:
    return memory._get().cached.value


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@pytest.fixture(autouse=True)
def empty_cache():
    bytes_in_use()                 # collects garbage: its blocks go to the cache first
    release_cached_memory()
    assert cached() == 0
    yield
    release_cached_memory()


def test_freed_large_block_is_reused_by_an_allocation_it_fits():
    a = allocate(4 * MiB, np.uint8)
    p = address(a)
    del a
    assert cached() == 4 * MiB
    b = allocate(MiB, np.float32)            # the same 4 MiB
    assert address(b) == p and cached() == 0
    del b
    c = allocate(3 * MiB + 5, np.uint8)      # 4 MiB is in [size, 2 size): reused
    assert address(c) == p
    del c
    d = allocate(2 * MiB, np.uint8)          # 4 MiB would waste half: a block of its own
    assert address(d) != p and cached() == 4 * MiB
    del d
    assert cached() == 6 * MiB


def test_best_fit_among_kept_blocks():
    a, b = allocate(4 * MiB, np.uint8), allocate(3 * MiB, np.uint8)
    pb = address(b)
    del a, b
    c = allocate(5 * MiB // 2, np.uint8)     # both fit: the smaller is taken
    assert address(c) == pb and cached() == 4 * MiB


def test_small_blocks_are_not_kept():
    a = allocate(CACHE_MIN_BYTES - 1, np.uint8)
    del a
    assert cached() == 0
    a = allocate(CACHE_MIN_BYTES, np.uint8)
    del a
    assert cached() == CACHE_MIN_BYTES


def test_stats_count_live_blocks_only():
    before = bytes_in_use()
    reset_peak_memory()
    a = allocate(8 * MiB, np.uint8)
    assert bytes_in_use() - before == 8 * MiB
    del a
    assert bytes_in_use() == before and cached() == 8 * MiB
    b = allocate(6 * MiB, np.uint8)          # reuses the 8 MiB block, counted as 6 MiB
    assert bytes_in_use() - before == 6 * MiB and cached() == 0
    c = allocate(6 * MiB, np.uint8)
    assert memory_stats()["peak_bytes"] == before + 12 * MiB
    del b, c
    stats = memory_stats()
    assert stats["bytes_in_use"] == before and stats["peak_bytes"] == before + 12 * MiB
    assert cached() == 14 * MiB
    release_cached_memory()
    assert memory_stats()["bytes_in_use"] == before


def test_cache_is_bounded_by_its_slots():
    blocks = [allocate(MiB, np.uint8) for _ in range(CACHE_SLOTS + 8)]
    del blocks
    assert cached() == CACHE_SLOTS * MiB


def test_cache_is_bounded_by_its_limit():
    size = 40 * MiB                          # never written: costs address space only
    blocks = [allocate(size, np.uint8) for _ in range(CACHE_LIMIT_BYTES // size + 3)]
    del blocks
    assert cached() == CACHE_LIMIT_BYTES // size * size
    whole = allocate(CACHE_LIMIT_BYTES + MiB, np.uint8)   # larger than the cache
    del whole
    assert cached() == CACHE_LIMIT_BYTES // size * size


def test_limit_is_read_at_each_free():
    limit = memory._get().cache_limit
    saved = limit.value
    limit.value = 10 * MiB
    try:
        blocks = [allocate(3 * MiB, np.uint8) for _ in range(5)]
        del blocks
        assert cached() == 9 * MiB
    finally:
        limit.value = saved


def test_release_frees_kept_blocks():
    blocks = [allocate(n * MiB, np.uint8) for n in (1, 2, 5)]
    del blocks
    assert release_cached_memory() == 8 * MiB
    assert cached() == 0 and release_cached_memory() == 0


def test_public_release():
    import adjit
    block = allocate(3 * MiB, np.uint8)
    del block                           # freed: kept
    assert cached() >= 3 * MiB
    assert adjit.release_cached_memory() >= 3 * MiB and cached() == 0


def test_failed_malloc_releases_the_cache_first():
    a = allocate(2 * MiB, np.uint8)
    del a
    assert cached() == 2 * MiB
    before = bytes_in_use()
    with pytest.raises(MemoryError):
        allocate(1 << 62, np.uint8)
    assert cached() == 0 and bytes_in_use() == before


def test_forked_child_starts_with_an_empty_cache():
    a = allocate(2 * MiB, np.uint8)
    del a
    pid = os.fork()
    if pid == 0:
        ok = cached() == 0
        b = allocate(2 * MiB, np.uint8)      # the child's cache works
        del b
        os._exit(0 if ok and cached() == 2 * MiB else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert cached() == 2 * MiB               # the parent's is untouched


# Each work item, `reps` times, allocates a block of a size chosen by its index and the
# repetition (two of the four sizes are kept when freed), writes its index at both ends and
# reads them back; the pipeline's buffer deallocation frees it at the end of the iteration:
# the async runtime's workers allocate and free concurrently.
CHURN = """
func.func @churn_k(%out: memref<?xi64>, %reps: index) attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.global_id"() {dim = 0 : i64} : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %small = arith.constant 16 : index
  %mid = arith.constant 2048 : index
  %big = arith.constant 131073 : index
  %huge = arith.constant 393217 : index
  %v = arith.index_cast %i : index to i64
  %zero = arith.constant 0 : i64
  %total = scf.for %k = %c0 to %reps step %c1 iter_args(%acc = %zero) -> (i64) {
    %ik = arith.addi %i, %k : index
    %r = arith.remui %ik, %c4 : index
    %is0 = arith.cmpi eq, %r, %c0 : index
    %is1 = arith.cmpi eq, %r, %c1 : index
    %is2 = arith.cmpi eq, %r, %c2 : index
    %a = arith.select %is2, %big, %huge : index
    %b = arith.select %is1, %mid, %a : index
    %n = arith.select %is0, %small, %b : index
    %buf = memref.alloc(%n) : memref<?xi64>
    %last = arith.subi %n, %c1 : index
    memref.store %v, %buf[%c0] : memref<?xi64>
    memref.store %v, %buf[%last] : memref<?xi64>
    %x = memref.load %buf[%c0] : memref<?xi64>
    %y = memref.load %buf[%last] : memref<?xi64>
    %s = arith.addi %x, %y : i64
    %acc2 = arith.addi %acc, %s : i64
    scf.yield %acc2 : i64
  }
  memref.store %total, %out[%i] : memref<?xi64>
  return
}
func.func @churn(%out: memref<?xi64>, %reps: index) attributes {adj.entry, llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %n = memref.dim %out, %c0 : memref<?xi64>
  "adj.launch"(%n) ({
    func.call @churn_k(%out, %reps) : (memref<?xi64>, index) -> ()
    gpu.yield
  }) {kernel = @churn_k} : (index) -> ()
  return
}
"""


def test_threads_and_workers_allocating_concurrently(compile_text):
    churn = compile_text(CHURN).function("churn", [ArrayType(i64, 1), index], [])
    items, reps = 2000, 25
    want = 2 * reps * np.arange(items)
    out = np.zeros(items, dtype=np.int64)
    churn(out, reps)
    np.testing.assert_array_equal(out, want)
    assert cached() > 0                      # the kernel's large blocks went through the cache
    release_cached_memory()

    before = bytes_in_use()
    sizes = [8, 4096, MiB, MiB + 8, 2 * MiB, 3 * MiB + 8, 5 * MiB, 16 * MiB, 100_000]
    barrier = threading.Barrier(9)
    failures: list[str] = []

    def work(seed: int) -> None:
        rnd = random.Random(seed)
        held: list[tuple[np.ndarray, int]] = []
        barrier.wait()
        try:
            for _ in range(2000):
                if held and (len(held) >= 6 or rnd.random() < 0.5):
                    a, tag = held.pop(rnd.randrange(len(held)))
                    if a[0] != tag or a[-1] != tag:
                        failures.append(f"block of {a.nbytes} bytes overwritten")
                    del a
                else:
                    a = allocate(rnd.choice(sizes) // 8, np.int64)
                    tag = rnd.getrandbits(62)
                    a[0] = a[-1] = tag
                    held.append((a, tag))
            held.clear()
        except Exception as e:                # noqa: BLE001 - reported below
            failures.append(repr(e))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    barrier.wait()
    for _ in range(20):                       # the workers meanwhile
        out[:] = -1
        churn(out, reps)
        if not np.array_equal(out, want):
            failures.append("wrong kernel result")
    for t in threads:
        t.join()
    assert not failures, failures[:5]
    assert bytes_in_use() == before
    kept = cached()
    assert 0 < kept <= CACHE_LIMIT_BYTES
    assert release_cached_memory() == kept and cached() == 0


@pytest.mark.parametrize("nbytes", [1, 60, 4096, 65535, 65536, 256 * 1024 + 4, MiB, 5 * MiB + 3])
def test_blocks_are_cache_line_aligned_and_page_aligned_from_64_kib(nbytes):
    """Arrays of 64 KiB or more start on a page: two heap arrays at different offsets within a
    page made a stencil's loads of one falsely wait on its stores to the other (4K aliasing,
    6x slower); smaller ones start on a cache line. Freeing goes back through the offset."""
    before = bytes_in_use()
    blocks = [allocate(nbytes, np.uint8) for _ in range(3)]
    for a in blocks:
        assert address(a) % (4096 if nbytes >= 65536 else 64) == 0
        a[:] = 7                                  # the whole block is writable
    assert bytes_in_use() == before + 3 * nbytes
    del blocks, a
    assert bytes_in_use() == before
    release_cached_memory()
