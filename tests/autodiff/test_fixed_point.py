"""Fixed-point adjoints (issue 14): `adjit.fixed_point(step, x0, *params, tol=, max_iter=)`
in @jit code, differentiated implicitly. A Jacobi solve of A x = b: the gradient of c . x*
is A^-T c for b and -(A^-T c) x*^T for A (the exact inverse-transpose products); a scalar
fixed point against its implicit-function derivative; central differences; the memory of
the gradient does not grow with the iterations; forward mode; from Python."""
from __future__ import annotations

import math

import numpy as np
import pytest

import adjit


@adjit.jit
def jacobi(x, a, b):
    """One Jacobi sweep for A x = b: a contraction when A is diagonally dominant."""
    n = x.shape[0]
    y = adjit.empty_like(x)
    for i in range(n):
        s = b[i]
        for j in range(n):
            if j != i:
                s -= a[i, j] * x[j]
        y[i] = s / a[i, i]
    return y


@adjit.jit
def solve_loss(a, b, c):
    x = adjit.fixed_point(jacobi, adjit.zeros_like(b), a, b, tol=1e-14, max_iter=2000)
    return adjit.sum(x * c)


@adjit.jit
def solve_loss_loop(a, b, c, iters: int):
    """The same iteration as a plain loop (its reverse mode keeps every iterate)."""
    x = adjit.zeros_like(b)
    for _ in range(iters):
        x = jacobi(x, a, b)
    return adjit.sum(x * c)


@adjit.jit
def loose_loss(a, b, c):
    x = adjit.fixed_point(jacobi, adjit.zeros_like(b), a, b, tol=1e-3, max_iter=2000)
    return adjit.sum(x * c)


def system(n=7, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n)) + 2.0 * n * np.eye(n)
    return a, rng.standard_normal(n), rng.standard_normal(n)


def test_the_adjoint_of_a_linear_solve_is_the_inverse_transpose_product():
    a, b, c = system()
    x = np.linalg.solve(a, b)
    assert solve_loss(a, b, c) == pytest.approx(c @ x, rel=1e-12)
    ga, gb, gc = np.zeros_like(a), np.zeros_like(b), np.zeros_like(c)
    adjit.autodiff(adjit.Reverse, solve_loss, adjit.Duplicated(a, ga), adjit.Duplicated(b, gb),
                   adjit.Duplicated(c, gc))
    lam = np.linalg.solve(a.T, c)
    np.testing.assert_allclose(gb, lam, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(ga, -np.outer(lam, x), rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(gc, x, rtol=1e-12, atol=1e-14)
    # and central differences of the solve itself
    h = 1e-6
    for k in (0, 3, 6):
        e = np.zeros_like(b)
        e[k] = h
        fd = (solve_loss(a, b + e, c) - solve_loss(a, b - e, c)) / (2 * h)
        assert gb[k] == pytest.approx(fd, rel=1e-6, abs=1e-10)
    e = np.zeros_like(a)
    e[2, 5] = h
    fd = (solve_loss(a + e, b, c) - solve_loss(a - e, b, c)) / (2 * h)
    assert ga[2, 5] == pytest.approx(fd, rel=1e-6, abs=1e-10)


def test_the_gradient_keeps_x_star_alone_not_every_iterate():
    """The plain loop's reverse mode keeps each iterate (its memory grows with the
    iterations); the fixed point's tape is x*, whatever the iteration count."""
    a, b, c = system(n=64)

    def peak(f, *extra):
        ga, gb, gc = np.zeros_like(a), np.zeros_like(b), np.zeros_like(c)
        adjit.release_cached_memory()
        adjit.reset_peak_memory()
        base = adjit.memory_stats()["bytes_in_use"]
        adjit.autodiff(adjit.Reverse, f, adjit.Duplicated(a, ga), adjit.Duplicated(b, gb),
                       adjit.Duplicated(c, gc), *extra)
        return adjit.memory_stats()["peak_bytes"] - base, gb

    tight, g_tight = peak(solve_loss)
    loose, _ = peak(loose_loss)
    loop_200, g_loop = peak(solve_loss_loop, 200)
    assert tight <= loose + 16 * b.nbytes        # iterations cost no tape
    assert loop_200 > 50 * b.nbytes               # the plain loop keeps its iterates
    np.testing.assert_allclose(g_tight, g_loop, rtol=1e-10, atol=1e-13)


@adjit.func
def cosine_map(x: float, a: float, b: float) -> float:
    return adjit.cos(a * x) + b


@adjit.jit
def scalar_root(a: float, b: float):
    return adjit.fixed_point(cosine_map, 0.0, a, b, tol=1e-15, max_iter=500)


def test_a_scalar_fixed_point_against_the_implicit_derivative():
    a, b = 0.7, 0.2
    x = scalar_root(a, b)
    assert x == pytest.approx(math.cos(a * x) + b, abs=1e-14)
    da, db = adjit.autodiff(adjit.Reverse, scalar_root, adjit.Active(a), adjit.Active(b))
    # x = cos(a x) + b: dx (1 + a sin(a x)) = -x sin(a x) da + db
    s = math.sin(a * x)
    assert da == pytest.approx(-x * s / (1 + a * s), rel=1e-12)
    assert db == pytest.approx(1 / (1 + a * s), rel=1e-12)
    h = 1e-6
    assert da == pytest.approx((scalar_root(a + h, b) - scalar_root(a - h, b)) / (2 * h),
                               rel=1e-7)


def test_forward_mode_iterates_the_tangents_to_the_same_derivative():
    a, b, c = system()
    db = np.random.default_rng(9).standard_normal(b.size)
    t = adjit.autodiff(adjit.Forward, solve_loss, adjit.Const(a), adjit.Duplicated(b, db),
                       adjit.Const(c))
    assert t == pytest.approx(np.linalg.solve(a.T, c) @ db, rel=1e-10)


def test_from_python_it_iterates_in_python():
    a, b, _ = system()
    x = adjit.fixed_point(jacobi, np.zeros_like(b), a, b, tol=1e-14, max_iter=2000)
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-12)


def test_a_step_of_another_type_is_refused():
    @adjit.jit
    def halve(x):
        return adjit.sum(x) * 0.5

    @adjit.jit
    def bad(x):
        return adjit.fixed_point(halve, x)

    with pytest.raises(adjit.CompilationError, match="must return one value of x0's type"):
        bad(np.ones(3))
