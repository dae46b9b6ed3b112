"""Kernels that loop over tuples known while compiling (issue 33, item 4): a loop over
constants and one over a tuple of device functions, unrolled in the kernel, compile to PTX
that ptxas accepts for sm_90, and so do their forward and reverse derivative kernels."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir", reason="compiling kernels needs MLIR")

import adjit                                                      # noqa: E402
from adjit import Duplicated, Forward, Reverse                   # noqa: E402
from adjit.core.types import ArrayType                            # noqa: E402
from adjit.api.cuda_launch import gpu_kernel                 # noqa: E402
from test_ptx import assemble                                     # noqa: E402

COEFFS = (0.5, -1.0, 2.0)


@adjit.func
def soften(v):
    return v / (1.0 + v * v)


@adjit.func
def wave(v):
    return adjit.sin(v) * v


@adjit.kernel
def staged(x, y):
    i = adjit.index()
    s = 0.0
    for c in COEFFS:                      # Horner's rule, unrolled
        s = s * x[i] + c
    for k, f in enumerate((soften, wave)):
        s = s + (k + 1) * f(x[i])
    y[i] = s


TYPES = [ArrayType(adjit.f32, 1), ArrayType(adjit.f32, 1)]


def test_the_unrolled_kernel_assembles(tmp_path):
    kernel = gpu_kernel(staged, TYPES, 1)
    assemble(kernel.ptx, tmp_path)
    x, y = np.linspace(-1.0, 1.0, 5, dtype=np.float32), np.zeros(5, np.float32)
    staged(x, y, ndrange=5)                # and on the CPU it computes what it says
    want = (0.5 * x - 1.0) * x + 2.0 + x / (1 + x * x) + 2 * np.sin(x) * x
    np.testing.assert_allclose(y, want, rtol=1e-6)


@pytest.mark.parametrize("mode", [Forward, Reverse], ids=["forward", "reverse"])
def test_its_derivative_kernels_assemble(mode, tmp_path):
    from adjit.compiler.derivative import Derivative
    x = np.linspace(-1.0, 1.0, 5, dtype=np.float32)
    anns = [Duplicated(x, np.ones_like(x)), Duplicated(np.zeros_like(x), np.ones_like(x))]
    d = Derivative(staged, mode, anns, TYPES, (5,), None)
    _, program = d.host_program("t", "sm_90")
    assert program.kernels
    for k in program.kernels:
        assemble(k.ptx, tmp_path)
