"""Failures raise on every rank instead of hanging. argv[1]:
- python: rank 1's Python code raises (uncaught) while the others wait in a halo exchange
  inside compiled code; they raise RuntimeError, and rank 1's exception ends the job;
- shape: the ranks' arrays differ in shape across the decomposed axis 0 (rank 0's rows are
  shorter: its messages to and from rank 1 do not fit); every rank raises;
- skip: rank 0 skips an allreduce: its next one (op='max') meets the others'
  allreduce(op='sum'), which the ranks' check of what they call finds: every rank raises.
Each rank that raises prints `RAISED rank r: <last_error()>`."""
import sys

import numpy as np

import adjit
from adjit import mpi

case = sys.argv[1]
comm = mpi.Comm()
R = comm.rank


@adjit.jit
def exchange(u, steps: int, comm: int):
    for _ in range(steps):
        mpi.halo_exchange(u, 1, comm)
        u[1] = u[1] + 1.0
    return adjit.sum(u)


@adjit.jit
def exchange_2d(u, steps: int, comm: int):
    for _ in range(steps):
        mpi.halo_exchange(u, 1, comm)
    return adjit.sum(u)


@adjit.jit
def reduce_twice(x: float, first: bool, comm: int):
    s = 0.0
    if first:
        s = mpi.allreduce(x, comm)
    return s + mpi.allreduce(x * 2.0, comm, "max")


u = np.zeros(8)
exchange(u, 1, comm)      # compiled and working on every rank before the failure
comm.mpi.Barrier()
try:
    if case == "python":
        if R == 1:
            raise ValueError("rank 1 found bad input")
        exchange(u, 100000, comm)
    elif case == "shape":
        exchange_2d(np.zeros((6, 5 if R == 0 else 6)), 3, comm)
    elif case == "skip":
        reduce_twice(1.0, R != 0, comm)
        reduce_twice(1.0, True, comm)
except RuntimeError as e:
    assert mpi.failed()
    print(f"RAISED rank {R}: {mpi.last_error()} | {e}", flush=True)
    sys.exit(0)
print(f"NO ERROR rank {R}", flush=True)
