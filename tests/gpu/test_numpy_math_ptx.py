"""NumPy's element-wise functions of issue 33 in kernels, without a GPU: np.logaddexp,
np.logaddexp2 and the inverse hyperbolic functions by their NumPy names (np.arcsinh,
np.arccosh, np.arctanh) compile to PTX that ptxas accepts for sm_90, in f64 and f32, and
so do the kernels of their forward and reverse derivatives."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir", reason="compiling kernels needs MLIR")

import adjit                                                      # noqa: E402
from adjit import Const, Duplicated, Forward, Reverse            # noqa: E402
from adjit.core.types import ArrayType                            # noqa: E402
from adjit.api.cuda_launch import gpu_kernel                      # noqa: E402
from test_ptx import assemble                                     # noqa: E402


@adjit.kernel
def log_sums(x, y, out):
    i = adjit.index()
    out[i] = (np.logaddexp(x[i], y[i]) + np.logaddexp2(y[i], 0.5) + np.arcsinh(x[i])
              + np.arctanh(y[i] * 0.5) + np.arccosh(2.0 + x[i] * x[i]))


@pytest.mark.parametrize("dtype", [adjit.f64, adjit.f32])
def test_the_kernel_assembles(dtype, tmp_path):
    kernel = gpu_kernel(log_sums, [ArrayType(dtype, 1)] * 3, 1)
    assert ".entry" in kernel.ptx and ".extern" not in kernel.ptx
    assemble(kernel.ptx, tmp_path)


@pytest.mark.parametrize("mode", [Forward, Reverse], ids=["forward", "reverse"])
def test_its_derivative_kernels_assemble(mode, tmp_path):
    from adjit.compiler.derivative import Derivative
    x = np.linspace(-1.0, 1.0, 8)
    anns = [Duplicated(x, np.ones(8)), Const(x * 0.5), Duplicated(np.zeros(8), np.ones(8))]
    d = Derivative(log_sums, mode, anns, [ArrayType(adjit.f64, 1)] * 3, (8,), None)
    _, program = d.host_program("t", "sm_90")
    assert program.kernels
    for k in program.kernels:
        assert ".entry" in k.ptx and ".extern" not in k.ptx, k.entry
        assemble(k.ptx, tmp_path)
