"""Jacobians, Hessians and derivatives of derivatives of functions taking pytrees, and
functions returning them in jvp, vjp, jacfwd and jacrev (issue 33), from Python: JAX's
output structures (a tree of out.shape + leaf.shape blocks; a Hessian a tree of trees; a
tree result's Jacobian the result's structure outside), values against JAX in float64 and
central differences; size-0 and size-1 leaves, float32, and the refusals by name."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

import adjit


def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


class Layer(NamedTuple):
    W: np.ndarray
    b: np.ndarray


@adjit.jit
def predict(p, x):
    return np.tanh(x @ p["W"] + p["b"])


@adjit.jit
def energy(p, x):
    return np.sum(np.tanh(x @ p["W"] + p["b"]) ** 2) * p["s"]


@adjit.jit
def layer_energy(c, layer):
    return c * c * np.sum(layer.W ** 2) + c * np.sum(layer.b * layer.W)


@adjit.jit
def several(x, p):
    # a dict holding a nested tuple; an integer leaf (no derivatives) among the results
    return {"a": x * p["s"], "b": (np.sum(x * x) * p["s"], x * x * np.sum(p["w"]), 3)}


@adjit.jit
def pair(x):
    return x * 3.0, np.sum(np.sin(x))


def _jpredict(p, x):
    import jax.numpy as jnp
    return jnp.tanh(x @ p["W"] + p["b"])


def _jenergy(p, x):
    import jax.numpy as jnp
    return jnp.sum(jnp.tanh(x @ p["W"] + p["b"]) ** 2) * p["s"]


def _jlayer_energy(c, layer):
    import jax.numpy as jnp
    return c * c * jnp.sum(layer.W ** 2) + c * jnp.sum(layer.b * layer.W)


def _jseveral(x, p):
    import jax.numpy as jnp
    return {"a": x * p["s"], "b": (jnp.sum(x * x) * p["s"], x * x * jnp.sum(p["w"]))}


def _same(mine, theirs, rtol=1e-12, atol=0.0):
    """Same tree structure (containers, keys, classes) and leaves of the same shapes and
    values."""
    jax = _jax()
    assert jax.tree_util.tree_structure(mine) == jax.tree_util.tree_structure(theirs)
    for a, b in zip(jax.tree_util.tree_leaves(mine), jax.tree_util.tree_leaves(theirs)):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(a, np.asarray(b), rtol=rtol, atol=atol)


def _data(rng, n=2, d=3, h=2, dtype=np.float64):
    p = {"W": (rng.standard_normal((d, h)) / 2).astype(dtype),
         "b": rng.standard_normal(h).astype(dtype)}
    return p, rng.standard_normal((n, d)).astype(dtype)


def _fd_column(fn, tree, path, e, h=1e-6):
    """Central difference of fn(tree) along element e of tree[path]."""
    def moved(s):
        t = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in tree.items()}
        if isinstance(t[path], np.ndarray):
            t[path].flat[e] += s
        else:
            t[path] += s
        return np.asarray(fn(t))
    return (moved(h) - moved(-h)) / (2 * h)


# ---- Jacobians with respect to a tree argument ---------------------------------------------
@pytest.mark.parametrize("which", ["jacfwd", "jacrev"])
def test_the_jacobian_wrt_a_dict_is_a_dict_of_blocks(which):
    jax = _jax()
    p, x = _data(np.random.default_rng(0))
    J = getattr(adjit, which)(predict)(p, x)
    assert list(J) == ["W", "b"]
    assert J["W"].shape == (2, 2, 3, 2) and J["b"].shape == (2, 2, 2)
    _same(J, getattr(jax, which)(_jpredict)(p, x), rtol=1e-13)
    for e in (0, 5):
        np.testing.assert_allclose(J["W"].reshape(4, 6)[:, e],
                                   _fd_column(lambda t: predict(t, x), p, "W", e).ravel(),
                                   rtol=1e-7, atol=1e-9)
    # argnums: the plain array argument beside the tree
    _same(getattr(adjit, which)(predict, 1)(p, x), getattr(jax, which)(_jpredict, 1)(p, x),
          rtol=1e-13)


def test_jacobians_of_size_0_and_size_1_leaves_and_float32():
    jax = _jax()
    rng = np.random.default_rng(1)
    p, x = _data(rng, n=1, d=1, h=1)
    _same(adjit.jacfwd(predict)(p, x), jax.jacfwd(_jpredict)(p, x), rtol=1e-13)
    p0, x0 = _data(rng, n=0, d=3, h=2)
    J = adjit.jacrev(predict)(p0, x0)
    assert J["W"].shape == (0, 2, 3, 2) and J["b"].shape == (0, 2, 2)
    p32, x32 = _data(rng, dtype=np.float32)
    J = adjit.jacfwd(predict)(p32, x32)
    assert J["W"].dtype == np.float32
    _same(J, jax.jacfwd(_jpredict)(p32, x32), rtol=2e-5, atol=1e-6)


# ---- Hessians: a tree of trees ------------------------------------------------------------
def test_the_hessian_of_a_dict_is_a_dict_of_dicts():
    jax = _jax()
    p, x = _data(np.random.default_rng(2))
    p["s"] = 1.5
    H = adjit.hessian(energy)(p, x)
    assert list(H) == ["W", "b", "s"] and all(list(H[k]) == ["W", "b", "s"] for k in H)
    assert H["W"]["b"].shape == (3, 2, 2) and H["b"]["W"].shape == (2, 3, 2)
    assert np.shape(H["s"]["W"]) == (3, 2)
    _same(H, jax.hessian(_jenergy)(p, x), rtol=1e-12, atol=1e-14)
    # symmetric blocks: one the other's transpose
    np.testing.assert_allclose(H["b"]["W"], np.transpose(H["W"]["b"], (2, 0, 1)))
    # a column of H['W']['W'] against differences of the gradient
    gW = lambda t: adjit.grad(energy)(t, x)["W"]     # noqa: E731
    np.testing.assert_allclose(H["W"]["W"].reshape(6, 6)[:, 4],
                               _fd_column(gW, p, "W", 4).ravel(), rtol=1e-6, atol=1e-8)
    # the Hessian with respect to the array argument, and a mixed one
    _same(adjit.hessian(energy, 1)(p, x), jax.hessian(_jenergy, 1)(p, x), rtol=1e-12)
    _same(adjit.jacfwd(adjit.grad(energy, 1), 0)(p, x),
          jax.jacfwd(jax.grad(_jenergy, 1), 0)(p, x), rtol=1e-12, atol=1e-14)


def test_derivatives_of_derivatives_with_a_namedtuple_argument():
    jax = _jax()
    layer = Layer(np.array([1.0, -2.0, 0.5]), np.array([0.3, 0.1, -1.0]))
    g = adjit.grad(adjit.grad(layer_energy), 1)(1.5, layer)
    assert type(g) is Layer
    _same(g, jax.grad(jax.grad(_jlayer_energy), 1)(1.5, layer), rtol=1e-13)
    assert adjit.grad(adjit.grad(layer_energy))(1.5, layer) == pytest.approx(
        float(jax.grad(jax.grad(_jlayer_energy))(1.5, layer)), rel=1e-13)
    with pytest.raises(TypeError, match=r"argument 1 is a tree, and the gradient is "
                                        r"differentiated again"):
        adjit.grad(adjit.grad(layer_energy, 1))(1.5, layer)


# ---- functions returning trees ------------------------------------------------------------
def test_jvp_of_a_tree_result_gives_a_tree_tangent():
    jax = _jax()
    x, p = np.array([1.0, 2.0]), {"s": 2.0, "w": np.array([1.0, 0.5, 0.25])}
    t = (np.array([1.0, -1.0]), {"s": 0.5, "w": np.ones(3)})
    value, tangent = adjit.jvp(several, (x, p), t)
    assert value["b"][2] == 3 and tangent["b"][2] is None    # (an integer leaf)
    jvalue, jtangent = jax.jvp(_jseveral, (x, p), t)
    _same({"a": value["a"], "b": value["b"][:2]}, jvalue, rtol=1e-14)
    _same({"a": tangent["a"], "b": tangent["b"][:2]}, jtangent, rtol=1e-14)
    # batched: an N-tuple of tangent trees
    _, (t0, t1) = adjit.jvp(pair, (x,), ((np.array([1.0, 0.0]), np.array([0.0, 1.0])),),
                            width=2)
    assert isinstance(t0, tuple) and len(t0) == 2
    np.testing.assert_allclose(t1[0], [0.0, 3.0])
    assert t1[1] == pytest.approx(np.cos(2.0), rel=1e-14)


def test_vjp_of_a_tree_result_takes_a_tree_cotangent():
    jax = _jax()
    x, p = np.array([1.0, 2.0]), {"s": 2.0, "w": np.array([1.0, 0.5, 0.25])}
    value, pullback = adjit.vjp(several, x, p)
    ct = {"a": np.array([1.0, -2.0]), "b": (0.5, np.array([1.0, 3.0]), 0)}
    dx, dp = pullback(ct)
    _, jpullback = jax.vjp(_jseveral, x, p)
    jdx, jdp = jpullback({"a": ct["a"], "b": ct["b"][:2]})
    np.testing.assert_allclose(dx, jdx, rtol=1e-14)
    _same(dp, jdp, rtol=1e-14)
    # several results, `return a, b`: a tuple cotangent
    y, pb = adjit.vjp(pair, x)
    (g,) = pb((np.ones(2), 1.0))
    np.testing.assert_allclose(g, 3.0 + np.cos(x), rtol=1e-14)
    with pytest.raises(TypeError, match=r"the cotangent at result\['b'\] has 2 items"):
        pullback({"a": ct["a"], "b": ct["b"][:2]})
    with pytest.raises(ValueError, match=r"the cotangent at result\['a'\] has shape \(3,\)"):
        pullback({"a": np.ones(3), "b": ct["b"]})


@pytest.mark.parametrize("which", ["jacfwd", "jacrev"])
def test_the_jacobian_of_a_tree_result_is_a_tree_of_jacobians(which):
    jax = _jax()
    x, p = np.array([1.0, 2.0]), {"s": 2.0, "w": np.array([1.0, 0.5, 0.25])}
    for k in (0, 1):
        J = getattr(adjit, which)(several, k)(x, p)
        # (the integer result's blocks: None, one per argument leaf)
        assert J["b"][2] == (None if k == 0 else {"s": None, "w": None})
        J["b"] = J["b"][:2]
        _same(J, getattr(jax, which)(_jseveral, k)(x, p), rtol=1e-13)
    Jx = getattr(adjit, which)(pair)(x)
    assert Jx[0].shape == (2, 2) and Jx[1].shape == (2,)
    np.testing.assert_allclose(Jx[1], np.cos(x), rtol=1e-14)


def test_a_jacobian_of_an_integer_leaf_is_refused_by_name():
    with pytest.raises(TypeError, match=r"argument 1\['n'\] is not a float"):
        adjit.jacfwd(several, 1)(np.ones(2), {"s": 2.0, "w": np.ones(3), "n": 1})


# ---- inside compiled code ----------------------------------------------------------------------
@adjit.jit
def jacobians_in_code(p, x):
    J = adjit.jacfwd(predict)(p, x)
    R = adjit.jacrev(predict)(p, x)
    return J["W"], R["b"], adjit.jacrev(predict, 1)(p, x)


@adjit.jit
def jvp_of_a_tree_result_in_code(x, t):
    value, tangent = adjit.jvp(several, (x, {"s": 2.0, "w": x}), (t, {"s": 0.0, "w": t}))
    return value["b"][1], tangent["a"], tangent["b"][0], tangent["b"][1]


@adjit.jit
def hessian_of_a_tree_in_code(p, x):
    return adjit.hessian(energy)(p, x)


def test_jacobians_and_tree_results_inside_compiled_code():
    jax = _jax()
    p, x = _data(np.random.default_rng(4))
    JW, Rb, Rx = jacobians_in_code(p, x)
    np.testing.assert_allclose(JW, jax.jacfwd(_jpredict)(p, x)["W"], rtol=1e-13)
    np.testing.assert_allclose(Rb, jax.jacrev(_jpredict)(p, x)["b"], rtol=1e-13)
    np.testing.assert_allclose(Rx, jax.jacrev(_jpredict, 1)(p, x), rtol=1e-13)
    v, t = np.array([1.0, 2.0, 0.5]), np.array([0.5, -1.0, 2.0])
    got = jvp_of_a_tree_result_in_code(v, t)
    jvalue, jtangent = jax.jvp(_jseveral, (v, {"s": 2.0, "w": v}), (t, {"s": 0.0, "w": t}))
    for a, b in zip(got, (jvalue["b"][1], jtangent["a"], *jtangent["b"])):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-14)
    with pytest.raises(adjit.CompilationError, match="hessian and Jacobians of derivatives "
                                                     "take scalars and arrays, not trees"):
        hessian_of_a_tree_in_code(dict(p, s=1.0), x)
