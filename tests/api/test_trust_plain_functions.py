"""A plain Python function (a def or a lambda, not decorated) given to a derivative entry
point is compiled as if decorated with @adjit.jit, as JAX differentiates any Python
function; one adjit cannot compile from source (typed at the prompt, made by exec or eval,
something that is not a function) is refused with a clear error naming it (was:
AttributeError 'function' object has no attribute 'annotations' from inside adjit; lambdas
were refused by @adjit.jit)."""
from __future__ import annotations

import numpy as np
import pytest

import jax
import jax.numpy as jnp

import adjit
from adjit.core.errors import CompilationError

jax.config.update("jax_enable_x64", True)


def square(x):
    return x * x


def sum_sin(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += np.sin(x[i]) * x[i]
    return s


def vec_sin(x):
    return np.sin(x) * 2.0


def jsum_sin(x):
    return jnp.sum(jnp.sin(x) * x)


X = np.array([0.3, -1.2, 2.0])


def test_grad_and_value_and_grad_of_a_plain_def():
    assert adjit.grad(square)(3.0) == pytest.approx(6.0, rel=1e-15)
    v, g = adjit.value_and_grad(square)(3.0)
    assert (v, g) == (pytest.approx(9.0), pytest.approx(6.0))
    g = adjit.grad(sum_sin)(X)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, np.asarray(jax.grad(jsum_sin)(X)), rtol=1e-14)
    # f32 in, f32 out
    g32 = adjit.grad(sum_sin)(X.astype(np.float32))
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, np.asarray(jax.grad(jsum_sin)(X)), rtol=1e-5)


def test_the_same_compiled_function_each_time():
    # grad(f) twice is the same transform (compiled once), as for a decorated function
    assert adjit.grad(square) is adjit.grad(square)


def test_jvp_vjp_hvp_of_a_plain_def():
    p, t = adjit.jvp(square, (3.0,), (1.0,))
    assert (p, t) == (pytest.approx(9.0), pytest.approx(6.0))
    v, pull = adjit.vjp(vec_sin, X)
    np.testing.assert_allclose(v, np.sin(X) * 2.0, rtol=1e-15)
    (ct,) = pull(np.ones(3))
    np.testing.assert_allclose(ct, 2.0 * np.cos(X), rtol=1e-14)
    hv = adjit.hvp(sum_sin, (X,), (np.ones(3),))
    ref = jax.jvp(jax.grad(jsum_sin), (X,), (np.ones(3),))[1]
    np.testing.assert_allclose(hv, np.asarray(ref), rtol=1e-13)


def test_jacobians_and_hessian_of_a_plain_def():
    jf = adjit.jacfwd(vec_sin)(X)
    jr = adjit.jacrev(vec_sin)(X)
    np.testing.assert_allclose(jf, np.diag(2.0 * np.cos(X)), rtol=1e-14, atol=0)
    np.testing.assert_allclose(jr, np.diag(2.0 * np.cos(X)), rtol=1e-14, atol=0)
    h = adjit.hessian(sum_sin)(X)
    np.testing.assert_allclose(h, np.asarray(jax.hessian(jsum_sin)(X)), rtol=1e-13,
                               atol=1e-15)


def test_check_grad_and_autodiff_of_a_plain_def():
    assert adjit.check_grad(sum_sin, X) < 1e-6
    (g,), v = adjit.autodiff(adjit.ReverseWithPrimal, square, adjit.Active(3.0))
    assert (g, v) == (pytest.approx(6.0), pytest.approx(9.0))
    t = adjit.autodiff(adjit.Forward, square, adjit.Duplicated(3.0, 1.0))
    assert t == pytest.approx(6.0)
    # against central finite differences too
    h = 1e-6
    fd = (sum_sin(X + h * np.ones(3)) - sum_sin(X - h * np.ones(3))) / (2 * h)
    assert adjit.grad(sum_sin)(X).sum() == pytest.approx(fd, rel=1e-8)


