"""Default parameter values and keyword arguments (issue 33): `def f(x, scale=2.0, n=3)` as
an @adjit.func called from compiled code (`f(x)`, `f(x, n=1)`) and as an @adjit.jit called
from Python; a default is a Python constant, weakly typed as a Python scalar argument is
(an f32 computation stays f32); derivatives are with respect to the arguments given; a
mutable or array default is refused where the function is decorated."""
from __future__ import annotations

import numpy as np
import pytest

import adjit
from adjit import f32, f64


@adjit.func
def poly(x, scale=2.0, n=3, flag=True):
    y = x * scale + n
    if flag:
        y = y * x
    return y


@adjit.jit
def calls(x: f64):
    return poly(x), poly(x, 0.5), poly(x, n=1), poly(x, scale=3.0, flag=False)


@adjit.jit
def calls32(x: f32):
    return poly(x), poly(x, n=1)


@adjit.jit
def scaled(x, scale=2.0, shift=0.25):
    return x * x * scale + shift


@pytest.mark.parametrize("x", [0.0, 1.5, -2.0])
def test_an_at_func_called_with_defaults_and_keywords(x):
    got = calls(x)
    want = calls.pyfn(x)
    assert len(got) == 4
    for g, w in zip(got, want):
        assert isinstance(g, np.float64) and g == pytest.approx(w, rel=1e-15)


def test_a_python_default_is_weak_in_f32_code():
    a, b = calls32(np.float32(1.5))
    assert isinstance(a, np.float32) and isinstance(b, np.float32)
    assert a == np.float32(poly.pyfn(1.5)) and b == np.float32(poly.pyfn(1.5, n=1))


def test_an_at_jit_called_from_python_with_defaults_and_keywords():
    assert scaled(3.0) == 18.25
    assert scaled(3.0, 1.0) == 9.25
    assert scaled(3.0, shift=1.0) == 19.0
    assert scaled(3.0, shift=1.0, scale=0.0) == 1.0
    with pytest.raises(TypeError, match=r"scaled\(\) got an unexpected keyword argument "
                                        r"'bias' \(it takes x=, scale=, shift=, device=\)"):
        scaled(3.0, bias=1.0)
    with pytest.raises(TypeError, match="got multiple values for argument 'scale'"):
        scaled(3.0, 1.0, scale=2.0)


def test_derivatives_are_with_respect_to_the_arguments_given():
    eps = 1e-6
    fd = (scaled.pyfn(3.0 + eps) - scaled.pyfn(3.0 - eps)) / (2 * eps)
    assert adjit.grad(scaled)(3.0) == pytest.approx(12.0) == pytest.approx(fd, rel=1e-8)
    assert adjit.grad(scaled, argnums=(0, 1))(3.0, 0.5) == pytest.approx((3.0, 9.0))
    assert adjit.value_and_grad(scaled)(3.0) == pytest.approx((18.25, 12.0))
    assert adjit.jvp(scaled, (3.0,), (1.0,)) == pytest.approx((18.25, 12.0))
    assert adjit.vjp(scaled, 3.0)[1](2.0) == pytest.approx((24.0,))
    assert adjit.autodiff(adjit.Reverse, scaled, adjit.Active(3.0)) == pytest.approx((12.0,))


@adjit.jit
def gradients_in_code(x: f64):
    return adjit.grad(poly)(x), adjit.grad(poly, argnums=1)(x, 0.5)


def test_derivatives_in_compiled_code_fill_the_defaults():
    gx, gscale = gradients_in_code(1.5)
    assert gx == pytest.approx(2 * 2.0 * 1.5 + 3)        # d/dx (2x + 3) x
    assert gscale == pytest.approx(1.5 * 1.5)              # d/dscale (scale x + 3) x


@adjit.func
def takes_a_tuple(x, shape=(2, 3)):
    return x


@adjit.jit
def leaves_the_tuple_default(x: f64):
    return takes_a_tuple(x)


@adjit.jit
def passes_too_many(x: f64):
    return poly(x, 1.0, 2, True, 5)


@adjit.jit
def names_no_parameter(x: f64):
    return poly(x, power=2)


@pytest.mark.parametrize("fn, message", [
    (leaves_the_tuple_default, r"takes_a_tuple\(\): the default \(2, 3\) of parameter 'shape' "
                               r"cannot be passed in compiled code"),
    (passes_too_many, r"poly\(\) takes 4 arguments"),
    (names_no_parameter, r"poly\(\) got an unexpected keyword argument 'power'"),
], ids=["tuple-default", "too-many", "unknown-keyword"])
def test_calls_in_code_that_do_not_bind_are_refused_at_the_line(fn, message):
    with pytest.raises(adjit.CompilationError, match=message) as e:
        fn(1.0)
    assert "test_default_parameters.py" in str(e.value)


def test_a_mutable_or_array_default_is_refused_where_it_is_declared():
    with pytest.raises(adjit.CompilationError, match=r"parameter 'w' has the default ndarray: "
                                                     r"a default of a compiled function is a "
                                                     r"constant") as e:
        @adjit.jit
        def bad(x, w=np.ones(3)):
            return x
    assert "test_default_parameters.py" in str(e.value)
    with pytest.raises(adjit.CompilationError, match="has the default list"):
        @adjit.func
        def bad_list(x, w=[1.0]):
            return x
