"""Issue 9 item 4: tapes no larger than needed, measured as the bytes a gradient holds above
those in use before it (adjit.memory_stats, the benchmark's "grad extra" column).

G2's heat step is linear and its border guard (`0 < i < n - 1 and 0 < j < m - 1`, an
scf.if yielding an i1) follows from the item's ids and the array's sizes: the reverse
kernel recomputes it, so the step keeps nothing per item and the gradient's memory does
not grow with the number of steps (before: one i1 per item and step, copied again into the
function's i1 stack). Every gradient here is checked against the float64 NumPy reference
and against central finite differences of the float64 loss."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import adjit  # noqa: E402
import bench_grad_workloads as bench  # noqa: E402
from timing import extra_bytes  # noqa: E402

GRID = 64


def _workload(steps: int, reaction: bool):
    return bench.stencil_workload(GRID, steps, reaction, np.random.default_rng(3))


def _check_gradient(wl) -> None:
    (g,), value = wl.grad()
    (ref,), ref_value = wl.reference()
    assert bench.rel_error(((g,), value), ((ref,), ref_value)) < 1e-5
    u64 = wl.wrt[0]
    d = np.random.default_rng(5).standard_normal(u64.shape)
    h = 1e-6
    fd = (wl.ref_loss(u64 + h * d) - wl.ref_loss(u64 - h * d)) / (2 * h)
    assert float(np.sum(g * d)) == pytest.approx(fd, rel=1e-4)


@pytest.mark.parametrize("reaction", [False, True], ids=["G2", "G2b"])
def test_gradient_matches_references(reaction):
    _check_gradient(_workload(7, reaction))


def test_linear_stencil_tape_does_not_grow_with_steps():
    few, many = _workload(3, False), _workload(20, False)
    few.grad(), many.grad()   # compiled and warm: what is measured is the gradient call
    growth = extra_bytes(many.grad) - extra_bytes(few.grad)
    # Allowed: the function's index stack (a few indices per iteration, whatever the grid).
    # One i1 per item and step, as before, would be 17 * GRID**2 bytes (twice that copied).
    assert growth < 17 * GRID * GRID // 8, growth
    _check_gradient(many)


def test_reaction_diffusion_tapes_the_root_once_per_step():
    # The kernel tapes c = u[i, j] (one f32 per item and step) and recomputes 0.05 * c and
    # 1 - c from it, where it taped both. Per step and item, 4 bytes remain: the launch's
    # tape, copied onto the function's f32 stack, which grows once to what the loop's
    # remaining steps need (it doubled before: 8 bytes and more at its last growth; taping
    # both values, 16).
    few, many = _workload(3, True), _workload(20, True)
    few.grad(), many.grad()
    growth = extra_bytes(many.grad) - extra_bytes(few.grad)
    assert growth <= 17 * GRID * GRID * 4 + 4096, growth
    _check_gradient(many)


def test_reaction_diffusion_peak_is_one_state_per_step():
    # G2b at 50 steps. The gradient's peak, in float32 states of the grid: the 50 launch
    # tapes on the f32 stack, u and v (u0.copy(), empty_like), their shadows in reverse,
    # and one launch tape off the stack (the augmented launch's own buffer before its copy
    # onto the stack, the reverse launch's copy after). Before: 99, the f32 stack doubling
    # from 32 to 64 states beside its old buffer, and sum(u * u) taping u's elements twice
    # (2 states) although u is not written after it.
    steps = 50
    wl = _workload(steps, True)
    wl.grad()
    states = extra_bytes(wl.grad) / wl.state_bytes
    assert states <= steps + 5.5, states
    _check_gradient(wl)


@adjit.kernel
def _react_in_place(x, y):
    # x[i] is overwritten, so its load cannot be repeated in reverse: the root is taped.
    i = adjit.index()
    c = x[i]
    x[i] = c + 0.05 * c * (1.0 - c) - 0.5 * (c * c) * (2.0 - c)
    y[i] = adjit.exp(0.3 * c) * (1.0 - c) + (c > 0.5) * c


@adjit.jit
def _react_loss(x, steps: int):
    y = adjit.zeros_like(x)
    for _ in range(steps):
        _react_in_place(x, y, ndrange=x.shape[0])
    return adjit.sum(x * x) + adjit.sum(y)


def _react_loss_np(x, steps):
    x = np.array(x, dtype=np.float64)
    for _ in range(steps):
        c = x.copy()
        x = c + 0.05 * c * (1.0 - c) - 0.5 * (c * c) * (2.0 - c)
        y = np.exp(0.3 * c) * (1.0 - c) + (c > 0.5) * c
    return float(np.sum(x * x) + np.sum(y))


def _react_grad_np(x, steps):
    """Float64 reverse of _react_loss_np by hand."""
    xs = [np.array(x, dtype=np.float64)]
    for _ in range(steps):
        c = xs[-1]
        xs.append(c + 0.05 * c * (1.0 - c) - 0.5 * (c * c) * (2.0 - c))
    g = 2.0 * xs[-1]
    c = xs[-2]   # y of the last step only reaches the loss
    gy = 0.3 * np.exp(0.3 * c) * (1.0 - c) - np.exp(0.3 * c) + (c > 0.5)
    for k in range(steps, 0, -1):
        c = xs[k - 1]
        g = g * (1.0 + 0.05 * (1.0 - 2.0 * c) - 0.5 * (4.0 * c - 3.0 * c * c))
        if k == steps:
            g = g + gy
    return g


def test_in_place_kernel_with_recomputed_factors_matches_references():
    rng = np.random.default_rng(11)
    x0 = rng.random(257).astype(np.float32)
    steps = 4
    x, dx = x0.copy(), np.zeros_like(x0)
    adjit.autodiff(adjit.Reverse, _react_loss, adjit.Duplicated(x, dx), adjit.Const(steps))
    ref = _react_grad_np(x0, steps)
    np.testing.assert_allclose(dx, ref, rtol=2e-5, atol=2e-5 * np.max(np.abs(ref)))
    d = rng.standard_normal(x0.shape)
    h = 1e-6
    x64 = x0.astype(np.float64)
    fd = (_react_loss_np(x64 + h * d, steps) - _react_loss_np(x64 - h * d, steps)) / (2 * h)
    assert float(np.sum(ref * d)) == pytest.approx(fd, rel=1e-6)
