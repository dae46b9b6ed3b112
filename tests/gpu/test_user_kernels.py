"""The user-path GPU cases (user_kernels.py): `import adjit`, decorated kernels launched with
device="cuda", derivatives included, against NumPy. On a GPU machine without MLIR the kernels
come from the cache that `scripts/gpu_check.sh compile` filled; elsewhere the same cases run
on the CPU, which checks their references."""
from __future__ import annotations

import numpy as np
import pytest

import adjit
from adjit.runtime import cuda
from user_kernels import CASES, saxpy

NEEDS_GPU = pytest.mark.skipif(not cuda.is_available(), reason="no CUDA GPU or driver here")


def check(name: str, device: str) -> None:
    case = CASES[name]
    args = case.inputs(np.random.default_rng(0))
    expected = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    want = case.reference(expected)
    got = case.run(args, device)
    if want is not None:
        np.testing.assert_allclose(got, want, rtol=max(case.rtol, 1e-5))
    for g, w in zip(args, expected):
        if isinstance(g, np.ndarray):
            np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol)


@NEEDS_GPU
@pytest.mark.parametrize("name", list(CASES))
def test_on_the_gpu(name):
    check(name, "cuda")


@pytest.mark.parametrize("name", list(CASES))
def test_on_the_cpu(name):
    pytest.importorskip("mlir", reason="compiling for the CPU needs MLIR")
    check(name, "cpu")


@NEEDS_GPU
def test_device_arrays_stay_on_the_device():
    x = adjit.to_device(np.arange(1000, dtype=np.float32))
    y = adjit.DeviceArray.zeros(1000, np.float32)
    for wgs in (None, 32, 1024):
        saxpy(1.5, x, y, ndrange=1000, workgroupsize=wgs, device="cuda")
    np.testing.assert_array_equal(y.numpy(), 4.5 * np.arange(1000))
