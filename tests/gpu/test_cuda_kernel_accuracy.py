"""The GPU launch path's sum of per-item adjoints of an Active scalar (the launch rule's, in a
host program: per-item buffers summed on the device in f64 chunks, then pairwise,
passes/summation.py) is as accurate as the CPU's (issue 8.1: within 1e-6 relative of
float64 for float32 items), without a GPU: the host program's kernels, compiled for the CPU,
run behind the fake driver (cpu_device.py)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import adjit
from adjit import Active, Const, Duplicated, Reverse
from adjit.core.types import ArrayType
from fake_driver import install

pytest.importorskip("mlir", reason="compiling derivative kernels needs MLIR")
if shutil.which("cc") is None:
    pytest.skip("running kernels on the CPU needs a C compiler (cc)", allow_module_level=True)

F32_1D = ArrayType(adjit.f32, 1)
TYPES = [adjit.f32, F32_1D, F32_1D]


@adjit.kernel
def scale(a: adjit.f32, x, out):
    i = adjit.index()
    out[i] = a * x[i]


@pytest.fixture
def fake(monkeypatch, tmp_path):
    from cpu_device import derivative_kernels_on_cpu
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    z = np.zeros(1, np.float32)
    anns = [Active(np.float32(0)), Const(z), Duplicated(z, z)]
    return install(monkeypatch, derivative_kernels_on_cpu(scale, Reverse, anns, TYPES, (1,)))


def gpu_da(x, seed):
    da, _, _ = adjit.autodiff(Reverse, scale, Active(np.float32(0.5)), Const(x),
                              Duplicated(np.zeros_like(x), seed.copy()), ndrange=x.size,
                              device="cuda")
    return da


def test_sum_over_2_20_random_items(fake):
    rng = np.random.default_rng(0)
    x, seed = rng.random(1 << 20, dtype=np.float32), rng.random(1 << 20, dtype=np.float32)
    da = gpu_da(x, seed)
    want = np.dot(x.astype(np.float64), seed.astype(np.float64))
    assert type(da) is np.float32 and abs(da - want) / want < 1e-6


def test_sum_over_2_25_items_of_ones(fake):
    # A float32 total stops growing at 2^24.
    x = np.ones(1 << 25, np.float32)
    assert gpu_da(x, x) == 33554432.0


@adjit.kernel
def param(p, x, out):
    i = adjit.index()
    out[i] = p[0] * x[i]


@adjit.jit
def param_loss(p, x, out):
    param(p, x, out, ndrange=x.shape[0])
    return adjit.sum(out)


def test_jit_on_the_gpu_sums_an_element_every_item_reads(monkeypatch, tmp_path):
    # @jit(device="cuda") differentiates through the launch rule: the reverse kernel gives
    # each item's adjoint of p[0], which the host program sums in f64 (not 2^20 atomics).
    from cpu_device import kernels_on_cpu
    from adjit.compiler.derivative import Derivative
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    n = 1 << 20
    x = np.random.default_rng(5).random(n, dtype=np.float32)
    p = np.array([0.5], np.float32)
    anns = [Duplicated(p, np.zeros(1, np.float32)), Const(x), Duplicated(np.zeros_like(x),
                                                                         np.zeros_like(x))]
    install(monkeypatch, kernels_on_cpu(Derivative(param_loss, Reverse, anns,
                                                   [F32_1D] * 3, None, None).adj_text))
    dp = np.zeros(1, np.float32)
    adjit.autodiff(Reverse, param_loss, Duplicated(p, dp), Const(x),
                   Duplicated(np.zeros_like(x), np.zeros_like(x)), device="cuda")
    want = x.astype(np.float64).sum()
    assert abs(dp[0] - want) / want < 1e-6
