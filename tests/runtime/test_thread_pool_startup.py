"""The first parallel loop of a process starts the pool's workers, and they join it late
(thread creation): that loop must not be taken as evidence that handing off does not pay
or that the cores are busy. Judged so, the pool ran the next ~64 launches of that loop on
the caller alone (W4's first 20 ms of calls ran at one thread's speed, and benchmarks that
time a few calls after a warm-up measured that). Checked in a new process (whose pool has
no workers yet) by CPU accounting, not time: right after the first call, the workers must do
a share of the work of the next calls."""
import subprocess
import sys
import textwrap

import pytest

# the pool's share of the work depends on idle cores (conftest.py: run apart from -n)
pytestmark = pytest.mark.exclusive

CHILD = textwrap.dedent("""
    import os, resource, time
    import numpy as np
    import adjit

    @adjit.kernel
    def work(x, y):
        i = adjit.index()
        y[i] = x[i] * x[i] + 1.0

    x = np.random.default_rng(0).random(1 << 21, dtype=np.float32)   # ~0.5 ms a launch
    y = np.empty_like(x)
    work(x, y, ndrange=x.size)                 # compiles, and starts the workers
    adjit.wait_for_builds()
    caller0, all0 = time.thread_time(), resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(30):
        work(x, y, ndrange=x.size)
    caller1, all1 = time.thread_time(), resource.getrusage(resource.RUSAGE_SELF)
    caller = caller1 - caller0
    process = (all1.ru_utime + all1.ru_stime) - (all0.ru_utime + all0.ru_stime)
    np.testing.assert_allclose(y, x * x + 1.0, rtol=1e-6)
    print(caller, process - caller)
""")


@pytest.mark.skipif(len(__import__("os").sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_the_loops_after_the_first_are_shared_with_the_workers(tmp_path):
    script = tmp_path / "child.py"         # (adjit compiles from a file's source)
    script.write_text(CHILD)
    env = dict(__import__("os").environ, ADJIT_NUM_THREADS="2", ADJIT_DISK_CACHE="0")
    # Another process holding a core makes the pool back off on purpose (its preemption
    # back-off): then the workers rightly do little. The fault this guards against is
    # systematic (every process, a quiet machine too), so a few tries tell the two apart.
    found = []
    for _ in range(3):
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        caller, workers = (float(v) for v in done.stdout.split())
        found.append((caller, workers, __import__("os").getloadavg()[0]))
        # Two threads splitting the work: the worker's CPU time near the caller's. Serial
        # on the caller (the fault), the workers only poll between launches: a few percent.
        if workers > 0.3 * caller:
            return
    raise AssertionError(f"(caller, workers, load) of each try: {found}")
