"""The CUDA launcher and DeviceArray without a GPU, behind the fake driver (fake_driver.py)."""
from __future__ import annotations

import gc

import numpy as np
import pytest

from adjit.runtime import cuda, cuda_driver, device_array
from adjit.runtime.device_array import DeviceArray, as_device_array, dlpack_capsule, dlpack_view
from adjit.core.kernel import GpuKernel, Param
from fake_driver import error_cell, install, saxpy


def fail_check(api, params, grid, block):
    """CHECKED's first check fails: 1 into its error cell (after a 2-D memref and 2 extents)."""
    api.error_word = error_cell(params, 9)
    api.error_word[0] = 1


SAXPY = GpuKernel(name="saxpy", entry="saxpy", ptx="// fake", chip="sm_90",
                  params=(Param("scalar", "f32"), Param("memref", "f32", 1), Param("memref", "f32", 1)),
                  ndim=1, written=(2,))
CHECKED = GpuKernel(name="checked", entry="fail_check", ptx="// fake 2", chip="sm_90",
                    params=(Param("memref", "i64", 2),), ndim=2,
                    checks=(("IndexError", "index 7 is out of bounds"),))


@pytest.fixture
def fake(monkeypatch):
    api = install(monkeypatch, {"saxpy": saxpy, "fail_check": fail_check})
    yield api
    gc.collect()


def test_numpy_arrays_are_copied_in_and_back(fake):
    x = np.arange(1000, dtype=np.float32)
    y = np.ones(1000, dtype=np.float32)
    cuda.launch(SAXPY, [2.0, x, y], 1000)
    np.testing.assert_array_equal(y, 2 * np.arange(1000) + 1)
    assert fake.launches == [("saxpy", 4, 256)]
    gc.collect()
    assert fake.buffers == {}                        # temporaries freed


def test_an_array_passed_twice_is_one_device_array(fake):
    x = np.arange(8, dtype=np.float32)
    cuda.launch(SAXPY, [2.0, x, x], 8)                # y = 2x + y with y the same array
    np.testing.assert_array_equal(x, 3 * np.arange(8))
    readonly = np.ones(8, np.float32)
    readonly.flags.writeable = False
    y = np.zeros(8, np.float32)
    cuda.launch(SAXPY, [1.0, readonly, y], 8)
    np.testing.assert_array_equal(y, 1)
    with pytest.raises(ValueError, match="argument 2 of kernel saxpy is written .* read-only"):
        cuda.launch(SAXPY, [1.0, y, readonly], 8)     # writes would be lost on the copy back
    cuda.synchronize()


def test_grid_follows_workgroupsize(fake):
    x, y = np.ones(1000, np.float32), np.zeros(1000, np.float32)
    cuda.launch(SAXPY, [1.0, x, y], (1000,), workgroupsize=(64,))
    cuda.launch(SAXPY, [1.0, x, y], 1000, workgroupsize=1024)
    assert [l[1:] for l in fake.launches] == [(16, 64), (1, 1024)]
    assert fake.loaded == 1                          # the module is loaded once
    np.testing.assert_array_equal(y, 2)


def test_device_arrays_stay_on_the_device(fake):
    x = DeviceArray.from_numpy(np.arange(10, dtype=np.float32))
    y = DeviceArray.zeros(10, np.float32)
    cuda.launch(SAXPY, [3, x, y], 10)
    cuda.launch(SAXPY, [3, x, y], 10)
    np.testing.assert_array_equal(y.numpy(), 6 * np.arange(10))
    out = np.empty((20,), np.float32)[::2]           # strided host destination
    np.testing.assert_array_equal(y.copy_to_host(out=out), 6 * np.arange(10))


def test_cuda_array_interface_input(fake):
    y = DeviceArray.zeros(10, np.float32)

    class Foreign:               # what CuPy or PyTorch would hand over
        __cuda_array_interface__ = y.__cuda_array_interface__

    x = DeviceArray.from_numpy(np.ones(10, np.float32))
    cuda.launch(SAXPY, [1.0, x, Foreign()], 10)
    np.testing.assert_array_equal(y.numpy(), 1)
    strided = dict(y.__cuda_array_interface__, shape=(5,), strides=(8,))
    with pytest.raises(ValueError, match="not C-contiguous"):
        as_device_array(type("S", (), {"__cuda_array_interface__": strided})())


