"""NEP 50 (issue 29, item 11, and the random programs' finding on Python ints): Python
scalars are weak in NumPy 2, so `x_f32 * lr` with a Python float `lr` is float32. adjit
follows it for Python floats and ints whatever their source: literals, arguments of @jit
and @func (unannotated, or annotated `float` / `int`), ints from range(), len(), x.shape[d],
x.size, and arithmetic between them. NumPy 2 running the same Python function on the same
inputs is the reference for every dtype; JAX (which keeps f32 too) for the derivatives."""
from __future__ import annotations

import math

import numpy as np
import pytest

import adjit
from fe_helpers import DTYPES, NUMERIC, assert_same, sample

assert int(np.__version__.split(".")[0]) >= 2, "the reference is NumPy 2's NEP 50 promotion"


def same_as_numpy(fn, *args, rtol=None):
    """`fn` compiled by adjit gives what NumPy gives running it: value, dtype, and for a
    scalar its Python type (a Python float where NumPy gives one, np.float32...)."""
    want = fn(*args)
    got = adjit.jit(fn)(*args)
    assert type(got) is type(want), f"{type(got).__name__}, NumPy gives {type(want).__name__}"
    assert_same(got, want, rtol)
    return got


# ---- the table: every operator x dtype x source of a Python scalar ------------------------
# Each function is plain NumPy code; `s` is a Python scalar argument.
def add(x, s): return x + s                  # noqa: E704
def sub(x, s): return s - x                  # noqa: E704
def mul(x, s): return x * s                  # noqa: E704
def div(x, s): return x / s                  # noqa: E704
def rdiv(x, s): return s / x                 # noqa: E704
def power(x, s): return abs(x) ** s          # noqa: E704
def maximum(x, s): return np.maximum(x, s)   # noqa: E704
def where(x, s): return np.where(x > 0, x, s)  # noqa: E704
def elem_mul(x, s): return x[0] * s          # noqa: E704   (a typed scalar: np.float32...)
def elem_add(x, s): return s + x[1]          # noqa: E704


ARGUMENT_OPS = [add, sub, mul, div, rdiv, power, maximum, where, elem_mul, elem_add]


