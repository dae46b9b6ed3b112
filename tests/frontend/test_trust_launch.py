"""Trust where features meet (issue 29 item 12): a kernel indexed with the linear
`adjit.index()` over an N-D ndrange reaches the ndrange's item count, the product of its
extents; a launch whose item count is larger than an array indexed so was not refused and
wrote out of bounds (heap corruption, a double free or SIGSEGV). Now it is an IndexError
naming the kernel, the argument and the line, before any item runs: from Python, in @jit
code, in derivatives, on the GPU path, and through adjit.torch's default ndrange. Each
out-of-bounds launch runs in a subprocess, so that a crash cannot take pytest down."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import adjit


@adjit.kernel
def double_linear(x, y):
    i = adjit.index()
    y[i] = x[i] * 2.0


@adjit.jit
def double_in_jit(x, y, n: int, m: int):
    double_linear(x, y, ndrange=(n, m))


_PRELUDE = '''
import numpy as np
import adjit

@adjit.kernel
def double_linear(x, y):
    i = adjit.index()
    y[i] = x[i] * 2.0

'''


def _run(tmp_path, body: str) -> subprocess.CompletedProcess:
    """Runs the prelude and `body` as a script file (adjit compiles from source files)."""
    script = tmp_path / "launch.py"
    script.write_text(_PRELUDE + textwrap.dedent(body))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=600)


def test_a_linear_index_over_a_2d_ndrange_larger_than_the_arrays_is_refused(tmp_path):
    done = _run(tmp_path, '''
        x, y = np.ones(10), np.zeros(10)
        try:
            double_linear(x, y, ndrange=(10, 10))
        except IndexError as e:
            print("IndexError:", e)
        assert (y == 0).all(), y          # nothing ran
        print("survived")
    ''')
    assert done.returncode == 0, done.stderr[-3000:]
    assert "survived" in done.stdout
    assert "IndexError: kernel double_linear: the ndrange's item count (the product of its 2 " \
           "extents) is larger than dimension 0 of argument" in done.stdout
    assert "linear adjit.index() (line 8)" in done.stdout


def test_a_linear_index_that_fits_runs_as_numpy():
    x = np.arange(12.0)
    for ndrange in [(3, 4), (2, 2, 3), (12,), (2, 5)]:
        y = np.zeros(12)
        double_linear(x, y, ndrange=ndrange)
        n = int(np.prod(ndrange))
        expected = np.where(np.arange(12) < n, 2.0 * x, 0.0)
        np.testing.assert_array_equal(y, expected)
        assert y.dtype == expected.dtype


@pytest.mark.parametrize("ndrange", [(3, 5), (2, 2, 4), (1, 13)])
def test_every_rank_is_checked_by_its_item_count(ndrange):
    x, y = np.ones(12), np.zeros(12)
    with pytest.raises(IndexError, match=r"product of its \d extents\) is larger than "
                                         r"dimension 0 of argument '[xy]'"):
        double_linear(x, y, ndrange=ndrange)
    np.testing.assert_array_equal(y, np.zeros(12))


def test_a_launch_in_compiled_code_is_checked_too():
    x, y = np.ones(6), np.zeros(6)
    with pytest.raises(IndexError, match=r"item count.*test_trust_launch.py:\d+\)"):
        double_in_jit(x, y, 3, 3)
    np.testing.assert_array_equal(y, np.zeros(6))
    double_in_jit(x, y, 2, 3)
    np.testing.assert_array_equal(y, np.full(6, 2.0))


def test_derivatives_of_such_a_launch_are_refused():
    x, dx, y, dy = np.ones(10), np.zeros(10), np.zeros(10), np.ones(10)
    with pytest.raises(IndexError, match=r"kernel double_linear: the ndrange's item count"):
        adjit.autodiff(adjit.Reverse, double_linear, adjit.Duplicated(x, dx),
                       adjit.Duplicated(y, dy), ndrange=(4, 3))
    np.testing.assert_array_equal(dx, np.zeros(10))
    adjit.autodiff(adjit.Reverse, double_linear, adjit.Duplicated(x, dx),
                   adjit.Duplicated(y, dy), ndrange=(2, 5))
    np.testing.assert_array_equal(dx, np.full(10, 2.0))


def test_the_gpu_launch_path_checks_the_item_count_before_any_launch():
    """The GPU kernel carries the same facts (lower_gpu.py); the launcher checks them before
    it launches (runtime/cuda.py), so no GPU is needed to see it."""
    pytest.importorskip("mlir", reason="compiling GPU kernels needs MLIR")
    x, dx, y, dy = np.ones(10), np.zeros(10), np.zeros(10), np.ones(10)
    with pytest.raises(IndexError, match=r"kernel double_linear: the ndrange's item count"):
        adjit.autodiff(adjit.Reverse, double_linear, adjit.Duplicated(x, dx),
                       adjit.Duplicated(y, dy), ndrange=(4, 3), device="cuda")
    from adjit.core.kernel import LINEAR, check_ndrange_bounds
    facts = ((1, 0, LINEAR, "too many items"),)
    check_ndrange_bounds(facts, [x, y], (2, 5))
    with pytest.raises(IndexError, match="too many items"):
        check_ndrange_bounds(facts, [x, y], (2, 6))


def test_adjit_torch_default_ndrange_reaches_the_check(tmp_path):
    """adjit.torch.function's default ndrange is its first output's shape: a kernel with the
    linear index over a 2-D output of 4 x 4 items and a 1-D input of 4 is refused."""
    pytest.importorskip("torch")
    done = _run(tmp_path, '''
        import torch
        @adjit.kernel
        def spread(x, y):
            i = adjit.index()
            t = x[i]
            y[i // 4, i % 4] = t
        f = adjit.torch.function(spread, outputs=["y"])
        try:
            f(torch.ones(4, dtype=torch.float64), torch.zeros(4, 4, dtype=torch.float64))
        except IndexError as e:
            print("IndexError:", e)
        print("survived")
    ''')
    assert done.returncode == 0, done.stderr[-3000:]
    assert "survived" in done.stdout
    assert "IndexError: kernel spread: the ndrange's item count" in done.stdout


# ---- a constant negative size (issue 29, errors) ---------------------------------------------

@adjit.jit
def negative_zeros(x):
    return np.zeros(-3) + x[0]


@adjit.jit
def negative_ones_2d(x):
    return adjit.ones((2, -1)) * x[0]


def test_a_constant_negative_size_is_refused_at_its_line():
    """Was "Array length must be >= 0, not -24" from ctypes, with no line, after the code
    had allocated it."""
    with pytest.raises(adjit.CompilationError,
                       match=r"test_trust_launch.py:\d+:\d+: negative dimensions are not "
                             r"allowed: an array of shape \(-3,\)"):
        negative_zeros(np.ones(2))
    with pytest.raises(adjit.CompilationError, match=r"shape \(2, -1\)"):
        negative_ones_2d(np.ones(2))


# ---- indices computed from the id ------------------------------------------------------------

@adjit.kernel
def forward_difference(x, y):
    i = adjit.index()
    y[i] = x[i + 1] - x[i]


@adjit.kernel
def every_other(x, y):
    i = adjit.index()
    y[i] = x[2 * i]


@adjit.kernel
def shifted_rows(u, v):
    i, j = adjit.index_nd()
    v[i, j] = u[i, j + 2]


def test_an_offset_index_is_checked_at_its_last_item():
    x = np.arange(10.0) ** 2
    y = np.zeros(9)
    forward_difference(x, y, ndrange=9)
    np.testing.assert_array_equal(y, np.diff(x))
    y = np.zeros(10)
    with pytest.raises(IndexError, match=r"kernel forward_difference: ndrange\[0\] is too large "
                                         r"for dimension 0 of argument 'x', which every work "
                                         r"item indexes with its id \+ 1 \(line \d+\)"):
        forward_difference(x, y, ndrange=10)
    np.testing.assert_array_equal(y, np.zeros(10))       # nothing ran


def test_a_scaled_index_is_checked_at_its_last_item():
    x = np.arange(9.0)
    y = np.zeros(5)
    every_other(x, y, ndrange=5)                # 2 * 4 = 8 < 9
    np.testing.assert_array_equal(y, x[::2])
    x = np.arange(8.0)
    with pytest.raises(IndexError, match=r"indexes with 2 \* its id"):
        every_other(x, y, ndrange=5)            # 2 * 4 = 8 >= 8
    every_other(x, np.zeros(0), ndrange=0)      # no items: nothing to check


def test_an_offset_in_one_dimension_of_an_n_d_index():
    u = np.arange(20.0).reshape(4, 5)
    v = np.zeros((4, 3))
    shifted_rows(u, v, ndrange=v.shape)
    np.testing.assert_array_equal(v, u[:, 2:])
    with pytest.raises(IndexError, match=r"ndrange\[1\] is too large for dimension 1 of "
                                         r"argument 'u'.*its id \+ 2"):
        shifted_rows(u, np.zeros((4, 4)), ndrange=(4, 4))


def test_derivatives_check_computed_indices_too():
    """The facts' scale and offset travel onto the derivative kernels (driver._carry_bounds)
    and through the CPU derivative's metadata; the GPU kernel's too (no GPU needed: checked
    before any launch)."""
    x, dx = np.arange(10.0), np.zeros(10)
    y, dy = np.zeros(10), np.ones(10)
    for device in ("cpu", "cuda"):
        with pytest.raises(IndexError, match=r"its id \+ 1"):
            adjit.autodiff(adjit.Reverse, forward_difference, adjit.Duplicated(x, dx),
                           adjit.Duplicated(y, dy), ndrange=10, device=device)
        np.testing.assert_array_equal(dx, np.zeros(10))
    y, dy = np.zeros(9), np.ones(9)
    adjit.autodiff(adjit.Reverse, forward_difference, adjit.Duplicated(x, dx),
                   adjit.Duplicated(y, dy), ndrange=9)
    np.testing.assert_array_equal(dx, np.r_[-1.0, np.zeros(8), 1.0])
