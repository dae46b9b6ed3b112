"""0-d arrays on the GPU path (issue 19, item 16), without a GPU: a kernel taking them
compiles to PTX that ptxas accepts, and a launch with device="cuda" packs a rank-0 memref's
parameter words (allocated, aligned, offset: no sizes or strides) that the kernel, run on
the CPU behind the fake driver (cpu_device.py), reads back correctly."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import adjit

pytest.importorskip("mlir")
from fake_driver import install                                    # noqa: E402
from test_ptx import assemble                                      # noqa: E402


@adjit.kernel
def scale0(w0, y, out, total0):
    i = adjit.index()
    out[i] = y[i] * w0[()] + w0 * 0.5
    adjit.atomic_add(total0, (), y[i])


def _args(n=9):
    return np.array(3.0), np.arange(float(n)), np.zeros(n), np.array(0.0)


def test_kernel_with_0d_arrays_assembles(tmp_path):
    ptx = scale0.lower(*_args(), ndrange=9, device="cuda").ptx()
    assemble(ptx, tmp_path)


@pytest.mark.skipif(shutil.which("cc") is None, reason="kernels run on the CPU need cc")
def test_launch_packs_rank_0_memrefs(monkeypatch, tmp_path):
    from cpu_device import kernels_on_cpu
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    api = install(monkeypatch, kernels_on_cpu(scale0.lower(*_args(), ndrange=9).adj()))
    w0, y, out, total0 = _args()
    scale0(w0, y, out, total0, ndrange=9, device="cuda")
    assert api.launches
    np.testing.assert_array_equal(out, y * 3.0 + 1.5)
    assert total0.shape == () and total0[()] == y.sum()


def test_device_array_of_a_0d_array(monkeypatch):
    install(monkeypatch, {})
    d = adjit.DeviceArray.from_numpy(np.array(2.5))
    assert d.shape == () and d.ndim == 0 and d.size == 1
    d.copy_from_host(np.array(4.0))
    back = d.copy_to_host()
    assert back.shape == () and back[()] == 4.0


@adjit.jit
def host_with_0d(w0, y):
    out = adjit.empty_like(y)
    total0 = adjit.zeros(())
    scale0(w0, y, out, total0, ndrange=y.shape[0])
    return adjit.sum(out) + total0 * w0, total0


@pytest.mark.skipif(shutil.which("cc") is None, reason="host programs need a C compiler")
def test_host_program_with_0d_arguments_and_results(monkeypatch, tmp_path):
    from cpu_device import kernels_on_cpu
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    install(monkeypatch, kernels_on_cpu(scale0.lower(*_args(), ndrange=9).adj()))
    w0, y = np.array(3.0), np.arange(9.0)
    got, total0 = host_with_0d(w0, y, device="cuda")
    want, want_total = host_with_0d(w0, y)
    assert got == want == np.sum(y * 3.0 + 1.5) + 36.0 * 3.0
    assert isinstance(total0, np.ndarray) and total0.shape == () and total0[()] == want_total