@pytest.mark.parametrize("fn", ARGUMENT_OPS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("s", [0.5, 3], ids=["float", "int"])
@pytest.mark.filterwarnings("ignore:divide by zero")    # (NumPy's, on a bool False)
def test_python_scalar_argument_promotes_as_numpy(fn, dtype, s):
    x = sample(5, dtype, seed=1)
    same_as_numpy(fn, x, s)


# Python scalars the code makes itself: literals, ints from range/len/shape/size/ndim.
def lit_float(x): return x * 0.5 + 1.5 - x / 4.0         # noqa: E704
def lit_int(x): return x * 3 + 2 - x // 2                 # noqa: E704
def lit_elem(x): return x[0] * 0.25 + 7                   # noqa: E704
def shape_int(x): return x * x.shape[0] + x.size          # noqa: E704
def len_int(x): return len(x) * x - x.ndim                # noqa: E704
def len_div(x): return x / len(x)                         # noqa: E704
def len_float(x): return x * (len(x) * 0.5)               # noqa: E704  (weak int * weak float)
def shape_elem(x): return x[2] + x.shape[0]               # noqa: E704


def range_leaked(x):
    for i in range(2, 4):
        pass
    return x * i + i / 2


def range_in_loop(x):
    out = x * 1
    for i in range(1, 4):
        out = out + x * i         # carries x's dtype: x * i must keep it
    return out


def float_of_int(x):
    return x * float(len(x)) + int(3.7)


def weak_mix(x):
    n = len(x)
    t = n * 0.5 + n // 2          # Python int and float: a Python float
    return x - t


MADE_OPS = [lit_float, lit_int, lit_elem, shape_int, len_int, len_div, len_float, shape_elem,
            range_leaked, range_in_loop, float_of_int, weak_mix]


@pytest.mark.parametrize("fn", MADE_OPS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", DTYPES)
def test_python_scalars_made_in_code_promote_as_numpy(fn, dtype):
    x = sample(5, dtype, seed=2)
    same_as_numpy(fn, x)


# ---- Python scalars among themselves: they stay Python scalars --------------------------
def scalars(a, b):
    return a * b + a / 2 - b


@pytest.mark.parametrize("a, b", [(0.5, 3), (3, 4), (2, 0.25), (np.float32(0.5), 3),
                                  (3, np.float32(2.0)), (np.int32(3), 2),
                                  (np.int32(3), 0.5), (np.float64(0.5), 2)])
def test_scalar_arithmetic_and_its_result_type(a, b):
    same_as_numpy(scalars, a, b)


def weak_times_f32(x, a, n):
    s = a * n + 1        # a Python float: weak, however it was computed
    return x * s


def test_weak_results_of_weak_arithmetic_stay_weak():
    x = sample(4, np.float32)
    got = same_as_numpy(weak_times_f32, x, 0.5, 3)
    assert got.dtype == np.float32


def numpy_of_python(x, s):
    return x * np.sin(s) + x * np.maximum(s, 0.1)


def math_of_python(x, s):
    return x * math.sin(s)


def test_numpy_functions_make_numpy_scalars_of_python_ones():
    # np.sin(0.5) is an np.float64 (typed), as in NumPy: the f32 array becomes f64;
    # math.sin(0.5) is a Python float.
    x = sample(4, np.float32)
    assert same_as_numpy(numpy_of_python, x, 0.5).dtype == np.float64
    assert same_as_numpy(math_of_python, x, 0.5).dtype == np.float32


def test_numpy_scalar_arguments_are_typed_and_a_separate_specialisation():
    x = sample(4, np.float32)
    assert same_as_numpy(mul, x, 0.5).dtype == np.float32
    assert same_as_numpy(mul, x, np.float64(0.5)).dtype == np.float64
    assert same_as_numpy(mul, x, 0.5).dtype == np.float32       # (the first again)
    assert same_as_numpy(mul, x, np.int64(3)).dtype == np.float64
    assert same_as_numpy(mul, x.astype(np.int32), np.int64(3)).dtype == np.int64
    assert same_as_numpy(mul, x.astype(np.int32), 3).dtype == np.int32


def test_returned_python_scalars_are_python_scalars_natively_too():
    f = adjit.jit(scalars)
    for _ in range(3):     # the first call, then the fast paths
        r = f(0.5, 3)
        assert type(r) is float and r == scalars(0.5, 3)
        r = f(3, 4)
        assert type(r) is float and r == scalars(3, 4)
    g = adjit.jit(lit_int)
    for _ in range(3):
        r = g(7)
        assert type(r) is int and r == lit_int(7)
    # the native dispatcher takes these calls, and returns Python scalars too
    assert len(f._native) == 2 and len(g._native) == 1


# ---- annotations: `float` / `int` are Python's (weak), adjit.f64 is typed ------------------
@adjit.jit
def scale_float(x: adjit.Array[adjit.f32, 1], lr: float):
    return x * lr


@adjit.jit
def scale_f64(x: adjit.Array[adjit.f32, 1], lr: adjit.f64):
    return x * lr


@adjit.jit
def scale_int(x: adjit.Array[adjit.i32, 1], n: int):
    return x * n


def test_annotations_float_and_int_are_weak_and_adjit_f64_is_typed():
    x = sample(4, np.float32)
    assert_same(scale_float(x, 0.5), x * 0.5)
    assert_same(scale_float(x, np.float64(0.5)), x * 0.5)     # the annotation decides
    assert_same(scale_f64(x, 0.5), x * np.float64(0.5))
    assert scale_f64(x, 0.5).dtype == np.float64
    xi = sample(4, np.int32)
    assert_same(scale_int(xi, 3), xi * 3)


# ---- calls: Python scalars passed, returned, and literals given to them -------------------
@adjit.jit
def axpy(a, x, y):
    return a * x + y


@adjit.func
def halve(s):
    return s * 0.5


@adjit.jit
def through_funcs(x, lr):
    return axpy(lr, x, x) + axpy(2.0, x, x) * halve(lr) + halve(len(x))


def test_python_scalars_through_func_calls_stay_weak():
    for dtype in (np.float32, np.float64):
        x = sample(4, dtype)
        got = through_funcs(x, 0.5)
        want = (0.5 * x + x) + (2.0 * x + x) * (0.5 * 0.5) + len(x) * 0.5
        assert_same(got, want)


# ---- loops and branches carrying Python scalars -------------------------------------------
def carried_weak(x, lr):
    s = lr
    for i in range(3):
        s = s * 0.5 + i          # stays a Python float
    return x * s


def carried_becomes_typed(x, y, lr):
    s = lr
    for i in range(3):
        s = s + y[i]             # a Python float plus np.float64: np.float64
    return x * s


def branch_weak(x, lr):
    t = lr if x[0] > 0 else 2.0
    return x * t


def typed_then_python(x, lr):
    s = x[0]
    for i in range(3):
        s = lr * i           # a Python float into an f32 variable: the variable stays f32
    return x * s


def typed_then_range_int(x):
    s = x[0]
    for i in range(3):
        s = i
    return x * s


def test_loops_and_branches_carry_weakness_as_numpy():
    x = sample(4, np.float32, seed=5)
    assert same_as_numpy(typed_then_python, x, 0.5).dtype == np.float32
    assert same_as_numpy(typed_then_range_int, x).dtype == np.float32
    x = sample(4, np.float32, seed=3)
    assert same_as_numpy(carried_weak, x, 0.5).dtype == np.float32
    y = sample(4, np.float64, seed=4)
    assert same_as_numpy(carried_becomes_typed, x, y, 0.5).dtype == np.float64
    assert same_as_numpy(branch_weak, x, 0.5).dtype == np.float32
    assert same_as_numpy(branch_weak, -x, 0.5).dtype == np.float32


# ---- a Python int too large for the array: refused, as NumPy 2 refuses it -----------------
def int32_plus_big_literal(x):
    return x + 1099511627776


def test_python_int_out_of_range_for_int32_raises_overflow_as_numpy():
    x = sample(4, np.int32)
    with pytest.raises(OverflowError):
        add(x, 2 ** 40)                      # NumPy 2
    with pytest.raises(OverflowError, match="does not fit in adjit.i32"):
        adjit.jit(add)(x, 2 ** 40)
    assert_same(adjit.jit(add)(x, 2 ** 31 - 10), x + (2 ** 31 - 10))   # in range: fine
    # checked once, before the element loop: an empty array too, as NumPy 2
    with pytest.raises(OverflowError):
        add(x[:0], 2 ** 40)
    with pytest.raises(OverflowError, match="does not fit in adjit.i32"):
        adjit.jit(add)(x[:0], 2 ** 40)
    ir = adjit.jit(add).lower(x, 3).adj()
    assert ir.index("OverflowError") < ir.index("scf.parallel")
    # a literal: refused when compiled, at its line
    with pytest.raises(OverflowError):
        int32_plus_big_literal(x)
    with pytest.raises(adjit.CompilationError, match=r"does not fit in adjit.i32") as e:
        adjit.jit(int32_plus_big_literal)(x)
    assert "return x + 1099511627776" in str(e.value)


# ---- the f32 training loop with a Python learning rate ------------------------------------
def sgd(w, x, y, lr, steps):
    for _ in range(steps):
        r = x @ w - y
        w = w - lr * (x.T @ r) / len(y)       # carries f32 w: lr and len(y) are weak
    return w


def sgd_loss(w, x, y, lr, steps):
    # (an element-wise model: reverse mode of `@` on an array a loop carries is issue 29's
    # separate internal error)
    for _ in range(steps):
        r = x * w - y
        w = w - lr * (x * r) / len(y)
    r = x * w - y
    return np.sum(r * r) * 0.5


@pytest.fixture(params=["matmul"])
def problem(request):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 3)).astype(np.float32)
    y = rng.standard_normal(8).astype(np.float32)
    w = (0.1 * rng.standard_normal(3)).astype(np.float32)
    if request.param == "elementwise":
        x, y = x[:, 0].copy(), y.copy()
        w = (0.1 * rng.standard_normal(8)).astype(np.float32)
    return w, x, y


