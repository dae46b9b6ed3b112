"""adjit.torch.function: an adjit simulator and kernels as differentiable PyTorch operations.
Every derivative is checked against adjit's own and finite differences (torch's gradcheck
takes finite differences of the float64 operation, in reverse and forward mode)."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import adjit
from adjit.interop import operation

sys.path.insert(0, str(Path(__file__).parent))
import heat  # noqa: E402

N, STEPS = 24, 20


@adjit.kernel
def saxpy(a: adjit.f64, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


@adjit.kernel
def softplus_scaled(x, w, out, c: adjit.f64):
    i = adjit.index()
    out[i] = c * adjit.log(1.0 + adjit.exp(w[i] * x[i]))


@adjit.jit
def writes_its_argument(x):
    x[0] = 1.0
    return adjit.sum(x)


@adjit.jit
def two_results(x):
    return adjit.sum(x), adjit.sum(x * x)


@adjit.jit
def weighted(x, k):
    return adjit.sum(x * x) * k[0]


@adjit.kernel
def writes_an_input(x, y):
    i = adjit.index()
    x[i] = 0.0
    y[i] = 1.0


class HeatModel(torch.nn.Module):
    """A latent code through a linear layer is the initial temperature, which the adjit
    simulator diffuses with a learnt coefficient."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.decode = torch.nn.Linear(4, N, dtype=torch.float64)
        self.kappa = torch.nn.Parameter(torch.tensor(0.2, dtype=torch.float64))
        self.simulate = adjit.torch.function(heat.simulate)

    def forward(self, z):
        return self.simulate(self.decode(z), STEPS, self.kappa)


def target_field():
    x = np.linspace(0.0, 1.0, N)
    return torch.from_numpy(np.exp(-30 * (x - 0.4) ** 2))


def test_import_adjit_imports_neither_torch_nor_jax():
    code = "import sys, adjit; print('torch' in sys.modules, 'jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]


def test_a_heat_simulator_in_a_model_trains_with_adam():
    model, z, target = HeatModel(), torch.ones(4, dtype=torch.float64), target_field()
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _ in range(50):
        opt.zero_grad()
        loss = torch.mean((model(z) - target) ** 2)
        loss.backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters())
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0], losses
    assert np.mean(losses[-10:]) < 0.2 * np.mean(losses[:10])    # (Adam's steps wobble)


