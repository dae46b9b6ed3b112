"""Host programs (`@adjit.jit` functions on device="cuda", runtime/host_program.py) under
threads and Ctrl-C, against the fake driver (fake_driver.py): called from several threads at
once, some calls failing a check in the host code, each call raises exactly its own error
(the error cell is per call, passes/lower_cpu.py); a Ctrl-C ends a call after the launch
under way."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import adjit
from cuda_jit_cases import KERNELS, scale
from fake_driver import install

pytest.importorskip("mlir", reason="compiling host programs needs MLIR")
if shutil.which("cc") is None:
    pytest.skip("building host programs needs a C compiler (cc)", allow_module_level=True)


@adjit.jit
def scale_by_quotient(x, n: int, m: int):
    scale(x, 1.0 * (n // m), ndrange=x.shape[0])


def test_threads_calling_one_host_program_get_their_own_errors(monkeypatch, tmp_path):
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    api = install(monkeypatch, KERNELS)
    api.cuCtxSetCurrent = lambda context: (0,)    # each thread makes the context current
    x0 = np.arange(64, dtype=np.float64)
    x = x0.copy()
    scale_by_quotient(x, 6, 3, device="cuda")       # compiled once, up front
    np.testing.assert_array_equal(x, 2 * x0)
    barrier = threading.Barrier(8)
    report: dict[int, list] = {}

    def work(t: int) -> None:
        wrong: list = []
        raised = expected = 0
        barrier.wait()
        for i in range(100):
            fail = (i + t) % 3 == 0
            expected += fail
            m = 0 if fail else i % 4 + 1
            x = x0.copy()
            try:
                scale_by_quotient(x, 12, m, device="cuda")
                if fail:
                    wrong.append((i, "a failing call returned"))
                elif not np.array_equal(x, (12 // m) * x0):
                    wrong.append((i, "wrong result"))
            except ZeroDivisionError:
                raised += 1
                if not fail:
                    wrong.append((i, "a valid call raised"))
        report[t] = [raised, expected, wrong[:5]]

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(report) == list(range(8))          # no thread died
    assert all(w == [] and r == e for r, e, w in report.values()), report


def test_ctrl_c_ends_a_host_program_after_the_launch_under_way(tmp_path):
    # 200 launches of 20 ms each; SIGINT lands during one of them: the call skips the rest,
    # raises KeyboardInterrupt when it returns, and the next call runs whole.
    script = textwrap.dedent(f'''
        import os, signal, sys, threading, time
        import numpy as np, pytest
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from cuda_jit_cases import KERNELS, fake_scale, scale_often
        from fake_driver import install
        def slow_scale(api, params, grid, block):
            time.sleep(0.02)
            fake_scale(api, params, grid, block)
        api = install(pytest.MonkeyPatch(), {{**KERNELS, "scale__a1f64_wf64__1d": slow_scale}})
        x = np.ones(8)
        scale_often(x, 1, device="cuda")              # compiled (and loaded) first
        started = len(api.launches)
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            scale_often(x, 200, device="cuda")
            print("not interrupted")
        except KeyboardInterrupt:
            print("interrupted after", len(api.launches) - started, "launches")
        before = len(api.launches)
        scale_often(x, 3, device="cuda")
        assert len(api.launches) - before == 3
        print("then", len(api.launches) - before)
    ''')
    env = {**os.environ, "ADJIT_CACHE_DIR": str(tmp_path / "cache")}
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=120, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"hung: {e.stdout!r} {e.stderr!r}")
    assert done.returncode == 0, done.stderr
    words = done.stdout.split()
    assert words[:2] == ["interrupted", "after"], done.stdout
    assert 1 <= int(words[2]) < 200 and words[-2:] == ["then", "3"], done.stdout
