"""Issue 29 items 9 and 16: what the ranks disagree about is found before any data moves,
and refused on every rank with a message that names the mismatch, the operation that
failed and the user's line; a dead rank ends the others (default timeout). argv[1] names
the case; each rank that raises prints `RAISED rank r: <type>: <message>`, a rank that
finishes prints `DONE rank r`."""
import sys
import traceback

import numpy as np

import adjit
from adjit import mpi

case = sys.argv[1]
comm = mpi.Comm()
R = comm.rank


@adjit.jit
def reduce_in_jit(u, comm: int):
    mpi.allreduce_array(u, comm)
    return mpi.allreduce(adjit.sum(u), comm, "max")


@adjit.jit
def halo_in_jit(u, comm: int):
    mpi.halo_exchange(u, 1, comm)
    return mpi.allreduce(adjit.sum(u), comm, "max")


@adjit.jit
def dies_after(x: float, comm: int):
    return mpi.allreduce(x, comm)                                 # USER LINE dies_after


@adjit.jit
def halo_loss(u, comm: int):
    v = u.copy()
    mpi.halo_exchange(v, 1, comm)
    return mpi.replicated(mpi.allreduce(adjit.sum(v * v), comm), comm)


def report(e):
    print(f"RAISED rank {R}: {type(e).__name__}: {e} || last_error: {mpi.last_error()}",
          flush=True)


try:
    if case == "reduce_length":
        u = np.arange(3.0 if R == 0 else 4.0)
        mpi.allreduce_array(u, comm)                              # USER LINE reduce_length
        print(f"VALUES rank {R}: {u.tolist()}", flush=True)
    elif case == "reduce_dtype":
        u = np.arange(4.0, dtype=np.float64 if R == 0 else np.float32)
        mpi.allreduce_array(u, comm)                              # USER LINE reduce_dtype
        print(f"VALUES rank {R}: {u.tolist()}", flush=True)
    elif case == "reduce_jit":
        u = np.arange(3.0 if R == 0 else 4.0)
        reduce_in_jit(u, comm)                                    # USER LINE reduce_jit
    elif case == "halo_dtype":
        u = np.arange(8.0, dtype=np.float64 if R == 0 else np.float32)
        mpi.halo_exchange(u, 1, comm)                             # USER LINE halo_dtype
    elif case == "halo_jit":
        u = np.arange(12.0).reshape(4, 3) if R == 0 else np.arange(16.0).reshape(4, 4)
        halo_in_jit(u, comm)                                      # USER LINE halo_jit
    elif case == "halo_not_comm":
        u = np.arange(8.0)
        for bad in ("world", 1.5, None, comm.mpi, 0, 7):
            try:
                mpi.halo_exchange(u, 1, bad)
                print(f"ACCEPTED rank {R}: {bad!r}", flush=True)
            except TypeError as e:
                print(f"TYPEERROR rank {R}: {e}", flush=True)
        for bad in ("world", 2.5):
            try:
                mpi.allreduce_array(u, bad)
                print(f"ACCEPTED rank {R}: {bad!r}", flush=True)
            except TypeError as e:
                print(f"TYPEERROR rank {R}: {e}", flush=True)
        v = np.arange(8.0) + R
        mpi.allreduce_array(v, comm)                  # still works after the refusals
        assert v.tolist() == [2.0 * i + 1 for i in range(8)], v
        print(f"DONE rank {R}", flush=True)
        sys.exit(0)
    elif case == "dead_rank":
        dies_after(1.0, comm)
        if R == 1:
            sys.exit(1)                                           # ends without a word
        dies_after(2.0, comm)
    elif case == "timeout_setting":
        from adjit.mpi import _native
        print(f"TIMEOUT rank {R}: {_native.timeout()}", flush=True)
        sys.exit(0)
    elif case == "grad_mismatch":
        # a derivative whose exchange disagrees: refused on every rank (the rules check)
        u = np.arange(12.0).reshape(4, 3) if R == 0 else np.arange(16.0).reshape(4, 4)
        adjit.grad(halo_loss)(u, comm)                            # USER LINE grad_mismatch
    elif case == "ops_differ":
        # rank 0 reduces an array where rank 1 reduces a scalar (different control flow)
        if R == 0:
            mpi.allreduce_array(np.arange(4.0), comm)             # USER LINE ops_differ
        else:
            mpi.allreduce(1.0, comm, "max")                       # USER LINE ops_differ
    elif case == "jit_not_comm":
        # an int that is no communicator's handle, inside compiled code (where it is an i64)
        halo_in_jit(np.arange(8.0), 7)                            # USER LINE jit_not_comm
    elif case == "matching":
        # what must keep working: equal arrays, and halo arrays of different lengths along
        # the decomposed axis (an uneven split)
        u = np.arange(5.0) * (R + 1)
        mpi.allreduce_array(u, comm)
        assert u.tolist() == [3.0 * i for i in range(5)], u
        w = np.arange(6.0 + R)
        mpi.halo_exchange(w, 1, comm)
        if R == 0:
            assert w[-1] == 1.0, w
        else:
            assert w[0] == 4.0, w
        print(f"DONE rank {R}", flush=True)
        sys.exit(0)
except RuntimeError as e:
    report(e)
    print("TRACE " + " / ".join(f"{f.filename}:{f.lineno}" for f in traceback.extract_tb(
        e.__traceback__)), flush=True)
    sys.exit(0)
print(f"NO ERROR rank {R}", flush=True)