ENTRY_POINTS = {
    "grad": lambda f: adjit.grad(f)(3.0),
    "value_and_grad": lambda f: adjit.value_and_grad(f)(3.0),
    "jvp": lambda f: adjit.jvp(f, (3.0,), (1.0,)),
    "vjp": lambda f: adjit.vjp(f, 3.0),
    "hvp": lambda f: adjit.hvp(f, (3.0,), (1.0,)),
    "jacfwd": lambda f: adjit.jacfwd(f)(X),
    "jacrev": lambda f: adjit.jacrev(f)(X),
    "hessian": lambda f: adjit.hessian(f)(X),
    "check_grad": lambda f: adjit.check_grad(f, 3.0),
    "autodiff": lambda f: adjit.autodiff(adjit.Reverse, f, adjit.Active(3.0)),
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_every_entry_point_takes_a_plain_def(entry):
    ENTRY_POINTS[entry](vec_sin if entry in ("jacfwd", "jacrev") else
                        sum_sin if entry == "hessian" else square)


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_function_without_source_is_refused_at_its_definition(entry):
    # Defined by exec(): Python keeps no source, and adjit compiles from source
    ns: dict = {}
    exec("def typed_at_prompt(x):\n    return x * x\n", ns)
    with pytest.raises(CompilationError, match="cannot read the source of typed_at_prompt"):
        ENTRY_POINTS[entry](ns["typed_at_prompt"])


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_something_not_a_function_is_refused_with_its_name(entry):
    with pytest.raises(TypeError, match=r"ufunc.*@adjit\.jit"):
        ENTRY_POINTS[entry](np.sin)


# ---- lambdas: compiled from their source as the def `def <lambda>(x): return x * x` --------
def test_grad_of_a_lambda_in_a_file():
    assert adjit.grad(lambda x: x * x)(3.0) == pytest.approx(6.0, rel=1e-15)
    g = adjit.grad(lambda x, y: x * np.sin(y), argnums=1)(2.0, 0.5)
    assert g == pytest.approx(float(jax.grad(lambda x, y: x * jnp.sin(y), argnums=1)(2.0, 0.5)),
                              rel=1e-15)
    # over several lines, inside a call's arguments
    h = adjit.hessian(
        lambda v: np.sum(np.sin(v) * v))(X)
    np.testing.assert_allclose(h, np.asarray(jax.hessian(jsum_sin)(X)), rtol=1e-13,
                               atol=1e-15)
    jf = adjit.jacfwd(lambda v:
                      np.sin(v) * 2.0)(X.astype(np.float32))
    assert jf.dtype == np.float32
    np.testing.assert_allclose(jf, np.diag(2.0 * np.cos(X)), rtol=1e-6, atol=0)


def test_two_lambdas_on_one_line_are_two_functions():
    a, b = adjit.grad(lambda x: x * x)(3.0), adjit.grad(lambda x: x * x * x)(3.0)
    assert (a, b) == (pytest.approx(6.0), pytest.approx(27.0))
    # the disk cache's key of each (its source's digest) tells them apart too
    from adjit.lang.source import fingerprint
    f, g = (lambda x: x * x), (lambda x: x * x * x)
    assert fingerprint(adjit.jit(f)) != fingerprint(adjit.jit(g))


def test_an_error_in_a_lambda_names_its_line_and_column():
    with pytest.raises(CompilationError) as info:
        adjit.grad(lambda x: x + no_such_name)(1.0)  # the-lambda  # noqa: F821
    e = info.value
    line = next(k for k, text in enumerate(open(__file__), 1) if "# the-lambda" in text
                and "no_such_name" in text)
    assert (e.filename, e.lineno) == (__file__, line)
    assert "no_such_name" in str(e)
    assert open(__file__).read().splitlines()[line - 1][e.col:].startswith("no_such_name")


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_lambda_typed_at_the_prompt_is_refused_clearly(entry):
    f = eval("lambda x: x * x")      # as at the prompt: Python keeps no source for it
    with pytest.raises(CompilationError, match=r"cannot read the source of <lambda>.*"
                                               r"define it in a \.py file"):
        ENTRY_POINTS[entry](f)
