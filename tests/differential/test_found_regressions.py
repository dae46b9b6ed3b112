"""Failures the instrument found (test_differential.py's random programs and the composition
matrix), each reduced to a named test against JAX (or, for check_grad, to what it must
report). Each failed when it was found; all were fixed by their owners meanwhile."""
import os
import sys

import numpy as np
import pytest

import adjit

sys.path.insert(0, os.path.dirname(__file__))
import found_programs as fp  # noqa: E402


def _jax():
    import jax
    jax.config.update("jax_enable_x64", True)
    return jax


def _jnp_fd(x0, x1):
    jnp = _jax().numpy
    v2 = jnp.cbrt(2.0 + jnp.sin(x1))
    return jnp.power(1.5 + x1 * x1, jnp.sin(x0)) * 0.0 + v2 * 0.5 + jnp.cos(x1) * x0


@pytest.mark.parametrize("jac", ["jacfwd", "jacrev", "hessian"])
def test_jacobians_with_respect_to_a_0d_array_beside_a_vector(jac):
    # found by the generator: jacrev(fd)(x0, x1), x0 0-d, x1 of shape (3,): an internal
    # error ('memref.collapse_shape' op has source rank 0 and result rank 1)
    jax = _jax()
    x0, x1 = np.array(0.3), np.array([0.2, -0.4, 0.7])
    if jac == "hessian":
        got = adjit.hessian(fp.loss_0d)(x0, x1)
        want = jax.hessian(lambda a, b: jax.numpy.sum(jax.numpy.sin(_jnp_fd(a, b))))(x0, x1)
    else:
        got = getattr(adjit, jac)(fp.fd_0d)(x0, x1)
        want = getattr(jax, jac)(_jnp_fd)(x0, x1)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10)
    assert np.asarray(got).shape == np.asarray(want).shape


@pytest.mark.parametrize("transform", ["hvp", "jacfwd", "jacrev", "hessian", "in_jit"])
@pytest.mark.parametrize("layout", ["fortran", "reversed"])
def test_transforms_of_strided_arrays(transform, layout):
    # found by the composition matrix: the shadow a transform makes for a strided argument
    # is contiguous, then refused ('the shadow must be an array of the same type, ...
    # strided')
    jax = _jax()
    base = np.linspace(-0.9, 0.8, 6)
    x = np.asfortranarray(base.reshape(3, 2)) if layout == "fortran" else base[::-1]
    v = np.ones_like(x)

    def ref(z):
        return jax.numpy.sum(jax.numpy.sin(z) * z)

    if transform == "hvp":
        got, want = adjit.hvp(fp.sin_x_x, (x,), (v,)), jax.jvp(jax.grad(ref), (x,), (v,))[1]
    elif transform == "in_jit":
        got, want = fp.grad_sin_x_x(x), jax.grad(ref)(x)
    elif transform == "hessian":
        got, want = adjit.hessian(fp.sin_x_x)(x), jax.hessian(ref)(x)
    else:
        got, want = getattr(adjit, transform)(fp.sin_x_x)(x), jax.grad(ref)(x)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", ["0-d", "vector"])
def test_check_grad_of_a_correct_float32_gradient_reports_a_small_error(kind):
    # found by the composition matrix: check_grad took its finite differences in float32
    # with eps=1e-6 (16 ulp at 0.5): 1-9% "error" for an exact gradient (fixed meanwhile)
    x = (np.array(0.37, np.float32) if kind == "0-d" else
         np.array([0.3, -0.8, 0.55], np.float32))
    assert adjit.check_grad(fp.sin_x_x, x) < 1e-3


def _jnp_matmul_after_loop(x0, s0):
    jnp = _jax().numpy
    v2 = x0
    for _ in range(3):
        v2 = jnp.sin(v2) * 0.9 + jnp.tanh(x0)
    v3 = x0 @ x0
    return jnp.sum(jnp.sin(jnp.clip(s0, -0.5, 0.75) * 0.5 + jnp.cos(v2))) + 0.0 * v3


