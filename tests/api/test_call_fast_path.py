"""A call whose argument signature (dtypes, ranks, Python types) ran before goes straight to
its compiled specialisation (lang/functions.py _fast_path): the arguments are converted
by it and, where it refuses one, the full path runs and gives the usual message before
anything has run. Each message below is the one a first call gives."""
import numpy as np
import pytest

import adjit


@adjit.kernel
def saxpy(a: adjit.f32, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


@adjit.jit
def scaled_sum(x, k: adjit.i32):
    return adjit.sum(x) * k


def first_message(fn, *args, **kwargs):
    # a new decorated object of the same function: no call has run through it yet
    fresh = adjit.jit(fn.pyfn) if isinstance(fn, type(scaled_sum)) else adjit.kernel(fn.pyfn)
    with pytest.raises(Exception) as info:
        fresh(*args, **kwargs)
    return type(info.value), str(info.value)


def test_repeated_calls_take_the_fast_path_and_stay_right():
    x, y = np.ones(16, np.float32), np.zeros(16, np.float32)
    for k in range(3):
        saxpy(np.float32(2.0), x, y, ndrange=16)
    np.testing.assert_array_equal(y, np.full(16, 6.0, np.float32))
    assert saxpy._fast                        # the signature was recorded
    assert scaled_sum(np.arange(4.0), 3) == 18.0
    assert scaled_sum(np.arange(4.0), 2) == 12.0


def test_a_strided_view_after_a_fast_call_takes_its_own_specialisation():
    x, y = np.ones(16, np.float32), np.zeros(16, np.float32)
    saxpy(np.float32(1.0), x, y, ndrange=16)           # records the signature
    strided = np.arange(32, dtype=np.float32)[::2]
    saxpy(np.float32(2.0), strided, y, ndrange=16)
    np.testing.assert_array_equal(y, 1.0 + 2.0 * strided)
    saxpy(np.float32(1.0), x, y, ndrange=16)           # and the contiguous one still runs
    np.testing.assert_array_equal(y, 2.0 + 2.0 * strided)


@pytest.mark.parametrize("args, kwargs", [
    # a read-only array where the kernel writes
    ((np.float32(1.0), np.ones(16, np.float32),
      np.frombuffer(np.zeros(16, np.float32).tobytes(), np.float32)), {"ndrange": 16}),
    # a value that is no real number for the f32 annotation
    ((None, np.ones(16, np.float32), np.zeros(16, np.float32)), {"ndrange": 16}),
])
def test_refused_arguments_after_a_fast_call_give_the_first_calls_message(args, kwargs):
    x, y = np.ones(16, np.float32), np.zeros(16, np.float32)
    saxpy(np.float32(1.0), x, y, ndrange=16)           # records the signature
    want = first_message(saxpy, *args, **kwargs)
    with pytest.raises(want[0]) as info:
        saxpy(*args, **kwargs)
    assert str(info.value) == want[1]


def test_an_int_that_does_not_fit_the_annotation_after_a_fast_call():
    assert scaled_sum(np.ones(3), 1) == 3.0
    want = first_message(scaled_sum, np.ones(3), 2 ** 40)
    with pytest.raises(want[0]) as info:
        scaled_sum(np.ones(3), 2 ** 40)
    assert str(info.value) == want[1]


def test_adjit_debug_switched_on_takes_the_full_path(monkeypatch):
    x = np.ones(4)
    assert scaled_sum(x, 2) == 8.0
    monkeypatch.setenv("ADJIT_DEBUG", "1")
    assert scaled_sum(x, 2) == 8.0
    debug_keys = [k for k in scaled_sum._cache if k[-1] is True]
    assert debug_keys                                   # compiled again, with checks
