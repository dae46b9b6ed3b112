"""Issue 29 item 10: the native fast path (runtime/native/dispatch.cpp) takes only the arrays
the Python path would take the same way. A byte-swapped array has the same dtype number as a
native one, so after a native-order call it went through the fast path and was read as
garbage; the Python path refuses it. Each case runs in both orders (the fast path primed by
a native-order call first, and the odd array first), and must give what the Python path
gives: NumPy's value, or the Python path's refusal."""
import numpy as np
import pytest

import adjit


@adjit.jit
def total(x):
    return np.sum(x * 1.0)


@adjit.kernel
def double_into(x, y):
    i = adjit.index()
    y[i] = x[i] * 2.0


@adjit.jit
def writes_first(x):
    x[0] = 5.0
    return x[1]


def swapped(a):
    return a.astype(a.dtype.newbyteorder(">" if a.dtype.byteorder in "=<" else "<"))


def misaligned(a):
    raw = np.zeros(a.nbytes + 1, np.uint8)
    out = raw[1:].view(a.dtype)
    out[:] = a
    assert not out.flags.aligned
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("native_first", [True, False])
def test_a_byte_swapped_argument_is_refused_in_either_order(dtype, native_first):
    x = np.arange(4.0, dtype=dtype)
    calls = [lambda: total(x), lambda: total(swapped(x))]
    for call in (calls if native_first else calls[::-1]) * 2:
        if call is calls[0]:
            assert call() == 6.0
        else:
            with pytest.raises(TypeError, match="argument 'x': dtype >f.* byte-swapped.*newbyteorder"):
                call()


@pytest.mark.parametrize("native_first", [True, False])
def test_a_byte_swapped_kernel_output_or_input_is_refused(native_first):
    x, y = np.arange(4.0), np.zeros(4)
    if native_first:
        double_into(x, y, ndrange=4)
        double_into(x, y, ndrange=4)       # (the second call takes the native path)
        np.testing.assert_array_equal(y, 2 * x)
    ys = swapped(np.zeros(4))
    with pytest.raises(TypeError, match="argument 'y': dtype >f8 is byte-swapped"):
        double_into(x, ys, ndrange=4)
    assert not ys.any()                    # nothing was written
    with pytest.raises(TypeError, match="argument 'x': dtype >f8 is byte-swapped"):
        double_into(swapped(x), y, ndrange=4)
    y2 = np.zeros(4)
    double_into(x, y2, ndrange=4)
    np.testing.assert_array_equal(y2, 2 * x)


def test_a_byte_swapped_written_argument_is_refused_and_left_unchanged():
    writes_first(np.arange(4.0))
    assert writes_first(np.arange(4.0)) == 1.0
    a = swapped(np.arange(4.0))
    with pytest.raises(TypeError, match="argument 'x': dtype >f8 is byte-swapped"):
        writes_first(a)
    np.testing.assert_array_equal(a, np.arange(4.0))


@pytest.mark.parametrize("native_first", [True, False])
def test_a_misaligned_array_gives_numpys_value_in_either_order(native_first):
    x = np.arange(6.0)
    odd = misaligned(x)
    for a in ([x, odd, x, odd] if native_first else [odd, x, odd, x]):
        got = total(a)
        assert got == np.sum(x) and got.dtype == np.float64
    y = misaligned(np.zeros(6))
    double_into(x, np.zeros(6), ndrange=6)
    double_into(x, y, ndrange=6)
    np.testing.assert_array_equal(y, 2 * x)


@pytest.mark.parametrize("native_first", [True, False])
def test_a_read_only_written_array_is_refused_in_either_order(native_first):
    ro = np.arange(4.0)
    ro.flags.writeable = False
    calls = [lambda: writes_first(np.arange(4.0)), lambda: writes_first(ro)]
    for call in (calls if native_first else calls[::-1]) * 2:
        if call is calls[0]:
            assert call() == 1.0
        else:
            with pytest.raises(ValueError, match="argument 'x' is written.*read-only"):
                call()
    np.testing.assert_array_equal(ro, np.arange(4.0))
    # a read-only array the function only reads is taken (on either path)
    assert total(ro) == 6.0
    assert total(ro) == 6.0
