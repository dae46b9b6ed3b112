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


def test_double_backward_is_refused_clearly():
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    s = adjit.torch.function(sum_sq)
    (g,) = torch.autograd.grad(s(x), x, create_graph=True)
    torch.testing.assert_close(g.detach(), 2 * x.detach())     # the first derivative stands
    with pytest.raises(RuntimeError, match="sum_sq: a derivative of adjit's derivative"):
        torch.autograd.grad(g.sum(), x)
    with pytest.raises(NotImplementedError, match="derivative of adjit's derivative"):
        torch.func.grad(lambda v: torch.func.grad(s)(v).sum())(x.detach())
    with pytest.raises(NotImplementedError, match="derivative of adjit's derivative"):
        torch.func.jvp(torch.func.grad(s), (x.detach(),), (x.detach(),))


@pytest.mark.parametrize("transform", [torch.func.jacrev, torch.func.jacfwd, torch.func.hessian])
def test_vmap_over_the_derivative_is_refused_clearly(transform):
    x = torch.randn(3, dtype=torch.float64)
    f = adjit.torch.function(square if transform is not torch.func.hessian else sum_sq)
    with pytest.raises(NotImplementedError, match="vmap over the derivative"):
        transform(f)(x)
