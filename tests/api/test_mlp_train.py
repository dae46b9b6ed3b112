"""An MLP trained in a compiled loop (issue 30): `adjit.value_and_grad` of the loss called
each step of an @adjit.jit loop gives NumPy's hand backpropagation's parameters, float32
kept, and its gradient agrees with JAX's float64 one and central differences."""
import sys
from pathlib import Path

import numpy as np
import pytest

import adjit

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_mlp_train as bench  # noqa: E402


def test_trained_parameters_are_numpy_s():
    args = bench.problem(batch=6, seed=3)
    got = bench.train_adjit(*args, 0.1, 4)
    want = bench.train_numpy(*args, 0.1, 4)
    assert len(got) == 6
    for g, w, a in zip(got, want, args):
        assert g.dtype == np.float32 and g.shape == a.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)
    # the training moved the parameters (a loop that ran no step would also agree at 0 steps)
    assert not np.allclose(got[2], args[2])


def test_zero_steps_return_the_parameters():
    args = bench.problem(batch=5, seed=4)
    for g, a in zip(bench.train_adjit(*args, 0.1, 0), args):
        np.testing.assert_array_equal(g, a)


def test_the_step_s_gradient_against_jax_and_finite_differences():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    args = [a.astype(np.float64) for a in bench.problem(batch=5, seed=5)]
    value, grads = adjit.value_and_grad(bench.loss, (0, 1, 2, 3, 4, 5))(*args)

    def jloss(w1, b1, w2, b2, w3, b3, x, y):
        h1 = jnp.tanh(x @ w1 + b1)
        h2 = jnp.tanh(h1 @ w2 + b2)
        return jnp.mean((h2 @ w3 + b3 - y) ** 2)
    jvalue, jgrads = jax.value_and_grad(jloss, (0, 1, 2, 3, 4, 5))(*args)
    assert value == pytest.approx(float(jvalue), rel=1e-12)
    for g, w in zip(grads, jgrads):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-10, atol=1e-13)
    h = 1e-6
    e = np.zeros_like(args[2])
    e[1, 2] = h
    up = bench.loss(args[0], args[1], args[2] + e, *args[3:])
    down = bench.loss(args[0], args[1], args[2] - e, *args[3:])
    assert grads[2][1, 2] == pytest.approx((up - down) / (2 * h), rel=1e-6, abs=1e-9)