def test_failed_check_raises_and_resets(fake):
    with pytest.raises(IndexError, match="index 7 is out of bounds"):
        cuda.launch(CHECKED, [np.zeros((2, 3), np.int64)], (2, 3))
    assert fake.error_word[0] == 0


def test_argument_errors(fake):
    x = np.zeros(10, np.float32)
    with pytest.raises(TypeError, match="argument 1 of kernel saxpy must be a 1-D float32 array"):
        cuda.launch(SAXPY, [1.0, x.astype(np.float64), x], 10)
    with pytest.raises(TypeError, match="must be a 1-D float32 array"):
        cuda.launch(SAXPY, [1.0, [1.0], x], 10)
    with pytest.raises(TypeError, match="must be a scalar"):
        cuda.launch(SAXPY, [x, x, x], 10)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        cuda.launch(SAXPY, [1.0, x], 10)
    with pytest.raises(ValueError, match="1-D"):
        cuda.launch(SAXPY, [1.0, x, x], (2, 5))
    with pytest.raises(ValueError, match="workgroupsize"):
        cuda.launch(SAXPY, [1.0, x, x], 10, workgroupsize=2048)
    cuda.launch(SAXPY, [1.0, x, x], 0)               # nothing to do
    assert fake.launches == []


def test_no_driver_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(cuda_driver, "_driver", None)
    monkeypatch.setattr(cuda_driver, "_driver_error", RuntimeError("no CUDA driver on this machine"))
    assert cuda.is_available() is False
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        cuda.launch(SAXPY, [1.0, np.zeros(4, np.float32), np.zeros(4, np.float32)], 4)
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        device_array.to_device(np.zeros(3))


def test_is_available_here_does_not_crash():
    assert cuda.is_available() in (True, False)


def test_dlpack_capsule_round_trip_through_numpy():
    # The capsule layout is the same for every device; NumPy can check it for host memory.
    a = np.arange(12, dtype=np.float32).reshape(3, 4)

    class Host:
        def __dlpack__(self, **kwargs):
            return dlpack_capsule(a.ctypes.data, a.shape, a.dtype, (device_array.KDL_CPU, 0), a)

        def __dlpack_device__(self):
            return device_array.KDL_CPU, 0

    b = np.from_dlpack(Host())
    assert np.shares_memory(a, b) and b.shape == (3, 4) and b.dtype == np.float32
    del b
    gc.collect()
    assert device_array._exported == {}
    ptr, shape, strides, dtype, owner = dlpack_view(a[:, ::2].__dlpack__())
    assert (ptr, shape, strides, dtype) == (a.ctypes.data, (3, 2), (16, 8), np.float32)
    assert dlpack_view(np.zeros(3, bool).__dlpack__())[3] == np.bool_


def test_device_arrays_are_counted_in_memory_stats(fake):
    before = cuda.accounting.in_use
    x = DeviceArray.zeros(1000, np.float32)
    borrowed = as_device_array(x)            # a view of x: not adjit's allocation
    assert cuda.accounting.in_use - before == 4000
    assert cuda.accounting.peak >= cuda.accounting.in_use
    del x, borrowed
    gc.collect()
    assert cuda.accounting.in_use == before


def test_a_launch_larger_than_an_array_its_items_index_is_refused(fake):
    bounded = GpuKernel(name="saxpy", entry="saxpy", ptx="// fake", chip="sm_90",
                        params=SAXPY.params, ndim=1, written=(2,),
                        ndrange_bounds=((2, 0, 0, "kernel saxpy: ndrange[0] is larger than "
                                                  "dimension 0 of argument 'y'"),))
    x, y = np.ones(10, np.float32), np.ones(10, np.float32)
    with pytest.raises(IndexError, match="ndrange\\[0\\] is larger"):
        cuda.launch(bounded, [2.0, x, y], 11)
    assert fake.launches == []
    cuda.launch(bounded, [2.0, x, y], 10)
    assert len(fake.launches) == 1
