"""A 2-D heat inverse problem decomposed over MPI ranks: recover the diffusivity field kappa
from the temperature it produces after `steps` explicit steps, by gradient descent on
L(kappa) = 1/2 sum (u_T(kappa) - target)^2. Each rank holds a block of the grid with one
layer of ghost cells and exchanges them every step (adjit.mpi.halo_exchange inside the
compiled time loop); adjit.grad differentiates the whole loop, halo exchanges and the
allreduce of the loss included, and each rank gets its block of the gradient.

    mpiexec -n 4 python examples/heat_mpi.py     # a 2x2 process grid
    python examples/heat_mpi.py                  # the same problem on one rank

On every number of ranks the loss and the gradient equal the single-process run's (the
script checks this against a run of the same functions on the whole grid, in this process).
"""
from __future__ import annotations

import sys

import numpy as np

import adjit
from adjit import mpi


@adjit.kernel
def heat_step(u, v, kappa, dt: float):
    i, j = adjit.index_nd()
    if 0 < i < u.shape[0] - 1 and 0 < j < u.shape[1] - 1:
        lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        v[i, j] = u[i, j] + dt * kappa[i, j] * lap
    else:
        v[i, j] = u[i, j]      # ghosts: the next exchange overwrites them (or the boundary)


@adjit.jit
def simulate(kappa, u0, steps: int, dt: float, comm: int):
    u = u0.copy()
    v = u0.copy()
    for _ in range(steps):
        mpi.halo_exchange(u, 1, comm)
        heat_step(u, v, kappa, dt, ndrange=u.shape)
        u, v = v, u
    return u


@adjit.jit
def loss(kappa, u0, target, owned, steps: int, dt: float, comm: int):
    u = simulate(kappa, u0, steps, dt, comm)
    r = u - target
    local = 0.5 * adjit.sum(owned * r * r)          # this rank's cells only
    return mpi.replicated(mpi.allreduce(local, comm), comm)


def problem(n: int = 64, seed: int = 0):
    """The global grid's n x n cells (inside a ring of boundary cells held at 0, which
    `Comm.scatter` adds as the ghosts at the grid's edge): the initial temperature, the true
    diffusivity and the initial guess."""
    rng = np.random.default_rng(seed)
    x = (np.arange(n) + 0.5) / n
    u0 = np.outer(np.sin(np.pi * x), np.sin(2 * np.pi * x))
    kappa_true = 0.5 + 0.2 * rng.random((n, n))
    kappa0 = np.full((n, n), 0.6)
    return u0, kappa_true, kappa0


def local_problem(comm, n: int = 64, steps: int = 20, dt: float = 0.2):
    """This rank's blocks (one ghost layer), the target computed by the decomposed forward
    run itself, and a mask of the cells it owns."""
    u0, kappa_true, kappa0 = problem(n)
    blocks = [comm.scatter(a, width=1) for a in (u0, kappa_true, kappa0)]
    u0_l, kt_l, k0_l = blocks
    target = simulate(kt_l, u0_l, steps, dt, comm)
    owned = np.zeros_like(u0_l)
    comm.owned(owned)[...] = 1.0
    return k0_l, u0_l, target, owned


def main(iters: int = 5, n: int = 64, steps: int = 20, dt: float = 0.2) -> int:
    comm = mpi.Comm().cart((0, 0))
    kappa, u0, target, owned = local_problem(comm, n, steps, dt)
    grad = adjit.value_and_grad(loss)
    history = []
    for it in range(iters):
        value, g = grad(kappa, u0, target, owned, steps, dt, comm)
        history.append(value)
        kappa = kappa - 50.0 * g
    g_global = comm.gather(g)

    # The same functions on the whole grid in this process (a one-rank communicator).
    single = mpi.Comm(comm.mpi.Split(comm.rank, 0)).cart((1, 1))
    kappa_g, u0_g, target_g, owned_g = local_problem(single, n, steps, dt)
    ref = []
    for it in range(iters):
        value, g_ref = adjit.value_and_grad(loss)(kappa_g, u0_g, target_g, owned_g, steps,
                                                  dt, single)
        ref.append(value)
        kappa_g = kappa_g - 50.0 * g_ref
    g_ref = g_ref[1:-1, 1:-1]
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(history, ref))
    grad_err = float(np.abs(g_global - g_ref).max() / np.abs(g_ref).max())
    if comm.rank == 0:
        print(f"{comm.size} ranks, grid {comm.dims}: loss {history[0]:.6e} -> {history[-1]:.6e}"
              f" in {iters} steps; vs one process: loss rel. error {loss_err:.1e}, gradient "
              f"rel. error {grad_err:.1e}")
    return 0 if loss_err < 1e-12 and grad_err < 1e-12 else 1


if __name__ == "__main__":
    sys.exit(main())
