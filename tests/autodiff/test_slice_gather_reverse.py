"""Stencils written with slices in @jit (issue 30): the reverse of the frontend's loop nest
that reads one array through several shifted views (`u[2:, 1:-1] + u[:-2, 1:-1] + ...`) is
in gather form (passes/autodiff/generate/gather.py, row_sites / gather_rows): a parallel loop over
the array's rows, each adding the partials of the iterations that read it, and the reversed
loop itself parallel, instead of one serial loop adding into shared rows. Every gradient
against central differences and JAX's float64 one; 1-D and 2-D, shifts of 1 and 2, odd
sizes, and the edges where a view has 1 or 0 rows (its index then broadcasts: row 0)."""
import numpy as np
import pytest

import adjit
from adjit.passes.autodiff.rules import control_flow_ops as control_flow
from adjit.passes.autodiff.generate import gather

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

K = 0.1


def heat(u0, steps: int):
    u = u0.copy()
    un = u0.copy()
    for _ in range(steps):
        un[1:-1, 1:-1] = u[1:-1, 1:-1] + K * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:]
                                              + u[1:-1, :-2] - 4.0 * u[1:-1, 1:-1])
        u[...] = un
    return np.sum(u * u)


def heat_jax(u0, steps):
    u = u0
    for _ in range(steps):
        u = u.at[1:-1, 1:-1].set(u[1:-1, 1:-1] + K * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:]
                                                     + u[1:-1, :-2] - 4.0 * u[1:-1, 1:-1]))
    return jnp.sum(u * u)


def wide(u):
    """Shifts of 2 in both dimensions, and a product (the partials read u)."""
    v = u * 0.5
    v[2:-2, 2:-2] = u[4:, 2:-2] * u[:-4, 2:-2] - u[2:-2, 4:] + 0.25 * u[2:-2, :-4]
    return np.sum(v * v)


def wide_jax(u):
    v = (u * 0.5).at[2:-2, 2:-2].set(u[4:, 2:-2] * u[:-4, 2:-2] - u[2:-2, 4:]
                                     + 0.25 * u[2:-2, :-4])
    return jnp.sum(v * v)


def line(u):
    """1-D: shifts of -1, +1 and +2 (an asymmetric window), nonlinear."""
    v = u.copy()
    v[1:-2] = np.sin(u[2:-1]) * u[:-3] + u[3:] * u[1:-2]
    return np.sum(v * v)


def line_jax(u):
    v = u.at[1:-2].set(jnp.sin(u[2:-1]) * u[:-3] + u[3:] * u[1:-2])
    return jnp.sum(v * v)


def row_broadcast(u):
    """A view of one row broadcast over the others: every iteration reads its row 0."""
    v = u * 1.0
    v[1:, :] = u[1:, :] * u[:1, :] + u[:-1, :]
    return np.sum(v * v)


def row_broadcast_jax(u):
    v = u.at[1:, :].set(u[1:, :] * u[:1, :] + u[:-1, :])
    return jnp.sum(v * v)


def cube(u):
    """3-D: shifts along the first two axes (the loop nest's rows and an inner loop)."""
    v = u * 1.0
    v[1:-1, 1:-1, :] = u[2:, 1:-1, :] - u[:-2, 1:-1, :] * u[1:-1, 2:, :]
    return np.sum(v * v)


def cube_jax(u):
    v = u.at[1:-1, 1:-1, :].set(u[2:, 1:-1, :] - u[:-2, 1:-1, :] * u[1:-1, 2:, :])
    return jnp.sum(v * v)


def views_of_views(u):
    """Shifted views of a view (offsets add up), of a transpose, and a stepped one."""
    w = u[1:, :]
    t = u.T
    v = u * 1.0
    v[2:, :] = w[1:, :] * w[:-1, :] + u[:-2, :]
    v[:, 1:] = v[:, 1:] + t[1:, :].T * t[:-1, :].T + u[::2, :].sum()
    return np.sum(v * v)


def views_of_views_jax(u):
    w = u[1:, :]
    t = u.T
    v = u.at[2:, :].set(w[1:, :] * w[:-1, :] + u[:-2, :])
    v = v.at[:, 1:].set(v[:, 1:] + t[1:, :].T * t[:-1, :].T + u[::2, :].sum())
    return jnp.sum(v * v)


