"""A kernel's local arrays (`buf = adjit.zeros(4)` in an @adjit.kernel): the work item's own
memory, of a constant shape, allocated once at the kernel's entry (compiler/builtin_calls.py
_local_array). Against NumPy; the refusals name the problem and the line."""
import numpy as np
import pytest

import adjit
from adjit import CompilationError


@adjit.kernel
def moving_sum(x, out):
    i = adjit.index()
    acc = adjit.zeros((2, 3))
    for k in range(5):
        acc[k % 2, k % 3] = acc[k % 2, k % 3] + x[i] * k
    ones = adjit.ones(3, adjit.f32)
    empty = adjit.empty(2)
    empty[0] = 1.0
    empty[1] = 2.0
    out[i] = acc[0, 0] + acc[1, 1] + acc[0, 2] + acc[1, 0] + acc[0, 1] + ones[2] + empty[1]


def test_local_arrays_in_a_loop_match_numpy():
    x = np.linspace(-1, 1, 1000)
    out = np.zeros_like(x)
    moving_sum(x, out, ndrange=x.size)
    np.testing.assert_allclose(out, x * (0 + 1 + 2 + 3 + 4) + 1.0 + 2.0, rtol=1e-14)


def test_a_local_array_in_a_loop_is_allocated_once():
    text = moving_sum.lower(np.zeros(4), np.zeros(4), ndrange=4).adj()
    kernel = text[text.index("func.func private @moving_sum"):]
    kernel = kernel[:kernel.index("\n  }\n")]
    assert kernel.count("memref.alloca") == 3
    body = kernel[kernel.index("scf.for"):]
    assert "memref.alloca" not in body


@adjit.kernel
def sized_by_argument(x, n: int):
    i = adjit.index()
    buf = adjit.zeros(n)
    x[i] = buf[0]


@adjit.kernel
def too_big(x):
    i = adjit.index()
    buf = adjit.zeros((64, 64))
    x[i] = buf[0, 0]


def test_a_local_array_needs_a_constant_shape():
    with pytest.raises(CompilationError, match="shape must be integer constants") as info:
        sized_by_argument(np.zeros(2), 3, ndrange=2)
    assert "buf = adjit.zeros(n)" in str(info.value)


def test_a_local_array_has_a_size_limit():
    with pytest.raises(CompilationError, match="4096 elements is over the 1024") as info:
        too_big(np.zeros(2), ndrange=2)
    assert "adjit.zeros((64, 64))" in str(info.value)
