"""The main example: a kernel, a compiled function that launches it, and their results
checked against NumPy."""
import numpy as np

import adjit


@adjit.kernel
def saxpy(a: adjit.f32, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


@adjit.kernel
def heat_step(u, v, dt: float):
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    if 0 < i < n - 1 and 0 < j < m - 1:
        lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        v[i, j] = u[i, j] + dt * lap
    else:
        v[i, j] = u[i, j]


@adjit.jit
def simulate(u0, steps: int, dt: float):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(steps):
        heat_step(u, v, dt, ndrange=u.shape)
        u, v = v, u
    return adjit.sum(u * u)


def simulate_numpy(u0, steps, dt):
    u = u0.copy()
    for _ in range(steps):
        v = u.copy()
        v[1:-1, 1:-1] = u[1:-1, 1:-1] + dt * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2]
                                              + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1])
        u = v
    return np.sum(u * u)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000).astype(np.float32)
    y = rng.standard_normal(1000).astype(np.float32)
    expected = 2.0 * x + y
    saxpy(2.0, x, y, ndrange=len(x))
    print("saxpy max error:", float(np.max(np.abs(y - expected))))
    assert np.allclose(y, expected, rtol=1e-6)

    u0 = rng.random((64, 64))
    got, want = simulate(u0, 50, 0.1), simulate_numpy(u0, 50, 0.1)
    print(f"heat energy after 50 steps: adjit {got:.12f}  numpy {want:.12f}")
    assert np.isclose(got, want, rtol=1e-12)