CASES = {
    "heat": (adjit.jit(heat), heat_jax, True),
    "wide": (adjit.jit(wide), wide_jax, False),
    "line": (adjit.jit(line), line_jax, False),
    "row_broadcast": (adjit.jit(row_broadcast), row_broadcast_jax, False),
    "cube": (adjit.jit(cube), cube_jax, False),
    "views_of_views": (adjit.jit(views_of_views), views_of_views_jax, False),
}
SHAPES = {
    "heat": [(7, 5), (9, 9), (3, 3), (3, 5), (1, 4), (2, 3)],
    "wide": [(9, 7), (5, 5), (6, 11)],
    "line": [(7,), (4,), (3,), (1,)],
    "row_broadcast": [(5, 3), (2, 4), (1, 3)],
    "cube": [(5, 4, 3), (3, 3, 1)],
    "views_of_views": [(6, 5), (3, 4)],
}
PARAMS = [(name, shape) for name, shapes in SHAPES.items() for shape in shapes]


def fd_grad(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[k] += h
        xm[k] -= h
        g[k] = (f(xp) - f(xm)) / (2 * h)
    return g


@pytest.mark.parametrize("name,shape", PARAMS, ids=[f"{n}-{'x'.join(map(str, s))}"
                                                    for n, s in PARAMS])
def test_gradient_against_jax_and_finite_differences(name, shape):
    fn, jfn, stepped = CASES[name]
    u = np.random.default_rng(len(shape) * 10 + shape[0]).standard_normal(shape)
    args = (3,) if stepped else ()
    g = adjit.grad(fn)(u, *args)
    assert g.dtype == np.float64 and g.shape == u.shape
    want = np.asarray(jax.grad(jfn)(u, *args))
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)
    fd = fd_grad(lambda x: fn(x, *args), u)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)


def _reversals(monkeypatch) -> dict:
    """Which reversal each scf.parallel the pass reverses gets, from here on."""
    seen = {"sequential views": 0, "gathered": 0}
    seq, rows = control_flow._reverse_sequential, control_flow.gather_rows

    def sequential(gen, op):
        # (a reduction's chunks reverse serially by design: count only the loops that read
        # views, the slices)
        seen["sequential views"] += any(
            inner.name == "memref.load" and "strided" in str(inner.operands[0].type)
            for inner in control_flow.walk(op))
        return seq(gen, op)

    def gathered(gen, loop, plan):
        seen["gathered"] += 1
        assert loop.name == "scf.parallel"      # the reversed loop itself stays parallel
        return rows(gen, loop, plan)
    monkeypatch.setattr(control_flow, "_reverse_sequential", sequential)
    monkeypatch.setattr(control_flow, "gather_rows", gathered)
    return seen


def test_the_shifted_reads_reverse_in_gather_form(monkeypatch):
    """No loop of the stencil's gradient reverses serially (it did: the shifted reads' adds
    into shared rows), and the gradient has no atomics."""
    seen = _reversals(monkeypatch)

    @adjit.jit
    def stencil(u, c: float):
        v = u * 1.0
        v[1:-1, 1:-1] = u[2:, 1:-1] + u[:-2, 1:-1] - c * u[1:-1, 2:] * u[1:-1, :-2]
        return np.sum(v * v)

    u = np.random.default_rng(1).standard_normal((6, 5))
    g = adjit.grad(stencil)(u, 0.3)
    assert seen["gathered"] >= 1 and seen["sequential views"] == 0, seen
    text = list(stencil.__dict__["_derivatives"].values())[-1].adj_text
    assert "atomic_rmw" not in text
    assert gather._ROW_SITE_ATTR not in text        # every tagged add placed
    np.testing.assert_allclose(g, fd_grad(lambda x: stencil(x, 0.3), u), rtol=1e-6, atol=1e-6)


def test_an_in_place_update_of_shifted_views():
    """Gather form only where its partials read nothing the reversed loop writes: an
    in-place update reading shifted views of its own target is copied first by the
    frontend (NumPy's rule); the reversal stays correct whichever form it takes."""
    @adjit.jit
    def inplace(u):
        v = u * 1.0
        v[1:] = v[1:] + v[:-1] * v[:-1]
        return np.sum(v * v)

    def inplace_jax(u):
        v = u.at[1:].set(u[1:] + u[:-1] * u[:-1])
        return jnp.sum(v * v)
    u = np.random.default_rng(2).standard_normal(7)
    np.testing.assert_allclose(adjit.grad(inplace)(u), np.asarray(jax.grad(inplace_jax)(u)),
                               rtol=1e-12, atol=1e-12)


def test_float32_gradient_stays_float32():
    u = np.random.default_rng(3).standard_normal((9, 8)).astype(np.float32)
    g = adjit.grad(CASES["heat"][0])(u, 2)
    assert g.dtype == np.float32
    want = np.asarray(jax.grad(heat_jax)(u.astype(np.float64), 2))
    np.testing.assert_allclose(g, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())
