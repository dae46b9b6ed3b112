"""Batched tangents (BatchDuplicated, width N) on the GPU path, without a GPU: the forward
derivative kernels carry N scalar tangents per float and N shadows per array; they go through
the GPU pipeline (passes/pipeline.py, _TO_NVVM) to PTX that ptxas accepts for sm_90 and that
calls nothing (no libdevice). Covered: a kernel's own launch derivative (a float scalar
parameter and arrays BatchDuplicated, sin/exp/division/pow in a loop; a second kernel with a
local array, max, abs and an atomic_add), an @adjit.jit function launching a kernel
(the host program's derivative kernels), and batched derivatives called inside a kernel
(autodiff with BatchDuplicated, jvp(width=3), hvp(width=2)). Where a C compiler is present,
the host programs run behind the fake driver (fake_driver.py; kernels compiled for the CPU
from the same module: cpu_device.py) and give the CPU's tangents, which match N width-1
passes and central differences; on a GPU machine the same calls run on the GPU."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import adjit
from adjit import BatchDuplicated, Const, Duplicated, Forward
from adjit.core.types import ArrayType, weak_f64, weak_i64

pytest.importorskip("mlir", reason="compiling derivative kernels needs MLIR")
from test_ptx import assemble                                      # noqa: E402

WIDTH = 4
DTYPES = {"f32": (np.float32, adjit.f32), "f64": (np.float64, adjit.f64)}


@adjit.kernel
def damped(a, x, y):
    """Each item iterates a damped map with the scalar parameter `a`."""
    i = adjit.index()
    s = x[i]
    for _ in range(4):
        s = adjit.sin(s) * a + adjit.exp(-s * s) / (1.0 + a * a)
    y[i] = s + adjit.pow(1.5 + adjit.cos(s), a)


def damped_numpy(a, x):
    s = x.copy()
    for _ in range(4):
        s = np.sin(s) * a + np.exp(-s * s) / (1.0 + a * a)
    return s + (1.5 + np.cos(s)) ** a


@adjit.kernel
def scratch(a, x, y, acc):
    """A local array (per-thread memory), max, abs, a branch and an atomic_add."""
    i = adjit.index()
    w = adjit.zeros(3)
    s = x[i]
    for k in range(4):
        w[k % 3] = w[k % 3] + adjit.exp(-s * s) * a
        s = max(adjit.sin(s) * a + adjit.tanh(s) ** 2, -10.0)
        if s > 0.5:
            s = s / (1.0 + adjit.abs(s))
    y[i] = s + w[0] * w[1] - w[2] ** 3 + adjit.sqrt(1.0 + s * s)
    adjit.atomic_add(acc, 0, y[i])


KERNELS = {"damped": (damped, 1), "scratch": (scratch, 2)}     # kernel, output arrays


def kernel_annotations(name: str, dtype, n: int, width: int = WIDTH, seed: int = 0):
    """The kernel's arguments, every one BatchDuplicated: `a` with `width` float tangents, x
    with `width` random tangent arrays, the outputs with `width` zeroed shadows."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, n).astype(dtype)
    a = dtype(0.7)
    da = tuple(dtype(v) for v in rng.standard_normal(width))
    dx = tuple(rng.standard_normal(n).astype(dtype) for _ in range(width))
    outs = [BatchDuplicated(np.zeros(m, dtype), tuple(np.zeros(m, dtype) for _ in range(width)))
            for m in ([n] if KERNELS[name][1] == 1 else [n, 1])]
    return [BatchDuplicated(a, da), BatchDuplicated(x, dx), *outs]


def kernel_types(name: str, scalar):
    return [scalar] + [ArrayType(scalar, 1)] * (1 + KERNELS[name][1])


def derivative(f, anns, types, ndrange):
    from adjit.compiler.derivative import Derivative
    return Derivative(f, Forward, anns, types, ndrange, None)


def assemble_all(kernels, tmp_path) -> None:
    for k in kernels:
        assert ".entry" in k.ptx and ".extern" not in k.ptx and "__nv_" not in k.ptx, k.entry
        assemble(k.ptx, tmp_path)


# ---- a kernel's launch derivative --------------------------------------------------------
@pytest.mark.parametrize("width", [WIDTH, 3], ids=["w4", "w3"])
@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("name", list(KERNELS))
def test_batched_launch_derivative_assembles(name, dt, width, tmp_path):
    dtype, scalar = DTYPES[dt]
    d = derivative(KERNELS[name][0], kernel_annotations(name, dtype, 8, width),
                   kernel_types(name, scalar), (8,))
    # The forward kernel is the batched one (its name says the width): N tangents, N shadows.
    _, program = d.host_program("t", "sm_90")
    entries = [k.entry for k in program.kernels]
    assert any(e.endswith(f"_w{width}") for e in entries), entries
    assemble_all(program.kernels, tmp_path)


