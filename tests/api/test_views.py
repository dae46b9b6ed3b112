"""Views, slices, strided inputs and broadcasting in compiled code (issue 15, items 1-2):
each construct against NumPy on random inputs (1-D to 3-D, f32/f64, negative steps, empty
slices, broadcasting corner cases) and each derivative against central differences."""
import numpy as np
import pytest

import adjit

RNG = np.random.default_rng(15)
FLOATS = [np.float32, np.float64]


def _rand(shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def _close(got, want, dtype=np.float64):
    tol = 2e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def _central(f, x, h=1e-6):
    """Central differences of scalar f at every element of float64 array x."""
    g = np.zeros_like(x)
    flat, gf = x.reshape(-1), g.reshape(-1)
    for k in range(flat.size):
        keep = flat[k]
        flat[k] = keep + h
        up = f(x)
        flat[k] = keep - h
        down = f(x)
        flat[k] = keep
        gf[k] = (up - down) / (2 * h)
    return g


# ---- strided NumPy inputs, taken without a copy ------------------------------------------

@adjit.jit
def weighted_sum(x):
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            s += x[i, j] * (i + 2 * j + 1)
    return s


@adjit.kernel
def double_into(x, y):
    i, j = adjit.index_nd()
    y[i, j] = 2.0 * x[i, j]


def _layouts(m):
    return {"C": m, "F": np.asfortranarray(m), "T": m.T, "reversed": m[::-1, ::-2],
            "rows": m[1::2], "column-view": m[:, 1:2]}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("layout", ["C", "F", "T", "reversed", "rows", "column-view"])
def test_strided_inputs_are_read_and_written_in_place(dtype, layout):
    base = _rand((6, 8), dtype)
    x = _layouts(base)[layout]
    want = sum(float(x[i, j]) * (i + 2 * j + 1) for i in range(x.shape[0])
               for j in range(x.shape[1]))
    _close(weighted_sum(x), want, dtype)
    out_base = np.zeros((6, 8), dtype)
    out = _layouts(out_base)[layout]
    double_into(x, out, ndrange=x.shape)
    _close(out, 2 * x, dtype)                 # written through the view into out_base
    if layout != "F":          # (np.asfortranarray made a new array)
        assert np.shares_memory(out, out_base)


@pytest.mark.parametrize("layout", ["F", "T", "reversed", "rows"])
def test_gradients_into_strided_shadows(layout):
    x = _layouts(_rand((6, 8)))[layout]
    dx = np.zeros_like(x)                          # the same layout (zeros_like keeps it)
    adjit.autodiff(adjit.Reverse, weighted_sum, adjit.Duplicated(x, dx))
    i, j = np.indices(x.shape)
    _close(dx, (i + 2 * j + 1).astype(float))
    contiguous_dx = np.zeros(x.shape)          # a strided primal, a contiguous shadow
    adjit.autodiff(adjit.Reverse, weighted_sum, adjit.Duplicated(x, contiguous_dx))
    _close(contiguous_dx, dx)
    strided_dx = np.zeros((x.shape[1], x.shape[0])).T     # a contiguous primal, strided shadow
    xc = np.ascontiguousarray(x)
    adjit.autodiff(adjit.Reverse, weighted_sum, adjit.Duplicated(xc, strided_dx))
    _close(strided_dx, dx)
    tangent = adjit.autodiff(adjit.Forward, weighted_sum, adjit.Duplicated(x, np.ones_like(x)))
    _close(tangent, dx.sum())


def test_a_strided_input_compiles_a_specialisation_of_its_own():
    x = _rand((5, 4))
    assert weighted_sum(x) == pytest.approx(weighted_sum(np.asfortranarray(x)))
    assert weighted_sum(x.T.copy().T) == pytest.approx(weighted_sum(x))


# ---- slices and indexing in compiled code ------------------------------------------------

@adjit.jit
def slices_2d(x):
    return (x[1:-1, ::2] * 1.0, x[::-1, 1:4], x[-2], x[:, -1], x[..., 0], x[1:3, ...],
            x[:, None, 2], x[::-2, ::-3], x[4:1:-1, 1], x[x.shape[0] - 1::-2, 0:1])


def _slices_2d_numpy(x):
    return (x[1:-1, ::2], x[::-1, 1:4], x[-2], x[:, -1], x[..., 0], x[1:3, ...],
            x[:, None, 2], x[::-2, ::-3], x[4:1:-1, 1], x[x.shape[0] - 1::-2, 0:1])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(7, 6), (5, 9), (6, 4)])
