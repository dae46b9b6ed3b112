"""Reverse mode of a kernel launch on the GPU whose loops run `steps` times, a kernel argument,
without a GPU: the host program's kernels run on the CPU behind the fake driver
(cpu_device.py). A launch's derivative, as an `@adjit.jit(device="cuda")` function's, sizes
its tapes in the host program, through the launch rule, from the launch's arguments."""
from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import adjit
from adjit import Active, Const, Duplicated, Reverse
from adjit.core.types import ArrayType, weak_f64, weak_i64
from fake_driver import install
from user_kernels import integrate

pytest.importorskip("mlir", reason="compiling derivative kernels needs MLIR")
if shutil.which("cc") is None:
    pytest.skip("running kernels on the CPU needs a C compiler (cc)", allow_module_level=True)

F32_1D = ArrayType(adjit.f32, 1)
TYPES = [F32_1D, F32_1D, weak_i64, adjit.f32]   # (steps: a Python int)


@adjit.jit
def integrate_all(x, v, steps, dt):
    integrate(x, v, steps, dt, ndrange=x.shape[0])
    return adjit.sum(x * x) + adjit.sum(v)


def annotations():
    z = np.zeros(1, np.float32)
    return [Duplicated(z, z), Duplicated(z, z), Const(1), Active(np.float32(0))]


def launch_derivative():
    """The module of integrate's launch derivative, which the host program is compiled from."""
    from adjit.compiler.derivative import Derivative
    return Derivative(integrate, Reverse, annotations(), TYPES, (1,), None)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    from cpu_device import kernels_on_cpu
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    return install(monkeypatch, kernels_on_cpu(launch_derivative().adj_text))


def reverse(steps, device, n=33):
    rng = np.random.default_rng(0)
    x, v, dx, dv = (rng.uniform(-1, 1, n).astype(np.float32) for _ in range(4))
    ddt = adjit.autodiff(Reverse, integrate, Duplicated(x, dx), Duplicated(v, dv), Const(steps),
                         Active(np.float32(0.01)), ndrange=n, device=device)[3]
    return x, v, dx, dv, ddt


def test_the_tape_size_is_an_expression_of_the_arguments():
    # the augmented and reverse kernels' tape: 2 slots per step, steps being argument 2
    assert re.findall(r'per_item = "([^"]*)"', launch_derivative().adj_text) == \
        ["(muli 2 (trip 0 (arg 2) 1))"] * 2


@pytest.mark.parametrize("steps", [25, 1, 0])
def test_reverse_launch_sizes_its_tapes_from_steps(fake, steps):
    sizes = []
    alloc = fake.cuMemAlloc
    fake.cuMemAlloc = lambda n: (sizes.append(n), alloc(n))[1]
    got = reverse(steps, "cuda")
    want = reverse(steps, "cpu")
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    # the tape: items * steps * 2 slots * 4 bytes (none to allocate for no steps)
    assert steps == 0 or 33 * steps * 2 * 4 in sizes


def test_jit_on_the_gpu_sizes_tapes_through_the_launch_rule(monkeypatch, tmp_path):
    from cpu_device import kernels_on_cpu as on_cpu
    from adjit.compiler.derivative import Derivative
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(1)
    x, v = (rng.uniform(-1, 1, 20) for _ in range(2))
    anns = [Duplicated(x, np.zeros(20)), Duplicated(v, np.zeros(20)), Const(30), Active(0.02)]
    types = [ArrayType(adjit.f64, 1)] * 2 + [weak_i64, weak_f64]   # (Python scalars)
    install(monkeypatch, on_cpu(Derivative(integrate_all, Reverse, anns, types, None,
                                           None).adj_text))
    dx, dv = np.zeros(20), np.zeros(20)
    got = adjit.autodiff(Reverse, integrate_all, Duplicated(x.copy(), dx),
                         Duplicated(v.copy(), dv), Const(30), Active(0.02), device="cuda")
    dx_cpu, dv_cpu = np.zeros(20), np.zeros(20)
    want = adjit.autodiff(Reverse, integrate_all, Duplicated(x.copy(), dx_cpu),
                          Duplicated(v.copy(), dv_cpu), Const(30), Active(0.02))
    np.testing.assert_allclose(dx, dx_cpu, rtol=1e-12)
    np.testing.assert_allclose(dv, dv_cpu, rtol=1e-12)
    np.testing.assert_allclose(got[3], want[3], rtol=1e-12)
