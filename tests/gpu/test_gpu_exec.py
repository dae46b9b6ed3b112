"""GPU execution: launch the test kernels and compare with NumPy. Skips without a GPU.

Imports no MLIR itself: on a GPU machine without a compiler, kernels come from the cache that
`scripts/gpu_check.sh compile` wrote (ADJIT_GPU_TEST_KERNELS); elsewhere a miss compiles.
"""
from __future__ import annotations

import numpy as np
import pytest

from adjit.runtime import cuda
from adjit.runtime.device_array import DeviceArray, to_device
from gpu_kernels import CASES, CHECK_MESSAGE, UNARY_MATH, get_kernel

pytestmark = pytest.mark.skipif(not cuda.is_available(), reason="no CUDA GPU or driver here")


def launch_case(name: str, rng_seed: int = 0):
    case = CASES[name]
    args, ndrange = case.inputs(np.random.default_rng(rng_seed))
    expected = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    case.reference(expected)
    cuda.launch(get_kernel(name), args, ndrange)
    return case, args, expected


@pytest.mark.parametrize("name", list(CASES))
def test_case_matches_numpy(name):
    case, args, expected = launch_case(name)
    for got, want in zip(args, expected):
        if isinstance(got, np.ndarray):
            np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol)


@pytest.mark.parametrize("dt", ["f32", "f64"])
@pytest.mark.parametrize("op", list(UNARY_MATH))
def test_math_special_values(op, dt):
    dtype = np.float32 if dt == "f32" else np.float64
    values = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30]
    if op not in ("sin", "cos", "tan"):      # their reduction is accurate to |x| ~ 1.6e6 only
        values.append(1e30)
    x = np.array(values, dtype=dtype)
    y = np.zeros_like(x)
    cuda.launch(get_kernel(f"math_{op}_{dt}"), [x, y], x.shape)
    ref = UNARY_MATH[op][0]
    with np.errstate(all="ignore"):
        expected = ref(x.astype(np.float64)).astype(dtype)
    np.testing.assert_allclose(y, expected, rtol=4e-6 if dt == "f32" else 1e-13)


@pytest.mark.parametrize("n", [1, 255, 256, 257, 100_003])
@pytest.mark.parametrize("wgs", [None, 1, 32, 1000, 1024])
def test_guard_with_any_block_size(n, wgs):
    x = to_device(np.arange(n, dtype=np.float32))
    y = DeviceArray.zeros(n + 1, np.float32)          # one element past ndrange stays untouched
    cuda.launch(get_kernel("saxpy_f32"), [2.0, x, DeviceArray(n, np.float32, ptr=y.ptr, owner=y)],
                n, workgroupsize=wgs)
    result = y.numpy()
    np.testing.assert_array_equal(result[:n], 2 * np.arange(n, dtype=np.float32))
    assert result[n] == 0


def test_device_arrays_stay_on_device():
    x = to_device(np.ones(1000, np.float32))
    y = DeviceArray.zeros(1000, np.float32)
    kernel = get_kernel("saxpy_f32")
    for _ in range(3):
        cuda.launch(kernel, [1.5, x, y], 1000)
    np.testing.assert_array_equal(y.numpy(), 4.5)


def test_device_array_round_trip():
    for a in [np.arange(24, dtype=np.float64).reshape(2, 3, 4), np.zeros(0, np.int32),
              np.array(3.5, np.float32), np.array([True, False])]:
        d = to_device(a)
        assert d.shape == a.shape and d.dtype == a.dtype
        np.testing.assert_array_equal(d.numpy(), a)


def test_failed_check_raises_then_recovers():
    kernel = get_kernel("gather_checked_f32")
    x = np.arange(100, dtype=np.float32)
    idx = np.arange(50)
    idx[17] = 1000
    with pytest.raises(IndexError, match=CHECK_MESSAGE):
        cuda.launch(kernel, [idx, x, np.zeros(50, np.float32)], 50)
    out = np.zeros(50, np.float32)
    cuda.launch(kernel, [np.arange(50), x, out], 50)
    np.testing.assert_array_equal(out, x[:50])


def test_cupy_arrays():
    cupy = pytest.importorskip("cupy")
    x = cupy.arange(1000, dtype=cupy.float32)
    y = cupy.ones(1000, dtype=cupy.float32)
    cuda.launch(get_kernel("saxpy_f32"), [2.0, x, y], 1000)
    np.testing.assert_array_equal(cupy.asnumpy(y), 2 * np.arange(1000) + 1)
    d = to_device(np.arange(5, dtype=np.float64))
    np.testing.assert_array_equal(cupy.asnumpy(cupy.asarray(d)), np.arange(5))


def test_torch_tensors_and_dlpack():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no GPU")
    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    y = torch.ones(1000, dtype=torch.float32, device="cuda")
    cuda.launch(get_kernel("saxpy_f32"), [2.0, x, y], 1000)
    np.testing.assert_array_equal(y.cpu().numpy(), 2 * np.arange(1000) + 1)
    d = to_device(np.arange(6, dtype=np.float32).reshape(2, 3))
    t = torch.from_dlpack(d)
    assert t.shape == (2, 3) and t.data_ptr() == d.ptr
    t += 1                                              # shared memory: visible in d
    torch.cuda.synchronize()
    np.testing.assert_array_equal(d.numpy(), np.arange(6).reshape(2, 3) + 1)