def test_slices_match_numpy(dtype, shape):
    x = _rand(shape, dtype)
    for got, want in zip(slices_2d(x), _slices_2d_numpy(x)):
        assert got.shape == want.shape and got.dtype == want.dtype
        _close(got, want, dtype)


@adjit.jit
def dynamic_slice(x, lo: int, hi: int, step: int):
    return x[lo:hi:step] + 0.0


@pytest.mark.parametrize("lo, hi, step", [(0, 10, 1), (2, 8, 3), (-3, 100, 1), (8, 2, -2),
                                          (-1, -100, -1), (5, 5, 1), (7, 2, 1), (100, 200, 1),
                                          (-100, 3, 2), (3, -100, -1), (0, 10, 11)])
def test_slice_bounds_are_pythons(lo, hi, step):
    x = np.arange(10.0)
    got = dynamic_slice(x, lo, hi, step)
    np.testing.assert_array_equal(got, x[lo:hi:step])


def test_a_zero_step_raises():
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        dynamic_slice(np.arange(4.0), 0, 4, 0)


@adjit.jit
def slices_3d(x):
    return x[1, :, ::-1] + x[..., 1:2][0, :, :] + x[-1, None, 0, :][0]


def test_3d_views_and_new_axes():
    x = _rand((3, 4, 5))
    want = x[1, :, ::-1] + x[..., 1:2][0, :, :] + x[-1, None, 0, :][0]
    _close(slices_3d(x), want)


@adjit.jit
def empty_slices(x):
    a = x[3:3]
    b = x[5:1]
    return a.shape[0] + b.shape[0], np.sum(x[2:2] * 2.0)


def test_empty_slices():
    n, s = empty_slices(np.arange(6.0))
    assert n == 0 and s == 0.0


@adjit.kernel
def row_sums(m, out):
    i = adjit.index()
    row = m[i]                     # a view: a row of the 2-D array
    s = 0.0
    for j in range(row.shape[0]):
        s += row[j]
    out[i] = s


def test_a_row_view_in_a_kernel():
    m = _rand((5, 7))
    out = np.zeros(5)
    row_sums(m, out, ndrange=5)
    _close(out, m.sum(axis=1))
    out[:] = 0
    row_sums(m[:, ::-2], out, ndrange=5)   # a strided input, viewed again
    _close(out, m[:, ::-2].sum(axis=1))


# ---- assignment through views ------------------------------------------------------------

@adjit.jit
def assignments(u, v):
    u[1:-1] = v[2:] - v[:-2]        # an expression into a view
    u[0] = 7.0                      # an element
    u[-1:] = -1.0                   # a scalar into a view
    w = u[::2]                      # a named view aliases u
    w[1] = 5.0
    u[1::3] += 0.5                  # in place through a view
    return u


def test_assignments_through_views():
    u, v = np.zeros(11), _rand(11)
    want = np.zeros(11)
    want[1:-1] = v[2:] - v[:-2]
    want[0] = 7.0
    want[-1:] = -1.0
    want[::2][1] = 5.0
    want[1::3] += 0.5
    _close(assignments(u.copy(), v), want)


@adjit.jit
def overlapping(u):
    u[1:] = u[:-1]           # NumPy: as if the right side were computed first
    u[::-1] = u * 1.0
    u[:-2] += u[2:]
    return u


