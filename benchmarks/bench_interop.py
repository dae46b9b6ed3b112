"""What a call through adjit.torch / adjit.jax costs over the bare adjit call.

One small @adjit.jit function (the sum of squares of 1,024 float64s: a call of about a
microsecond, so that the wrapping is what is timed) and one small kernel launch, each
called bare (adjit's native dispatch), through adjit.torch.function (tensors that do not
require grad: no autograd record; tensors that do: a torch.autograd.Function), and through
adjit.jax.function under jax.jit. Beside them the floors the frameworks set themselves: an
identity torch.autograd.Function, a jax.jit'd identity pure_callback. Then one gradient, by
adjit.autodiff and by backward() through the wrapper. Every wrapped result is checked
against the bare one before anything is timed. Medians (after warm-up) of the time per call
in loops of `inner` calls; overheads in microseconds and as ratios.

    python benchmarks/bench_interop.py
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import adjit  # noqa: E402
from timing import median_of  # noqa: E402


@adjit.jit
def sum_sq(x):
    return adjit.sum(x * x)


@adjit.kernel
def scale(a: adjit.f64, x, y):
    i = adjit.index()
    y[i] = a * x[i]


def per_call(fn, inner: int, repeat: int) -> float:
    """Median seconds per call of `fn`, timed in loops of `inner` calls."""
    def loop():
        for _ in range(inner):
            fn()
    return median_of(loop, repeat=repeat) / inner


def torch_rows(n: int, inner: int, repeat: int) -> list[tuple[str, float, float | None]]:
    import torch

    x_np = np.linspace(0.0, 1.0, n)
    y_np = np.zeros(n)
    x = torch.from_numpy(x_np.copy())
    xg = x.clone().requires_grad_()
    y = torch.zeros(n, dtype=torch.float64)
    f = adjit.torch.function(sum_sq)
    k = adjit.torch.function(scale, outputs="y")
    # checked before timing
    assert float(f(x)) == float(sum_sq(x_np)) == float(f(xg).detach())
    scale(2.0, x_np, y_np, ndrange=n)
    assert np.array_equal(k(2.0, x, y).numpy(), y_np)

    class Identity(torch.autograd.Function):
        @staticmethod
        def forward(t):
            return t

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g

    bare_f = per_call(lambda: sum_sq(x_np), inner, repeat)
    bare_k = per_call(lambda: scale(2.0, x_np, y_np, ndrange=n), inner, repeat)
    rows = [("function: bare adjit call", bare_f, None),
            ("function: adjit.torch, no grad", per_call(lambda: f(x), inner, repeat), bare_f),
            ("function: adjit.torch, requires_grad (autograd.Function)",
             per_call(lambda: f(xg), inner, repeat), bare_f),
            ("  floor: an identity torch.autograd.Function",
             per_call(lambda: Identity.apply(xg), inner, repeat), None),
            ("kernel: bare adjit launch", bare_k, None),
            ("kernel: adjit.torch, no grad (output copied)",
             per_call(lambda: k(2.0, x, y), inner, repeat), bare_k)]
    # one gradient: adjit.autodiff against backward() through the wrapper
    dx = np.zeros(n)

    def bare_grad():
        dx[:] = 0.0
        adjit.autodiff(adjit.Reverse, sum_sq, adjit.Duplicated(x_np, dx))

    def torch_grad():
        xg.grad = None
        f(xg).backward()
    bare_grad()
    torch_grad()
    assert np.allclose(xg.grad.numpy(), dx) and np.allclose(dx, 2 * x_np)
    bare_g = per_call(bare_grad, max(inner // 10, 1), repeat)
    rows += [("gradient: adjit.autodiff(Reverse)", bare_g, None),
             ("gradient: forward + backward() through adjit.torch",
              per_call(torch_grad, max(inner // 10, 1), repeat), bare_g)]
    return rows


def jax_rows(n: int, inner: int, repeat: int) -> list[tuple[str, float, float | None]]:
    import jax
    import jax.numpy as jnp

    x_np = np.linspace(0.0, 1.0, n).astype(np.float32)     # JAX's default precision
    x = jnp.asarray(x_np)
    f = jax.jit(adjit.jax.function(sum_sq))
    assert np.isclose(float(f(x)), float(sum_sq(x_np)), rtol=1e-6)
    identity = jax.jit(lambda t: jax.pure_callback(
        lambda a: np.asarray(a), jax.ShapeDtypeStruct(t.shape, t.dtype), t))
    g = jax.jit(jax.grad(adjit.jax.function(sum_sq)))
    assert np.allclose(np.asarray(g(x)), 2 * x_np, rtol=1e-6)
    bare = per_call(lambda: sum_sq(x_np), inner, repeat)
    slow = max(inner // 20, 1)
    return [("function: bare adjit call (float32)", bare, None),
            ("function: adjit.jax under jax.jit",
             per_call(lambda: f(x).block_until_ready(), slow, repeat), bare),
            ("  floor: jax.jit of an identity pure_callback",
             per_call(lambda: identity(x).block_until_ready(), slow, repeat), None),
            ("gradient: jax.jit(jax.grad) through adjit.jax",
             per_call(lambda: g(x).block_until_ready(), slow, repeat), bare)]


def table(title: str, rows: list) -> str:
    lines = [f"### {title}", "", "| call | median per call | over the bare call |",
             "|---|---:|---:|"]
    for name, t, base in rows:
        over = "" if base is None else f"+{(t - base) * 1e6:.2f} us ({t / base:.1f}x)"
        lines.append(f"| {name} | {t * 1e6:.2f} us | {over} |")
    return "\n".join(lines)


def main(n: int = 1024, inner: int = 2000, repeat: int = 15) -> None:
    start = time.perf_counter()
    print(table(f"PyTorch (adjit.torch), {n} float64", torch_rows(n, inner, repeat)))
    print()
    print(table(f"JAX (adjit.jax), {n} float32", jax_rows(n, inner, repeat)))
    print(f"\n({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
