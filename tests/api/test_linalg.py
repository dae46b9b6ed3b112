"""np.linalg.solve, inv, det, cholesky and norm, np.outer and np.einsum in @jit code (issue 33,
item 2): NumPy's values, dtypes and shapes (f32, f64, integers; sizes 0 and 1), NumPy's errors
(LinAlgError for a singular matrix and one that is not positive definite, at the user's
line), the refusals (kernels, device functions, stacks of matrices, einsum's subscripts), and
the derivatives in every mode against JAX in float64 and finite differences: reverse, forward,
batched tangents (jacfwd), second order (hessian, jvp of grad), an input overwritten after the
call."""
from __future__ import annotations

import numpy as np
import pytest

import adjit
from adjit.core.errors import CompilationError

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)


@adjit.jit
def everything(a, b, s):
    return (np.linalg.solve(a, b), np.linalg.solve(a, np.outer(b, b)), np.linalg.inv(a),
            np.linalg.det(a), np.linalg.cholesky(s), np.linalg.norm(a), np.outer(b, b),
            np.einsum("ij,j->i", a, b))


def numpy_everything(a, b, s):
    return (np.linalg.solve(a, b), np.linalg.solve(a, np.outer(b, b)), np.linalg.inv(a),
            np.linalg.det(a), np.linalg.cholesky(s), np.linalg.norm(a), np.outer(b, b),
            np.einsum("ij,j->i", a, b))


def _inputs(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n)) * 3 + 5 * np.eye(n)
    m = rng.standard_normal((n, n))
    return (a.astype(dtype), (rng.standard_normal(n) * 3).astype(dtype),
            (m @ m.T + n * np.eye(n)).astype(dtype))