def test_overlapping_assignments_are_numpys():
    u = np.arange(9.0)
    want = u.copy()
    want[1:] = want[:-1]
    want[::-1] = want * 1.0
    want[:-2] += want[2:]
    np.testing.assert_array_equal(overlapping(u.copy()), want)


@adjit.jit
def overlapping_arguments(dst, src):
    dst[1:] = src[:-1] * 2.0
    return dst


def test_arguments_that_are_views_of_one_array():
    a = np.arange(8.0)
    want = a.copy()
    want[2:][1:] = want[:-2][:-1] * 2.0
    overlapping_arguments(a[2:], a[:-2])
    np.testing.assert_array_equal(a, want)


@adjit.jit
def broadcast_assign(m, row, col):
    m[...] = row                    # (n,) into (k, n)
    m[:, 0:1] = col[:, None]        # (k, 1) into (k, 1)
    m[1] = 3.0
    return m


def test_assignment_broadcasts():
    m, row, col = np.zeros((4, 5)), _rand(5), _rand(4)
    want = np.zeros((4, 5))
    want[...] = row
    want[:, 0:1] = col[:, None]
    want[1] = 3.0
    _close(broadcast_assign(m, row, col), want)


# ---- broadcasting ----------------------------------------------------------------------

@adjit.jit
def broadcasting(x, b, c):
    centred = x - x.mean(axis=1, keepdims=True)
    return (x + b, x * c[:, None], b[None, :] * c[:, None], centred,
            np.sum(x * b), x + 1.0, b * 2.0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_broadcasting_matches_numpy(dtype):
    x, b, c = _rand((4, 6), dtype), _rand(6, dtype), _rand(4, dtype)
    want = (x + b, x * c[:, None], b[None, :] * c[:, None], x - x.mean(axis=1, keepdims=True),
            np.sum(x * b), x + 1.0, b * 2.0)
    for got, w in zip(broadcasting(x, b, c), want):
        assert np.shape(got) == np.shape(w)
        _close(got, w, dtype)


@adjit.jit
def broadcast_3d(x, y):
    return x * y


@pytest.mark.parametrize("xs, ys", [((2, 3, 4), (4,)), ((2, 3, 4), (3, 4)), ((4,), (2, 3, 4))])
def test_broadcasting_between_ranks(xs, ys):
    x, y = _rand(xs), _rand(ys)
    _close(broadcast_3d(x, y), x * y)


def test_sizes_that_do_not_broadcast_raise():
    with pytest.raises(ValueError, match="different shapes"):
        broadcast_3d(_rand((2, 3, 4)), _rand(3))
    with pytest.raises(ValueError, match="different shapes"):
        broadcast_3d(_rand((3, 4)), _rand((2, 4)))


@pytest.mark.parametrize("xs, ys", [((3, 4), (1, 4)), ((3, 1), (1, 4)), ((3, 4), (3, 1)),
                                    ((1,), (5,)), ((1, 1), (2, 3)), ((2, 1, 4), (3, 1)),
                                    ((1, 3, 1), (2, 1, 5))])
def test_arguments_with_dimensions_of_one_broadcast(xs, ys):
    """Which dimensions of an argument are 1 is part of its specialisation (the compiler
    then knows them), so whole arrays of one rank broadcast as NumPy's do; the same
    function called again with other sizes is another specialisation."""
    x, y = _rand(xs), _rand(ys)
    _close(broadcast_3d(x, y), x * y)
    z = _rand(np.broadcast_shapes(xs, ys))
    _close(broadcast_3d(z, z), z * z)


@adjit.jit
def squared_distance(x, y):
    return np.sum((x - y) ** 2)


def test_gradients_through_a_run_time_unit_dimension():
    x, y = _rand((5, 4)), _rand((1, 4))
    gx, gy = adjit.grad(squared_distance, argnums=(0, 1))(x, y)
    _close(gx, 2 * (x - y))
    _close(gy, -2 * (x - y).sum(axis=0, keepdims=True))
    fd = _central(lambda v: float(np.sum((x - v) ** 2)), y.copy())
    np.testing.assert_allclose(gy, fd, rtol=1e-6, atol=1e-8)


@adjit.kernel
def scale_by_first(out, s):
    i = adjit.index()
    out[i] = s[0] * 2.0


def test_the_call_fast_path_keeps_unit_dimensions_apart():
    out = np.zeros(4)
    for v in (3.0, 1.0, 5.0):              # (the native dispatcher matches unit dimensions)
        scale_by_first(out, np.array([v]), ndrange=4)
        np.testing.assert_array_equal(out, np.full(4, 2 * v))
    scale_by_first(out, np.array([4.0, 9.0]), ndrange=4)
    np.testing.assert_array_equal(out, np.full(4, 8.0))


# ---- derivatives -----------------------------------------------------------------------

@adjit.jit
def heat_loss(u0, k: float, steps: int):
    """The heat equation written with slices, NumPy style (runs unchanged under NumPy)."""
    u = u0.copy()
    un = u0.copy()
    for _ in range(steps):
        un[1:-1, 1:-1] = u[1:-1, 1:-1] + k * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:]
                                              + u[1:-1, :-2] - 4.0 * u[1:-1, 1:-1])
        u[...] = un
    return np.sum(u * u)


