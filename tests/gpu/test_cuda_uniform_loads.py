"""A launch's derivative on the GPU (`autodiff(Reverse, kernel, ..., device="cuda")`, a host
program through the launch rule) sums the adjoints of an element every work item reads
(`p[0]`, `w[k]`: passes/autodiff/uniform_loads.py) as on the CPU: the reverse kernel outputs
them per item, the host program sums them on the device in float64 and adds the sum into the
shadow element once, instead of one float32 atomic add per item, which stops growing at 2^24.
Without a GPU: the host program's kernels, compiled for the CPU, run behind the fake driver
(cpu_device.py); the PTX is assembled by ptxas where it is installed."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import adjit
from adjit import Const, Duplicated, Reverse
from adjit.core.kernel import Param
from adjit.core.types import ArrayType, weak_i64
from adjit.runtime.device_array import DeviceArray
from fake_driver import install

pytest.importorskip("mlir", reason="compiling derivative kernels needs MLIR")
if shutil.which("cc") is None:
    pytest.skip("running kernels on the CPU needs a C compiler (cc)", allow_module_level=True)

F32_1D = ArrayType(adjit.f32, 1)
F64_1D = ArrayType(adjit.f64, 1)
PARAM_TYPES = [F32_1D, F32_1D, F32_1D]
WEIGHT_TYPES = [F64_1D, weak_i64, F64_1D, F64_1D]   # (a Python int)


@adjit.kernel
def param(p, x, out):
    i = adjit.index()
    out[i] = p[0] * x[i]


@adjit.kernel
def weight(w, k: int, x, out):
    """w[k], k a scalar argument: the same element for every item."""
    i = adjit.index()
    out[i] = w[k] * x[i] * x[i]


def param_annotations():
    z = np.zeros(1, np.float32)
    return [Duplicated(z, z), Const(z), Duplicated(z, z)]


def weight_annotations():
    z = np.zeros(1)
    return [Duplicated(z, z), Const(0), Const(z), Duplicated(z, z)]


CASES = [(param, param_annotations, PARAM_TYPES), (weight, weight_annotations, WEIGHT_TYPES)]


def launch_derivative(k, annotations, types):
    """The module of k's reverse launch derivative, which the host program is compiled from."""
    from adjit.compiler.derivative import Derivative
    return Derivative(k, Reverse, annotations(), types, (1,), None)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    from cpu_device import kernels_on_cpu
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    kernels = {}
    for case in CASES:
        kernels.update(kernels_on_cpu(launch_derivative(*case).adj_text))
    return install(monkeypatch, kernels)


def gpu_dp(x, seed, dp=None):
    dp = np.zeros(1, np.float32) if dp is None else dp
    adjit.autodiff(Reverse, param, Duplicated(np.array([0.5], np.float32), dp), Const(x),
                   Duplicated(np.zeros_like(x), seed.copy()), ndrange=x.size, device="cuda")
    return dp


@pytest.mark.parametrize("case", CASES, ids=["p[0]", "w[k]"])
def test_the_reverse_kernel_outputs_the_element_per_item_and_adds_no_atomic(case):
    # dp[0] (dw[k]) gets no float atomic add per item: the reverse kernel stores its item's
    # adjoint, which the host program's summing kernels add up.
    _, program = launch_derivative(*case).host_program("t", "sm_90")
    by_name = {k.entry.rsplit("_", 1)[-1]: k for k in program.kernels}
    aug, rev = by_name["aug"], by_name["rev"]
    dtype = "f32" if case[0] is param else "f64"
    # the arguments and shadows (no tape: nothing to save), then the per-item adjoints
    assert rev.params == aug.params + (Param("memref", dtype, 1),)
    assert f"atom.global.add.{dtype}" not in rev.ptx and f"red.global.add.{dtype}" not in rev.ptx
    assert f"__adj_item_sums_{dtype}" in {k.entry for k in program.kernels}


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not on PATH")
def test_the_host_programs_kernels_assemble(tmp_path):
    for case in CASES:
        _, program = launch_derivative(*case).host_program("t", "sm_90")
        for kernel in program.kernels:
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
