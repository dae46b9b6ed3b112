"""Views and strided arrays on the GPU path, without a GPU: a kernel taking strided arrays
(a NumPy view's or a slice's layout: `memref<?x?xT, strided<[?, ?], offset: ?>>`) and
making row views of its own compiles to PTX that ptxas accepts for sm_90, and so do its
forward and reverse derivative kernels."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir", reason="compiling kernels needs MLIR")

import adjit                                                      # noqa: E402
from adjit import Active, Const, Duplicated, Forward, Reverse    # noqa: E402
from adjit.core.types import ArrayType                            # noqa: E402
from adjit.api.cuda_launch import gpu_kernel                 # noqa: E402
from test_ptx import assemble                                     # noqa: E402


@adjit.kernel
def scaled_row_sums(m, w, out, k: float):
    i = adjit.index()
    row = m[i]                        # a view of row i
    s = 0.0
    for j in range(row.shape[0]):
        s += adjit.sin(row[j]) * w[j]
    out[i] = k * s


def _types(scalar, strided: bool):
    return [ArrayType(scalar, 2, strided), ArrayType(scalar, 1, strided),
            ArrayType(scalar, 1), scalar]


@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
@pytest.mark.parametrize("scalar", [adjit.f32, adjit.f64], ids=["f32", "f64"])
def test_a_kernel_with_views_assembles(scalar, strided, tmp_path):
    kernel = gpu_kernel(scaled_row_sums, _types(scalar, strided), 1)
    assert ".extern" not in kernel.ptx and "__nv_" not in kernel.ptx
    assemble(kernel.ptx, tmp_path)


@pytest.mark.parametrize("mode", [Forward, Reverse], ids=["forward", "reverse"])
def test_its_derivative_kernels_assemble(mode, tmp_path):
    from adjit.compiler.derivative import Derivative
    m = np.ones((4, 6), np.float32)[:, ::-1]
    w = np.ones(12, np.float32)[::2]
    anns = [Duplicated(m, np.zeros_like(m)), Duplicated(w, np.zeros_like(w)),
            Duplicated(np.zeros(4, np.float32), np.ones(4, np.float32)),
            Active(np.float32(2.0)) if mode is Reverse else Const(np.float32(2.0))]
    d = Derivative(scaled_row_sums, mode, anns, _types(adjit.f32, True), (4,), None)
    _, program = d.host_program("t", "sm_90")
    assert program.kernels
    for k in program.kernels:
        assert ".entry" in k.ptx and ".extern" not in k.ptx and "__nv_" not in k.ptx, k.entry
        assemble(k.ptx, tmp_path)


def test_the_same_kernel_on_the_cpu_with_strided_arrays():
    rng = np.random.default_rng(3)
    m, w = rng.standard_normal((4, 12))[:, ::-2], rng.standard_normal(12)[::2]
    out = np.zeros(4)
    scaled_row_sums(m, w, out, 2.0, ndrange=4)
    np.testing.assert_allclose(out, 2.0 * (np.sin(m) @ w), rtol=1e-13)
    dm, dw = np.zeros_like(m), np.zeros_like(w)
    adjit.autodiff(Reverse, scaled_row_sums, Duplicated(m, dm), Duplicated(w, dw),
                   Duplicated(np.zeros(4), np.ones(4)), Const(2.0), ndrange=4)
    np.testing.assert_allclose(dm, 2.0 * np.cos(m) * w[None, :], rtol=1e-13)
    np.testing.assert_allclose(dw, 2.0 * np.sin(m).sum(axis=0), rtol=1e-13)