def _jnp_matmul_of_loop(x0, w):
    jnp = _jax().numpy
    v2 = x0
    for _ in range(3):
        v2 = jnp.sin(v2) * 0.9 + jnp.tanh(x0)
    return jnp.sum(jnp.sin(v2 @ w))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_second_order_and_value_and_grad_of_a_product_after_a_loop(dtype):
    # found by the generator: hvp of a program with x0 @ v1 after a loop carrying an array:
    # "@adj_gemm_f64 has no body to differentiate" (second order through @)
    jax = _jax()
    x0, v = np.linspace(-0.7, 0.6, 3).astype(dtype), np.array([0.3, -0.2, 0.5], dtype)
    got = adjit.hvp(fp.loss_matmul_after_loop, (x0, 0.4), (v, 1.0))
    want = jax.jvp(jax.grad(_jnp_matmul_after_loop, argnums=(0, 1)), (x0, 0.4), (v, 1.0))[1]
    tol = 1e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(got[0], np.asarray(want[0]), rtol=tol, atol=tol)
    assert np.asarray(got[0]).dtype == dtype
    np.testing.assert_allclose(got[1], float(want[1]), rtol=tol, atol=tol)
    # the same program's value_and_grad: its augmented forward returned a strided 3-D
    # array where the function's type said contiguous (an internal MLIR error)
    value, grads = adjit.value_and_grad(fp.loss_matmul_after_loop, argnums=(0, 1))(x0, 0.4)
    want_value, want_grads = jax.value_and_grad(_jnp_matmul_after_loop, argnums=(0, 1))(x0, 0.4)
    np.testing.assert_allclose(value, float(want_value), rtol=tol)
    np.testing.assert_allclose(grads[0], np.asarray(want_grads[0]), rtol=tol, atol=tol)
    np.testing.assert_allclose(grads[1], float(want_grads[1]), rtol=tol, atol=tol)
    w = np.linspace(-1, 1, 6).reshape(3, 2).astype(dtype)
    got = adjit.hvp(fp.loss_matmul_of_loop, (x0, w), (v, np.ones_like(w)))
    want = jax.jvp(jax.grad(_jnp_matmul_of_loop, argnums=(0, 1)), (x0, w),
                   (v, np.ones_like(w)))[1]
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(r), rtol=tol, atol=tol)


def test_a_run_time_size_1_into_an_empty_slice_works_or_is_refused_at_its_line():
    # found by the generator (seed 5, program 67): NumPy broadcasts the (1, 1) view into
    # the (0, 1) slice; adjit broadcasts only along dimensions known to be 1 when compiling
    # (README), and this one is known at run time. A clear ValueError at the assignment's
    # line is the documented refusal; a wrong value, a crash or an unclear error is not.
    x = np.ones((1, 1), np.float32)
    try:
        got = fp.assign_into_empty_slice(x, -1)
    except ValueError as e:
        assert "different shapes" in str(e) and "found_programs.py:" in str(e), str(e)
        line = int(str(e).split("found_programs.py:")[1].split(")")[0].split(":")[0])
        with open(fp.__file__) as fh:
            assert "t[1:] = np.sin(v)" in fh.read().splitlines()[line - 1]
    else:
        np.testing.assert_array_equal(got, x)
        assert got.dtype == np.float32


@pytest.mark.parametrize("value", [0.5, np.float32(0.5)])
def test_ravel_of_a_scalar_is_refused_at_its_line(value):
    # found by the CI budget: np.ravel(s0) of a Python float was an internal error
    # ("'Scalar' object has no attribute 'shape'"); reshape() refuses a scalar, and now ravel
    # too, naming it, at the call's line
    with pytest.raises(adjit.CompilationError) as info:
        fp.ravel_of_a_scalar(value)
    assert not isinstance(info.value, adjit.InternalCompilerError)
    assert "ravel() takes an array" in str(info.value)
    assert "found_programs.py:" in str(info.value) and "np.ravel(s0)" in str(info.value)
