"""On the GPU launch path (the fake driver running the host program's kernels compiled for the
CPU, cpu_device.py): a triangular loop's tape, whose per-item size is a sum over the outer
loop that the launch rule computes from the launch's arguments (core/tape_size.py), and an
integer counter that runs once per item (issue 8.9, 8.10)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import adjit
from adjit import Const, Duplicated, Reverse
from adjit.core.types import ArrayType, weak_i64
from fake_driver import install

pytest.importorskip("mlir", reason="compiling derivative kernels needs MLIR")
if shutil.which("cc") is None:
    pytest.skip("running kernels on the CPU needs a C compiler (cc)", allow_module_level=True)

F64_1D = ArrayType(adjit.f64, 1)


@adjit.kernel
def triangular(a, out, count, n: int):
    i = adjit.index()
    acc = 0.0
    for k in range(3):
        for k2 in range(k, n):
            acc = adjit.sin(acc + a[i * n + k2] * (k + 1))
    out[i] = acc
    adjit.atomic_add(count, 0, 1)


TYPES = [F64_1D, F64_1D, ArrayType(adjit.i32, 1), weak_i64]   # (a Python int)


def annotations():
    a, count = np.zeros(1), np.zeros(1, np.int32)
    return [Duplicated(a, a), Duplicated(a, a), Const(count), Const(1)]


@pytest.fixture
def fake(monkeypatch, tmp_path):
    from cpu_device import derivative_kernels_on_cpu
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    return install(monkeypatch, derivative_kernels_on_cpu(triangular, Reverse, annotations(),
                                                          TYPES, (1,)))


def run(device, n, m=7):
    a = np.random.default_rng(n).uniform(-1, 1, m * n)
    da, out, count = np.zeros_like(a), np.zeros(m), np.zeros(1, np.int32)
    adjit.autodiff(Reverse, triangular, Duplicated(a, da), Duplicated(out, np.ones(m)),
                   Const(count), n, ndrange=m, device=device)
    return da, out, count


@pytest.mark.parametrize("n", [5, 1])
def test_triangular_loop_and_counter_on_the_gpu_path(fake, n):
    sizes = []
    alloc = fake.cuMemAlloc
    fake.cuMemAlloc = lambda b: (sizes.append(b), alloc(b))[1]
    got = run("cuda", n)
    want = run("cpu", n)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    assert got[2][0] == 7
    # the tape: 7 items * sum over k < 3 of max(0, n - k) slots * 8 bytes
    assert 7 * sum(max(0, n - k) for k in range(3)) * 8 in sizes


def test_the_kernels_assemble_for_sm_90(tmp_path):
    # The host program's kernels (the aug's slot sums are scf.for loops) pass ptxas.
    import subprocess
    from adjit.compiler.derivative import Derivative
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        pytest.skip("ptxas is not on PATH")
    _, program = Derivative(triangular, Reverse, annotations(), TYPES, (1,),
                            None).host_program("t", "sm_90")
    assert {k.entry.rsplit("_", 1)[-1] for k in program.kernels} >= {"aug", "rev"}
    for k in program.kernels:
        path = tmp_path / f"{k.entry}.ptx"
        path.write_text(k.ptx)
        done = subprocess.run([ptxas, "-arch=sm_90", str(path), "-o", "/dev/null"],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
