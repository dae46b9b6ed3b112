"""Issue 29 item 8: adjit.torch.function reads tensors with the negative bit by value, runs
under torch.func.vmap one batch row at a time, and refuses (clearly) what it cannot
differentiate: a derivative of its own derivative, and vmap over its derivative. Every
value is checked against torch's own autograd of the same math."""
import numpy as np
import pytest
import torch

import adjit


@adjit.jit
def sum_sq(x):
    return np.sum(x * x)


@adjit.jit
def square(x):
    return x * x


@adjit.jit
def two(x, k):
    return np.sum(x * x) * k, x * k


@adjit.kernel
def axpy(a: adjit.f64, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


def neg_views():
    torch.manual_seed(0)
    yield torch.randn(5, dtype=torch.complex128).conj().imag          # c.conj().imag
    yield torch._neg_view(torch.randn(5, dtype=torch.float64))         # torch.neg view


@pytest.mark.parametrize("t", list(neg_views()), ids=["conj_imag", "neg_view"])
def test_a_tensor_with_the_negative_bit_is_read_by_value(t):
    assert t.is_neg()
    f = adjit.torch.function(square)
    got = f(t)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, t.resolve_neg() ** 2)
    s = adjit.torch.function(sum_sq)
    torch.testing.assert_close(s(t), (t.resolve_neg() ** 2).sum())
    # a kernel output and an input with the negative bit
    k = adjit.torch.function(axpy, outputs="y")
    y = torch._neg_view(torch.arange(5.0, dtype=torch.float64))
    out = k(2.0, t, y)
    torch.testing.assert_close(out, 2.0 * t.resolve_neg() + y.resolve_neg())


def test_a_tensor_with_the_negative_bit_in_reverse_and_forward_mode():
    base = torch.randn(5, dtype=torch.float64)
    x = torch._neg_view(base.clone()).requires_grad_()
    assert x.is_neg()
    loss = adjit.torch.function(sum_sq)(x)
    (g,) = torch.autograd.grad(loss, x)
    torch.testing.assert_close(g, 2 * x.detach().resolve_neg())
    # a cotangent with the negative bit (an array result)
    xr = base.clone().requires_grad_()
    ct = torch._neg_view(torch.ones(5, dtype=torch.float64))
    (g,) = torch.autograd.grad(adjit.torch.function(square)(xr), xr, ct)
    torch.testing.assert_close(g, -2 * base)
    # a tangent with the negative bit
    _, tan = torch.func.jvp(adjit.torch.function(square), (base,), (ct,))
    torch.testing.assert_close(tan, -2 * base)


def test_vmap_runs_one_call_per_batch_row():
    torch.manual_seed(1)
    xb = torch.randn(4, 3, dtype=torch.float64)
    s = adjit.torch.function(sum_sq)
    torch.testing.assert_close(torch.func.vmap(s)(xb), (xb * xb).sum(1))
    torch.testing.assert_close(torch.func.vmap(s, in_dims=1)(xb), (xb * xb).sum(0))
    # several results, a batched and an unbatched argument, a batched scalar
    t = adjit.torch.function(two)
    k = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    a, b = torch.func.vmap(t, in_dims=(0, 0))(xb, k)
    torch.testing.assert_close(a, (xb * xb).sum(1) * k)
    torch.testing.assert_close(b, xb * k[:, None])
    a, b = torch.func.vmap(t, in_dims=(0, None))(xb, torch.tensor(2.0, dtype=torch.float64))
    torch.testing.assert_close(b, xb * 2.0)
    # a kernel
    kern = adjit.torch.function(axpy, outputs="y")
    y = torch.randn(4, 3, dtype=torch.float64)
    out = torch.func.vmap(kern, in_dims=(None, 0, 0))(3.0, xb, y)
    torch.testing.assert_close(out, 3.0 * xb + y)


def test_gradients_through_vmap_are_torchs():
    xb = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    s = adjit.torch.function(sum_sq)
    (g,) = torch.autograd.grad(torch.func.vmap(s)(xb).sum(), xb)
    xt = xb.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad((xt * xt).sum(1).sum(), xt)
    torch.testing.assert_close(g, want)
    g = torch.func.grad(lambda x: torch.func.vmap(s)(x).sum())(xb.detach())
    torch.testing.assert_close(g, want)


def test_jacrev_of_a_scalar_result_is_torchs():
    x = torch.randn(3, dtype=torch.float64)
    s = adjit.torch.function(sum_sq)
    torch.testing.assert_close(torch.func.jacrev(s)(x),
                               torch.func.jacrev(lambda v: (v * v).sum())(x))


@adjit.jit
def cubic(x, k):
    return np.sum(x * x * x) * k


@adjit.jit
def looped(x, n: int, k):
    s = 0.0
    for _ in range(n):
        s += np.sum(np.sin(x) * x) * k * k
    return s


def torch_cubic(x, k):
    return (x * x * x).sum() * k


