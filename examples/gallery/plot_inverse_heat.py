"""
The inverse heat problem
========================

Heat diffuses on a square plate for 30 explicit time steps (fixed, cold edges). Given only
the final temperature, which initial temperature produced it? Gradient descent on the
initial field, with the gradient of the misfit computed by ``adjit.value_and_grad`` through
the whole simulation (a kernel launched per step in an ``@adjit.jit`` loop), recovers it as
far as diffusion kept it: the broad shapes come back, the sharp peaks lower and wider.
"""
import matplotlib.pyplot as plt
import numpy as np

import adjit


@adjit.kernel
def heat_step(u, v, kappa: float):
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    if 0 < i < n - 1 and 0 < j < m - 1:
        v[i, j] = u[i, j] + kappa * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                                     - 4.0 * u[i, j])
    else:
        v[i, j] = 0.0


@adjit.jit
def diffuse(u0, steps: int, kappa: float):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(steps):
        heat_step(u, v, kappa, ndrange=u.shape)
        u, v = v, u
    return u


@adjit.jit
def misfit(u0, observed, steps: int, kappa: float):
    d = diffuse(u0, steps, kappa) - observed
    return adjit.sum(d * d)


n, steps, kappa = 32, 30, 0.2
y, x = np.mgrid[0:n, 0:n] / (n - 1)
true_u0 = (np.exp(-((x - 0.3) ** 2 + (y - 0.35) ** 2) / 0.01)
           + 0.7 * np.exp(-((x - 0.7) ** 2 + (y - 0.6) ** 2) / 0.005))
true_u0[0, :] = true_u0[-1, :] = true_u0[:, 0] = true_u0[:, -1] = 0.0
observed = diffuse(true_u0, steps, kappa)

# %%
# The gradient, checked
# ---------------------
# At a random initial guess, one component of the gradient against a central difference.

guess = np.random.default_rng(0).random((n, n))
value, g = adjit.value_and_grad(misfit)(guess, observed, steps, kappa)
e = np.zeros((n, n))
e[10, 12] = 1e-6
fd = (misfit(guess + e, observed, steps, kappa)
      - misfit(guess - e, observed, steps, kappa)) / 2e-6
print(f"d misfit / d u0[10, 12]: adjit {g[10, 12]:.8f}, central difference {fd:.8f}")
assert abs(g[10, 12] - fd) < 1e-6 * max(1.0, abs(fd))

# %%
# Gradient descent from a cold plate
# ----------------------------------
# The misfit is quadratic in the initial field and the diffusion operator's norm is at most
# 1, so a fixed step of 0.45 descends steadily.

u0 = np.zeros((n, n))
losses = []
for it in range(300):
    value, g = adjit.value_and_grad(misfit)(u0, observed, steps, kappa)
    losses.append(value)
    u0 = u0 - 0.45 * g
print(f"misfit {losses[0]:.3e} -> {losses[-1]:.3e}")
print(f"largest error of the recovered field: {np.abs(u0 - true_u0).max():.3f} "
      f"(peak {true_u0.max():.3f})")
assert losses[-1] < 1e-3 * losses[0]
assert all(b <= a for a, b in zip(losses, losses[1:]))

# %%
# The true, observed and recovered fields
# ---------------------------------------

fig, axes = plt.subplots(1, 4, figsize=(13, 3.4), layout="constrained")
for ax, field, title in ((axes[0], true_u0, "true initial field"),
                         (axes[1], observed, f"observed after {steps} steps"),
                         (axes[2], u0, "recovered initial field")):
    im = ax.imshow(field, cmap="inferno", vmin=0, vmax=true_u0.max())
    ax.set_title(title)
    ax.set_axis_off()
fig.colorbar(im, ax=axes[:3], shrink=0.8)
axes[3].semilogy(losses)
axes[3].set_xlabel("iteration")
axes[3].set_ylabel("misfit")
plt.show()
