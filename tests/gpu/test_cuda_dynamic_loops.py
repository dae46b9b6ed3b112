"""Reverse mode of a kernel whose loops run a different number of times per work item, on the
GPU (issue 10.5), without a GPU. Through a host program (of an @adjit.jit(device="cuda")
function, or of a kernel's own launch), the launch rule's counting kernel, offsets kernels
(the exclusive scan, on the device) and augmented and reverse kernels run behind the fake
driver (cpu_device.py) and agree with the CPU; their PTX passes ptxas."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import adjit
from adjit import CompilationError, Const, Duplicated, Reverse
from adjit.core.types import ArrayType
from fake_driver import install

pytest.importorskip("mlir", reason="compiling derivative kernels needs MLIR")

F64_1D = ArrayType(adjit.f64, 1)
I64_1D = ArrayType(adjit.i64, 1)


@adjit.kernel
def squarings(n, x, out):
    i = adjit.index()
    s = x[i]
    for _ in range(n[i]):            # per item: a packed tape sized by a counting pass
        s = s * s * 0.5 + 0.25
    out[i] = s


@adjit.kernel
def scratch_steps(n, x, out):
    i = adjit.index()
    w = adjit.zeros(3)            # a local array: local memory of the GPU thread
    for k in range(n[i]):
        w[k % 3] = w[k % 3] * x[i] + 1.0
    out[i] = w[0] + w[1] * w[2]


@adjit.jit
def loss(n, x):
    out, out2 = adjit.empty_like(x), adjit.empty_like(x)
    squarings(n, x, out, ndrange=x.shape[0])
    scratch_steps(n, x, out2, ndrange=x.shape[0])
    return adjit.sum(out * out) + adjit.sum(out2)


def annotations(n, x, dx):
    return [Const(n), Duplicated(x, dx)], [I64_1D, F64_1D]


def test_jit_on_the_gpu_sizes_per_item_tapes_on_the_device(monkeypatch, tmp_path):
    if shutil.which("cc") is None:
        pytest.skip("running kernels on the CPU needs a C compiler (cc)")
    from cpu_device import kernels_on_cpu
    from adjit.compiler.derivative import Derivative
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    n, x = rng.integers(0, 6, 40), rng.uniform(-1, 1, 40)
    anns, types = annotations(n, x, np.zeros(40))
    d = Derivative(loss, Reverse, anns, types, None, None)
    assert "__adj_tape_chunk_offsets" in d.adj_text
    install(monkeypatch, kernels_on_cpu(d.adj_text))
    dx = np.zeros(40)
    adjit.autodiff(Reverse, loss, Const(n), Duplicated(x.copy(), dx), device="cuda")
    dx_cpu = np.zeros(40)
    adjit.autodiff(Reverse, loss, Const(n), Duplicated(x.copy(), dx_cpu))
    np.testing.assert_allclose(dx, dx_cpu, rtol=1e-13)
    assert np.any(dx != 0)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not on PATH")
def test_the_host_programs_kernels_assemble_for_sm_90(tmp_path):
    from adjit.compiler.derivative import Derivative
    n, x = np.array([1, 2]), np.ones(2)
    anns, types = annotations(n, x, np.zeros(2))
    _, program = Derivative(loss, Reverse, anns, types, None, None).host_program("t", "sm_90")
    entries = {k.entry for k in program.kernels}
    assert any(e.endswith("_count") for e in entries)
    assert {"__adj_tape_chunk_sums", "__adj_tape_scan_chunks", "__adj_tape_chunk_offsets"} <= entries
    assemble(program.kernels, tmp_path)


def assemble(kernels, tmp_path) -> None:
    for k in kernels:
        path = tmp_path / f"{k.entry}.ptx"
        path.write_text(k.ptx)
        done = subprocess.run(["ptxas", "-arch=sm_90", str(path), "-o", "/dev/null"],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def test_a_kernels_own_gpu_derivative_sizes_per_item_tapes_on_the_device(monkeypatch,
                                                                          tmp_path):
    """autodiff(Reverse, squarings, ..., device="cuda"): once refused (Python sized the tapes
    in advance), now the launch rule's, as for a @jit function: its kernels pass ptxas, and
    run on the CPU behind the fake driver they give the CPU's gradient."""
    if shutil.which("cc") is None:
        pytest.skip("building host programs needs a C compiler (cc)")
    from cpu_device import kernels_on_cpu
    from adjit.compiler.derivative import Derivative
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(2)
    n, x, seed = rng.integers(0, 6, 40), rng.uniform(-1, 1, 40), rng.uniform(-1, 1, 40)
    anns = [Const(n), Duplicated(x, np.zeros(40)), Duplicated(np.zeros(40), seed)]
    d = Derivative(squarings, Reverse, anns, [I64_1D, F64_1D, F64_1D], (40,), None)
    if shutil.which("ptxas") is not None:
        _, program = d.host_program("t", "sm_90")
        assert any(k.entry.endswith("_count") for k in program.kernels)
        assemble(program.kernels, tmp_path)
    fake = install(monkeypatch, kernels_on_cpu(d.adj_text))

    def gradient(device):
        dx, out = np.zeros(40), np.zeros(40)
        adjit.autodiff(Reverse, squarings, Const(n), Duplicated(x.copy(), dx),
                       Duplicated(out, seed.copy()), ndrange=40, device=device)
        return dx, out

    (dx, out), (dx_cpu, out_cpu) = gradient("cuda"), gradient("cpu")
    np.testing.assert_allclose(out, out_cpu, rtol=1e-15)
    np.testing.assert_allclose(dx, dx_cpu, rtol=1e-13)
    assert np.any(dx != 0)
    launched = [entry for entry, _, _ in fake.launches]
    assert launched[0].endswith("_count") and launched[-1].endswith("_rev")
    h = 1e-6                               # against central differences of the primal

    def squarings_np(x):
        s = x.copy()
        for i in range(40):
            for _ in range(n[i]):
                s[i] = s[i] * s[i] * 0.5 + 0.25
        return s

    fd = (squarings_np(x + h) - squarings_np(x - h)) / (2 * h) * seed
    np.testing.assert_allclose(dx, fd, rtol=1e-6, atol=1e-9)