def torch_looped(x, n, k):
    return n * (torch.sin(x) * x).sum() * k * k


CASES = [(cubic, torch_cubic, ()), (looped, torch_looped, (3,))]


@pytest.mark.parametrize("f, ref, extra", CASES, ids=["cubic", "looped_int_arg"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_double_backward_of_a_scalar_result_is_torchs(f, ref, extra, dtype):
    torch.manual_seed(2)
    x = torch.randn(4, dtype=dtype, requires_grad=True)
    k = torch.tensor(1.7, dtype=dtype, requires_grad=True)
    v = torch.randn(4, dtype=dtype)
    got, want = [], []
    for fn, into in ((adjit.torch.function(f), got), (ref, want)):
        y = fn(x, *extra, k) * 1.3             # (the seed scales the gradient)
        gx, gk = torch.autograd.grad(y, (x, k), create_graph=True)
        hx, hk = torch.autograd.grad((gx * v).sum() + gk * 0.7, (x, k))
        into += [gx.detach(), gk.detach(), hx, hk]
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else {}
    for a, b in zip(got, want):
        assert a.dtype == b.dtype
        torch.testing.assert_close(a, b, **tol)


@pytest.mark.parametrize("f, ref, extra", CASES, ids=["cubic", "looped_int_arg"])
def test_second_derivatives_against_finite_differences(f, ref, extra):
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    k = torch.tensor(0.9, dtype=torch.float64, requires_grad=True)
    g = adjit.torch.function(f)
    assert torch.autograd.gradgradcheck(lambda x, k: g(x, *extra, k), (x, k))


def test_torch_func_second_order_of_a_scalar_result_is_torchs():
    x = torch.randn(4, dtype=torch.float64)
    k = torch.tensor(1.3, dtype=torch.float64)
    w = torch.arange(4.0, dtype=torch.float64)
    f = adjit.torch.function(cubic)
    got = torch.func.grad(lambda v: (torch.func.grad(f)(v, k) * w).sum())(x)
    want = torch.func.grad(lambda v: (torch.func.grad(torch_cubic)(v, k) * w).sum())(x)
    torch.testing.assert_close(got, want)
    got = torch.func.jvp(lambda v: torch.func.grad(f)(v, k), (x,), (w,))
    want = torch.func.jvp(lambda v: torch.func.grad(torch_cubic)(v, k), (x,), (w,))
    torch.testing.assert_close(got, want)


def test_what_second_order_cannot_do_is_refused_clearly():
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    # an array result: its backward's derivative
    (g,) = torch.autograd.grad(adjit.torch.function(square)(x), x, torch.ones(3,
                               dtype=torch.float64), create_graph=True)
    torch.testing.assert_close(g.detach(), 2 * x.detach())     # the first derivative stands
    with pytest.raises(RuntimeError, match="square: a derivative of adjit's derivative"):
        torch.autograd.grad(g.sum(), x)
    # a kernel
    k = adjit.torch.function(axpy, outputs="y")
    y0 = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad((k(2.0, x, y0) ** 2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="axpy: a derivative of adjit's derivative"):
        torch.autograd.grad(g.sum(), x)
    # a third derivative
    c = adjit.torch.function(cubic)
    kk = torch.tensor(1.0, dtype=torch.float64)
    (g,) = torch.autograd.grad(c(x, kk), x, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), x, create_graph=True)
    torch.testing.assert_close(h.detach(), 6 * x.detach())
    with pytest.raises(RuntimeError, match="cubic: a third derivative"):
        torch.autograd.grad(h.sum(), x)


@pytest.mark.parametrize("transform", [torch.func.jacrev, torch.func.jacfwd, torch.func.hessian])
def test_vmap_over_the_derivative_is_refused_clearly(transform):
    x = torch.randn(3, dtype=torch.float64)
    f = adjit.torch.function(square if transform is not torch.func.hessian else sum_sq)
    with pytest.raises(NotImplementedError, match="vmap over the derivative"):
        transform(f)(x)


def test_per_sample_gradients_vmap_of_grad_are_torchs():
    xb = torch.randn(5, 4, dtype=torch.float64)
    k = torch.tensor(0.8, dtype=torch.float64)
    f = adjit.torch.function(cubic)
    got = torch.func.vmap(torch.func.grad(f), in_dims=(0, None))(xb, k)
    want = torch.func.vmap(torch.func.grad(torch_cubic), in_dims=(0, None))(xb, k)
    torch.testing.assert_close(got, want)


def test_a_tensor_with_the_negative_bit_passed_directly_is_refused():
    # (outside adjit.torch.function, runtime/foreign.py takes tensors by DLPack, which
    # exports the negated memory: refused, where resolving would lose a function's writes)
    t = torch._neg_view(torch.arange(4.0, dtype=torch.float64))
    with pytest.raises(TypeError, match="negative bit set.*resolve_neg"):
        sum_sq(t)
    assert sum_sq(t.resolve_neg()) == 14.0
