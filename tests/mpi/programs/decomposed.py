"""A decomposed 2-D stencil run against the same functions on the whole grid in one
process, and against finite differences: forward result, reverse gradient, forward-mode
tangent. argv: process grid (e.g. 2x2, or 4 for a 1-D decomposition of the 2-D grid),
ghost width, periodic (0/1)."""
import sys

import numpy as np

import adjit
from adjit import mpi

dims = tuple(int(d) for d in sys.argv[1].split("x"))
W = int(sys.argv[2])
PERIODIC = bool(int(sys.argv[3]))
N, STEPS, DT = 12, 6, 0.05


@adjit.kernel
def step(u, v, kappa, dt: float, w: int):
    # A stencil of reach w (w = 1: the 5-point Laplacian; w = 2: also the cells 2 away),
    # with a reaction term, on the owned cells; the ghosts are carried.
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    if w <= i < n - w and w <= j < m - w:
        lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        if w == 2:
            lap += 0.25 * (u[i - 2, j] + u[i + 2, j] + u[i, j - 2] + u[i, j + 2]
                           - 4.0 * u[i, j])
        v[i, j] = u[i, j] + dt * (kappa[i, j] * lap - u[i, j] * u[i, j] * u[i, j])
    else:
        v[i, j] = u[i, j]


@adjit.jit
def run(kappa, u0, steps: int, dt: float, w: int, comm: int):
    u = u0.copy()
    v = u0.copy()
    for _ in range(steps):
        mpi.halo_exchange(u, w, comm)
        step(u, v, kappa, dt, w, ndrange=u.shape)
        u, v = v, u
    return u


@adjit.jit
def loss(kappa, u0, target, owned, steps: int, dt: float, w: int, comm: int):
    u = run(kappa, u0, steps, dt, w, comm)
    r = u - target
    return mpi.replicated(mpi.allreduce(adjit.sum(owned * r * r), comm), comm)


def blocks(comm, seed=0):
    rng = np.random.default_rng(seed)
    u0 = rng.random((N, N))
    kappa = 0.5 + rng.random((N, N))
    target = rng.random((N, N))
    direction = rng.standard_normal((N, N))
    local = [comm.scatter(a, W) for a in (u0, kappa, target, direction)]
    owned = np.zeros_like(local[0])
    comm.owned(owned, W)[...] = 1.0
    return (*local, owned)


world = mpi.Comm()
comm = world.cart(dims, PERIODIC)
single = mpi.Comm(world.mpi.Split(world.rank, 0)).cart((1,) * len(dims), PERIODIC)
u0, kappa, target, d, owned = blocks(comm)
args = (STEPS, DT, W)

# Forward: the decomposed final state is the single-process one.
out = comm.gather(run(kappa, u0, *args, comm), W)
g_u0, g_kappa, g_target, g_d, g_owned = blocks(single)
ref = single.gather(run(g_kappa, g_u0, *args, single), W)
assert np.allclose(out, ref, rtol=1e-14, atol=1e-14), np.abs(out - ref).max()

# Reverse: the gradient in kappa, gathered, is the single-process gradient.
value, g = adjit.value_and_grad(loss)(kappa, u0, target, owned, *args, comm)
ref_value, ref_g = adjit.value_and_grad(loss)(g_kappa, g_u0, g_target, g_owned, *args, single)
assert abs(value - ref_value) <= 1e-13 * abs(ref_value), (value, ref_value)
G, RG = comm.gather(g, W), single.gather(ref_g, W)
assert np.allclose(G, RG, rtol=1e-12, atol=1e-14 * np.abs(RG).max()), np.abs(G - RG).max()
# Ghost cells of kappa are never read: no gradient there.
assert np.all(g[owned == 0] == 0.0)

# Finite differences of the decomposed loss along a direction (every rank moves its block).
eps = 1e-6
masked = d * owned
lp = loss(kappa + eps * masked, u0, target, owned, *args, comm)
lm = loss(kappa - eps * masked, u0, target, owned, *args, comm)
fd = (lp - lm) / (2 * eps)
an = comm.mpi.allreduce(float(np.sum(g * masked)))
assert abs(fd - an) <= 1e-6 * abs(an), (fd, an)

# Forward mode: the tangent of the replicated loss is the directional derivative.
tangent = adjit.autodiff(adjit.Forward, loss, adjit.Duplicated(kappa, masked), u0, target,
                         owned, *args, comm)
assert abs(tangent - an) <= 1e-10 * abs(an), (tangent, an)
if PERIODIC:
    # A checkpointed time loop (Revolve, 2 snapshots): the reverse pass runs steps again,
    # their exchanges included, on every rank alike; the same gradient.
    @adjit.jit
    def loss_checkpointed(kappa, u0, target, owned, steps: int, dt: float, w: int, comm: int):
        u = u0.copy()
        v = u0.copy()
        for _ in adjit.checkpointed(range(steps), snapshots=2):
            mpi.halo_exchange(u, w, comm)
            step(u, v, kappa, dt, w, ndrange=u.shape)
            u, v = v, u
        r = u - target
        return mpi.replicated(mpi.allreduce(adjit.sum(owned * r * r), comm), comm)

    gc = adjit.grad(loss_checkpointed)(kappa, u0, target, owned, *args, comm)
    assert np.allclose(gc, g, rtol=1e-13, atol=1e-15), np.abs(gc - g).max()

print(f"PASS rank {comm.rank}: loss {value:.6e}, gradient and tangent {an:.6e}", flush=True)
