"""The heat-equation simulator the interop tests put inside PyTorch and JAX programs: an
explicit finite-difference step as a kernel, time steps in an @adjit.jit function."""
import adjit


@adjit.kernel
def heat_step(u, v, kappa: adjit.f64):
    i = adjit.index()
    n = u.shape[0]
    if i == 0 or i == n - 1:
        v[i] = u[i]                          # fixed ends
    else:
        v[i] = u[i] + kappa * (u[i - 1] - 2.0 * u[i] + u[i + 1])


@adjit.jit
def simulate(u0, steps: int, kappa: float):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(steps):
        heat_step(u, v, kappa, ndrange=u.shape)
        u, v = v, u
    return u


@adjit.jit
def energy(u0, steps: int, kappa: float):
    u = simulate(u0, steps, kappa)
    return adjit.sum(u * u)


@adjit.jit
def mse(u0, steps: int, kappa: float, target):
    """The training loss of test_torch's model, all in adjit: its gradient is adjit's own."""
    d = simulate(u0, steps, kappa) - target
    return adjit.sum(d * d) / u0.shape[0]