def run_kernel_forward(f, anns, n, device="cpu"):
    adjit.autodiff(Forward, f, *anns, ndrange=n, device=device)
    return [np.array(t) for t in anns[2].dval]


@pytest.mark.parametrize("name", list(KERNELS))
def test_batched_kernel_on_the_cpu_matches_width_one_passes(name):
    """What the PTX computes, on the CPU: one batched pass gives the N width-1 passes'
    tangents."""
    f, n = KERNELS[name][0], 33
    anns = kernel_annotations(name, np.float64, n)
    batched = run_kernel_forward(f, anns, n)
    for lane in range(WIDTH):
        single = [Duplicated(a.val if np.isscalar(a.val) else a.val.copy(),
                             a.dval[lane] if np.isscalar(a.val) else
                             (a.dval[lane].copy() if k < 2 else np.zeros_like(a.val)))
                  for k, a in enumerate(anns)]
        adjit.autodiff(Forward, f, *single, ndrange=n)
        np.testing.assert_allclose(batched[lane], single[2].dval, rtol=1e-13, atol=1e-15)


def test_batched_kernel_matches_central_differences():
    n, h = 17, 1e-6
    anns = kernel_annotations("damped", np.float64, n)
    batched = run_kernel_forward(damped, anns, n)
    a, x = anns[0].val, anns[1].val
    for lane in range(WIDTH):
        da, dx = anns[0].dval[lane], anns[1].dval[lane]
        fd = (damped_numpy(a + h * da, x + h * dx) - damped_numpy(a - h * da, x - h * dx)) / (2 * h)
        np.testing.assert_allclose(batched[lane], fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("dt", list(DTYPES))
def test_batched_kernel_through_the_fake_driver(dt, monkeypatch, tmp_path):
    """autodiff(Forward, kernel, BatchDuplicated..., device="cuda"): the host program packs
    the N tangents of `a` and the N shadows of each array into the launch words; its kernel,
    compiled for the CPU, gives the CPU's tangents."""
    if shutil.which("cc") is None:
        pytest.skip("running kernels on the CPU needs a C compiler (cc)")
    from cpu_device import kernels_on_cpu
    from fake_driver import install
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    dtype, scalar = DTYPES[dt]
    n = 40
    d = derivative(damped, kernel_annotations("damped", dtype, n), kernel_types("damped", scalar),
                   (n,))
    fake = install(monkeypatch, kernels_on_cpu(d.adj_text))
    on_gpu = run_kernel_forward(damped, kernel_annotations("damped", dtype, n), n, "cuda")
    on_cpu = run_kernel_forward(damped, kernel_annotations("damped", dtype, n), n)
    assert [e for e, _, _ in fake.launches] and all(e.endswith(f"_w{WIDTH}")
                                                    for e, _, _ in fake.launches)
    for g, c in zip(on_gpu, on_cpu):
        np.testing.assert_allclose(g, c, rtol=1e-5 if dt == "f32" else 1e-13)
    assert all(np.any(g != 0) for g in on_gpu)


# ---- an @adjit.jit function launching a kernel -------------------------------------------
@adjit.kernel
def relax(u, v, w):
    i = adjit.index()
    n = u.shape[0]
    if 0 < i < n - 1:
        v[i] = (1.0 - w) * u[i] + 0.5 * w * adjit.sin(u[i - 1] + u[i + 1])
    else:
        v[i] = u[i]


@adjit.jit
def relaxed_energy(u0, steps: int, w):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(steps):
        relax(u, v, w, ndrange=u.shape[0])
        u, v = v, u
    return adjit.sum(u * u)


def relaxed_energy_numpy(u0, steps, w):
    u = u0.copy()
    for _ in range(steps):
        v = u.copy()
        v[1:-1] = (1 - w) * u[1:-1] + 0.5 * w * np.sin(u[:-2] + u[2:])
        u = v
    return np.sum(u * u)


JIT_TYPES = [ArrayType(adjit.f64, 1), weak_i64, weak_f64]   # (Python scalars)


def jit_annotations(n: int, steps: int = 3, seed: int = 1):
    """Four directions: three unit vectors of u0 (columns of the Jacobian) and w alone."""
    rng = np.random.default_rng(seed)
    u0 = rng.uniform(0.0, 1.0, n)
    du = tuple(np.eye(n)[j] for j in (1, n // 2, n - 2)) + (np.zeros(n),)
    return [BatchDuplicated(u0, du), Const(steps), BatchDuplicated(0.3, (0.0, 0.0, 0.0, 1.0))]


def test_batched_jit_function_kernels_assemble(tmp_path):
    d = derivative(relaxed_energy, jit_annotations(16), JIT_TYPES, None)
    _, program = d.host_program("t", "sm_90")
    assert any(k.entry.endswith(f"_w{WIDTH}") for k in program.kernels)
    assemble_all(program.kernels, tmp_path)


def test_batched_jit_function_through_the_fake_driver(monkeypatch, tmp_path):
    if shutil.which("cc") is None:
        pytest.skip("building host programs needs a C compiler (cc)")
    from cpu_device import kernels_on_cpu
    from fake_driver import install
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    n, steps = 24, 3
    anns = jit_annotations(n, steps)
    install(monkeypatch, kernels_on_cpu(derivative(relaxed_energy, anns, JIT_TYPES, None).adj_text))
    on_gpu = adjit.autodiff(Forward, relaxed_energy, *jit_annotations(n, steps), device="cuda")
    on_cpu = adjit.autodiff(Forward, relaxed_energy, *jit_annotations(n, steps))
    assert isinstance(on_gpu, tuple) and len(on_gpu) == WIDTH
    np.testing.assert_allclose(on_gpu, on_cpu, rtol=1e-12)
    u0, w, h = anns[0].val, anns[2].val, 1e-6
    for lane in range(WIDTH):
        du, dw = anns[0].dval[lane], anns[2].dval[lane]
        fd = (relaxed_energy_numpy(u0 + h * du, steps, w + h * dw)
              - relaxed_energy_numpy(u0 - h * du, steps, w - h * dw)) / (2 * h)
        assert on_gpu[lane] == pytest.approx(fd, rel=1e-6, abs=1e-9)


# ---- batched derivatives called inside a kernel ------------------------------------------
@adjit.func
def potential(x, k):
    return k * x * x * x * x + adjit.sin(x) * adjit.exp(-k * x)


@adjit.kernel
def directions(x, k, out):
    i = adjit.index()
    t = adjit.autodiff(adjit.Forward, potential, adjit.BatchDuplicated(x[i], (1.0, 0.0, 2.0, 0.5)),
                       adjit.BatchDuplicated(k, (0.0, 1.0, 0.0, -1.0)))
    _, u = adjit.jvp(potential, (x[i], k), ((1.0, 0.0, 3.0), (0.0, 1.0, 1.0)), width=3)
    h = adjit.hvp(potential, (x[i], k), ((1.0, 0.0), (0.0, 1.0)), width=2)
    out[i] = t[0] + 2.0 * t[1] + t[2] * t[3] + u[0] + u[1] * u[2] + h[0][0] + h[1][1]


def directions_numpy(x, k):
    e = np.exp(-k * x)
    px = 4 * k * x ** 3 + (np.cos(x) - k * np.sin(x)) * e            # d/dx
    pk = x ** 4 - x * np.sin(x) * e                                     # d/dk
    pxx = 12 * k * x ** 2 + (-np.sin(x) - 2 * k * np.cos(x) + k * k * np.sin(x)) * e
    pkk = x * x * np.sin(x) * e
    t = [px, pk, 2 * px, 0.5 * px - pk]
    u = [px, pk, 3 * px + pk]
    return t[0] + 2 * t[1] + t[2] * t[3] + u[0] + u[1] * u[2] + pxx + pkk


@pytest.mark.parametrize("dt", list(DTYPES))
def test_a_kernel_calling_batched_derivatives_assembles(dt, tmp_path):
    dtype = DTYPES[dt][0]
    x = np.linspace(-1, 1, 9).astype(dtype)
    lowered = directions.lower(x, dtype(0.5), x, ndrange=9, device="cuda")
    assert "_w4" in lowered.adj() and "_w3" in lowered.adj() and "_w2" in lowered.adj()
    assemble_all([type("K", (), {"entry": "directions", "ptx": lowered.ptx()})], tmp_path)


def test_the_same_kernel_on_the_cpu():
    # (Not at x = 0: there the hvp's second derivative of sin(x) * exp(-k x) misses a term,
    # width 1 as well, from the strong-zero guard of sin's reverse rule, whose seed x * ...
    # is 0 there while its tangent is not.)
    x = np.linspace(-1, 1, 10)
    out = np.zeros(10)
    directions(x, 0.5, out, ndrange=10)
    np.testing.assert_allclose(out, directions_numpy(x, 0.5), rtol=1e-12, atol=1e-14)


# ---- on a GPU ----------------------------------------------------------------------------
def test_batched_forward_on_a_gpu(monkeypatch, tmp_path):
    from adjit.runtime import cuda
    if not cuda.is_available():
        pytest.skip("no CUDA GPU or driver here (the PTX checks above ran without one)")
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    n = 1000
    on_gpu = run_kernel_forward(damped, kernel_annotations("damped", np.float64, n), n, "cuda")
    on_cpu = run_kernel_forward(damped, kernel_annotations("damped", np.float64, n), n)
    for g, c in zip(on_gpu, on_cpu):
        np.testing.assert_allclose(g, c, rtol=1e-12, atol=1e-14)
    t_gpu = adjit.autodiff(Forward, relaxed_energy, *jit_annotations(64), device="cuda")
    t_cpu = adjit.autodiff(Forward, relaxed_energy, *jit_annotations(64))
    np.testing.assert_allclose(t_gpu, t_cpu, rtol=1e-12)
