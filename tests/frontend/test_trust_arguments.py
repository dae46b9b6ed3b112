"""Scalar arguments for integer parameters (issue 29: nothing silently wrong): a float given
for a parameter annotated `int` or `adjit.i32` is refused, as NumPy's same-kind rule refuses
the cast, instead of being truncated to an index."""
import numpy as np
import pytest

import adjit


@adjit.jit
def pick(x, k: int):
    return x[k]


@adjit.jit
def pick32(x, k: adjit.i32):
    return x[k]


@adjit.kernel
def shift(x, y, k: int):
    i = adjit.index()
    y[i] = x[i] * k


@pytest.mark.parametrize("fn", [pick, pick32])
def test_integers_are_taken(fn):
    x = np.arange(5.0)
    assert fn(x, 2) == 2.0
    assert fn(x, np.int64(-1)) == 4.0
    assert fn(x, True) == 1.0        # a bool is an int, as operator.index says


@pytest.mark.parametrize("fn", [pick, pick32])
@pytest.mark.parametrize("bad", [2.7, 2.0, np.float64(2.5), np.float32(1.0)])
def test_a_float_for_an_integer_parameter_is_refused(fn, bad):
    x = np.arange(5.0)
    fn(x, 1)                          # the native fast path has a specialisation now
    with pytest.raises(TypeError, match=r"argument 'k' is annotated .* but got .*integer"):
        fn(x, bad)


def test_a_float_for_a_kernels_integer_parameter_is_refused():
    x = np.arange(4.0)
    y = np.zeros(4)
    shift(x, y, 3, ndrange=4)
    np.testing.assert_array_equal(y, x * 3)
    with pytest.raises(TypeError, match="argument 'k'"):
        shift(x, y, 3.5, ndrange=4)
