"""The differentiable cloth of examples/cloth_toss.py (issue 16): its simulation (a @jit
function launching a spring-force and an integration kernel per step) and its gradient
with respect to the launch velocity, written with adjit.vec3 against the same code written
with scalar components (x[i, 0], x[i, 1], x[i, 2]), and against NVIDIA Warp on the CPU
where it is installed (the same kernels with wp.vec3, wp.Tape for the gradient). Every
version's loss and gradient are checked against the vec3 version's before timing.

    python benchmarks/bench_vectors.py [k (a k-by-k cloth)] [steps]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import adjit
from timing import median_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from cloth_toss import GRAVITY, cloth, miss  # noqa: E402

KE, KD, INV_MASS = 50.0, 0.5, 10.0


# ---- the same simulation with scalar components ------------------------------------------
@adjit.kernel
def place_s(rest, tilt, v0, x, v):
    i = adjit.index()
    qx, qy, qz, qw = tilt[0], tilt[1], tilt[2], tilt[3]
    px, py, pz = rest[i, 0], rest[i, 1], rest[i, 2]
    a = 2.0 * qw * qw - 1.0
    cx, cy, cz = qy * pz - qz * py, qz * px - qx * pz, qx * py - qy * px
    d = 2.0 * (qx * px + qy * py + qz * pz)
    x[i, 0] = px * a + cx * qw * 2.0 + qx * d
    x[i, 1] = py * a + cy * qw * 2.0 + qy * d + 1.0
    x[i, 2] = pz * a + cz * qw * 2.0 + qz * d
    v[i, 0] = v0[0]
    v[i, 1] = v0[1]
    v[i, 2] = v0[2]


@adjit.kernel
def spring_forces_s(x, v, springs, rest_length, ke: float, kd: float, f):
    s = adjit.index()
    i = springs[s, 0]
    j = springs[s, 1]
    dx, dy, dz = x[j, 0] - x[i, 0], x[j, 1] - x[i, 1], x[j, 2] - x[i, 2]
    length_sq = dx * dx + dy * dy + dz * dz
    ok = length_sq > 0.0
    length = adjit.sqrt(length_sq if ok else 1.0)
    inv = 1.0 / length
    ux = dx * inv if ok else 0.0 * dx
    uy = dy * inv if ok else 0.0 * dy
    uz = dz * inv if ok else 0.0 * dz
    stretch = (length if ok else 0.0 * length) - rest_length[s]
    speed = (v[j, 0] - v[i, 0]) * ux + (v[j, 1] - v[i, 1]) * uy + (v[j, 2] - v[i, 2]) * uz
    m = ke * stretch + kd * speed
    adjit.atomic_add(f, (i, 0), ux * m)
    adjit.atomic_add(f, (i, 1), uy * m)
    adjit.atomic_add(f, (i, 2), uz * m)
    adjit.atomic_add(f, (j, 0), -ux * m)
    adjit.atomic_add(f, (j, 1), -uy * m)
    adjit.atomic_add(f, (j, 2), -uz * m)


@adjit.kernel
def integrate_s(x, v, f, inv_mass: float, dt: float, x_new, v_new):
    i = adjit.index()
    vx = v[i, 0] + f[i, 0] * inv_mass * dt
    vy = v[i, 1] + (f[i, 1] * inv_mass + GRAVITY) * dt
    vz = v[i, 2] + f[i, 2] * inv_mass * dt
    v_new[i, 0] = vx
    v_new[i, 1] = vy
    v_new[i, 2] = vz
    x_new[i, 0] = x[i, 0] + vx * dt
    x_new[i, 1] = x[i, 1] + vy * dt
    x_new[i, 2] = x[i, 2] + vz * dt


@adjit.jit
def miss_s(v0, rest, tilt, springs, rest_length, target, steps: int, dt: float):
    n = rest.shape[0]
    x = adjit.empty_like(rest)
    v = adjit.empty_like(rest)
    place_s(rest, tilt, v0, x, v, ndrange=n)
    for _ in range(steps):
        f = adjit.zeros_like(x)
        spring_forces_s(x, v, springs, rest_length, 50.0, 0.5, f, ndrange=springs.shape[0])
        x_new = adjit.empty_like(x)
        v_new = adjit.empty_like(v)
        integrate_s(x, v, f, 10.0, dt, x_new, v_new, ndrange=n)
        x = x_new
        v = v_new
    cx = adjit.sum(x[:, 0]) / n - target[0]
    cy = adjit.sum(x[:, 1]) / n - target[1]
    cz = adjit.sum(x[:, 2]) / n - target[2]
    return cx * cx + cy * cy + cz * cz


def adjit_runs(fn, args):
    def forward():
        return fn(*args)

    def gradient():
        dv0 = np.zeros_like(args[0])
        (_, *_), loss = adjit.autodiff(adjit.ReverseWithPrimal, fn, adjit.Duplicated(
            args[0], dv0), *args[1:])
        return loss, dv0
    return forward, gradient


# ---- Warp, where installed -----------------------------------------------------------------
def warp_runs(rest, springs, rest_length, tilt, target, v0, steps, dt):
    try:
        import warp as wp
    except ImportError:
        return None
    wp.config.quiet = True
    wp.init()

    @wp.kernel
    def w_place(rest: wp.array(dtype=wp.vec3), tilt: wp.quat, v0: wp.array(dtype=wp.vec3),
                x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3)):
        i = wp.tid()
        x[i] = wp.quat_rotate(tilt, rest[i]) + wp.vec3(0.0, 1.0, 0.0)
        v[i] = v0[0]

    @wp.kernel
    def w_springs(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
                  springs: wp.array2d(dtype=wp.int64), rest_length: wp.array(dtype=float),
                  ke: float, kd: float, f: wp.array(dtype=wp.vec3)):
        s = wp.tid()
        i = springs[s, 0]
        j = springs[s, 1]
        d = x[j] - x[i]
        direction = wp.normalize(d)
        stretch = wp.length(d) - rest_length[s]
        speed = wp.dot(v[j] - v[i], direction)
        force = direction * (ke * stretch + kd * speed)
        wp.atomic_add(f, i, force)
        wp.atomic_sub(f, j, force)

    @wp.kernel
    def w_integrate(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
                    f: wp.array(dtype=wp.vec3), inv_mass: float, dt: float,
                    x_new: wp.array(dtype=wp.vec3), v_new: wp.array(dtype=wp.vec3)):
        i = wp.tid()
        v1 = v[i] + (f[i] * inv_mass + wp.vec3(0.0, -9.8, 0.0)) * dt
        v_new[i] = v1
        x_new[i] = x[i] + v1 * dt

    @wp.kernel
    def w_centre(x: wp.array(dtype=wp.vec3), scale: float, c: wp.array(dtype=wp.vec3)):
        wp.atomic_add(c, 0, x[wp.tid()] * scale)

    @wp.kernel
    def w_loss(c: wp.array(dtype=wp.vec3), target: wp.vec3, loss: wp.array(dtype=float)):
        loss[0] = wp.length_sq(c[0] - target)

    n, m = len(rest), len(springs)
    dev = "cpu"
    rest_w = wp.array(rest, dtype=wp.vec3, device=dev)
    springs_w = wp.array(springs, dtype=wp.int64, device=dev)
    rl_w = wp.array(rest_length, dtype=float, device=dev)
    v0_w = wp.array(v0[None], dtype=wp.vec3, device=dev, requires_grad=True)
    xs = [wp.zeros(n, dtype=wp.vec3, device=dev, requires_grad=True) for _ in range(steps + 1)]
    vs = [wp.zeros(n, dtype=wp.vec3, device=dev, requires_grad=True) for _ in range(steps + 1)]
    fs = [wp.zeros(n, dtype=wp.vec3, device=dev, requires_grad=True) for _ in range(steps)]
    c = wp.zeros(1, dtype=wp.vec3, device=dev, requires_grad=True)
    loss = wp.zeros(1, dtype=float, device=dev, requires_grad=True)
    q, tv = wp.quat(*tilt), wp.vec3(*target)

    def simulate():
        wp.launch(w_place, n, inputs=[rest_w, q, v0_w, xs[0], vs[0]], device=dev)
        for t in range(steps):
            fs[t].zero_()
            wp.launch(w_springs, m, inputs=[xs[t], vs[t], springs_w, rl_w, KE, KD, fs[t]],
                      device=dev)
            wp.launch(w_integrate, n, inputs=[xs[t], vs[t], fs[t], INV_MASS, float(dt),
                                              xs[t + 1], vs[t + 1]], device=dev)
        c.zero_()
        wp.launch(w_centre, n, inputs=[xs[steps], 1.0 / n, c], device=dev)
        wp.launch(w_loss, 1, inputs=[c, tv, loss], device=dev)

    def forward():
        simulate()
        return float(loss.numpy()[0])

    def gradient():
        tape = wp.Tape()
        with tape:
            simulate()
        tape.backward(loss)
        g = v0_w.grad.numpy()[0].copy()
        tape.zero()
        return float(loss.numpy()[0]), g

    return forward, gradient


def main(k: int = 32, steps: int = 60, repeat: int = 11) -> dict:
    rest, springs, rest_length = cloth(k)
    tilt = adjit.quat(*adjit.quat_from_axis_angle(np.array([1.0, 0.0, 0.0]), 0.4))
    target = adjit.vec3(2.0, 1.5, -0.5)
    v0 = adjit.vec3(1.0, 2.0, 0.0)
    dt = np.float32(1.0 / 60)
    args = (v0, rest, tilt, springs, rest_length, target, steps, dt)
    runs = {"adjit vec3": adjit_runs(miss, args),
            "adjit scalar components": adjit_runs(miss_s, args)}
    w = warp_runs(rest, springs, rest_length, tilt, target, v0, steps, dt)
    if w is not None:
        runs["Warp (CPU)"] = w
    ref_loss, ref_grad = runs["adjit vec3"][1]()
    for name, (forward, gradient) in runs.items():   # the same numbers before any timing
        loss, grad = gradient()
        assert abs(forward() - ref_loss) <= 1e-3 * abs(ref_loss), (name, forward(), ref_loss)
        assert abs(loss - ref_loss) <= 1e-3 * abs(ref_loss), name
        np.testing.assert_allclose(grad, ref_grad, rtol=2e-3, atol=1e-4 * np.abs(ref_grad).max(),
                                   err_msg=name)
    print(f"cloth {k}x{k} ({len(rest)} particles, {len(springs)} springs), {steps} steps, "
          f"f32, CPU; medians of {repeat}")
    print(f"{'':28s}{'simulation':>14s}{'gradient':>14s}")
    times = {}
    for name, (forward, gradient) in runs.items():
        times[name] = (median_of(forward, repeat), median_of(gradient, repeat))
        print(f"{name:28s}{times[name][0] * 1e3:11.2f} ms{times[name][1] * 1e3:11.2f} ms")
    if w is None:
        print("Warp: not installed (pip install warp-lang): not compared")
    return times


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
