"""The thread pool's dynamic chunks and its thread count (runtime/native/parallel.cpp,
core/threads.py; issue 30, item 1): results identical to one thread for any chunking; a loop
whose worker cannot run (the process pinned to one CPU with two threads) finishes; the thread
count from a cgroup CPU quota, environment hints and ADJIT_NUM_THREADS; a forked child and two
Python threads."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
import threading

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


@pytest.fixture
def all_threads():
    set_limit(0)
    was = set_backoff(0)
    yield
    set_backoff(was)
    set_limit(th.thread_limit())


def run_loop(n: int, threads: int, size: int = 0) -> np.ndarray:
    """out[i] = i*i + 1 over [0, n) through the pool; each index written once (counted)."""
    out = np.zeros(n, np.int64)
    hits = np.zeros(n, np.int64)

    def body(ctx, lo, hi):
        idx = np.arange(lo, hi)
        out[lo:hi] = idx * idx + 1
        hits[lo:hi] += 1

    parallel_for(BODY(body), None, n, threads, size)
    assert (hits == 1).all()
    return out


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 17, 1000, 4099])
@pytest.mark.parametrize("threads", [2, 3, 4, 7, 64])
@pytest.mark.parametrize("size", [0, 1, 4])     # PARALLEL, SMALL, PARALLEL|COARSE
def test_results_identical_to_one_thread(all_threads, n, threads, size):
    expected = np.arange(n, dtype=np.int64) ** 2 + 1
    for _ in range(3):
        np.testing.assert_array_equal(run_loop(n, threads, size), expected)


def test_a_loop_of_launches_with_any_limit_agrees_with_numpy():
    """A module compiled for the process's count runs with whatever limit the pool has."""
    import adjit

    @adjit.kernel
    def scale(x, y):
        i = adjit.index()
        y[i] = 2.0 * x[i] + 1.0

    x = np.random.default_rng(0).standard_normal(100_003)
    try:
        for limit in (1, 2, 3, 8, 0):
            set_limit(limit)
            y = np.zeros_like(x)
            scale(x, y, ndrange=x.shape)
            np.testing.assert_array_equal(y, 2.0 * x + 1.0)
            assert y.dtype == np.float64
    finally:
        set_limit(th.thread_limit())


PINNED = """
import os, time, ctypes, numpy as np
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
import adjit
from adjit.runtime import extension
backed = ctypes.CFUNCTYPE(ctypes.c_int)(extension.address("adj_parallel_backed_off"))

@adjit.kernel
def row(x, y):
    i = adjit.index()
    s = 0.0
    for j in range(x.shape[0]):      # a run-time trip count: the launch goes to the pool
        s += x[j] * (i + j)
    y[i] = s

@adjit.jit
def many(x, steps: int):
    y = adjit.empty_like(x)
    for _ in range(steps):
        row(x, y, ndrange=x.shape)
    return y

x = np.linspace(0.0, 1.0, 64)
i = np.arange(64)[:, None]; j = np.arange(64)[None, :]
expected = ((i + j) * x[None, :]).sum(axis=1)
for _ in range(20):
    np.testing.assert_allclose(many(x, 200), expected, rtol=1e-12)
print("done", backed())
"""


def test_a_process_pinned_to_one_cpu_with_two_threads_finishes(tmp_path):
    # 4000 launches whose second thread cannot run while the first does. Completion is the
    # assertion (the timeout is for a hang, not a timing).
    env = {**os.environ, "ADJIT_NUM_THREADS": "2", "ADJIT_CACHE_DIR": str(tmp_path / "cache")}
    script = tmp_path / "pinned.py"
    script.write_text(PINNED)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("done")


def _cgroup(tmp_path, files: dict[str, str], proc: str):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "proc_cgroup").write_text(proc)
    return tmp_path, tmp_path / "proc_cgroup"


def test_cgroup_v2_quota(tmp_path):
    root, proc = _cgroup(tmp_path, {"cpu.max": "max 100000\n",
                                    "job/cpu.max": "150000 100000\n",
                                    "job/step/cpu.max": "max 100000\n"}, "0::/job/step\n")
    assert th.cgroup_cpu_limit(root, proc) == 1.5
    assert th.available_cpus(root, proc) == 1     # rounded down, at least 1


def test_cgroup_v2_no_quota_and_a_container_seeing_its_own_root(tmp_path):
    root, proc = _cgroup(tmp_path, {"cpu.max": "max 100000\n"}, "0::/\n")
    assert th.cgroup_cpu_limit(root, proc) is None
    assert th.available_cpus(root, proc) == len(os.sched_getaffinity(0))
    # the path names the host's cgroup, the container mounts its own at the root
    root, proc = _cgroup(tmp_path / "c", {"cpu.max": "100000 100000\n"}, "0::/kubepods/pod1\n")
    assert th.cgroup_cpu_limit(root, proc) == 1.0


def test_cgroup_v1_quota(tmp_path):
    root, proc = _cgroup(tmp_path, {"cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
                                    "cpu,cpuacct/cpu.cfs_period_us": "100000\n",
                                    "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "50000\n",
                                    "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n"},
                         "4:cpu,cpuacct:/docker/abc\n3:memory:/docker/abc\n")
    assert th.cgroup_cpu_limit(root, proc) == 0.5
    assert th.available_cpus(root, proc) == 1


