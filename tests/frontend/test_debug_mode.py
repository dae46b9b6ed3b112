"""ADJIT_DEBUG=1 (read at call time): element access out of bounds raises IndexError naming
the line, instead of touching memory; without it the same functions run unchecked."""
from __future__ import annotations

import re

import numpy as np
import pytest

import adjit
from fe_helpers import assert_same, marker_line


def line_of(marker: str) -> int:
    return marker_line(__file__, marker)


@adjit.kernel
def shifted_read(x, y, shift):
    i = adjit.index()
    y[i] = x[i + shift]  # read-oob


@adjit.kernel
def shifted_write(x, y, shift):
    i = adjit.index()
    y[i + shift] = x[i]  # write-oob


@adjit.kernel
def read_2d(m, out, k):
    i = adjit.index()
    out[i] = m[i, k]  # read-2d


def test_out_of_bounds_read_raises_index_error(debug_mode):
    x, y = np.arange(8.0), np.zeros(8)
    with pytest.raises(IndexError, match=re.escape(f"{__file__}:{line_of('read-oob')}")):
        shifted_read(x, y, 1, ndrange=8)
    with pytest.raises(IndexError):
        shifted_read(x, y, -1, ndrange=8)    # a negative computed index is out of bounds too
    shifted_read(x, y, 0, ndrange=8)         # in bounds: no error, the right result
    assert_same(y, x)


def test_out_of_bounds_write_raises_and_leaves_memory_alone(debug_mode):
    backing = np.zeros(12)
    x, y = np.arange(1.0, 9.0), backing[2:10]   # y is a contiguous view into backing
    with pytest.raises(IndexError, match=re.escape(f"{__file__}:{line_of('write-oob')}")):
        shifted_write(x, y, 2, ndrange=8)
    assert backing[10] == 0 and backing[11] == 0   # nothing written past y's end
    assert_same(y[2:], x[:6])                        # the items in bounds did their work


def test_each_dimension_is_checked(debug_mode):
    m = np.arange(12.0).reshape(3, 4)
    out = np.zeros(3)
    read_2d(m, out, 3, ndrange=3)
    assert_same(out, m[:, 3])
    with pytest.raises(IndexError, match=str(line_of("read-2d"))):
        read_2d(m, out, 4, ndrange=3)     # column 4 of 4: the flat offset would still be inside
    with pytest.raises(IndexError):
        read_2d(m, out, 0, ndrange=4)     # row 3 of 3


def test_the_setting_is_read_at_call_time(monkeypatch):
    x, y = np.arange(8.0), np.zeros(8)
    shifted_read(x[:4].copy(), y[:4], 0, ndrange=4)
    monkeypatch.setenv("ADJIT_DEBUG", "1")
    with pytest.raises(IndexError):
        shifted_read(x, y, 1, ndrange=8)
    monkeypatch.setenv("ADJIT_DEBUG", "0")
    shifted_read(x, y, 0, ndrange=8)      # unchecked again (and correct)
    assert_same(y, x)


@adjit.jit
def jit_read(x, k):
    return x[k]  # jit-read


@adjit.func
def device_read(x, k):
    return x[k]


@adjit.jit
def jit_write(x, k, v):
    x[k] += v


def test_checked_in_compiled_and_device_functions(debug_mode):
    x = np.arange(5.0)
    assert jit_read(x, 4) == 4.0
    with pytest.raises(IndexError, match=re.escape(f"{__file__}:{line_of('jit-read')}")):
        jit_read(x, 5)
    with pytest.raises(IndexError):
        device_read(x, -1)
    with pytest.raises(IndexError):
        jit_write(x, 7, 1.0)
    jit_write(x, 2, 1.0)
    assert_same(x, np.array([0.0, 1.0, 3.0, 3.0, 4.0]))


@adjit.kernel
def atomic_oob(hist, k):
    adjit.atomic_add(hist, k, 1.0)


def test_atomic_add_is_checked(debug_mode):
    hist = np.zeros(3)
    with pytest.raises(IndexError):
        atomic_oob(hist, 3, ndrange=4)
    atomic_oob(hist, 2, ndrange=4)
    assert_same(hist, np.array([0.0, 0.0, 4.0]))


def test_debug_mode_leaves_results_unchanged(debug_mode):
    @adjit.kernel
    def stencil(u, v):
        i = adjit.index()
        if 0 < i < u.shape[0] - 1:
            v[i] = u[i - 1] + u[i + 1] - 2.0 * u[i]

    u = np.random.default_rng(0).random(50)
    v = np.zeros(50)
    stencil(u, v, ndrange=50)
    assert_same(v[1:-1], u[:-2] + u[2:] - 2.0 * u[1:-1])


@adjit.kernel
def guarded_read(x, out):
    i = adjit.index()
    out[i] = 1 if i < x.shape[0] and x[i] > 0 else 0
    if i >= x.shape[0] or x[i] < 0:
        out[i] += 10


def test_and_or_short_circuit_guards_element_reads(debug_mode):
    x = np.array([1.0, -1.0, 2.0])
    out = np.zeros(5, dtype=np.int64)
    guarded_read(x, out, ndrange=5)      # x[3], x[4] would raise IndexError if read
    np.testing.assert_array_equal(out, [1, 10, 1, 10, 10])
