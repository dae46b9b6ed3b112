"""The main example: a kernel, a compiled function that launches it, its gradient, each
checked against NumPy or finite differences; and the same on a GPU when there is one."""
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

    # Gradient of the final energy w.r.t. the initial state and the time step, in one
    # reverse pass (the kernel launches are differentiated too), against central differences.
    du0 = np.zeros_like(u0)
    _, _, ddt = adjit.autodiff(adjit.Reverse, simulate, adjit.Duplicated(u0, du0), 50,
                               adjit.Active(0.1))
    h = 1e-6
    fd_dt = (simulate_numpy(u0, 50, 0.1 + h) - simulate_numpy(u0, 50, 0.1 - h)) / (2 * h)
    e = np.zeros_like(u0)
    e[10, 20] = h
    fd_u = (simulate_numpy(u0 + e, 50, 0.1) - simulate_numpy(u0 - e, 50, 0.1)) / (2 * h)
    print(f"d energy / d dt: adjit {ddt:.9f}  finite differences {fd_dt:.9f}")
    print(f"d energy / d u0[10, 20]: adjit {du0[10, 20]:.9f}  finite differences {fd_u:.9f}")
    assert np.isclose(ddt, fd_dt, rtol=1e-6) and np.isclose(du0[10, 20], fd_u, rtol=1e-6)

    from adjit.runtime import cuda
    if cuda.is_available():      # the launches on the GPU, the loop and the sum on the CPU
        on_gpu = simulate(u0, 50, 0.1, device="cuda")
        print(f"heat energy on the GPU: {on_gpu:.12f}")
        assert np.isclose(on_gpu, want, rtol=1e-10)   # (GPU code contracts into fma)
