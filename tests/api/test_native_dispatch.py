"""The native dispatcher (runtime/native/dispatch.cpp, built by `pip install`): a call whose
specialisation ran before goes from Python to the compiled code without ctypes, with the
same results (values and types) as the Python path, and any call it does not take exactly
as that path would goes there, which gives the messages of record: wrong dtype, rank,
argument count, read-only or non-contiguous arrays, values that do not fit, and errors of
compiled code's checks. Each message is compared with the one the Python path gives (a
decorated object whose dispatcher is removed)."""
import os

import numpy as np
import pytest

import adjit
from adjit.runtime import native_dispatch


def test_the_extension_is_built():
    # pip install builds it (setup.py); without it every call would take the Python path.
    assert native_dispatch._dispatch is not None


@adjit.kernel
def saxpy(a: adjit.f32, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


@adjit.kernel
def grid(u, k: int):
    i, j = adjit.index_nd()
    u[i, j] = u[i, j] * k + i - j


@adjit.jit
def scaled_sum(x, k: adjit.i32):
    return adjit.sum(x) * k


@adjit.jit
def mixed(x: adjit.Array[adjit.f64, 1], s, n: int, flag: bool):
    t = 0.0
    if flag:
        t = adjit.sum(x) * s + n
    return t


@adjit.jit
def stepped(n: int, s: int):
    t = 0
    for i in range(0, n, s):
        t += i
    return t


def python_path(fn):
    """A new decorated object of `fn`'s function that never dispatches natively."""
    fresh = adjit.jit(fn.pyfn) if isinstance(fn, type(scaled_sum)) else adjit.kernel(fn.pyfn)
    fresh._native = None
    return fresh


def outcome(fn, *args, **kwargs):
    try:
        return "ok", fn(*args, **kwargs)
    except Exception as e:      # noqa: BLE001 - compared as (type, message)
        return type(e), str(e)


def test_repeated_kernel_calls_run_natively_and_stay_right():
    x, y = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    saxpy(np.float32(2.0), x, y, ndrange=16)
    assert len(saxpy._native) == 1                 # registered by the first call
    for a in (np.float32(2.0), 2.0, 3, True):      # the first matches; the others compile
        saxpy(a, x, y, ndrange=16)
    np.testing.assert_array_equal(y, x * (2 + 2 + 2 + 3 + 1))
    u = np.ones((3, 5))
    grid(u, 2, ndrange=(3, 5))
    grid(u, 2, ndrange=(3, 5))
    i, j = np.indices((3, 5))
    np.testing.assert_array_equal(u, (2 + i - j) * 2 + i - j)


@pytest.mark.parametrize("args", [
    (np.arange(5.0), 2.5, 3, True), (np.arange(5.0), np.float32(2.5), 3, False),
    (np.arange(5.0), 2, np.int64(7), True), (np.arange(5.0), np.float64(-1.0), -(2 ** 62), True),
])
def test_scalar_results_and_conversions_match_the_python_path(args):
    want = python_path(mixed)(*args)
    for _ in range(3):
        got = mixed(*args)
        assert type(got) is type(want) and got == want
    got = scaled_sum(np.arange(4.0), np.int32(3))
    assert type(got) is type(python_path(scaled_sum)(np.arange(4.0), np.int32(3)))


X, Y = np.ones(16, np.float32), np.zeros(16, np.float32)
READ_ONLY = np.frombuffer(np.zeros(16, np.float32).tobytes(), np.float32)


@pytest.mark.parametrize("args, kwargs", [
    ((np.float32(1.0), X.astype(np.float64), Y), {"ndrange": 16}),       # wrong dtype
    ((np.float32(1.0), np.ones((4, 4), np.float32), Y), {"ndrange": 16}),  # wrong rank
    ((np.float32(1.0), X), {"ndrange": 16}),                               # too few arguments
    ((np.float32(1.0), X, Y, Y), {"ndrange": 16}),                         # too many
    ((np.float32(1.0), X, READ_ONLY), {"ndrange": 16}),                    # read-only, written
    ((np.float32(1.0), np.ones(32, np.float32)[::2], Y), {"ndrange": 16}),  # not contiguous
    ((None, X, Y), {"ndrange": 16}),                                       # not a number
    ((np.float32(1.0), X, Y), {"ndrange": 17}),        # past the arrays (a compiled check)
    ((np.float32(1.0), X, Y), {"ndrange": -1}),
    ((np.float32(1.0), X, Y), {"ndrange": (4, 4)}),    # another rank of ndrange
    ((np.float32(1.0), X, Y), {}),                     # no ndrange
])
def test_kernel_calls_it_does_not_take_give_the_python_paths_outcome(args, kwargs):
    saxpy(np.float32(1.0), X, Y.copy(), ndrange=16)     # registered natively
    want = outcome(python_path(saxpy), *args, **kwargs)
    assert outcome(saxpy, *args, **kwargs) == want
    assert outcome(saxpy, *args, **kwargs) == want      # and again, once recorded


@pytest.mark.parametrize("args", [
    (np.ones(3), 2 ** 40),         # does not fit the i32 annotation
    (np.ones(3), 2.5),             # not an integer
    (np.ones((3, 1)), 2),          # rank
    (np.ones(3, np.int32), 2),     # dtype: another specialisation, compiled
])
def test_function_calls_give_the_python_paths_outcome(args):
    assert scaled_sum(np.ones(3), 2) == 6.0
    assert outcome(scaled_sum, *args) == outcome(python_path(scaled_sum), *args)


def test_a_failed_check_in_compiled_code_raises_its_error():
    assert stepped(10, 3) == 0 + 3 + 6 + 9
    assert len(stepped._native) == 1
    want = outcome(python_path(stepped), 10, 0)
    assert want[0] is ValueError and "range() arg 3 must not be zero" in want[1]
    assert outcome(stepped, 10, 0) == want
    assert stepped(10, 5) == 5                 # the error cell is clean afterwards


def test_adjit_debug_switched_on_misses_natively(monkeypatch):
    x = np.ones(4)
    assert scaled_sum(x, 2) == 8.0
    monkeypatch.setenv("ADJIT_DEBUG", "1")
    assert scaled_sum(x, 2) == 8.0
    assert [k for k in scaled_sum._cache if k[-1] is True]   # compiled again, with checks


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_calls_through_the_python_path():
    big_x, big_y = np.ones(1 << 20, np.float32), np.zeros(1 << 20, np.float32)
    saxpy(np.float32(1.0), big_x, big_y, ndrange=1 << 20)     # parallel: the pool started
    pid = os.fork()
    if pid == 0:    # the child: natively, its pool's workers would not exist
        try:
            saxpy(np.float32(1.0), big_x, big_y, ndrange=1 << 20)
            os._exit(0 if big_y[0] == 2.0 else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_keywords_a_call_does_not_take_are_named():
    x = np.zeros(16, np.float32)
    saxpy(np.float32(1.0), x, x.copy(), ndrange=16)
    with pytest.raises(TypeError, match=r"kernel saxpy\(\) got an unexpected keyword argument "
                                        r"'grid' \(it takes ndrange=, workgroupsize=, device=\)"):
        saxpy(np.float32(1.0), x, x.copy(), grid=16)
    with pytest.raises(TypeError, match=r"scaled_sum\(\) got an unexpected keyword argument "
                                        r"'ndrange' \(it takes .*device=\)"):
        scaled_sum(np.ones(3), 2, ndrange=3)
