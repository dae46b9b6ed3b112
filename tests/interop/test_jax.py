"""adjit.jax.function: adjit functions and kernels inside jax.jit, jax.grad and jax.vmap;
each gradient equals adjit's own and central differences."""
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import adjit
from adjit.interop import jax as jax_interop

sys.path.insert(0, str(Path(__file__).parent))
import heat  # noqa: E402

jax.config.update("jax_enable_x64", True)     # float64: gradients compared to 1e-12

N, STEPS = 16, 10


@adjit.kernel
def saxpy(a: adjit.f64, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


@adjit.jit
def writes_its_argument(x):
    x[0] = 1.0
    return adjit.sum(x)


@adjit.jit
def first_n(x, n: int):
    return adjit.arange(n) * x[0]


def initial():
    return jnp.asarray(np.sin(np.linspace(0.0, 3.0, N)) + 0.5)


def test_jax_grad_through_an_adjit_function_is_adjits_gradient():
    energy = adjit.jax.function(heat.energy)
    u0 = initial()
    g, dk = jax.grad(energy, argnums=(0, 2))(u0, STEPS, 0.2)
    want_u, want_k = adjit.grad(heat.energy, argnums=(0, 2))(np.asarray(u0), STEPS, 0.2)
    np.testing.assert_allclose(np.asarray(g), want_u, rtol=1e-12)
    assert float(dk) == pytest.approx(want_k, rel=1e-12)
    # under jax.jit, composed with JAX's own operations, and against central differences
    target = jnp.linspace(0.0, 1.0, N)
    simulate = adjit.jax.function(heat.simulate)

    def loss(u, kappa):
        return jnp.mean((simulate(u, STEPS, kappa) - target) ** 2)
    value, (gu, gk) = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(u0, 0.2)
    du = np.zeros(N)
    ks = adjit.autodiff(adjit.Reverse, heat.mse, adjit.Duplicated(np.asarray(u0), du),
                        STEPS, adjit.Active(0.2), np.asarray(target))
    np.testing.assert_allclose(np.asarray(gu), du, rtol=1e-12, atol=1e-15)
    assert float(gk) == pytest.approx(ks[2], rel=1e-12)
    assert float(value) == pytest.approx(float(heat.mse(np.asarray(u0), STEPS, 0.2,
                                                        np.asarray(target))), rel=1e-14)
    h = 1e-6
    for j in (1, N // 2):
        e = jnp.zeros(N).at[j].set(h)
        fd = (loss(u0 + e, 0.2) - loss(u0 - e, 0.2)) / (2 * h)
        assert float(gu[j]) == pytest.approx(float(fd), rel=1e-6, abs=1e-11)
    fd = (loss(u0, 0.2 + h) - loss(u0, 0.2 - h)) / (2 * h)
    assert float(gk) == pytest.approx(float(fd), rel=1e-6)


def test_a_kernel_launch_in_jax():
    step = adjit.jax.function(saxpy, outputs="y")
    x, y = jnp.linspace(0.0, 1.0, 5), jnp.ones(5)
    out = jax.jit(step)(2.0, x, y)
    np.testing.assert_allclose(np.asarray(out), 2 * np.asarray(x) + 1)
    np.testing.assert_array_equal(np.asarray(y), np.ones(5))        # JAX's array is unchanged
    ga, gx, gy = jax.grad(lambda a, x, y: jnp.sum(step(a, x, y) ** 2), argnums=(0, 1, 2))(
        2.0, x, y)
    r = 2 * (2 * np.asarray(x) + 1)
    assert float(ga) == pytest.approx(float(np.sum(r * np.asarray(x))), rel=1e-14)
    np.testing.assert_allclose(np.asarray(gx), 2 * r)
    np.testing.assert_allclose(np.asarray(gy), r)


def test_vmap_runs_each_element():
    energy = adjit.jax.function(heat.energy)
    batch = jnp.stack([initial(), 2 * initial()])
    out = jax.vmap(lambda u: energy(u, STEPS, 0.2))(batch)
    want = [heat.energy(np.asarray(u), STEPS, 0.2) for u in batch]
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-14)
    grads = jax.vmap(jax.grad(lambda u: energy(u, STEPS, 0.2)))(batch)
    np.testing.assert_allclose(np.asarray(grads[1]),
                               adjit.grad(heat.energy)(np.asarray(batch[1]), STEPS, 0.2),
                               rtol=1e-12)


def test_adjit_views_the_callbacks_arrays_without_copies(monkeypatch):
    # JAX hands a pure_callback copies of its operands (its host-callback machinery); adjit
    # computes on those without copying them again.
    pairs = []
    view = jax_interop.host_value

    def spy(v, *rest):
        out = view(v, *rest)
        if isinstance(v, jax.Array):       # (not the NumPy zeros of the shape probe)
            pairs.append((v.unsafe_buffer_pointer(), out.ctypes.data))
        return out
    monkeypatch.setattr(jax_interop, "host_value", spy)
    adjit.jax.function(heat.energy)(initial(), STEPS, 0.2)
    assert pairs and all(given == seen for given, seen in pairs)
    # and JAX's arrays, as adjit arguments anywhere, are read-only views
    x = jnp.ones(4)
    assert heat.energy(x, 1, 0.1) == pytest.approx(4.0)
    with pytest.raises(ValueError, match="read-only"):
        saxpy(2.0, x, jnp.ones(4), ndrange=4)


def test_result_shape_and_refusals():
    f = adjit.jax.function(first_n, result_shape=jax.ShapeDtypeStruct((3,), jnp.float64))
    np.testing.assert_allclose(np.asarray(jax.jit(lambda x: f(x, 3))(jnp.full(2, 2.0))),
                               [0.0, 2.0, 4.0])
    with pytest.raises(ValueError, match="writes its argument 'x'"):
        adjit.jax.function(writes_its_argument)(jnp.ones(3))
    with pytest.raises(TypeError, match="name them, outputs="):
        adjit.jax.function(saxpy)
