"""
Tossing a cloth at a target
===========================

A mass-spring cloth (a 6 x 6 grid of particles joined by structural and shear springs) is
thrown from a tilted start; where its centre of mass lands depends on the initial velocity
`v0`. The whole simulation (an ``@adjit.jit`` function launching three kernels per time
step) is differentiated in reverse mode with respect to `v0`, and a few steps of gradient
descent on `v0` make the cloth land on the target.

Positions and velocities are ``(n, 3)`` float32 arrays taken as arrays of ``adjit.vec3``
(no copy); the start is tilted by a quaternion.
"""
import matplotlib.pyplot as plt
import numpy as np

import adjit
from adjit import Array, vec3

GRAVITY = -9.8


@adjit.kernel
def place(rest: Array[vec3, 1], tilt: adjit.quat, v0: vec3, x: Array[vec3, 1],
          v: Array[vec3, 1]):
    """The cloth at rest, rotated by `tilt` and lifted 1 m, every particle moving at v0."""
    i = adjit.index()
    x[i] = adjit.quat_rotate(tilt, rest[i]) + vec3(0.0, 1.0, 0.0)
    v[i] = v0


@adjit.kernel
def spring_forces(x: Array[vec3, 1], v: Array[vec3, 1], springs, rest_length,
                  ke: float, kd: float, f: Array[vec3, 1]):
    """A damped spring between particles springs[s, 0] and springs[s, 1]."""
    s = adjit.index()
    i = springs[s, 0]
    j = springs[s, 1]
    d = x[j] - x[i]
    direction = adjit.normalize(d)
    stretch = adjit.length(d) - rest_length[s]
    speed = adjit.dot(v[j] - v[i], direction)
    force = direction * (ke * stretch + kd * speed)
    adjit.atomic_add(f, i, force)
    adjit.atomic_add(f, j, -force)


@adjit.kernel
def integrate(x: Array[vec3, 1], v: Array[vec3, 1], f: Array[vec3, 1], inv_mass: float,
              dt: float, x_new: Array[vec3, 1], v_new: Array[vec3, 1]):
    """Semi-implicit Euler under gravity."""
    i = adjit.index()
    v1 = v[i] + (f[i] * inv_mass + vec3(0.0, GRAVITY, 0.0)) * dt
    v_new[i] = v1
    x_new[i] = x[i] + v1 * dt


@adjit.jit
def final_positions(v0: vec3, rest, tilt: adjit.quat, springs, rest_length, steps: int,
                    dt: float):
    """The particles' positions after `steps` time steps."""
    n = rest.shape[0]
    x = adjit.empty_like(rest)
    v = adjit.empty_like(rest)
    place(rest, tilt, v0, x, v, ndrange=n)
    for _ in range(steps):
        f = adjit.zeros_like(x)
        spring_forces(x, v, springs, rest_length, 50.0, 0.5, f, ndrange=springs.shape[0])
        x_new = adjit.empty_like(x)
        v_new = adjit.empty_like(v)
        integrate(x, v, f, 10.0, dt, x_new, v_new, ndrange=n)
        x = x_new
        v = v_new
    return x


@adjit.func
def centre(x: Array[vec3, 1]):
    c = vec3()
    for i in range(x.shape[0]):
        c = c + x[i]
    return c / float(x.shape[0])


@adjit.jit
def miss(v0: vec3, rest, tilt: adjit.quat, springs, rest_length, target: vec3, steps: int,
         dt: float):
    """The squared distance from the cloth's final centre of mass to `target`."""
    x = final_positions(v0, rest, tilt, springs, rest_length, steps, dt)
    return adjit.length_sq(centre(x) - target)


def cloth(k: int, size: float = 0.5):
    """A k-by-k grid of particles with structural and shear springs."""
    grid = np.stack(np.meshgrid(np.linspace(0, size, k), np.linspace(0, size, k)), -1)
    rest = np.zeros((k * k, 3), np.float32)
    rest[:, 0], rest[:, 2] = grid[..., 0].ravel(), grid[..., 1].ravel()
    pairs = []
    for r in range(k):
        for c in range(k):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                if 0 <= r + dr < k and 0 <= c + dc < k:
                    pairs.append((r * k + c, (r + dr) * k + c + dc))
    springs = np.array(pairs, np.int64)
    rest_length = np.linalg.norm(rest[springs[:, 1]] - rest[springs[:, 0]], axis=1)
    return rest, springs, rest_length.astype(np.float32)


rest, springs, rest_length = cloth(6)
tilt = adjit.quat(*adjit.quat_from_axis_angle(np.array([1.0, 0.0, 0.0]), 0.4))
target = vec3(2.0, 1.5, -0.5)
steps, dt = 40, np.float32(1.0 / 40)
problem = (rest, tilt, springs, rest_length, target, steps, dt)

# %%
# The gradient of the miss with respect to v0
# -------------------------------------------
# ``adjit.autodiff`` in ``ReverseWithPrimal`` mode gives the loss and accumulates its
# gradient into the shadow ``dv0`` of the ``Duplicated`` argument. Before descending, the
# gradient is checked against central differences at the starting point.

v_start = vec3(1.0, 2.0, 0.0)
dv0 = np.zeros_like(v_start)
_, loss = adjit.autodiff(adjit.ReverseWithPrimal, miss, adjit.Duplicated(v_start, dv0),
                         *problem)
h = 1e-2
fd = [(miss(v_start + h * e, *problem) - miss(v_start - h * e, *problem)) / (2 * h)
      for e in np.eye(3, dtype=np.float32)]
print("gradient      ", dv0)
print("central diff. ", np.array(fd))
assert np.allclose(dv0, fd, rtol=2e-2, atol=1e-2)

# %%
# Gradient descent on the initial velocity
# ----------------------------------------

v0, losses = v_start, []
for it in range(12):
    dv0 = np.zeros_like(v0)
    _, loss = adjit.autodiff(adjit.ReverseWithPrimal, miss, adjit.Duplicated(v0, dv0),
                             *problem)
    losses.append(loss)
    v0 = v0 - 0.15 * dv0
losses.append(miss(v0, *problem))
print(f"miss: {losses[0]:.4f} m^2 -> {losses[-1]:.6f} m^2, v0 = {np.round(v0, 3)}")
assert losses[-1] < 0.01 * losses[0]

# %%
# The trajectories before and after
# ---------------------------------
# The centre of mass after each number of steps (``final_positions`` for 0..steps steps),
# and the cloth's particles where it lands.


def centres(v):
    return np.array([final_positions(v, rest, tilt, springs, rest_length, t, dt).mean(0)
                     for t in range(steps + 1)])


fig = plt.figure(figsize=(9, 4))
ax = fig.add_subplot(1, 2, 1, projection="3d")
for v, label in ((v_start, "before"), (v0, "after")):
    path = centres(v)
    ax.plot(path[:, 0], path[:, 2], path[:, 1], label=label)
    landed = final_positions(v, rest, tilt, springs, rest_length, steps, dt)
    ax.scatter(landed[:, 0], landed[:, 2], landed[:, 1], s=4)
ax.scatter([target[0]], [target[2]], [target[1]], c="red", marker="x", s=60, label="target")
ax.set_xlabel("x")
ax.set_ylabel("z")
ax.set_zlabel("height")
ax.legend()
ax2 = fig.add_subplot(1, 2, 2)
ax2.semilogy(losses, "o-")
ax2.set_xlabel("gradient step")
ax2.set_ylabel("squared miss (m$^2$)")
fig.tight_layout()
plt.show()
