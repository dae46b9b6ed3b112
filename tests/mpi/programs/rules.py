"""Each communication rule alone against central finite differences, in reverse and forward
mode. What is differentiated is the program of all ranks: F = the sum over ranks of each
rank's result, each rank moving its own input along its own direction."""
import math

import numpy as np

import adjit
from adjit import mpi

world = mpi.Comm()
R, P = world.rank, world.size
rng = np.random.default_rng(100 + R)
EPS = 1e-6
checked = []


def total(v):
    return world.mpi.allreduce(float(v))


def check(name, f, x, *rest, replicated=False):
    """The reverse gradient and forward tangent of f in x (an array or a float) against
    central differences of F (or, replicated: of the one value every rank returns)."""
    is_array = isinstance(x, np.ndarray)
    d = rng.standard_normal(x.shape) if is_array else float(rng.standard_normal())
    g = adjit.grad(f)(x, *rest)
    fp, fm = f(x + EPS * d, *rest), f(x - EPS * d, *rest)
    fd = (fp - fm) / (2 * EPS) if replicated else (total(fp) - total(fm)) / (2 * EPS)
    an = total(np.sum(g * d))
    assert math.isfinite(an) and abs(fd - an) <= 1e-6 * max(abs(an), 1e-3), (name, fd, an)
    t = adjit.autodiff(adjit.Forward, f, adjit.Duplicated(x, d), *rest)
    # Forward mode: each rank's tangent of its own result; F's is their sum.
    tan = t if replicated else total(t)
    assert abs(tan - an) <= 1e-9 * max(abs(an), 1e-3), (name, tan, an)
    checked.append(name)


@adjit.jit
def f_halo(x, wts, width: int, comm: int):
    y = x.copy()
    mpi.halo_exchange(y, width, comm)
    return adjit.sum(wts * y * y)


# 1-D decomposition (a communicator without a grid: the ranks in a line), ghost width 2.
x = rng.random(10)
check("halo_exchange 1-D w=2", f_halo, x, rng.random(10), 2, world)
# 2-D decomposition over a periodic grid (a rank may be its own neighbour), width 1.
grid = world.cart((0, 0), periods=True)
check("halo_exchange 2-D periodic", f_halo, rng.random((5, 6)), rng.random((5, 6)), 1, grid)
check("halo_exchange 3-D array, 2-D grid", f_halo, rng.random((5, 6, 3)),
      rng.random((5, 6, 3)), 1, world.cart((0, 0)))


@adjit.jit
def f_allreduce_array(x, wts, comm: int):
    y = x.copy()
    mpi.allreduce_array(y, comm)
    return adjit.sum(wts * y * y)


check("allreduce_array", f_allreduce_array, rng.random((3, 4)), rng.random((3, 4)), world)


@adjit.jit
def f_bcast_array(x, wts, root: int, comm: int):
    y = x.copy()
    mpi.bcast_array(y, root, comm)
    return adjit.sum(wts * y * y) + adjit.sum(x * x * x)


check("bcast_array", f_bcast_array, rng.random(7), rng.random(7), P - 1, world)


@adjit.jit
def f_ring(x, wts, rank: int, size: int, comm: int):
    # Each rank sends y to the next and receives the previous rank's into z (even ranks
    # send first: the blocking pairs always match).
    y = x * x
    z = adjit.zeros_like(x)
    nxt = (rank + 1) % size
    prv = (rank + size - 1) % size
    if rank % 2 == 0:
        mpi.send(y, nxt, 7, comm)
        mpi.recv(z, prv, 7, comm)
    else:
        mpi.recv(z, prv, 7, comm)
        mpi.send(y, nxt, 7, comm)
    return adjit.sum(wts * z * z) + adjit.sum(x)


check("send/recv", f_ring, rng.random(6), rng.random(6), R, P, world)


@adjit.jit
def f_allreduce(x, wts, c: float, comm: int):
    s = adjit.sum(wts * x * x)
    return c * mpi.allreduce(s, comm) ** 2 + 0.5 * mpi.allreduce(s, comm, "max") ** 2 \
        + mpi.allreduce(s, comm, op="min") * c


check("allreduce sum/max/min", f_allreduce, rng.random(5), rng.random(5), 1.0 + R, world)


@adjit.jit
def f_max_only(x, comm: int):
    return mpi.allreduce(adjit.sum(x * x), comm, "max")


# The rank whose sum is largest gets the whole adjoint; the others none.
xm = rng.random(4) + (3.0 if R == P - 1 else 0.0)
gm = adjit.grad(f_max_only)(xm, world)
assert (np.abs(gm).sum() > 0) == (R == P - 1), gm
check("allreduce max", f_max_only, xm, world)


@adjit.jit
def f_min_only(x, comm: int):
    return mpi.allreduce(adjit.sum(x * x), comm, "min")


check("allreduce min", f_min_only, rng.random(4) + R, world)


@adjit.jit
def f_bcast(a, root: int, c: float, comm: int):
    return adjit.sin(mpi.bcast(a * a, root, comm)) * c + a


check("bcast", f_bcast, float(rng.random()), 0, 2.0 + R, world)


@adjit.jit
def f_replicated(x, comm: int):
    return mpi.replicated(mpi.allreduce(adjit.sum(adjit.sin(x) * x), comm), comm)


check("replicated", f_replicated, rng.random(5), world, replicated=True)

# The operations from Python (around compiled code) give what mpi4py gives.
assert mpi.allreduce(float(R), world) == sum(range(P))
assert mpi.allreduce(float(R), world, "max") == P - 1
assert mpi.bcast(float(R) + 0.5, 1 % P, world) == (1 % P) + 0.5
u = np.full(4, float(R))
mpi.allreduce_array(u, world)
assert np.all(u == sum(range(P)))
print(f"PASS rank {R}: {len(checked)} rules: {', '.join(checked)}", flush=True)
