"""Indexing, views and allocation where features meet (issue 29): run-time negative indices
wrap as NumPy's do, reshape's -1 known at run time, allocations too large or of a negative
size, views of views, empty slices under reverse mode, `@` carried out of a loop. Values
against NumPy (dtype included), derivatives against JAX in float64 and finite differences.
What could take the process down runs in a subprocess, so that the suite survives it."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import adjit
from fe_helpers import assert_same, marker_line

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


def line_of(marker: str) -> int:
    return marker_line(__file__, marker)


def run_isolated(code: str, timeout: int = 240) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (a crash there fails the test, not the suite)."""
    env = dict(os.environ)
    env.pop("ADJIT_DEBUG", None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def fd_check(f, g, x, *rest, eps=1e-6) -> None:
    """Gradient `g` of f at x (the other arguments held) against central differences along
    a random direction (adjit.check_grad casts int arguments to float: an index cannot be
    one)."""
    d = np.random.default_rng(0).standard_normal(x.shape)
    fd = (f(x + eps * d, *rest) - f(x - eps * d, *rest)) / (2 * eps)
    assert abs(fd - np.sum(g * d)) <= 1e-6 * max(1.0, abs(fd))


# ---- 1. a negative index known only at run time wraps, as the literal one does ----------

@adjit.jit
def read_at(w, k):
    return w[k]


@adjit.jit
def read_2d_at(m, i, j):
    return m[i, j]


@adjit.jit
def write_at(w, k, v):
    w[k] = v
    return w


@adjit.jit
def row_at(m, i):
    return m[i] * 2.0


@adjit.jit
def computed_index(w, n):
    k = n - 3          # negative for n < 3
    return w[k] + w[-1]


@pytest.mark.parametrize("k", [-1, -2, -5, 0, 3])
def test_run_time_negative_index_reads_like_numpy(k):
    w = np.arange(5.0) * 1.5
    assert_same(read_at(w, k), w[k])
    m = np.arange(30, dtype=np.float32).reshape(5, 6)
    assert_same(read_2d_at(m, k, -1 - k), m[k, -1 - k])


@pytest.mark.parametrize("k", [-1, -3, 2])
def test_run_time_negative_index_writes_like_numpy(k):
    w = np.arange(5.0)
    want = w.copy()
    want[k] = 9.0
    assert_same(write_at(w.copy(), k, 9.0), want)


def test_run_time_negative_integer_view_and_computed_index():
    m = np.arange(12.0).reshape(3, 4)
    for i in (-1, -3, 1):
        assert_same(row_at(m, i), m[i] * 2.0)
    w = np.arange(6.0)
    for n in (0, 1, 4):
        assert_same(computed_index(w, n), w[n - 3] + w[-1])


@adjit.kernel
def gather_kernel(x, y, k):
    i = adjit.index()
    y[i] = x[k] + x[-1] * 10.0 + x[i]


@adjit.func
def device_read_at(x, k):
    return x[k]


@adjit.jit
def jit_calls_device_read(x, k):
    return device_read_at(x, k) + x[k]


def test_kernels_and_device_functions_keep_warps_rule(debug_mode):
    # A negative literal counts from the end everywhere; a negative index known only at
    # run time is out of bounds in kernels and @func device functions (Warp's rule, which
    # their index analyses read), reported in debug mode.
    x = np.arange(4.0)
    y = np.zeros(4)
    gather_kernel(x, y, 2, ndrange=4)
    assert_same(y, x[2] + x[-1] * 10.0 + x)
    with pytest.raises(IndexError, match="out of bounds"):
        gather_kernel(x, y, -2, ndrange=4)
    assert jit_calls_device_read(x, 1) == 2.0
    with pytest.raises(IndexError, match="out of bounds"):
        jit_calls_device_read(x, -1)


@adjit.jit
def loop_neighbours(u):
    out = np.zeros(u.shape[0] - 1)
    for i in range(1, u.shape[0]):
        out[i - 1] = u[i] - u[i - 1]
    s = 0.0
    for i in range(u.shape[0]):
        s += u[i - 1] * u[i]       # i - 1 = -1 first: the last element, as in NumPy
    return out, s


def test_loop_counters_less_a_constant_and_wrapping_in_loops():
    u = np.array([1.0, 4.0, 9.0, 16.0])
    out, s = loop_neighbours(u)
    assert_same(out, np.diff(u))
    assert_same(s, np.float64(sum(u[i - 1] * u[i] for i in range(4))))
    # (`u[i - 1]` for i from 1 is known not negative: the first loop compares nothing with
    # 0; the second wraps its i - 1)
    lines = loop_neighbours.lower(u).adj().splitlines()
    loops = [k for k, line in enumerate(lines) if "scf.for" in line]
    assert len(loops) == 2

    def body(k):
        indent = len(lines[k]) - len(lines[k].lstrip())
        end = next(j for j in range(k + 1, len(lines))
                   if len(lines[j]) - len(lines[j].lstrip()) <= indent)
        return "\n".join(lines[k:end])
    assert "arith.cmpi slt" not in body(loops[0])
    assert "arith.cmpi slt" in body(loops[1])


def test_wrapped_index_gradients_match_jax():
    def f(w, k):
        return read_at(w, k) ** 2 + read_at(w, -2) * 3.0

    @adjit.jit
    def g(w, k):
        return w[k] ** 2 + w[-2] * 3.0

    w = np.array([0.5, -1.25, 2.0, 0.75])
    for k in (-1, -4, 1):
        got = adjit.grad(g)(w, k)
        want = jax.grad(lambda x: x[k] ** 2 + x[-2] * 3.0)(jnp.asarray(w))
        assert_same(got, np.asarray(want))
        fd_check(g, got, w, k)
    assert f(w, -1) == w[-1] ** 2 + w[-2] * 3.0


def test_wrapped_index_write_gradient_matches_jax():
    @adjit.jit
    def g(w, k):
        y = w * 1.0
        y[k] = w[0] * w[1]
        return np.sum(y * y)

    def j(x, k):
        return jnp.sum(x.at[k].set(x[0] * x[1]) ** 2)

    w = np.array([0.5, -1.25, 2.0, 0.75])
    for k in (-1, -3, 2):
        got = adjit.grad(g)(w, k)
        assert_same(got, np.asarray(jax.grad(j)(jnp.asarray(w), k)))
        fd_check(g, got, w, k)


def test_index_still_out_of_range_after_wrapping_is_reported(debug_mode):
    w = np.arange(5.0)
    assert read_at(w, -5) == 0.0
    with pytest.raises(IndexError, match="out of bounds"):
        read_at(w, -6)
    with pytest.raises(IndexError, match="out of bounds"):
        write_at(w.copy(), -7, 1.0)
    with pytest.raises(IndexError, match="out of bounds"):
        row_at(np.ones((2, 3)), -3)


# ---- 6. reverse mode of `@` on an array a loop carried out -----------------------------

@adjit.jit
def matmul_after_loop(W, x):
    h = x
    for _ in range(3):
        h = h * 1.5 + x
    return np.sum(W @ h)


@adjit.jit
def matrix_power_then_vector(W, x):
    h = W
    for _ in range(2):
        h = h @ W
    return np.sum(np.tanh(h @ x))


@adjit.jit
def tanh_layers(W, x):
    h = x
    for _ in range(3):
        h = np.tanh(W @ h)
    return np.sum(h) + np.sum(W @ h)


def _jax_matmul_after_loop(W, x):
    h = x
    for _ in range(3):
        h = h * 1.5 + x
    return jnp.sum(W @ h)


def _jax_matrix_power_then_vector(W, x):
    h = W
    for _ in range(2):
        h = h @ W
    return jnp.sum(jnp.tanh(h @ x))


def _jax_tanh_layers(W, x):
    h = x
    for _ in range(3):
        h = jnp.tanh(W @ h)
    return jnp.sum(h) + jnp.sum(W @ h)


@pytest.mark.parametrize("f, fj", [(matmul_after_loop, _jax_matmul_after_loop),
                                   (matrix_power_then_vector, _jax_matrix_power_then_vector),
                                   (tanh_layers, _jax_tanh_layers)])
def test_matmul_of_a_loop_carried_array_differentiates(f, fj):
    rng = np.random.default_rng(3)
    W, x = rng.standard_normal((4, 4)) * 0.4, rng.standard_normal(4)
    assert_same(f(W, x), np.float64(fj(W, x)))
    gW, gx = adjit.grad(f, argnums=(0, 1))(W, x)
    jW, jx = jax.grad(fj, argnums=(0, 1))(W, x)
    assert_same(gW, np.asarray(jW), rtol=1e-12)
    assert_same(gx, np.asarray(jx), rtol=1e-12)
    assert adjit.check_grad(f, W, x) < 1e-6
    value, pullback = adjit.vjp(f, W, x)       # split mode: the tape crosses to Python
    vW, vx = pullback(1.0)
    assert_same(vW, gW, rtol=1e-12)
    assert_same(vx, gx, rtol=1e-12)


# ---- 2. reshape with a -1 known only at run time ----------------------------------------

@adjit.jit
def reshaped(x, n, m):
    return x.reshape(n, m)  # reshape-line


@adjit.jit
def reshaped_sum(x, n, m):
    y = x.reshape(n, m)
    return np.sum(y * y[0:1, :])


@pytest.mark.parametrize("n, m", [(3, -1), (-1, 4), (2, 6), (-1, 12), (12, -1)])
def test_run_time_minus_one_in_reshape(n, m):
    x = np.arange(12.0)
    assert_same(reshaped(x, n, m), x.reshape(n, m))
    y = x.reshape(n, m)
    assert_same(reshaped_sum(x, n, m), np.sum(y * y[0:1, :]))
    g = adjit.grad(reshaped_sum)(x, n, m)
    want = jax.grad(lambda v: jnp.sum(v.reshape(n, m) * v.reshape(n, m)[0:1, :]))(x)
    assert_same(g, np.asarray(want))


def test_bad_run_time_reshape_is_a_clear_error_and_the_process_lives():
    # (each once failed, then freed memory it did not own: run apart from the suite)
    result = run_isolated(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import numpy as np
        from test_trust_indexing import reshaped, reshaped_sum
        x = np.arange(12.0)
        for n, m in [(5, -1), (-1, -1), (-2, -6), (2**62, 4), (-1, 5)]:
            for f in (reshaped, reshaped_sum):
                try:
                    f(x, n, m)
                    print("no error", n, m)
                except ValueError as e:
                    print(str(e))
        import gc; gc.collect()
        print(reshaped(x, -1, 6).shape)
    """)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    where = f"{__file__}:{line_of('reshape-line')}"
    assert lines[-1] == "(2, 6)"
    assert not any(s.startswith("no error") for s in lines)
    assert sum("element counts differ" in s for s in lines) == 6
    assert sum("one unknown dimension" in s for s in lines) == 2
    assert sum("negative dimensions" in s for s in lines) == 2
    assert sum(where in s for s in lines) == 5


# ---- 4. views of views: steps, negative steps, new axes, dropped dimensions --------------

@adjit.jit
def stepped_view_of_new_axes(x):
    return x[None, ::2, None][0, 0:1:3]


@adjit.jit
def reversed_view_of_new_axes(x):
    return x[None, ::2, None][0, ::-1] * 2.0


@adjit.jit
def view_of_static_unit_dims(x):
    return np.zeros((1, 6, 1))[0, 0:1:3] + x.reshape(1, 6, 1)[0, ::2]


@adjit.jit
def row_of_reversed_rows(x):
    return x.reshape(3, 2)[::-1][1:, 0]


@adjit.jit
def new_axes_around_an_element(x):
    return x.reshape(2, 3)[1, 2, None, None] * 2.0


@adjit.jit
def view_chain(x):
    return x.reshape(3, 2)[None][0, ::2][1] + x.reshape(1, 6)[0, 5:0:-2][:2]


VIEW_CASES = [
    (stepped_view_of_new_axes, lambda x: x[None, ::2, None][0, 0:1:3]),
    (reversed_view_of_new_axes, lambda x: x[None, ::2, None][0, ::-1] * 2.0),
    (view_of_static_unit_dims,
     lambda x: np.zeros((1, 6, 1))[0, 0:1:3] + x.reshape(1, 6, 1)[0, ::2]),
    (row_of_reversed_rows, lambda x: x.reshape(3, 2)[::-1][1:, 0]),
    (new_axes_around_an_element, lambda x: x.reshape(2, 3)[1, 2, None, None] * 2.0),
    (view_chain, lambda x: x.reshape(3, 2)[None][0, ::2][1] + x.reshape(1, 6)[0, 5:0:-2][:2]),
]


@pytest.mark.parametrize("f, ref", VIEW_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_views_of_views_match_numpy(f, ref, dtype):
    x = np.arange(1.0, 7.0).astype(dtype)
    assert_same(f(x), ref(x))


@pytest.mark.parametrize("f, ref", VIEW_CASES)
def test_views_of_views_differentiate(f, ref):
    x = np.linspace(-1.0, 1.5, 6)
    out_shape = np.shape(ref(x))
    w = np.random.default_rng(1).standard_normal(out_shape)
    value, pullback = adjit.vjp(f, x)
    got, = pullback(w)
    _, pb = jax.vjp(lambda v: ref_jax(f, v), jnp.asarray(x))
    assert_same(got, np.asarray(pb(jnp.asarray(w))[0]))


def ref_jax(f, v):
    """The JAX form of each case (jnp has no in-place zeros; the same expressions)."""
    if f is view_of_static_unit_dims:
        return jnp.zeros((1, 6, 1))[0, 0:1:3] + v.reshape(1, 6, 1)[0, ::2]
    return dict((g, r) for g, r in VIEW_CASES)[f](v)


def test_view_of_new_axes_does_not_abort_the_process():
    # (it once aborted on an MLIR assertion: run apart from the suite)
    result = run_isolated(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import numpy as np
        from test_trust_indexing import stepped_view_of_new_axes
        print(stepped_view_of_new_axes(np.arange(6.0)).tolist())
    """)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["[[0.0]]"]


# ---- 5. statically empty slices, slices of one, and 0-d arrays under derivatives ---------

@adjit.jit
def empty_slice_times_two(x):
    return x[1:1] * 2.0


@adjit.jit
def empty_rows(x):
    return x[1:1, :] * 2.0


@adjit.jit
def empty_and_one_element_sums(x):
    return np.sum(x[1:1] * 2.0) + np.sum(x[1:2] ** 2) + np.sum(x[4:2:1])


@adjit.jit
def empty_columns_and_one_row(x):
    return np.sum(x[:, 2:2] * 2.0) + np.sum(x[1:2, ::-1] ** 2) + np.sum(np.sin(x[:, 3:4]))


@adjit.jit
def one_element_product(x):
    return x[1:2] * x[1:2]


@adjit.jit
def zero_d_sine(x):
    return np.sin(x) * x


SLICE_CASES = [
    (empty_slice_times_two, lambda x: x[1:1] * 2.0, (6,)),
    (empty_rows, lambda x: x[1:1, :] * 2.0, (3, 4)),
    (empty_and_one_element_sums,
     lambda x: jnp.sum(x[1:1] * 2.0) + jnp.sum(x[1:2] ** 2) + jnp.sum(x[4:2:1]), (6,)),
    (empty_columns_and_one_row,
     lambda x: (jnp.sum(x[:, 2:2] * 2.0) + jnp.sum(x[1:2, ::-1] ** 2)
                + jnp.sum(jnp.sin(x[:, 3:4]))), (3, 4)),
    (one_element_product, lambda x: x[1:2] * x[1:2], (6,)),
    (zero_d_sine, lambda x: jnp.sin(x) * x, ()),
]


@pytest.mark.parametrize("f, fj, shape", SLICE_CASES)
def test_empty_and_one_element_slices_differentiate_like_jax(f, fj, shape):
    x = np.linspace(0.5, 2.0, int(np.prod(shape))).reshape(shape)
    xj = jnp.asarray(x)
    out = f(x)
    assert_same(out, np.asarray(fj(xj)))
    cot = np.linspace(1.0, 2.0, out.size).reshape(np.shape(out))
    _, pullback = adjit.vjp(f, x)
    got, = pullback(cot if np.ndim(out) else float(cot))
    _, pb = jax.vjp(fj, xj)
    assert_same(got, np.asarray(pb(jnp.asarray(cot))[0]))
    assert_same(adjit.jacfwd(f)(x), np.asarray(jax.jacfwd(fj)(xj)))
    assert_same(adjit.jacrev(f)(x), np.asarray(jax.jacrev(fj)(xj)))
    tangent = np.ones_like(x)
    value, t = adjit.jvp(f, (x,), (tangent,))
    assert_same(t, np.asarray(jax.jvp(fj, (xj,), (jnp.asarray(tangent),))[1]))
    if np.ndim(out) == 0:
        assert_same(adjit.grad(f)(x), np.asarray(jax.grad(fj)(xj)))
        assert_same(adjit.hessian(f)(x), np.asarray(jax.hessian(fj)(xj)))
        assert adjit.check_grad(f, x) < 1e-6


# ---- 3. allocations too large, of a negative size, or that the allocator cannot make ------

@adjit.jit
def zeros_of(n):
    return np.zeros(n)  # zeros-line


@adjit.jit
def square_ones_of(n):
    return np.ones((n, n), dtype=np.float32)  # square-line


@adjit.jit
def outer_of(x, y):
    return x[:, None] * y[None, :]  # outer-line


@adjit.jit
def empty_then_sum(n, m):
    a = np.zeros((n, 3, m))
    return np.sum(a + 1.0, axis=1, keepdims=True)


def test_run_time_sizes_allocate_as_numpy_does():
    for n in (0, 1, 5):
        assert_same(zeros_of(n), np.zeros(n))
        assert_same(square_ones_of(n), np.ones((n, n), dtype=np.float32))
        assert_same(empty_then_sum(n, 2), np.sum(np.zeros((n, 3, 2)) + 1.0, axis=1,
                                                 keepdims=True))
    assert_same(outer_of(np.arange(3.0), np.arange(2.0)), np.outer(np.arange(3.0),
                                                                   np.arange(2.0)))


def test_huge_or_negative_allocations_raise_at_the_users_line():
    # (each once killed the process with SIGSEGV: run apart from the suite)
    result = run_isolated(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import numpy as np
        from test_trust_indexing import zeros_of, square_ones_of, outer_of
        big = np.ones(2**23)
        for f, args in [(zeros_of, (2**60,)), (zeros_of, (2**60,)), (square_ones_of, (2**32,)),
                        (zeros_of, (-1,)), (square_ones_of, (-3,)), (zeros_of, (2**45,)),
                        (outer_of, (big, big)), (outer_of, (big, big))]:
            try:
                f(*args)
                print("no error")
            except (MemoryError, ValueError) as e:
                print(type(e).__name__, "|", e)
        print(zeros_of(2).tolist())
    """)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert lines[-1] == "[0.0, 0.0]"
    zeros, square, outer = (f"{__file__}:{line_of(m)}"
                            for m in ("zeros-line", "square-line", "outer-line"))
    assert lines[0].startswith("MemoryError |") and zeros in lines[0]     # 2**63 bytes
    assert lines[1] == lines[0]                                          # (the native path)
    assert lines[2].startswith("MemoryError |") and square in lines[2]  # n * n wraps around
    assert lines[3] == f"ValueError | negative dimensions are not allowed (at {zeros})"
    assert lines[4] == f"ValueError | negative dimensions are not allowed (at {square})"
    # 256 TiB, then 512 TiB: past the 128 TiB of x86-64's user address space, so the
    # allocator's null pointer whatever the overcommit setting
    for line, where in [(lines[5], zeros), (lines[6], outer), (lines[7], outer)]:
        assert line.startswith("MemoryError |") and where in line, line
