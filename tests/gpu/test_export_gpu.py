"""adjit.export of a kernel launch with device="cuda" on a machine without a GPU: the
artifact holds the kernel's PTX, which ptxas accepts; the loaded kernel launches through the
CUDA driver (the fake one here, tests/gpu/fake_driver.py), and without a driver it loads and
says so when called."""
from __future__ import annotations

import json
import shutil
import zipfile

import numpy as np
import pytest

pytest.importorskip("mlir")

import adjit                                          # noqa: E402
from adjit.runtime import cuda_driver                 # noqa: E402
from fake_driver import install, saxpy as fake_saxpy  # noqa: E402
from test_ptx import assemble                         # noqa: E402


@adjit.kernel
def saxpy(a: adjit.f32, x: adjit.Array[adjit.f32, 1], y: adjit.Array[adjit.f32, 1]):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


def test_an_exported_gpu_kernel_holds_ptx_and_launches_through_the_driver(
        tmp_path, monkeypatch):
    monkeypatch.delenv("ADJIT_CUDA_CHIP", raising=False)
    path = tmp_path / "saxpy.adjit"
    x = np.arange(8, dtype=np.float32)
    adjit.export(saxpy, 2.0, x, np.ones(8, np.float32), ndrange=8, device="cuda", path=path)
    with zipfile.ZipFile(path) as z:
        ptx = z.read("kernel.ptx").decode()
    assert ".target sm_90" in ptx
    assemble(ptx, tmp_path)

    monkeypatch.setattr(cuda_driver, "_driver", None)
    monkeypatch.setattr(cuda_driver, "_driver_error",
                        RuntimeError("no CUDA driver on this machine"))
    k = adjit.load(path)                 # no GPU needed to load it
    assert "saxpy" in repr(k) and "sm_90" in repr(k)
    y = np.ones(1000, np.float32)
    with pytest.raises(RuntimeError, match="CUDA is not available: no CUDA driver"):
        k(2.0, np.arange(1000, dtype=np.float32), y, ndrange=1000)
    with pytest.raises(TypeError, match="argument 'x' must be"):
        k(2.0, np.arange(1000.0), y, ndrange=1000)

    fake = install(monkeypatch, {k._kernel.entry: fake_saxpy})
    k(2.0, np.arange(1000, dtype=np.float32), y, ndrange=1000, workgroupsize=64)
    np.testing.assert_array_equal(y, 2 * np.arange(1000) + 1)
    assert fake.launches == [(k._kernel.entry, 16, 64)]


needs_cc = pytest.mark.skipif(shutil.which("cc") is None,
                              reason="building host programs needs a C compiler (cc)")


@needs_cc
def test_an_exported_cuda_jit_function_runs_its_host_program(tmp_path, monkeypatch):
    from cuda_jit_cases import KERNELS, simulate
    monkeypatch.delenv("ADJIT_CUDA_CHIP", raising=False)
    path = tmp_path / "simulate.adjit"
    u0 = np.random.default_rng(0).random((6, 9), dtype=np.float32)
    adjit.export(simulate, u0, 3, np.float32(0.1), device="cuda", path=path)
    with zipfile.ZipFile(path) as z:
        manifest = json.loads(z.read("manifest.json"))
        assert "module.so" in z.namelist()
    for kernel in manifest["call"]["kernels"]:
        assemble(kernel["ptx"], tmp_path)

    monkeypatch.setattr(cuda_driver, "_driver", None)
    monkeypatch.setattr(cuda_driver, "_driver_error",
                        RuntimeError("no CUDA driver on this machine"))
    f = adjit.load(path)
    assert "simulate" in repr(f) and "device='cuda'" in repr(f)
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        f(u0, 3, np.float32(0.1))

    install(monkeypatch, KERNELS)
    total, u = f(u0, 3, np.float32(0.1))
    want_total, want_u = simulate(u0, 3, np.float32(0.1))
    np.testing.assert_allclose(u, want_u, rtol=1e-6)
    np.testing.assert_allclose(total, want_total, rtol=1e-6)