@pytest.mark.parametrize("n", [0, 1, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_values_dtypes_and_shapes_are_numpys(n, dtype):
    args = _inputs(n, dtype)
    if dtype == np.int64:
        args = tuple(np.rint(x).astype(np.int64) for x in args)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for ours, want in zip(everything(*args), numpy_everything(*args)):
        ours = np.asarray(ours)
        assert ours.dtype == np.asarray(want).dtype and ours.shape == np.shape(want)
        np.testing.assert_allclose(ours, want, rtol=tol, atol=tol)


@adjit.jit
def norms(x, m):
    return (np.linalg.norm(x), np.linalg.norm(x, 2), np.linalg.norm(x, 1),
            np.linalg.norm(x, np.inf), np.linalg.norm(x, -np.inf), np.linalg.norm(x, 0),
            np.linalg.norm(x, 3), np.linalg.norm(x, keepdims=True), np.linalg.norm(m),
            np.linalg.norm(m, "fro"), np.linalg.norm(m, 1), np.linalg.norm(m, -1),
            np.linalg.norm(m, np.inf), np.linalg.norm(m, -np.inf), np.linalg.norm(m, axis=1),
            np.linalg.norm(m, 1, axis=0), np.linalg.norm(m, np.inf, 1, True),
            np.linalg.norm(m, axis=(1, 0)), np.linalg.norm(m, keepdims=True))


def numpy_norms(x, m):
    return (np.linalg.norm(x), np.linalg.norm(x, 2), np.linalg.norm(x, 1),
            np.linalg.norm(x, np.inf), np.linalg.norm(x, -np.inf), np.linalg.norm(x, 0),
            np.linalg.norm(x, 3), np.linalg.norm(x, keepdims=True), np.linalg.norm(m),
            np.linalg.norm(m, "fro"), np.linalg.norm(m, 1), np.linalg.norm(m, -1),
            np.linalg.norm(m, np.inf), np.linalg.norm(m, -np.inf), np.linalg.norm(m, axis=1),
            np.linalg.norm(m, 1, axis=0), np.linalg.norm(m, np.inf, 1, True),
            np.linalg.norm(m, axis=(1, 0)), np.linalg.norm(m, keepdims=True))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_norms_are_numpys(dtype):
    rng = np.random.default_rng(1)
    x = np.array([0.0, -2.0, 1.5, 3.0, -0.5], dtype)
    m = rng.standard_normal((3, 4)).astype(dtype)
    tol = 1e-6 if dtype == np.float32 else 1e-14
    for ours, want in zip(norms(x, m), numpy_norms(x, m)):
        ours = np.asarray(ours)
        assert ours.dtype == np.asarray(want).dtype and ours.shape == np.shape(want)
        np.testing.assert_allclose(ours, want, rtol=tol)


@adjit.jit
def contractions(a, b, m, n, s):
    return (np.einsum("ij,jk->ik", m, n), np.einsum("i,i->", a, b), np.einsum("i,j->ij", a, b),
            np.einsum("ii->", s), np.einsum("ii->i", s), np.einsum("ij->ji", m),
            np.einsum("ij->i", m), np.einsum("ij,j->i", m, n[:, 0]),
            np.einsum("ij,jk,kl->il", m, n, n.T), np.einsum("ij,kj->ik", m, m),
            np.einsum("ji,jk->ik", m, m), np.einsum("ij", m), np.einsum("ij,ij->", m, m),
            np.einsum("bij,bjk->bik", np.outer(a, b).reshape(5, 1, 5),
                      np.outer(b, a).reshape(5, 5, 1)),
            np.einsum("ij,ji", s, s), np.einsum("ij, jk -> ik", m, n))


def numpy_contractions(a, b, m, n, s):
    return (np.einsum("ij,jk->ik", m, n), np.einsum("i,i->", a, b), np.einsum("i,j->ij", a, b),
            np.einsum("ii->", s), np.einsum("ii->i", s), np.einsum("ij->ji", m),
            np.einsum("ij->i", m), np.einsum("ij,j->i", m, n[:, 0]),
            np.einsum("ij,jk,kl->il", m, n, n.T), np.einsum("ij,kj->ik", m, m),
            np.einsum("ji,jk->ik", m, m), np.einsum("ij", m), np.einsum("ij,ij->", m, m),
            np.einsum("bij,bjk->bik", np.outer(a, b).reshape(5, 1, 5),
                      np.outer(b, a).reshape(5, 5, 1)),
            np.einsum("ij,ji", s, s), np.einsum("ij, jk -> ik", m, n))


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_einsum_and_outer_are_numpys(dtype):
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(s) * 3 for s in [(5,), (5,), (3, 4), (4, 2), (3, 3)]]
    args = [np.rint(x).astype(dtype) for x in args] if dtype == np.int64 else args
    for ours, want in zip(contractions(*args), numpy_contractions(*args)):
        ours = np.asarray(ours)
        assert ours.dtype == np.asarray(want).dtype and ours.shape == np.shape(want)
        np.testing.assert_allclose(ours, want, rtol=1e-13, atol=1e-13)


@adjit.jit
def stacked(a, b, bs, v, s):
    return (np.linalg.solve(a, b), np.linalg.solve(a, bs), np.linalg.solve(a, v),
            np.linalg.inv(a), np.linalg.det(a), np.linalg.cholesky(s))


def test_stacks_of_matrices_are_numpys():
    rng = np.random.default_rng(16)
    a = rng.standard_normal((2, 3, 4, 4)) + 4 * np.eye(4)
    m = rng.standard_normal((2, 3, 4, 4))
    s = m @ np.swapaxes(m, -1, -2) + np.eye(4)
    args = (a, rng.standard_normal(4), rng.standard_normal((2, 3, 4, 2)),
            rng.standard_normal((4, 5)), s)
    ours = stacked(*args)
    want = (np.linalg.solve(a, args[1]), np.linalg.solve(a, args[2]),
            np.linalg.solve(a, args[3]), np.linalg.inv(a), np.linalg.det(a),
            np.linalg.cholesky(s))
    for o, w in zip(ours, want):
        assert o.shape == w.shape
        np.testing.assert_allclose(o, w, rtol=1e-12, atol=1e-13)
    with pytest.raises(ValueError, match="the stacks of a and b differ"):
        stacked(a, args[1], args[2][:1], args[3], s)


@adjit.jit
def stacked_loss(a, b):
    return np.sum(np.linalg.solve(a, b) ** 2) + np.sum(np.linalg.det(a))


def test_stacks_of_matrices_gradient_matches_jax():
    rng = np.random.default_rng(17)
    a, b = rng.standard_normal((3, 3, 3)) + 3 * np.eye(3), rng.standard_normal((3, 3, 2))
    ours = adjit.grad(stacked_loss, argnums=(0, 1))(a, b)
    want = jax.grad(lambda a, b: jnp.sum(jnp.linalg.solve(a, b) ** 2)
                    + jnp.sum(jnp.linalg.det(a)), argnums=(0, 1))(a, b)
    for o, w in zip(ours, want):
        np.testing.assert_allclose(o, w, rtol=1e-10, atol=1e-12)


# -- errors -----------------------------------------------------------------------------------
@adjit.jit
def solve(a, b):
    return np.linalg.solve(a, b)


@adjit.jit
def inv(a):
    return np.linalg.inv(a)


@adjit.jit
def det(a):
    return np.linalg.det(a)


@adjit.jit
def cholesky(a):
    return np.linalg.cholesky(a)


def test_singular_and_not_positive_definite_raise_linalgerror_at_the_users_line():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(np.linalg.LinAlgError, match=r"Singular matrix \(at .*test_linalg.py"):
        solve(singular, np.ones(2))
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        inv(np.zeros((3, 3)))
    with pytest.raises(np.linalg.LinAlgError, match="Matrix is not positive definite"):
        cholesky(np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(np.linalg.LinAlgError, match="must be square"):
        det(np.ones((2, 3)))
    with pytest.raises(ValueError, match="b's first dimension"):
        solve(np.eye(3), np.ones(2))
    assert det(singular) == 0.0 and det(np.zeros((3, 3))) == 0.0


@adjit.jit
def bad_ellipsis(a, b):
    return np.einsum('...ij,jk', a, b)


@adjit.jit
def bad_operands(a, b):
    return np.einsum('ij,jk->ik', a)


@adjit.jit
def bad_rank(a, b):
    return np.einsum('ijk,jk->i', a, b)


@adjit.jit
def bad_output(a, b):
    return np.einsum('ij,jk->iz', a, b)


@adjit.jit
def bad_norm2(a, b):
    return np.linalg.norm(a, 2)


@adjit.jit
def bad_normbad(a, b):
    return np.linalg.norm(a, 'bad')


@adjit.jit
def bad_stack(a, b):
    return np.linalg.solve(a.reshape(1, 2, 2), b.reshape(1, 1, 2, 2))


@adjit.jit
def bad_scalar(a, b):
    return np.linalg.det(b[0, 0])


@adjit.jit
def bad_upper(a, b):
    return np.linalg.cholesky(a, upper=True)


@pytest.mark.parametrize("fn,message", [
    (bad_ellipsis, "subscripts '...ij,jk' are not compiled"),
    (bad_operands, 'name 2 operand(s) and 1 were given'),
    (bad_rank, "'ijk' names 3 dimensions of an operand that has 2"),
    (bad_output, "the output 'iz' must name distinct letters"),
    (bad_norm2, 'ord=2 of a matrix needs its singular values'),
    (bad_normbad, "invalid norm order 'bad' for matrices"),
    (bad_stack, "b of shape (..., M, K) needs a's number of dimensions (3), got 4"),
    (bad_scalar, 'np.linalg.det: a must be an array'),
    (bad_upper, 'upper=True is not compiled'),
])
def test_what_is_not_compiled_is_a_clear_error(fn, message):
    with pytest.raises(CompilationError) as e:
        fn(np.eye(2), np.eye(2))
    assert message in str(e.value)


@adjit.kernel
def kernel_det(a, out):
    out[0] = np.linalg.det(a)


@adjit.func
def func_inv(a):
    return np.linalg.inv(a)


@adjit.jit
def calls_func_inv(a):
    return func_inv(a)


def test_kernels_and_device_functions_refuse_linalg():
    with pytest.raises(CompilationError, match="not compiled in kernels.*adjit.determinant"):
        kernel_det(np.eye(2), np.zeros(1), ndrange=1)
    with pytest.raises(CompilationError, match="allocates an array: only @adjit.jit"):
        calls_func_inv(np.eye(2))


# -- derivatives ------------------------------------------------------------------------------
@adjit.jit
def loss(a, b, s, w):
    x = np.linalg.solve(a, b)
    return (np.sum(x * w[0]) + np.sum(np.linalg.inv(a) * w) + np.linalg.det(a)
            + np.sum(np.linalg.cholesky(s) * w) + np.linalg.norm(x) + np.linalg.norm(a, 1)
            + np.einsum("ij,jk,kl->", a, w, a) + np.sum(np.outer(b, x) * w)
            + np.einsum("ii->", a * a))


def jax_loss(a, b, s, w):
    x = jnp.linalg.solve(a, b)
    return (jnp.sum(x * w[0]) + jnp.sum(jnp.linalg.inv(a) * w) + jnp.linalg.det(a)
            + jnp.sum(jnp.linalg.cholesky(s) * w) + jnp.linalg.norm(x) + jnp.linalg.norm(a, 1)
            + jnp.einsum("ij,jk,kl->", a, w, a) + jnp.sum(jnp.outer(b, x) * w)
            + jnp.einsum("ii->", a * a))


def _loss_inputs(n=3):
    a, b, s = _inputs(n, np.float64, seed=3)
    w = np.random.default_rng(4).standard_normal((n, n))
    return a, b, s, w


def test_reverse_and_forward_derivatives_match_jax():
    args = _loss_inputs()
    ours = adjit.grad(loss, argnums=(0, 1, 2))(*args)
    want = jax.grad(jax_loss, argnums=(0, 1, 2))(*args)
    for o, w in zip(ours, want):
        np.testing.assert_allclose(o, w, rtol=1e-10, atol=1e-12)
    rng = np.random.default_rng(5)
    ds = rng.standard_normal(args[2].shape)
    tangents = (rng.standard_normal(args[0].shape), rng.standard_normal(args[1].shape),
                ds + ds.T, np.zeros_like(args[3]))
    value, tangent = adjit.jvp(loss, args, tangents)
    want_value, want_tangent = jax.jvp(jax_loss, args, tangents)
    np.testing.assert_allclose([value, tangent], [want_value, want_tangent], rtol=1e-10)


@adjit.jit
def smooth(a, b, m):
    n = b.shape[0]
    s = m @ m.T + np.outer(b, b)
    for i in range(n):
        s[i, i] += 4.0            # symmetric, positive definite, whatever the direction
    return (np.sum(np.linalg.solve(a, b) * b) + np.linalg.det(a)
            + np.sum(np.linalg.cholesky(s)) + np.sum(np.linalg.inv(a) * m))


def test_finite_differences():
    a, b, _ = _inputs(3, np.float64, seed=6)
    m = np.random.default_rng(7).standard_normal((3, 3))
    assert adjit.check_grad(smooth, a, b, m) < 1e-6


@adjit.jit
def second(a, b):
    return np.sum(np.linalg.solve(a, b) ** 2) + np.linalg.det(a) ** 2 + np.linalg.norm(b, 3)


def jax_second(a, b):
    return (jnp.sum(jnp.linalg.solve(a, b) ** 2) + jnp.linalg.det(a) ** 2
            + jnp.linalg.norm(b, 3))


def test_second_order_matches_jax():
    a, b, _ = _inputs(2, np.float64, seed=8)
    np.testing.assert_allclose(np.asarray(adjit.hessian(second)(a, b)),
                               jax.hessian(jax_second)(a, b), rtol=1e-9, atol=1e-12)
    da = np.random.default_rng(9).standard_normal(a.shape)
    _, ours = adjit.jvp(adjit.grad(second), (a, b), (da, np.zeros(2)))
    _, want = jax.jvp(jax.grad(jax_second), (a, b), (da, jnp.zeros(2)))
    np.testing.assert_allclose(ours, want, rtol=1e-9, atol=1e-12)


@adjit.jit
def chol_loss(s, w):
    return np.sum(np.linalg.cholesky(s) * w)


def test_cholesky_second_order_matches_jax():
    _, _, s = _inputs(3, np.float64, seed=10)
    w = np.random.default_rng(11).standard_normal((3, 3))
    np.testing.assert_allclose(
        np.asarray(adjit.hessian(chol_loss)(s, w)),
        jax.hessian(lambda s, w: jnp.sum(jnp.linalg.cholesky(s) * w))(s, w), atol=1e-12)


def test_batched_tangents_and_jacobians_match_jax():
    a, b, _ = _inputs(3, np.float64, seed=12)
    np.testing.assert_allclose(adjit.jacfwd(solve, argnums=0)(a, b),
                               jax.jacfwd(jnp.linalg.solve, argnums=0)(a, b), atol=1e-13)
    np.testing.assert_allclose(adjit.jacrev(solve, argnums=0)(a, b),
                               jax.jacrev(jnp.linalg.solve, argnums=0)(a, b), atol=1e-13)
    np.testing.assert_allclose(adjit.jacfwd(det)(a), jax.jacfwd(jnp.linalg.det)(a),
                               rtol=1e-12)
    np.testing.assert_allclose(adjit.jacfwd(inv)(a), jax.jacfwd(jnp.linalg.inv)(a),
                               atol=1e-13)


@adjit.jit
def overwritten(a, b, s):
    x = np.linalg.solve(a, b)
    ell = np.linalg.cholesky(s)
    d = np.linalg.det(a)
    a[0, 0] = 100.0          # the rules taped what they read of a, x and ell
    y = x * 2.0
    x[1] = 7.0
    z = ell * 1.0
    ell[1, 0] = 5.0
    s[1, 1] = 9.0
    return np.sum(y * y) + a[0, 0] + d * d + np.sum(z * z)


def jax_overwritten(a, b, s):
    x = jnp.linalg.solve(a, b)
    d = jnp.linalg.det(a)
    return jnp.sum(4 * x * x) + d * d + jnp.sum(jnp.linalg.cholesky(s) ** 2)


def test_inputs_overwritten_after_the_call():
    a, b, s = _inputs(3, np.float64, seed=13)
    ours = adjit.grad(overwritten, argnums=(0, 1, 2))(a.copy(), b, s.copy())
    want = jax.grad(jax_overwritten, argnums=(0, 1, 2))(a, b, s)
    for o, w in zip(ours, want):
        np.testing.assert_allclose(o, w, rtol=1e-10, atol=1e-12)


@adjit.jit
def norm2(x):
    return np.linalg.norm(x)


@adjit.jit
def norm1(x):
    return np.linalg.norm(x, 1)


def test_norm_at_zero_is_jaxs():
    # the 2-norm's gradient at 0 is NaN (0 * 1/sqrt(0)), as JAX's; the 1-norm's is
    # sign-like with d|x|/dx = 1 at 0, as JAX's
    z = np.zeros(3)
    assert np.isnan(adjit.grad(norm2)(z)).all() and np.isnan(jax.grad(jnp.linalg.norm)(z)).all()
    np.testing.assert_array_equal(adjit.grad(norm1)(z),
                                  jax.grad(lambda v: jnp.linalg.norm(v, 1))(z))


def test_float32_gradients_stay_float32():
    a, b, _ = (x.astype(np.float32) for x in _inputs(3, np.float64, seed=14))
    g = adjit.grad(det)(a)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, jax.grad(jnp.linalg.det)(a.astype(np.float64)), rtol=1e-4)


@pytest.mark.parametrize("a", [[[1.0, 2.0], [2.0, 4.0]], [[0.0, 1.0], [0.0, 0.0]],
                               np.zeros((3, 3)), [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0],
                                                  [1.0, 0.0, 1.0]]])
