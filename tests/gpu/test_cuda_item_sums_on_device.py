"""The sums of a reverse launch's per-item adjoints (Active scalars) in an
@adjit.jit(device="cuda") host program run on the device (reduction.sum_items_on_device):
a launch per 4096-item chunk into f64 partials, a one-item launch adding them pairwise; the
host reads one number. Behind the fake driver (cpu_device.py) against the CPU's gradient and
a float64 reference; the summing kernels pass ptxas."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import adjit
from adjit import Active, Duplicated, Reverse
from adjit.core.types import ArrayType
from fake_driver import install

pytest.importorskip("mlir", reason="compiling derivative kernels needs MLIR")


@adjit.kernel
def scaled(a: adjit.f32, x, out):
    i = adjit.index()
    out[i] = a * x[i] * x[i]


@adjit.jit
def loss(a: adjit.f32, x):
    out = adjit.empty_like(x)
    scaled(a, x, out, ndrange=x.shape[0])
    return adjit.sum(out)


def annotations(x):
    return [Active(np.float32(1.5)), Duplicated(x, np.zeros_like(x))], \
        [adjit.f32, ArrayType(adjit.f32, 1)]


def test_active_scalar_sum_on_the_device_matches_the_cpu(monkeypatch, tmp_path):
    if shutil.which("cc") is None:
        pytest.skip("running kernels on the CPU needs a C compiler (cc)")
    from cpu_device import kernels_on_cpu
    from adjit.compiler.derivative import Derivative
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    n = (1 << 18) + 3                          # chunks of 4096 and a partial one
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    anns, types = annotations(x)
    install(monkeypatch, kernels_on_cpu(Derivative(loss, Reverse, anns, types, None,
                                                   None).adj_text))
    dx = np.zeros_like(x)
    da, _ = adjit.autodiff(Reverse, loss, Active(np.float32(1.5)), Duplicated(x, dx),
                           device="cuda")
    dx_cpu = np.zeros_like(x)
    da_cpu, _ = adjit.autodiff(Reverse, loss, Active(np.float32(1.5)), Duplicated(x, dx_cpu))
    want = float(np.sum(x.astype(np.float64) ** 2))
    assert float(da) == pytest.approx(want, rel=1e-6)
    assert float(da) == pytest.approx(float(da_cpu), rel=1e-6)
    np.testing.assert_allclose(dx, dx_cpu, rtol=1e-6)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not on PATH")
def test_the_summing_kernels_assemble_for_sm_90(tmp_path):
    from adjit.compiler.derivative import Derivative
    anns, types = annotations(np.ones(4, np.float32))
    _, program = Derivative(loss, Reverse, anns, types, None, None).host_program("t", "sm_90")
    by_name = {k.entry: k for k in program.kernels}
    assert {"__adj_item_sums_f32", "__adj_pairwise_f64"} <= set(by_name)
    for name in ("__adj_item_sums_f32", "__adj_pairwise_f64"):
        path = tmp_path / f"{name}.ptx"
        path.write_text(by_name[name].ptx)
        done = subprocess.run(["ptxas", "-arch=sm_90", str(path), "-o", "/dev/null"],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