def test_missing_or_malformed_cgroup_files_mean_no_quota(tmp_path):
    root, proc = _cgroup(tmp_path, {"cpu.max": "garbage\n",
                                    "cpu/cpu.cfs_quota_us": "x\n"}, "nonsense\n")
    assert th.cgroup_cpu_limit(root, proc) is None
    assert th.cgroup_cpu_limit(tmp_path / "absent", tmp_path / "absent2") is None


def test_processes_sharing_the_machine_and_the_override(monkeypatch):
    monkeypatch.delenv("ADJIT_NUM_THREADS", raising=False)
    cpus = th.available_cpus()
    assert th.local_processes({}) == 1
    assert th.local_processes({"OMPI_COMM_WORLD_LOCAL_SIZE": "4"}) == 4
    assert th.local_processes({"PYTEST_XDIST_WORKER_COUNT": "2", "MPI_LOCALNRANKS": "x"}) == 2
    assert th.thread_limit(environ={}) == cpus
    assert th.thread_limit(environ={"PMI_LOCAL_SIZE": str(cpus * 4)}) == 1
    assert th.thread_limit(in_child=True, environ={}) == 1
    override = {"ADJIT_NUM_THREADS": "3", "PYTEST_XDIST_WORKER_COUNT": "8"}
    assert th.thread_limit(in_child=True, environ=override) == 3
    with pytest.raises(ValueError, match="ADJIT_NUM_THREADS"):
        th.thread_limit(environ={"ADJIT_NUM_THREADS": "0"})
    monkeypatch.setenv("ADJIT_NUM_THREADS", "5")
    assert th.default_num_threads() == 5
    monkeypatch.delenv("ADJIT_NUM_THREADS")
    assert th.default_num_threads() == cpus


CHILD = textwrap.dedent("""
    import multiprocessing as mp, os, sys
    import numpy as np
    import ctypes
    import adjit
    from adjit.runtime import extension
    limit = ctypes.CFUNCTYPE(ctypes.c_int64)(extension.address("adj_thread_limit"))

    @adjit.kernel
    def bump(x):
        i = adjit.index()
        x[i] = x[i] + i

    def work(k):
        x = np.zeros(50_000, np.int64)
        bump(x, ndrange=x.shape)
        assert np.array_equal(x, np.arange(50_000))
        return limit()

    if __name__ == "__main__":
        work(0)
        with mp.get_context("fork").Pool(2) as pool:
            print(pool.map(work, range(4)))
""")


def test_multiprocessing_children_run_one_thread_each(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {k: v for k, v in os.environ.items() if k != "ADJIT_NUM_THREADS"}
    env.update(ADJIT_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[1, 1, 1, 1]"


def test_two_python_threads_and_many_chunkings_at_once(all_threads):
    errors = []

    def run(k):
        try:
            for n in (1, 7, 1000, 4099):
                np.testing.assert_array_equal(run_loop(n, 2 + k),
                                              np.arange(n, dtype=np.int64) ** 2 + 1)
        except BaseException as e:   # reported below
            errors.append(e)

    ts = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_the_caller_runs_what_a_stalled_worker_has_not_taken(all_threads):
    # A worker stalls in the first chunk it takes (as one descheduled would): the caller
    # runs every other chunk, its own and the worker's, and waits only for that one, an
    # eighth of the loop. (The pool before ran one block per thread: the worker's block was
    # half the loop.) The pool has more workers than two (tests before asked for up to 64):
    # those beyond the loop's threads take nothing.
    n, caller = 4000, threading.get_ident()
    ran_by_caller = np.zeros(n, bool)
    stalled = []

    def body(ctx, lo, hi):
        if threading.get_ident() != caller and not stalled:
            stalled.append((lo, hi))
            threading.Event().wait(0.3)
        else:
            ran_by_caller[lo:hi] |= threading.get_ident() == caller

    parallel_for(BODY(body), None, n, 2, 0)
    outside = np.ones(n, bool)
    for lo, hi in stalled:
        outside[lo:hi] = False
    assert len(stalled) <= 1 and all(hi - lo <= n // 8 for lo, hi in stalled)
    assert ran_by_caller[outside].all()


COMPILED_FOR_4 = """
import ctypes, numpy as np, adjit
from adjit.runtime import extension
set_limit = ctypes.CFUNCTYPE(None, ctypes.c_int64)(extension.address("adj_set_thread_limit"))

@adjit.kernel
def histogram(bins, w, h):
    i = adjit.index()
    adjit.atomic_add(h, bins[i], w[i])

rng = np.random.default_rng(0)
bins = rng.integers(0, 64, 200_000)
w = rng.standard_normal(200_000)
expected = np.zeros(64)
np.add.at(expected, bins, w)
for limit in (1, 2, 3, 4, 0, 1):
    set_limit(limit)
    h = np.zeros(64)
    histogram(bins, w, h, ndrange=w.shape)
    np.testing.assert_allclose(h, expected, rtol=1e-12, atol=1e-12)
print("ok")
"""


def test_a_module_compiled_for_four_threads_runs_under_any_limit(tmp_path):
    # Compiled for 4 (its privatised launch makes 4 x PARTS private copies), run with the
    # pool limited to 1, 2, 3, 4 threads and none: the same sums.
    script = tmp_path / "four.py"
    script.write_text(COMPILED_FOR_4)
    env = {**os.environ, "ADJIT_NUM_THREADS": "4", "ADJIT_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"
