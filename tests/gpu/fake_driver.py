"""A fake CUDA driver API for tests without a GPU: its "device memory" is host memory and its
kernels are Python functions that read the packed launch parameters, so the launch ABI
(parameter packing, grid, copies, error word) is checked in CI."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from adjit.runtime import cuda, cuda_driver


class FakeDriverAPI:
    class CUresult:
        CUDA_SUCCESS = 0

    def __init__(self, kernels):
        self.kernels = kernels          # entry name -> fn(api, params: list[int], grid, block)
        self.buffers: dict[int, np.ndarray] = {}      # device and managed memory
        self.host: dict[int, np.ndarray] = {}         # pinned host memory
        self.copies: list[tuple[int, int, int]] = []
        self.launches: list[tuple] = []
        self.loaded = 0

    def cuGetErrorName(self, err):
        return 0, b"CUDA_ERROR_FAKE"

    def cuMemAlloc(self, n):
        buf = np.zeros(n, np.uint8)
        self.buffers[buf.ctypes.data] = buf
        return 0, buf.ctypes.data

    def cuMemAllocManaged(self, n, flags):
        assert flags == 1          # CU_MEM_ATTACH_GLOBAL
        self.managed = getattr(self, "managed", 0) + 1
        return self.cuMemAlloc(n)

    def cuMemAllocHost(self, n):
        """Pinned host memory: a buffer of its own (`host`), counted in `host_allocs`."""
        buf = np.zeros(n, np.uint8)
        self.host[buf.ctypes.data] = buf
        self.host_allocs = getattr(self, "host_allocs", 0) + 1
        return 0, buf.ctypes.data

    def cuMemFreeHost(self, ptr):
        self.host.pop(int(ptr))
        return (0,)

    def cuMemcpy(self, dst, src, n):
        """Any memory to any (unified addressing): a memmove, recorded in `copies` as
        (dst, src, bytes)."""
        self.copies.append((int(dst), int(src), int(n)))
        ctypes.memmove(dst, src, n)
        return (0,)

    def cuMemFree(self, ptr):
        self.buffers.pop(int(ptr))
        return (0,)

    def cuMemcpyHtoD(self, dst, src, n):
        ctypes.memmove(dst, src, n)
        return (0,)

    cuMemcpyDtoH = cuMemcpyHtoD

    def cuMemsetD8(self, ptr, value, n):
        ctypes.memset(ptr, value, n)
        return (0,)

    def cuModuleLoadData(self, image):
        assert image.endswith(b"\0")
        self.loaded += 1
        return 0, "module"

    def cuModuleGetFunction(self, module, name):
        return 0, name.decode()

    def cuModuleGetGlobal(self, module, name):
        raise AssertionError("kernels take their launch's error cell as a parameter: no "
                             "module global is looked up")

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        assert (gy, gz, by, bz, shared, stream, extra) == (1, 1, 1, 1, 0, 0, 0)
        self.launches.append((f, gx, bx))
        self.kernels[f](self, params, gx, bx)
        return (0,)

    def cuStreamSynchronize(self, stream):
        return (0,)

    def cuCtxSynchronize(self):
        return (0,)

    def cuCtxSetCurrent(self, context):     # each new thread makes the context current
        return (0,)


def slots(params: int, n: int) -> list[int]:
    """The first 8 bytes behind each of the n kernel parameter pointers, as uint64."""
    pointers = (ctypes.c_void_p * n).from_address(params)
    return [ctypes.c_uint64.from_address(p).value for p in pointers]


def error_cell(params: int, nwords: int) -> np.ndarray:
    """The launch's error cell (int64[1]) of a kernel with checks: its hidden last parameter,
    a memref<1xi64> (allocated, aligned, offset, size, stride) after the kernel's `nwords`
    words (runtime/cuda.py)."""
    allocated, aligned, offset, size, stride = slots(params, nwords + 5)[nwords:]
    assert (allocated, offset, size, stride) == (aligned, 0, 1, 1)
    return device_view(aligned, 1, np.int64)


def as_f32(bits: int) -> float:
    return float(np.array([bits], np.uint64).view(np.float32)[0])


def device_view(address: int, n: int, dtype) -> np.ndarray:
    return np.frombuffer((ctypes.c_char * (n * np.dtype(dtype).itemsize)).from_address(address), dtype)


def saxpy(api, params, grid, block):
    """Stands in for a compiled saxpy(a: f32, x, y) over 1-D f32 arrays: y = a*x + y."""
    a, x_alloc, x, x_off, n_x, x_stride, y_alloc, y, y_off, n_y, y_stride, n = slots(params, 12)
    assert (x_alloc, y_alloc, x_off, y_off, x_stride, y_stride) == (x, y, 0, 0, 1, 1)
    assert grid * block >= n > (grid - 1) * block
    xs, ys = device_view(x, n_x, np.float32), device_view(y, n_y, np.float32)
    ys[:n] = as_f32(a) * xs[:n] + ys[:n]


def install(monkeypatch: pytest.MonkeyPatch, kernels: dict) -> FakeDriverAPI:
    """Makes `cuda` use a FakeDriverAPI running `kernels` (entry name -> Python function of
    (api, params, grid, block)) for the rest of the test."""
    api = FakeDriverAPI(kernels)
    monkeypatch.setattr(cuda_driver, "_driver", cuda_driver._Driver(api, 0, None))
    monkeypatch.setattr(cuda, "_loaded", {})
    monkeypatch.setattr(cuda_driver._current, "done", True, raising=False)
    return api
