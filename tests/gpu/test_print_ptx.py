"""`print` and `adjit.debug.print_adjoint` on the GPU path, without a GPU: a printing kernel
(f-string specs, a bool, a vector, a whole array, a device function that prints) compiles to
PTX that calls CUDA's vprintf and that ptxas accepts for sm_90, and so do its forward and
reverse derivative kernels (the reverse one prints the adjoints print_adjoint asks for)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir", reason="compiling kernels needs MLIR")

import adjit                                                      # noqa: E402
from adjit import Duplicated, Forward, Reverse                    # noqa: E402
from adjit.core.types import ArrayType                            # noqa: E402
from adjit.api.cuda_launch import gpu_kernel                      # noqa: E402
from test_ptx import assemble                                     # noqa: E402

F32 = ArrayType(adjit.f32, 1)


@adjit.func
def squared(v):
    print("squared", v, v > 0.5)
    return v * v


@adjit.kernel
def printing(x: adjit.Array[adjit.f32, 1], y: adjit.Array[adjit.f32, 1]):
    i = adjit.index()
    print(f"item {i:4d}: {x[i]:.3f} {x[i]:e}", adjit.vec3(x[i], 1.0, 2.0))
    if i == 0:
        print(x)
    y[i] = adjit.debug.print_adjoint(squared(x[i]), label="y")


def _calls_vprintf(ptx: str) -> bool:
    return ".extern .func  (.param .b32 func_retval0) vprintf" in ptx and "vprintf," in ptx


def test_a_printing_kernel_calls_vprintf_and_assembles(tmp_path):
    kernel = gpu_kernel(printing, [F32, F32], 1)
    assert _calls_vprintf(kernel.ptx)
    assert "__nv_" not in kernel.ptx
    assemble(kernel.ptx, tmp_path)


@pytest.mark.parametrize("mode", [Forward, Reverse], ids=["forward", "reverse"])
def test_its_derivative_kernels_assemble(mode, tmp_path):
    from adjit.compiler.derivative import Derivative
    x = np.linspace(0.0, 1.0, 3).astype(np.float32)
    anns = [Duplicated(x, np.ones_like(x)), Duplicated(np.zeros_like(x), np.ones_like(x))]
    d = Derivative(printing, mode, anns, [F32, F32], (3,), None)
    _, program = d.host_program("t", "sm_90")
    assert program.kernels
    for k in program.kernels:
        # every kernel prints: the primal's lines, or (reverse) print_adjoint's
        assert _calls_vprintf(k.ptx), k.entry
        assemble(k.ptx, tmp_path)


@adjit.kernel
def scale(x, a: float):
    i = adjit.index()
    print("item", i, x[i])
    x[i] = a * x[i]


@adjit.jit
def host(x, a: float):
    print("host", a, x.shape[0])
    scale(x, a, ndrange=x.shape[0])
    return x


def test_a_device_cuda_function_prints_with_printf_on_the_host_and_vprintf_in_kernels():
    lowered = host.lower(np.ones(4, np.float32), 2.0, device="cuda")
    llvm, ptx = lowered.llvm(), lowered.ptx()
    assert "@printf(ptr @adj_print_str" in llvm and "@fflush(ptr null)" in llvm
    assert "vprintf" not in llvm
    assert _calls_vprintf(ptx)
