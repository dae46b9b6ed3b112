"""A differentiable mass-spring cloth, tossed: the initial velocity is optimised by gradient
descent so that the cloth's centre of mass lands on a target.

Written with adjit's Warp-style vectors: positions and velocities are (n, 3) float32 arrays
taken as arrays of `adjit.vec3`, the cloth starts tilted by a quaternion, and the launch
velocity is a `vec3` parameter. The whole simulation (a @jit function launching kernels
each step) is differentiated in reverse mode with respect to that velocity.

    python examples/cloth_toss.py [iterations]
"""
import sys

import numpy as np

import adjit
from adjit import Array, vec3

GRAVITY = -9.8


@adjit.kernel
def place(rest: Array[vec3, 1], tilt: adjit.quat, v0: vec3, x: Array[vec3, 1],
          v: Array[vec3, 1]):
    """The cloth at rest, rotated by `tilt`, every particle moving at `v0`."""
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


@adjit.func
def centre(x: Array[vec3, 1]):
    c = vec3()
    for i in range(x.shape[0]):
        c = c + x[i]
    return c / float(x.shape[0])


@adjit.jit
def miss(v0: vec3, rest, tilt: adjit.quat, springs, rest_length, target: vec3, steps: int,
         dt: float):
    """The squared distance from the cloth's centre after `steps` steps to `target`."""
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


def main(iterations: int = 30) -> None:
    rest, springs, rest_length = cloth(8)
    tilt = adjit.quat(*adjit.quat_from_axis_angle(np.array([1.0, 0.0, 0.0]), 0.4))
    target = vec3(2.0, 1.5, -0.5)
    steps, dt = 60, np.float32(1.0 / 60)
    v0 = vec3(1.0, 2.0, 0.0)
    lr = 0.15
    for it in range(iterations):
        dv0 = np.zeros_like(v0)
        (_, *_), loss = adjit.autodiff(
            adjit.ReverseWithPrimal, miss, adjit.Duplicated(v0, dv0), rest, tilt, springs,
            rest_length, target, steps, dt)
        print(f"iteration {it:2d}  loss {loss:.6f}  v0 = {np.round(v0, 4)}")
        v0 = v0 - lr * dv0
    print(f"final loss {miss(v0, rest, tilt, springs, rest_length, target, steps, dt):.6f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
