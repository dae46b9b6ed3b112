"""GPU test cases written as users write them: `@adjit.kernel` functions launched with
device="cuda", autodiff of such launches, and `@adjit.jit` functions called with
device="cuda" (launches on the GPU, the rest on the CPU), each with inputs and a NumPy
reference.

test_user_kernels.py runs them on a GPU, and with device="cpu" where there is none (so the
references are checked everywhere). `python user_kernels.py` (scripts/gpu_check.sh compile)
makes every case's calls under cuda_launch.compile_only(), which compiles their kernels into
the kernel cache (ADJIT_CACHE_DIR) without a GPU; the GPU machine then makes the same calls
from that cache, without MLIR.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import adjit
from adjit import Active, Duplicated

AMPLITUDE = 0.75      # a global constant: compiled in, and part of the cache key
NBINS = 64


@adjit.kernel
def saxpy(a: adjit.f32, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


@adjit.kernel
def heat_step(u, v, dt: adjit.f32):
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    if 0 < i < n - 1 and 0 < j < m - 1:
        lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        v[i, j] = u[i, j] + dt * lap
    else:
        v[i, j] = u[i, j]


@adjit.func
def wave(v):
    return AMPLITUDE * adjit.sin(v) + math.exp(-v * v)


@adjit.kernel
def apply_wave(x, out):
    i = adjit.index()
    out[i] = wave(x[i])


@adjit.kernel
def histogram(x, counts):
    i = adjit.index()
    b = min(max(int(x[i] * NBINS), 0), NBINS - 1)
    adjit.atomic_add(counts, b, 1)


@adjit.kernel
def row_sums(a, out):
    i = adjit.index()
    total = 0.0
    for j in range(a.shape[1]):
        total += a[i, j] * a[i, j]
    out[i] = math.sqrt(total)


@adjit.kernel
def collatz_steps(start, steps):
    i = adjit.index()
    n = start[i]
    count = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        count += 1
        if count >= 500:
            break
    steps[i] = count


@adjit.kernel
def masked_negate(flip: bool, mask, x, out):
    i = adjit.index()
    out[i] = x[i] if mask[i] != flip else -x[i]


@adjit.kernel
def linear_ids(out):
    i, j, k = adjit.index_nd()
    out[i, j, k] = float(adjit.index()) + 0.5 * (i - j + k)


@adjit.jit
def diffuse(u, steps: int, dt: adjit.f32):
    """2 * steps heat steps, ping-ponging between u and a scratch array, so that the result
    is in u; returns the energy, summed by the host code."""
    v = adjit.empty_like(u)
    for _ in range(steps):
        heat_step(u, v, dt, ndrange=u.shape)
        heat_step(v, u, dt, ndrange=u.shape)
    return adjit.sum(u * u)


@adjit.jit
def wave_energy(x, out):
    """A launch, then element-wise host code over what it wrote."""
    apply_wave(x, out, ndrange=x.shape[0])
    shifted = out * 0.5 + 1.0
    return adjit.sum(shifted * shifted)


@adjit.kernel
def relax(u, v, w):
    i = adjit.index()
    n = u.shape[0]
    if 0 < i < n - 1:
        v[i] = (1.0 - w) * u[i] + 0.5 * w * (u[i - 1] + u[i + 1])
    else:
        v[i] = u[i]


@adjit.jit
def relaxed_energy(u0, steps: int, w):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(steps):
        relax(u, v, w, ndrange=u.shape[0])
        u, v = v, u
    return adjit.sum(u * u)


def relaxed_energy_gradient(u0, du0, steps, w, device: str):
    """Reverse mode of a function whose launches (then, the derivative kernels') run on
    `device`: du0 receives d/du0, the result is d/dw."""
    return adjit.autodiff(adjit.Reverse, relaxed_energy, Duplicated(u0, du0), steps,
                          Active(w), device=device)[2]


@adjit.kernel
def integrate(x, v, steps, dt):
    """Each item integrates its own pendulum for `steps` steps: a nonlinear recurrence whose
    reverse mode tapes every step (a per-item tape sized by `steps`)."""
    i = adjit.index()
    p, q = x[i], v[i]
    for _ in range(steps):
        q = q - dt * adjit.sin(p)
        p = p + dt * q
    x[i] = p
    v[i] = q


def integrate_gradient(x, dx, v, dv, steps, dt, device: str):
    """Reverse mode of a launch of integrate: x, v end as the primal results, dx, dv (the
    results' adjoints on entry) as the inputs' adjoints; returns d/d(dt)."""
    return adjit.autodiff(adjit.Reverse, integrate, Duplicated(x, dx), Duplicated(v, dv),
                          steps, Active(dt), ndrange=len(x), device=device)[3]


@dataclass(frozen=True)
class UserCase:
    name: str
    inputs: Callable[[np.random.Generator], list]    # the arguments
    run: Callable[[list, str], Any]                  # the call on a device (cpu, cuda)
    reference: Callable[[list], Any]                 # the same on NumPy copies, in place
    rtol: float = 0.0
    atol: float = 0.0


def _heat_reference(u, v, dt):
    v[:] = u
    v[1:-1, 1:-1] = u[1:-1, 1:-1] + dt * _laplacian(u)[1:-1, 1:-1]


def _laplacian(u):
    lap = np.zeros_like(u)
    lap[1:-1, 1:-1] = (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                       - 4 * u[1:-1, 1:-1])
    return lap


def heat_gradient(u, du, v, dv, dt, device: str):
    """Reverse mode of one heat step: du receives the gradient, the result is d/d(dt)."""
    return adjit.autodiff(adjit.Reverse, heat_step, Duplicated(u, du), Duplicated(v, dv),
                          Active(dt), ndrange=u.shape, device=device)[2]


def _heat_gradient_reference(u, du, v, dv, dt):
    inner = dv[1:-1, 1:-1].copy()
    ddt = np.sum(dv * _laplacian(u), dtype=np.float64)
    _heat_reference(u, v, dt)            # reverse mode performs the primal effects too
    du += dv
    du[1:-1, 1:-1] -= 4 * dt * inner
    du[:-2, 1:-1] += dt * inner
    du[2:, 1:-1] += dt * inner
    du[1:-1, :-2] += dt * inner
    du[1:-1, 2:] += dt * inner
    dv[:] = 0                            # v was overwritten: its adjoint is consumed
    return ddt


def _diffuse_reference(u, steps, dt):
    v = np.empty_like(u)
    for _ in range(steps):
        _heat_reference(u, v, dt)
        _heat_reference(v, u, dt)
    return np.sum(u.astype(np.float64) ** 2)


def _wave_energy_reference(x, out):
    out[:] = AMPLITUDE * np.sin(x) + np.exp(-x * x)
    return np.sum((out * 0.5 + 1.0) ** 2)


def _relax_reference(u, w):
    v = u.copy()
    v[1:-1] = (1 - w) * u[1:-1] + 0.5 * w * (u[:-2] + u[2:])
    return v


def _relax_transpose(g, w):
    """A(w)^T g for the relaxation step v = A(w) u."""
    out = g.copy()
    out[1:-1] = (1 - w) * g[1:-1]
    out[:-2] += 0.5 * w * g[1:-1]
    out[2:] += 0.5 * w * g[1:-1]
    return out


def _relaxed_energy_gradient_reference(u0, du0, steps, w):
    """E = |A(w)^steps u0|^2: dE/du0 = 2 (A^T)^steps u, and dE/dw from the tangent
    recurrence t' = A t + (dA/dw) u."""
    u, t = u0.copy(), np.zeros_like(u0)
    for _ in range(steps):
        dA_u = np.zeros_like(u)
        dA_u[1:-1] = -u[1:-1] + 0.5 * (u[:-2] + u[2:])
        t = _relax_reference(t, w) + dA_u
        u = _relax_reference(u, w)
    g = 2 * u
    for _ in range(steps):
        g = _relax_transpose(g, w)
    du0 += g
    return np.sum(2 * u * t)


def integrate_np(x, v, steps, dt):
    p, q = x.copy(), v.copy()
    for _ in range(steps):
        q = q - dt * np.sin(p)
        p = p + dt * q
    return p, q


def integrate_reverse_np(x, v, steps, dt, ap, aq):
    """The adjoints of x, v and dt given those of the results: the recurrence reversed by
    hand, states recomputed forward first."""
    ps, qs = [x.astype(np.float64)], [v.astype(np.float64)]
    for _ in range(steps):
        qs.append(qs[-1] - dt * np.sin(ps[-1]))
        ps.append(ps[-1] + dt * qs[-1])
    ap, aq, adt = ap.astype(np.float64), aq.astype(np.float64), 0.0
    for t in reversed(range(steps)):
        # p[t+1] = p[t] + dt * q[t+1]
        adt += np.sum(ap * qs[t + 1])
        aq = aq + dt * ap
        # q[t+1] = q[t] - dt * sin(p[t])
        adt -= np.sum(aq * np.sin(ps[t]))
        ap = ap - dt * np.cos(ps[t]) * aq
    return ap, aq, adt


def _integrate_gradient_reference(x, dx, v, dv, steps, dt):
    dx[:], dv[:], ddt = integrate_reverse_np(x, v, steps, dt, dx, dv)
    x[:], v[:] = integrate_np(x, v, steps, dt)
    return ddt


def _saxpy_tangent_reference(a, da, x, dx, y, dy):
    dy[:] = da * x + a * dx + dy
    y[:] = a * x + y


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


CASES: dict[str, UserCase] = {c.name: c for c in [
    UserCase("saxpy", lambda rng: [np.float32(2.5), _f32(rng, 1_000_003), _f32(rng, 1_000_003)],
             lambda a, d: saxpy(*a, ndrange=len(a[1]), device=d),
             lambda a: a[2].__setitem__(slice(None), a[0] * a[1] + a[2]), rtol=1e-6),
    UserCase("heat_step", lambda rng: [_f32(rng, 300, 517), np.zeros((300, 517), np.float32),
                                       np.float32(0.1)],
             lambda a, d: heat_step(*a, ndrange=a[0].shape, device=d),
             lambda a: _heat_reference(*a), rtol=1e-5, atol=1e-6),
    UserCase("apply_wave", lambda rng: [rng.uniform(-4, 4, 5000), np.zeros(5000)],
             lambda a, d: apply_wave(*a, ndrange=5000, device=d),
             lambda a: a[1].__setitem__(slice(None),
                                        AMPLITUDE * np.sin(a[0]) + np.exp(-a[0] ** 2)),
             rtol=1e-12, atol=1e-12),      # the GPU's libdevice-free math (math_approx.py)
    UserCase("histogram", lambda rng: [rng.random(100_000, dtype=np.float32),
                                       np.zeros(NBINS, np.int32)],
             lambda a, d: histogram(*a, ndrange=len(a[0]), device=d),
             lambda a: a[1].__setitem__(slice(None), np.bincount(
                 np.clip((a[0] * NBINS).astype(np.int64), 0, NBINS - 1), minlength=NBINS))),
    UserCase("row_sums", lambda rng: [rng.standard_normal((1000, 77)), np.zeros(1000)],
             lambda a, d: row_sums(*a, ndrange=1000, device=d),
             lambda a: a[1].__setitem__(slice(None), np.sqrt((a[0] ** 2).sum(axis=1))),
             rtol=1e-12),                   # fused multiply-adds on the GPU
    UserCase("collatz_steps", lambda rng: [np.arange(1, 10_001), np.zeros(10_000, np.int64)],
             lambda a, d: collatz_steps(*a, ndrange=10_000, device=d),
             lambda a: a[1].__setitem__(slice(None), [_collatz(int(n)) for n in a[0]])),
    UserCase("masked_negate", lambda rng: [True, rng.random(3000) < 0.3,
                                           rng.standard_normal(3000), np.zeros(3000)],
             lambda a, d: masked_negate(*a, ndrange=3000, device=d),
             lambda a: a[3].__setitem__(slice(None), np.where(a[1] != a[0], a[2], -a[2]))),
    UserCase("linear_ids", lambda rng: [np.zeros((5, 33, 70), np.float32)],
             lambda a, d: linear_ids(*a, ndrange=a[0].shape, device=d),
             lambda a: a[0].__setitem__(slice(None), _linear_ids(a[0].shape))),
    UserCase("heat_gradient",
             lambda rng: [*(_f32(rng, 67, 129) for _ in range(4)), np.float32(0.1)],
             lambda a, d: heat_gradient(*a, device=d),
             lambda a: _heat_gradient_reference(*a), rtol=1e-4, atol=1e-5),
    UserCase("saxpy_tangent", lambda rng: [np.float32(1.5), np.float32(-0.5),
                                           *(_f32(rng, 10_001) for _ in range(4))],
             lambda a, d: adjit.autodiff(adjit.Forward, saxpy, Duplicated(a[0], a[1]),
                                         Duplicated(a[2], a[3]), Duplicated(a[4], a[5]),
                                         ndrange=10_001, device=d),
             lambda a: _saxpy_tangent_reference(*a), rtol=1e-5, atol=1e-6),
    UserCase("jit_diffuse", lambda rng: [_f32(rng, 130, 257), 10, np.float32(0.1)],
             lambda a, d: diffuse(*a, device=d),
             lambda a: _diffuse_reference(*a), rtol=1e-5, atol=1e-6),
    UserCase("integrate_gradient",
             lambda rng: [*(rng.uniform(-1, 1, 20_000) for _ in range(4)), 200, 0.01],
             lambda a, d: integrate_gradient(*a, device=d),
             lambda a: _integrate_gradient_reference(*a), rtol=1e-9, atol=1e-11),
    UserCase("jit_relaxed_energy_gradient",
             lambda rng: [rng.random(10_000), np.zeros(10_000), 25, 0.3],
             lambda a, d: relaxed_energy_gradient(*a, device=d),
             lambda a: _relaxed_energy_gradient_reference(*a), rtol=1e-10, atol=1e-12),
    UserCase("jit_wave_energy", lambda rng: [rng.uniform(-4, 4, 20_000), np.zeros(20_000)],
             lambda a, d: wave_energy(*a, device=d),
             lambda a: _wave_energy_reference(*a), rtol=1e-12, atol=1e-12),
]}


def _collatz(n: int) -> int:
    count = 0
    while n != 1 and count < 500:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        count += 1
    return count


def _linear_ids(shape):
    i, j, k = np.indices(shape)
    return (np.arange(math.prod(shape)).reshape(shape) + 0.5 * (i - j + k)).astype(np.float32)


def compile_cases() -> None:
    """Compiles every case's kernels into the kernel cache (see the module docstring); where
    they are there already, finds them (which is all a machine without MLIR can do)."""
    from adjit.api.cuda_launch import compile_only
    rng = np.random.default_rng(0)
    with compile_only():
        for case in CASES.values():
            case.run(case.inputs(rng), "cuda")


if __name__ == "__main__":
    from adjit.runtime.files import cache_settings
    compile_cases()
    print(f"compiled the kernels of {len(CASES)} cases into {cache_settings().kernel_folder()}")
