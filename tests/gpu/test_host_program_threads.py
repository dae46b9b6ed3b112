"""Host programs (`@adjit.jit` functions on device="cuda", runtime/host_program.py) called
from several threads at once, some calls failing a check in the host code: each call raises
exactly its own error (the error cell is per call, passes/lower_cpu.py), against the fake
driver (fake_driver.py)."""
from __future__ import annotations

import shutil
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
