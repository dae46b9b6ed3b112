"""Pytrees (issue 33): tuples, lists, dicts and NamedTuples of arrays, scalars and structs as
arguments and results of @jit functions, @func calls in compiled code and kernels, and of
every derivative entry point, from Python and inside compiled code: values against NumPy,
derivatives against JAX (float64) and central differences, structures kept (a dict's
gradient is a dict, a NamedTuple's the same class), mismatches named by their path."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

import adjit
from adjit import Active, Const, Duplicated, Reverse, ReverseWithPrimal


class Layer(NamedTuple):
    W: np.ndarray
    b: np.ndarray


class Scaled(NamedTuple):
    w: np.ndarray
    s: float


def loss(params, x):
    h = np.tanh(x @ params["W1"] + params["b1"])
    return np.mean((h @ params["W2"] + params["b2"]) ** 2)


@adjit.jit
def layer_loss(p, x):
    return adjit.sum((p.W * x + p.b) ** 2)


@adjit.jit
def scaled_loss(p, x):
    return adjit.sum((p.w * x) ** 2) * p.s + p.s * p.s


@adjit.jit
def dict_scaled(p, x):
    return scaled_loss(Scaled(p["w"], s=p["s"]), x)


@adjit.jit
def nested(t, x):
    (a, b), c = t[0], t[1]
    return adjit.sum(a * x) + adjit.sum(b * b) * c["k"]


@adjit.jit
def reshape_tree(params, x):
    W1, b1 = params["layer"]
    total = 0.0
    for k, v in params["extra"].items():
        total += adjit.sum(v)
    for w in (W1, b1):
        total += adjit.sum(w)
    out = {k: params["extra"][k] * 2.0 for k in params["extra"]}
    return {"y": W1 * x + b1, "total": total, "more": (out, Layer(W=W1, b=b1))}


@adjit.struct
class Spring:
    k: adjit.f64
    x: adjit.Array[adjit.f64, 1]


@adjit.jit
def spring_energy(params, y):
    s = params["spring"]
    return 0.5 * s.k * adjit.sum(s.x * s.x) + adjit.sum(params["w"] * y)


@adjit.jit
def identity(t):
    return t


@adjit.func
def dot_layer(p, i):
    return p.W[i] * p.b[i]


@adjit.kernel
def apply_layer(p, out):
    i = adjit.index()
    out[i] = dot_layer(p, i) + p[0][i]


@adjit.jit
def sgd_step(params, x, lr):
    value, g = adjit.value_and_grad(loss)(params, x)
    return value, {k: params[k] - lr * g[k] for k in params}


@adjit.jit
def derivatives_in_code(p, x, t):
    value, tangent = adjit.jvp(layer_loss, (p, x), (Layer(W=t, b=t), adjit.zeros_like(x)))
    _, pullback = adjit.vjp(layer_loss, p, x)
    dp, dx = pullback(2.0)
    dW, db = adjit.zeros_like(p.W), adjit.zeros_like(p.b)
    adjit.autodiff(Reverse, layer_loss, Duplicated(p, Layer(W=dW, b=db)), x)
    hp, hx = adjit.hvp(layer_loss, (p, x), (Layer(W=t, b=t), adjit.zeros_like(x)))
    return value, tangent, dp, dx, Layer(dW, db), hp, hx


def _params(rng, dtype=np.float64, d_in=3, hidden=4):
    return {"W1": rng.standard_normal((d_in, hidden)).astype(dtype),
            "b1": rng.standard_normal(hidden).astype(dtype),
            "W2": rng.standard_normal((hidden, 2)).astype(dtype),
            "b2": np.zeros(2, dtype)}


def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


def _jloss(params, x):
    import jax.numpy as jnp
    h = jnp.tanh(x @ params["W1"] + params["b1"])
    return jnp.mean((h @ params["W2"] + params["b2"]) ** 2)


def _fd(fn, tree_leaves, k, h=1e-6):
    """Central differences of fn() along every element of leaf array tree_leaves[k]."""
    a = tree_leaves[k]
    out = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        old = a[i]
        a[i] = old + h
        up = fn()
        a[i] = old - h
        down = fn()
        a[i] = old
        out[i] = (up - down) / (2 * h)
    return out


# ---- calls ---------------------------------------------------------------------------------
def test_trees_as_arguments_and_results():
    x = np.arange(3.0)
    params = {"layer": (np.ones(3), np.full(3, 2.0)),
              "extra": {"a": np.array([1.0, 2.0]), "b": np.zeros(0)}}
    out = reshape_tree(params, x)
    assert list(out) == ["y", "total", "more"]
    np.testing.assert_array_equal(out["y"], x + 2.0)
    assert out["total"] == pytest.approx(3.0 + 3.0 + 6.0)
    more, layer = out["more"]
    assert isinstance(more, dict) and list(more) == ["a", "b"] and more["b"].shape == (0,)
    np.testing.assert_array_equal(more["a"], [2.0, 4.0])
    assert type(layer) is Layer and layer.W.dtype == np.float64
    np.testing.assert_array_equal(layer.b, np.full(3, 2.0))


def test_lists_stay_lists_and_empty_trees_and_structs_are_leaves():
    out = identity([np.ones(1), (2.0, [np.zeros(0)])])
    assert type(out) is list and type(out[1]) is tuple and type(out[1][1]) is list
    assert out[1][1][0].shape == (0,) and out[1][0] == 2.0
    assert identity(()) == () and identity({}) == {}
    p = {"spring": Spring(k=2.0, x=np.array([1.0, 2.0])), "w": np.ones(2)}
    assert spring_energy(p, np.ones(2)) == pytest.approx(7.0)
    g = adjit.grad(spring_energy)(p, np.ones(2))
    assert type(g["spring"]) is Spring and g["spring"].k == pytest.approx(2.5)
    np.testing.assert_allclose(g["spring"].x, [2.0, 4.0])
    np.testing.assert_allclose(g["w"], [1.0, 1.0])


def test_a_structure_is_a_specialisation_of_its_own():
    x = np.arange(3.0)
    a = Layer(np.ones(3), np.zeros(3))
    assert layer_loss(a, x) == pytest.approx(5.0)
    assert layer_loss(Layer(np.ones(3), np.ones(3)), x) == pytest.approx(14.0)
    variants = dict(layer_loss._variants)
    assert len(variants) == 1                                  # same structure: reused
    (variant,) = variants.values()
    assert len(variant._cache) == 1
    assert layer_loss(Layer(np.ones(3, np.float32), np.ones(3, np.float32)),
                      x.astype(np.float32)) == pytest.approx(14.0)
    assert len(variant._cache) == 2                            # new leaf types: compiled
    assert nested(((x, x), {"k": 2.0}), x) == pytest.approx(5.0 + 10.0)
    # (a list where a tuple was: another structure, compiled on its own)
    assert nested([[x, x], {"k": 1.0}], x) == pytest.approx(10.0)
    assert len(nested._variants) == 2
    from adjit.lang.source import fingerprint
    prints = {fingerprint(v) for v in nested._variants.values()}
    assert len(prints) == 2 and fingerprint(nested) not in prints


def test_a_tree_result_is_regrouped_from_the_disk_record():
    x = np.arange(3.0)
    params = {"layer": (np.ones(3), np.ones(3)), "extra": {"a": np.ones(2)}}
    first = reshape_tree(params, x)
    variant = next(v for v in reshape_tree._variants.values()
                   if v.tree_layout[0].children[1].node == ("a",))
    variant._cache = {}                       # a new process: the disk record is read
    again = reshape_tree(params, x)
    assert type(again["more"][1]) is Layer
    np.testing.assert_array_equal(again["y"], first["y"])


def test_a_kernel_takes_a_namedtuple_of_arrays_and_a_device_function_too():
    p = Layer(np.arange(4.0), np.full(4, 3.0))
    out = np.zeros(4)
    apply_layer(p, out, ndrange=4)
    np.testing.assert_array_equal(out, p.W * p.b + p.W)


# ---- derivatives from Python --------------------------------------------------------------------
def test_grad_of_a_dict_is_a_dict_like_jax_s():
    jax = _jax()
    rng = np.random.default_rng(0)
    params, x = _params(rng), rng.standard_normal((5, 3))
    g = adjit.grad(loss)(params, x)
    want = jax.grad(_jloss)(params, x)
    assert list(g) == list(params)
    for k in params:
        assert g[k].dtype == np.float64 and g[k].shape == params[k].shape
        np.testing.assert_allclose(g[k], np.asarray(want[k]), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(
        g["W1"], _fd(lambda: loss(params, x), params, "W1"), rtol=1e-6, atol=1e-9)


def test_value_and_grad_over_argnums_and_trees_of_every_kind():
    jax = _jax()
    x = np.array([0.5, -1.0, 2.0])
    p = Layer(np.array([1.0, 2.0, 3.0]), np.array([0.1, 0.2, 0.3]))
    value, (gp, gx) = adjit.value_and_grad(layer_loss, argnums=(0, 1))(p, x)
    jvalue, (jp, jx) = jax.value_and_grad(
        lambda p, x: ((p.W * x + p.b) ** 2).sum(), argnums=(0, 1))(p, x)
    assert value == pytest.approx(float(jvalue), rel=1e-14)
    assert type(gp) is Layer
    np.testing.assert_allclose(gp.W, np.asarray(jp.W), rtol=1e-14)
    np.testing.assert_allclose(gp.b, np.asarray(jp.b), rtol=1e-14)
    np.testing.assert_allclose(gx, np.asarray(jx), rtol=1e-14)
    # a scalar leaf's gradient is a float; a list stays a list
    g = adjit.grad(scaled_loss)(Scaled(np.array([1.0, 2.0]), 3.0), np.ones(2))
    assert type(g) is Scaled and g.s == pytest.approx(5.0 + 6.0)
    gl = adjit.grad(nested)([[x, x], {"k": 2.0}], x)
    assert type(gl) is list and type(gl[0]) is list and list(gl[1]) == ["k"]
    np.testing.assert_allclose(gl[0][1], 4.0 * x)
    assert gl[1]["k"] == pytest.approx(float(x @ x))


def test_jvp_vjp_and_hvp_take_and_give_trees():
    jax = _jax()
    x = np.array([0.5, -1.0, 2.0])
    p = Layer(np.array([1.0, 2.0, 3.0]), np.array([0.1, 0.2, 0.3]))
    t = Layer(np.array([1.0, 0.0, -1.0]), np.array([0.5, 0.5, 0.5]))
    jf = lambda p, x: ((p.W * x + p.b) ** 2).sum()          # noqa: E731
    value, tangent = adjit.jvp(layer_loss, (p, x), (t, np.zeros(3)))
    jvalue, jtangent = jax.jvp(jf, (p, x), (t, np.zeros(3)))
    assert (value, tangent) == pytest.approx((float(jvalue), float(jtangent)), rel=1e-14)
    value, pullback = adjit.vjp(layer_loss, p, x)
    dp, dx = pullback(2.0)
    _, jpullback = jax.vjp(jf, p, x)
    jdp, jdx = jpullback(2.0)
    assert type(dp) is Layer
    np.testing.assert_allclose(dp.W, np.asarray(jdp.W), rtol=1e-14)
    np.testing.assert_allclose(dx, np.asarray(jdx), rtol=1e-14)
    hp, hx = adjit.hvp(layer_loss, (p, x), (t, np.zeros(3)))
    jh = jax.jvp(jax.grad(jf, argnums=(0, 1)), (p, x), (t, np.zeros(3)))[1]
    assert type(hp) is Layer
    np.testing.assert_allclose(hp.W, np.asarray(jh[0].W), rtol=1e-12)
    np.testing.assert_allclose(hx, np.asarray(jh[1]), rtol=1e-12)


def test_autodiff_takes_duplicated_const_and_active_trees():
    rng = np.random.default_rng(1)
    params, x = _params(rng), rng.standard_normal((4, 3))
    shadow = {k: np.zeros_like(v) for k, v in params.items()}
    assert adjit.autodiff(Reverse, loss, Duplicated(params, shadow), Const(x)) == (None, None)
    want = adjit.grad(loss)(params, x)
    for k in params:
        np.testing.assert_allclose(shadow[k], want[k], rtol=1e-14)
    adjit.autodiff(Reverse, loss, Duplicated(params, shadow), x)       # shadows accumulate
    np.testing.assert_allclose(shadow["W2"], 2 * want["W2"], rtol=1e-14)
    # a float scalar's derivative is added to its shadow's entry (a dict's)
    ds = {"w": np.zeros(2), "s": 1.0}
    adjit.autodiff(Reverse, dict_scaled,
                   Duplicated({"w": np.array([1.0, 2.0]), "s": 3.0}, ds), np.ones(2))
    assert ds["s"] == pytest.approx(1.0 + 11.0)
    # Active: a tree of float scalars, whose derivatives come back as one
    (g, _), value = adjit.autodiff(ReverseWithPrimal, nested,
                                   Active(((1.0, 2.0), {"k": 3.0})), 1.0)
    assert value == pytest.approx(1.0 + 12.0)
    assert g == ((1.0, pytest.approx(12.0)), {"k": pytest.approx(4.0)})


@pytest.mark.parametrize("shadow, message", [
    ({"W1": 0, "b1": 0, "W2": 0}, r"keys \['W1', 'b1', 'W2'\].*missing \['b2'\]"),
    ({"W1": 0, "b1": 0, "b2": 0, "W2": 0}, "in another order"),
    ((0, 0, 0, 0), "is a tuple where the argument has a dict"),
    ({"W1": 0, "b1": (0,), "W2": 0, "b2": 0},
     r"the shadow at params\['b1'\] is a tuple where the argument has a leaf"),
])
def test_a_shadow_of_another_structure_is_named(shadow, message):
    params = _params(np.random.default_rng(2))
    with pytest.raises(TypeError, match=message):
        adjit.autodiff(Reverse, loss, Duplicated(params, shadow), np.ones((2, 3)))


def test_a_leaf_of_another_shape_or_an_immutable_scalar_shadow_is_named():
    params = _params(np.random.default_rng(2))
    shadow = {k: np.zeros_like(v) for k, v in params.items()}
    shadow["W1"] = np.zeros((2, 2))
    with pytest.raises((TypeError, ValueError), match=r"params\['W1'\]"):
        adjit.autodiff(Reverse, loss, Duplicated(params, shadow), np.ones((2, 3)))
    with pytest.raises(TypeError, match=r"p\.s is a float scalar.*Scaled"):
        adjit.autodiff(Reverse, scaled_loss, Duplicated(Scaled(np.ones(2), 1.0),
                                                        Scaled(np.zeros(2), 0.0)), np.ones(2))
    with pytest.raises(TypeError, match=r"tangent 0 at \.b is a list where the argument has "
                                        r"a leaf|tangent 0.*Layer"):
        adjit.jvp(layer_loss, (Layer(np.ones(3), np.ones(3)), np.ones(3)),
                  ((np.ones(3), [1.0]), np.ones(3)))
    with pytest.raises(TypeError, match=r"Active\(tree\) takes a tree of float scalars; "
                                        r"params\['W1'\] is an array"):
        adjit.autodiff(Reverse, loss, Active(params), np.ones((2, 3)))


def test_refusals_name_the_problem():
    fwd, _ = adjit.autodiff_thunk(adjit.ReverseSplitWithPrimal, layer_loss, Duplicated, Const)
    with pytest.raises(TypeError, match="split mode takes scalars, arrays and structs, not "
                                        "pytrees"):
        fwd(Duplicated(Layer(np.ones(2), np.ones(2)), Layer(np.zeros(2), np.zeros(2))),
            Const(np.ones(2)))
    with pytest.raises(TypeError, match="keys that are strings or ints"):
        layer_loss({(1, 2): np.ones(2)}, np.ones(2))


# ---- inside compiled code ---------------------------------------------------------------------
def test_derivatives_of_trees_inside_compiled_code():
    jax = _jax()
    x = np.array([0.5, -1.0, 2.0])
    p = Layer(np.array([1.0, 2.0, 3.0]), np.array([0.1, 0.2, 0.3]))
    t = np.array([1.0, 0.0, -1.0])
    value, tangent, dp, dx, shadow, hp, hx = derivatives_in_code(p, x, t)
    jf = lambda p, x: ((p.W * x + p.b) ** 2).sum()          # noqa: E731
    jvalue, jtangent = jax.jvp(jf, (p, x), (Layer(t, t), np.zeros(3)))
    assert (value, tangent) == pytest.approx((float(jvalue), float(jtangent)), rel=1e-14)
    jdp, jdx = jax.grad(jf, argnums=(0, 1))(p, x)
    assert type(dp) is Layer and type(shadow) is Layer
    np.testing.assert_allclose(dp.W, 2 * np.asarray(jdp.W), rtol=1e-14)
    np.testing.assert_allclose(dx, 2 * np.asarray(jdx), rtol=1e-14)
    np.testing.assert_allclose(shadow.b, np.asarray(jdp.b), rtol=1e-14)
    jh = jax.jvp(jax.grad(jf, argnums=(0, 1)), (p, x), (Layer(t, t), np.zeros(3)))[1]
    assert type(hp) is Layer
    np.testing.assert_allclose(hp.W, np.asarray(jh[0].W), rtol=1e-12)
    np.testing.assert_allclose(hp.b, np.asarray(jh[0].b), rtol=1e-12)
    np.testing.assert_allclose(hx, np.asarray(jh[1]), rtol=1e-12)


def test_an_sgd_step_of_a_dict_mlp_matches_jax_in_float32():
    jax = _jax()
    import jax.numpy as jnp
    rng = np.random.default_rng(3)
    params, x = _params(rng, np.float32), rng.standard_normal((8, 3)).astype(np.float32)

    @jax.jit
    def jstep(params, x, lr):
        value, g = jax.value_and_grad(_jloss)(params, x)
        return value, {k: params[k] - lr * g[k] for k in params}
    mine, theirs = params, {k: jnp.asarray(v) for k, v in params.items()}
    for _ in range(3):
        value, mine = sgd_step(mine, x, 0.1)
        jvalue, theirs = jstep(theirs, x, np.float32(0.1))
        assert value.dtype == np.float32 and value == pytest.approx(float(jvalue), rel=1e-5)
        assert list(mine) == list(params)
        for k in params:
            assert mine[k].dtype == np.float32
            np.testing.assert_allclose(mine[k], np.asarray(theirs[k]), rtol=1e-5, atol=1e-6)


@adjit.jit
def _missing_key(params):
    return adjit.sum(params["W3"])


@adjit.jit
def _carried_dict(params, n: int):
    for _ in range(n):
        params = {k: params[k] * 2.0 for k in params}
    return params


@pytest.mark.parametrize("fn, args, message", [
    (_missing_key, ({"W1": np.ones(2)},), r"params has no key 'W3' \(its keys: 'W1'\)"),
    (_carried_dict, ({"a": np.ones(2)}, 2), "holds a dict .* reassigned in a loop"),
])
def test_what_compiled_code_refuses_is_named(fn, args, message):
    with pytest.raises(adjit.CompilationError, match=message):
        fn(*args)
