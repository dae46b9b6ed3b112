"""The direct GPU derivative launch (`autodiff(Reverse, kernel, ..., device="cuda")`) sums the
adjoints of an element every work item reads (`p[0]`, `w[k]`: passes/autodiff/uniform_loads.py)
as the CPU's launch rule does: the by-name reverse kernel outputs them per item
(GpuKernel.uniform_loads), the launcher sums them in float64 (cuda_launch._sum_into) and adds
the sum into the shadow element once, instead of one float32 atomic add per item, which stops
growing at 2^24. Without a GPU: the derivative kernels, compiled for the CPU, run behind the
fake driver (cpu_device.py); the PTX is assembled by ptxas where it is installed."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import adjit
from adjit import Const, Duplicated, Reverse
from adjit.frontend import cuda_launch
from adjit.frontend.derivative import kernel_derivative_to_gpu, kernel_derivative_unit
from adjit.core.types import ArrayType
from adjit.runtime.device_array import DeviceArray
from fake_driver import install

pytest.importorskip("mlir", reason="compiling derivative kernels needs MLIR")
if shutil.which("cc") is None:
    pytest.skip("running kernels on the CPU needs a C compiler (cc)", allow_module_level=True)

F32_1D = ArrayType(adjit.f32, 1)
F64_1D = ArrayType(adjit.f64, 1)
PARAM_TYPES = [F32_1D, F32_1D, F32_1D]
PARAM_ACTIVITY = ("dup", "const", "dup")
WEIGHT_TYPES = [F64_1D, adjit.i64, F64_1D, F64_1D]
WEIGHT_ACTIVITY = ("dup", "const", "const", "dup")


@adjit.kernel
def param(p, x, out):
    i = adjit.index()
    out[i] = p[0] * x[i]


@adjit.kernel
def weight(w, k: int, x, out):
    """w[k], k a scalar argument: the same element for every item."""
    i = adjit.index()
    out[i] = w[k] * x[i] * x[i]


@pytest.fixture
def fake(monkeypatch, tmp_path):
    from cpu_device import kernels_on_cpu
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    kernels = {}
    for k, types, activity in [(param, PARAM_TYPES, PARAM_ACTIVITY),
                               (weight, WEIGHT_TYPES, WEIGHT_ACTIVITY)]:
        unit, _ = kernel_derivative_unit(k, types, 1, "reverse", activity, False)
        kernels.update(kernels_on_cpu(str(unit.module)))
    for t in (np.float32, np.float64):
        sum_into = cuda_launch._sum_into.lower(np.zeros(1, t), np.zeros(1, np.float64),
                                               ndrange=1)
        kernels.update(kernels_on_cpu(sum_into.adj()))
    return install(monkeypatch, kernels)


def gpu_dp(x, seed, dp=None):
    dp = np.zeros(1, np.float32) if dp is None else dp
    adjit.autodiff(Reverse, param, Duplicated(np.array([0.5], np.float32), dp), Const(x),
                   Duplicated(np.zeros_like(x), seed.copy()), ndrange=x.size, device="cuda")
    return dp


def test_the_reverse_kernel_records_its_element_and_outputs_it_per_item():
    kernels = kernel_derivative_to_gpu(param, PARAM_TYPES, 1, "reverse", PARAM_ACTIVITY, False,
                                       "sm_90")
    rev = kernels["rev"]
    assert rev.uniform_loads == ((0, ("0",)),)        # p[0]
    # args (p, dp, x, out, dout), no tape, then the one per-item output of p[0]'s adjoint
    assert len(rev.params) == 6 and rev.params[-1].dtype == "f32"
    assert "atom.global.add.f32" not in rev.ptx       # no per-item atomic into dp[0]
    w = kernel_derivative_to_gpu(weight, WEIGHT_TYPES, 1, "reverse", WEIGHT_ACTIVITY, False,
                                 "sm_90")["rev"]
    assert w.uniform_loads == ((0, ("(arg 1)",)),)    # w[k]


def test_the_format_records_the_elements(tmp_path):
    from adjit.runtime import kernel_cache
    rev = kernel_derivative_to_gpu(param, PARAM_TYPES, 1, "reverse", PARAM_ACTIVITY, False,
                                   "sm_90")["rev"]
    kernel_cache.store(tmp_path, "k", rev)
    assert kernel_cache.load(tmp_path, "k") == rev


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not on PATH")
def test_the_reverse_kernel_assembles(tmp_path):
    for k, types, activity in [(param, PARAM_TYPES, PARAM_ACTIVITY),
                               (weight, WEIGHT_TYPES, WEIGHT_ACTIVITY)]:
        for kernel in kernel_derivative_to_gpu(k, types, 1, "reverse", activity, False,
                                               "sm_90").values():
            path = tmp_path / f"{kernel.entry}.ptx"
            path.write_text(kernel.ptx)
            done = subprocess.run(["ptxas", "-arch=sm_90", str(path), "-o", "/dev/null"],
                                  capture_output=True, text=True)
            assert done.returncode == 0, done.stderr


def test_sum_over_2_25_items_of_ones(fake):
    # One float32 atomic per item stopped at 2^24 = 16777216.
    x = np.ones(1 << 25, np.float32)
    assert gpu_dp(x, x)[0] == 33554432.0


def test_sum_over_2_20_random_items_adds_into_the_shadow(fake):
    rng = np.random.default_rng(0)
    x, seed = rng.random(1 << 20, dtype=np.float32), rng.random(1 << 20, dtype=np.float32)
    dp = gpu_dp(x, seed, np.array([2.0], np.float32))          # added into what is there
    want = 2.0 + np.dot(x.astype(np.float64), seed.astype(np.float64))   # d/dp sum(p x seed)
    assert abs(dp[0] - want) / want < 1e-6


def test_an_element_at_a_scalar_index_on_a_device_shadow(fake):
    """w[k] with w's shadow a DeviceArray (added into on the device): d/dw[k] of
    sum(w[k] x^2 seed) = sum(x^2 seed), the other elements untouched; against the analytic
    form and a central finite difference of the primal."""
    rng = np.random.default_rng(1)
    n, k = 5000, 2
    x, seed = rng.random(n), rng.random(n)
    w0 = np.array([0.5, -1.0, 1.5, 3.0])
    dw = DeviceArray.from_numpy(np.full(4, 0.25))
    adjit.autodiff(Reverse, weight, Duplicated(w0.copy(), dw), Const(k), Const(x),
                   Duplicated(np.zeros(n), seed.copy()), ndrange=n, device="cuda")
    analytic = np.sum(x * x * seed)
    h = 1e-6
    fd = (np.sum((w0[k] + h) * x * x * seed) - np.sum((w0[k] - h) * x * x * seed)) / (2 * h)
    assert analytic == pytest.approx(fd, rel=1e-7)
    want = np.full(4, 0.25)
    want[k] += analytic
    np.testing.assert_allclose(dw.numpy(), want, rtol=1e-13)