def test_det_at_a_singular_matrix_is_0_and_its_gradient_the_cofactors(a):
    a = np.asarray(a)
    assert det(a) == 0.0
    np.testing.assert_allclose(adjit.grad(det)(a), jax.grad(jnp.linalg.det)(a), atol=1e-12)
    da = np.random.default_rng(15).standard_normal(a.shape)
    _, tangent = adjit.jvp(det, (a,), (da,))
    np.testing.assert_allclose(tangent, jax.jvp(jnp.linalg.det, (a,), (da,))[1], atol=1e-12)


def test_device_cuda_refuses_lapack():
    with pytest.raises(CompilationError, match="not compiled for device='cuda'"):
        solve.lower(np.eye(2), np.ones(2), device="cuda")


CACHED_PROGRAM = """
import sys
if "--block-mlir" in sys.argv:
    sys.modules["mlir"] = None          # any import of mlir now fails
import numpy as np
import adjit

@adjit.jit
def solve(a, b):
    return np.linalg.solve(a, b)

@adjit.jit
def det(a):
    return np.linalg.det(a)

a = np.array([[2.0, 1.0], [1.0, 3.0]])
try:
    solve(np.ones((2, 2)), np.ones(2))
    error = None
except np.linalg.LinAlgError as e:
    error = str(e).split(" (at")[0]
print({"x": solve(a, np.ones(2)).tolist(), "g": adjit.grad(det)(a).tolist(), "error": error,
       "mlir": "mlir.ir" in sys.modules})
if "--wait" in sys.argv:
    from adjit.runtime import cpu_cache
    assert cpu_cache.wait_for_builds(120)
"""


def test_a_process_without_mlir_calls_lapack_from_the_disk_cache(tmp_path):
    """The cache's shared objects call LAPACK by its symbols: runtime/cpu_cache.py makes
    them global (runtime/lapack.py) before loading one, in a process that compiles
    nothing."""
    import os
    import subprocess
    import sys
    script = tmp_path / "user_code.py"
    script.write_text(CACHED_PROGRAM)
    env = {**os.environ, "ADJIT_CACHE_DIR": str(tmp_path / "cache"), "ADJIT_DISK_CACHE": "1"}

    def run(*args):
        result = subprocess.run([sys.executable, str(script), *args], capture_output=True,
                                text=True, cwd=tmp_path, env=env, timeout=300)
        assert result.returncode == 0, result.stderr
        return eval(result.stdout.strip().splitlines()[-1])
    first = run("--wait")
    again = run("--block-mlir")
    assert first["mlir"] and not again["mlir"]
    assert {**again, "mlir": True} == first
    assert first["error"] == "Singular matrix"
    np.testing.assert_allclose(first["x"], [0.4, 0.2])