def test_f32_training_loop_with_python_learning_rate_compiles_and_stays_f32(problem):
    w, x, y = problem
    got = same_as_numpy(sgd, w, x, y, 0.1, 5, rtol=1e-5)
    assert got.dtype == np.float32


@pytest.mark.parametrize("problem", ["elementwise"], indirect=True)
def test_f32_loss_of_training_loop_stays_f32(problem):
    w, x, y = problem
    loss = same_as_numpy(sgd_loss, w, x, y, 0.1, 5, rtol=1e-5)
    assert type(loss) is np.float32


def sgd_loss_jax(w, x, y, lr, steps):
    for _ in range(steps):
        r = x * w - y
        w = w - lr * (x * r) / y.shape[0]
    r = x * w - y
    return (r * r).sum() * 0.5


@pytest.mark.parametrize("problem", ["elementwise"], indirect=True)
def test_gradients_through_the_f32_loop_against_jax(problem):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    w, x, y = problem
    lr, steps = 0.1, 5
    f = adjit.jit(sgd_loss)
    gw = adjit.grad(f)(w, x, y, lr, steps)
    assert gw.dtype == np.float32
    # JAX keeps f32 with a Python float too
    jw = jax.grad(sgd_loss_jax)(w, x, y, lr, steps)
    assert jw.dtype == np.float32
    # the float64 reference, and finite differences of it
    w64, x64, y64 = (a.astype(np.float64) for a in (w, x, y))
    ref = np.asarray(jax.grad(sgd_loss_jax)(w64, x64, y64, lr, steps))
    np.testing.assert_allclose(gw, ref, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(gw, np.asarray(jw), rtol=1e-4, atol=1e-6)

    @adjit.jit
    def five_steps(w, x, y, lr):     # (check_grad makes every non-array argument a float)
        return f(w, x, y, lr, steps)
    assert adjit.check_grad(five_steps, w64, x64, y64, lr) < 1e-6

    # with respect to the Python float itself: a float
    glr = adjit.grad(f, argnums=3)(w, x, y, lr, steps)
    assert type(glr) is float      # a Python float, as the primal of Python floats
    ref_lr = float(jax.grad(sgd_loss_jax, argnums=3)(w64, x64, y64, lr, steps))
    np.testing.assert_allclose(float(glr), ref_lr, rtol=1e-4)
    eps = 1e-6
    fd = (f(w64, x64, y64, lr + eps, steps) - f(w64, x64, y64, lr - eps, steps)) / (2 * eps)
    np.testing.assert_allclose(float(adjit.grad(f, argnums=3)(w64, x64, y64, lr, steps)),
                               fd, rtol=1e-6)


def elementwise_loop(w, lr, steps):
    for i in range(steps):
        w = w - lr * np.tanh(w) * i          # the loop variable is weak too
    return np.sum(w * w)


@pytest.mark.parametrize("problem", ["elementwise"], indirect=True)
def test_gradient_of_elementwise_f32_loop_with_weak_scalars(problem):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    w = problem[0] * 10
    f = adjit.jit(elementwise_loop)
    assert type(f(w, 0.3, 4)) is np.float32
    g = adjit.grad(f)(w, 0.3, 4)
    assert g.dtype == np.float32

    def ref(w, lr):
        for i in range(4):
            w = w - lr * jax.numpy.tanh(w) * i
        return (w * w).sum()
    np.testing.assert_allclose(g, np.asarray(jax.grad(ref)(w.astype(np.float64), 0.3)),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(adjit.grad(f, argnums=1)(w, 0.3, 4)),
                               float(jax.grad(ref, argnums=1)(w.astype(np.float64), 0.3)),
                               rtol=1e-5)


# ---- kernels: a `float` parameter is a Python float --------------------------------------
@adjit.kernel
def step_kernel(x: adjit.Array[adjit.f32, 1], v: adjit.Array[adjit.f32, 1], dt: float):
    i = adjit.index()
    x[i] = x[i] + dt * v[i]


def test_kernel_float_parameter_computes_in_the_array_dtype():
    x, v = sample(6, np.float32, seed=6), sample(6, np.float32, seed=7)
    want = x + 0.1 * v       # NumPy 2: in float32
    out = x.copy()
    step_kernel(out, v, 0.1, ndrange=6)
    np.testing.assert_allclose(out, want, rtol=2e-7, atol=1e-6)
    # the arithmetic is f32's, as NumPy's (not f64 rounded to f32 at the store)
    adj_text = step_kernel.lower(out, v, 0.1, ndrange=6).adj()
    assert "arith.mulf" in adj_text
    assert not [line for line in adj_text.splitlines()
                if ("arith.mulf" in line or "arith.addf" in line) and "f64" in line]


def compare_big(x, n):
    return (x < n) & (x > -n) & (x != 2 ** 40)


def test_comparison_with_a_python_int_beyond_int32_is_exact_as_numpy():
    x = sample(4, np.int32)
    same_as_numpy(compare_big, x, 2 ** 40)
    same_as_numpy(compare_big, x, 3)


def scalar_fn(a, b):
    return a * b + math.sin(a)


def test_derivatives_of_python_scalars_are_python_floats_as_their_values():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    f = adjit.jit(scalar_fn)
    assert type(f(0.5, 2.0)) is float
    g = adjit.grad(f, argnums=(0, 1))(0.5, 2.0)
    assert [type(v) for v in g] == [float, float]
    ref = jax.grad(lambda a, b: a * b + jax.numpy.sin(a), argnums=(0, 1))(0.5, 2.0)
    np.testing.assert_allclose(g, [float(r) for r in ref], rtol=1e-14)
    primal, tangent = adjit.jvp(f, (0.5, 2.0), (1.0, 0.0))
    assert type(primal) is float and type(tangent) is float
    np.testing.assert_allclose([primal, tangent], [scalar_fn(0.5, 2.0), float(ref[0])],
                               rtol=1e-14)
    # a typed scalar argument keeps its NumPy type
    assert type(adjit.grad(f)(np.float32(0.5), 2.0)) is np.float32
