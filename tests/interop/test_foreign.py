"""Other libraries' arrays where adjit takes NumPy's (runtime/foreign.py): views of their
memory, never copies; what cannot be viewed is a TypeError naming the argument."""
import numpy as np
import pytest
import torch

import adjit
from adjit.runtime.foreign import host_value, is_foreign


@adjit.kernel
def double(x, y):
    i = adjit.index()
    y[i] = 2.0 * x[i]


@adjit.jit
def total(x):
    return adjit.sum(x)


class ArrayInterfaceOnly:
    """An array known only by __array_interface__ (as older libraries export them)."""

    def __init__(self, a):
        self.a = a
        self.__array_interface__ = a.__array_interface__


class OnTheGpu:
    """A DLPack producer in CUDA memory (device type 2), as a CuPy or torch.cuda array is."""

    def __dlpack__(self, **kwargs):
        raise AssertionError("not to be exported on the CPU")

    def __dlpack_device__(self):
        return (2, 0)


def test_views_share_memory():
    t = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    assert host_value(t).ctypes.data == t.data_ptr()
    strided = host_value(t.T)                 # adjit's rule decides whether it is taken
    assert strided.ctypes.data == t.data_ptr() and strided.strides == (8, 24)
    plain = np.arange(4.0)
    wrapped = ArrayInterfaceOnly(plain)
    assert is_foreign(wrapped) and host_value(wrapped).ctypes.data == plain.ctypes.data
    for v in (plain, np.float32(1), 1.0, 3, True, None):
        assert not is_foreign(v) and host_value(v) is v


def test_launches_calls_and_derivatives_take_them():
    x, y = torch.arange(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    double(x, y, ndrange=4)
    assert torch.equal(y, 2 * x)
    a = np.arange(4.0)
    assert total(ArrayInterfaceOnly(a)) == 6.0
    dx = torch.zeros(4, dtype=torch.float64)                  # a tensor shadow receives it
    adjit.autodiff(adjit.Reverse, total, adjit.Duplicated(x, dx))
    assert torch.equal(dx, torch.ones(4, dtype=torch.float64))
    np.testing.assert_array_equal(adjit.grad(total)(x), np.ones(4))


def test_what_cannot_be_viewed_is_refused_naming_the_argument():
    with pytest.raises(TypeError, match=r"total\(\): argument 'x': a [\w.]*OnTheGpu in cuda "
                                        "memory cannot be an argument of CPU code"):
        total(OnTheGpu())
    with pytest.raises(TypeError, match="argument 'x': adjit cannot view this torch.Tensor "
                                        "through DLPack"):
        total(torch.zeros(3, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="argument 'x': dtype float16 is not supported"):
        total(torch.zeros(3, dtype=torch.float16))