@pytest.mark.parametrize("steps", [1, 4, 7])
def test_the_slice_written_heat_equation(steps):
    u0 = _rand((7, 9))
    want = _numpy_heat(u0, 0.1, steps)
    _close(heat_loss(u0, 0.1, steps), want)
    du = np.zeros_like(u0)
    adjit.autodiff(adjit.Reverse, heat_loss, adjit.Duplicated(u0, du), 0.1, steps)
    fd = _central(lambda v: _numpy_heat(v, 0.1, steps), u0.copy())
    np.testing.assert_allclose(du, fd, rtol=1e-6, atol=1e-7)
    direction = _rand(u0.shape)
    tangent = adjit.autodiff(adjit.Forward, heat_loss, adjit.Duplicated(u0, direction),
                             0.1, steps)
    _close(tangent, float(np.sum(du * direction)))


def _numpy_heat(u0, k, steps):
    u, un = u0.copy(), u0.copy()
    for _ in range(steps):
        un[1:-1, 1:-1] = u[1:-1, 1:-1] + k * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:]
                                              + u[1:-1, :-2] - 4.0 * u[1:-1, 1:-1])
        u[...] = un
    return float(np.sum(u * u))


@adjit.jit
def dense_loss(x, w, b):
    return np.sum(np.tanh(x * w[None, :] + b) ** 2) + np.sum(x[:, ::-1] * x[::2].mean())


def test_broadcast_and_view_gradients():
    x, w, b = _rand((5, 4)), _rand(4), _rand(4)

    def loss(x, w, b):
        return float(np.sum(np.tanh(x * w[None, :] + b) ** 2) + np.sum(x[:, ::-1] * x[::2].mean()))

    grads = adjit.grad(dense_loss, argnums=(0, 1, 2))(x, w, b)
    for k, (g, v) in enumerate(zip(grads, (x, w, b))):
        args = [x.copy(), w.copy(), b.copy()]

        def f(val, k=k, args=args):
            args[k] = val
            return loss(*args)
        np.testing.assert_allclose(g, _central(f, v.copy()), rtol=1e-6, atol=1e-8)


@adjit.jit
def strided_f32_sum(x):
    return np.sum(x[::-3] * 2.0)


def test_float32_strided_views_at_large_sizes():
    x = RNG.random(1 << 21).astype(np.float32)
    got = strided_f32_sum(x)
    want = np.sum(x[::-3].astype(np.float64) * 2.0)
    assert abs(got - want) <= 1e-5 * abs(want)