def test_the_models_gradients_are_adjits_own_and_finite_differences():
    model, z, target = HeatModel(), torch.ones(4, dtype=torch.float64), target_field()
    u0 = model.decode(z).detach().requires_grad_()
    loss = torch.mean((model.simulate(u0, STEPS, model.kappa) - target) ** 2)
    loss.backward()
    # adjit's own gradient of the same loss, written in adjit
    u0_np, du0 = u0.detach().numpy().copy(), np.zeros(N)
    kappa = model.kappa.item()
    grads = adjit.autodiff(adjit.Reverse, heat.mse, adjit.Duplicated(u0_np, du0),
                           adjit.Const(STEPS), adjit.Active(kappa), adjit.Const(target.numpy()))
    np.testing.assert_allclose(u0.grad.numpy(), du0, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(model.kappa.grad.item(), grads[2], rtol=1e-12)

    # central differences of the torch loss
    def torch_loss(u, k):
        with torch.no_grad():
            return torch.mean((model.simulate(u, STEPS, k) - target) ** 2).item()
    h = 1e-6
    for j in (0, 5, N // 2, N - 2):
        e = torch.zeros(N, dtype=torch.float64)
        e[j] = h
        fd = (torch_loss(u0.detach() + e, kappa) - torch_loss(u0.detach() - e, kappa)) / (2 * h)
        assert u0.grad[j].item() == pytest.approx(fd, rel=1e-6, abs=1e-10)
    fd = (torch_loss(u0.detach(), kappa + h) - torch_loss(u0.detach(), kappa - h)) / (2 * h)
    assert model.kappa.grad.item() == pytest.approx(fd, rel=1e-6)
    # the decoder's gradient goes on through torch's own layers
    loss = torch.mean((model(z) - target) ** 2)
    model.zero_grad()
    loss.backward()
    np.testing.assert_allclose(model.decode.weight.grad.numpy(), np.outer(du0, z.numpy()),
                               rtol=1e-12, atol=1e-15)


def test_gradcheck_of_kernels_in_float64_reverse_and_forward():
    rng = np.random.default_rng(0)
    x, y = (torch.from_numpy(rng.standard_normal(7)).requires_grad_() for _ in range(2))
    a = torch.tensor(1.3, dtype=torch.float64, requires_grad=True)
    step = adjit.torch.function(saxpy, outputs="y")
    assert torch.autograd.gradcheck(step, (a, x, y), check_forward_ad=True)
    sp = adjit.torch.function(softplus_scaled, outputs=("out",))
    w = torch.from_numpy(rng.standard_normal(7)).requires_grad_()
    out0 = torch.from_numpy(rng.standard_normal(7))           # overwritten: no gradient
    assert torch.autograd.gradcheck(lambda x, w, c: sp(x, w, out0, c), (x, w, a),
                                    check_forward_ad=True)
    # and the heat step, whose output's old contents do not matter
    hs = adjit.torch.function(heat.heat_step, outputs="v")
    assert torch.autograd.gradcheck(lambda u, k: hs(u, torch.zeros(7, dtype=torch.float64), k),
                                    (x, a), check_forward_ad=True)


def test_gradcheck_of_functions_and_torch_func():
    rng = np.random.default_rng(1)
    u = torch.from_numpy(rng.standard_normal(9)).requires_grad_()
    k = torch.tensor(0.15, dtype=torch.float64, requires_grad=True)
    sim = adjit.torch.function(heat.simulate)
    en = adjit.torch.function(heat.energy)
    assert torch.autograd.gradcheck(lambda u, k: sim(u, 3, k), (u, k), check_forward_ad=True)
    assert torch.autograd.gradcheck(lambda u, k: en(u, 3, k), (u, k), check_forward_ad=True)
    # torch.func's transforms: grad (reverse) and jvp (forward) equal adjit's
    g = torch.func.grad(lambda u: en(u, 3, 0.15))(u.detach())
    np.testing.assert_allclose(g.numpy(), adjit.grad(heat.energy)(u.detach().numpy(), 3, 0.15),
                               rtol=1e-12)
    t = torch.from_numpy(rng.standard_normal(9))
    _, tangent = torch.func.jvp(lambda u: sim(u, 3, 0.15), (u.detach(),), (t,))
    want = adjit.autodiff(adjit.Forward, heat.simulate, adjit.Duplicated(u.detach().numpy(),
                                                                         t.numpy()), 3, 0.15)
    np.testing.assert_allclose(tangent.numpy(), want, rtol=1e-12)


def test_requires_grad_decides_the_activities(monkeypatch):
    seen = []
    reverse = operation.Operation.reverse

    def spy(self, values, wanted, *rest):
        seen.append(list(wanted))
        return reverse(self, values, wanted, *rest)
    monkeypatch.setattr(operation.Operation, "reverse", spy)
    x = torch.linspace(0, 1, 5, dtype=torch.float64, requires_grad=True)
    k = torch.tensor([2.0], dtype=torch.float64)                 # no grad: Const
    loss = adjit.torch.function(weighted)(x, k)
    loss.backward()
    assert seen == [[True, False]]
    np.testing.assert_allclose(x.grad.numpy(), 2 * 2.0 * x.detach().numpy())
    assert k.grad is None
    # a kernel's integer input and its float64 output together
    y = torch.zeros(5, dtype=torch.float64, requires_grad=True)
    a = torch.tensor(3.0, dtype=torch.float64)
    adjit.torch.function(saxpy, outputs="y")(a, x, y).sum().backward()
    assert seen[-1] == [False, True, True]
    np.testing.assert_allclose(y.grad.numpy(), np.ones(5))


def test_tensors_are_passed_and_returned_without_copies(monkeypatch):
    ptrs = []
    call = operation.Operation.call

    def spy(self, values, *rest):
        ptrs.append([v.ctypes.data for v in values if isinstance(v, np.ndarray)])
        return call(self, values, *rest)
    monkeypatch.setattr(operation.Operation, "call", spy)
    u = torch.linspace(0, 1, 16, dtype=torch.float64, requires_grad=True)
    v = torch.zeros(16, dtype=torch.float64)
    sim = adjit.torch.function(heat.simulate)
    out = sim(u, 2, 0.1)
    assert ptrs[-1] == [u.data_ptr()]                 # adjit read the tensor's memory
    step = adjit.torch.function(heat.heat_step, outputs="v")
    new = step(u, v, 0.1)
    assert ptrs[-1][0] == u.data_ptr() and ptrs[-1][1] == new.data_ptr() != v.data_ptr()
    assert torch.equal(v, torch.zeros(16, dtype=torch.float64))    # the input is unchanged
    # results: tensors viewing adjit's arrays; NumPy results to torch through DLPack
    result = heat.simulate(u.detach().numpy(), 2, 0.1)
    assert torch.from_dlpack(result).data_ptr() == result.ctypes.data
    assert out.dtype == torch.float64 and out.shape == (16,)
    # a kernel launched on tensors directly writes into them (no wrapper, no gradient)
    x, y = torch.ones(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    address = y.data_ptr()
    saxpy(2.0, x, y, ndrange=4)
    assert y.data_ptr() == address and torch.equal(y, torch.full((4,), 2.0, dtype=torch.float64))


def test_a_non_contiguous_cpu_tensor_is_taken_as_a_strided_view():
    sim = adjit.torch.function(heat.simulate)
    grid = torch.rand((4, 8), dtype=torch.float64)
    column = grid[:, 0]                          # strides (8,): no copy is made of it
    want = sim(column.contiguous(), 2, 0.1)
    np.testing.assert_allclose(sim(column, 2, 0.1).numpy(), want.numpy(), rtol=1e-15)
    leaf = grid.clone().requires_grad_()
    sim(leaf[:, 0], 2, 0.1).sum().backward()
    dense = grid[:, 0].clone().requires_grad_()
    sim(dense, 2, 0.1).sum().backward()
    np.testing.assert_allclose(leaf.grad[:, 0].numpy(), dense.grad.numpy(), rtol=1e-13)
    assert torch.count_nonzero(leaf.grad[:, 1:]) == 0
    # a kernel's output may be any layout: the wrapper copies it into a contiguous result
    step = adjit.torch.function(heat.heat_step, outputs="v")
    out = step(torch.ones(4, dtype=torch.float64), grid[:, 1], 0.1)
    assert out.is_contiguous() and torch.equal(out, torch.ones(4, dtype=torch.float64))


def test_bad_arguments_get_clear_errors():
    sim = adjit.torch.function(heat.simulate)
    with pytest.raises(TypeError, match="argument 'u0' is a tensor of torch.float16"):
        sim(torch.zeros(4, dtype=torch.float16), 2, 0.1)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        sim(torch.zeros(4, dtype=torch.float64), 2)
    with pytest.raises(TypeError, match="outputs= is for kernels"):
        adjit.torch.function(heat.simulate, outputs="u0")
    with pytest.raises(TypeError, match="name them, outputs="):
        adjit.torch.function(saxpy)
    with pytest.raises(ValueError, match="names 'z', which is not a parameter"):
        adjit.torch.function(saxpy, outputs="z")
    with pytest.raises(TypeError, match="takes an @adjit.jit function or an @adjit.kernel"):
        adjit.torch.function(np.sin)
    x = torch.zeros(4, dtype=torch.float64)
    with pytest.raises(ValueError, match="writes its argument 'x': a function given to a "
                                         "framework must not change its inputs"):
        adjit.torch.function(writes_its_argument)(x)
    assert torch.equal(x, torch.zeros(4, dtype=torch.float64))       # refused before running
    with pytest.raises(ValueError, match="kernel writes_an_input writes its argument 'x', "
                                         "which outputs= does not name"):
        adjit.torch.function(writes_an_input, outputs="y")(x, torch.zeros(4, dtype=torch.float64))
    # a tuple result runs; its derivative is refused, naming why
    x.requires_grad_()
    s, q = adjit.torch.function(two_results)(x)
    with pytest.raises(TypeError, match="returns a tuple; adjit's derivatives are of functions "
                                        "with one result"):
        (s + q).backward()
    # a tensor that requires grad, given to adjit directly
    with pytest.raises(TypeError, match="requires grad .* adjit.torch.function"):
        heat.simulate(x, 2, 0.1)
