"""Starting adjit's MPI runtime (runtime/native/mpi.cpp): the addresses of the MPI functions
of the library mpi4py loaded, and the handles of the datatypes and operations it uses, handed
to the native extension once per process. mpi4py is imported here, when adjit.mpi is first
used, never by `import adjit`."""
from __future__ import annotations

import ctypes
import functools
import sys

from ..core.environment import default, read

# The order of mpi.cpp's `Api` struct and `Constant` enum.
_FUNCTIONS = ("Isend", "Irecv", "Test", "Iallreduce", "Ireduce", "Ibcast", "Iprobe", "Recv",
              "Get_count", "Comm_rank", "Comm_size", "Topo_test", "Cartdim_get", "Cart_get",
              "Cart_shift", "Cancel", "Request_free", "Abort", "Error_string")


def _handle(obj) -> int:
    """An mpi4py object's handle as the C int of the MPICH ABI."""
    return ctypes.c_int(obj.handle & 0xFFFFFFFF).value


@functools.cache
def library() -> ctypes.CDLL:
    """The native extension, with the argument types of its MPI entry points."""
    from ..runtime.extension import library as lib
    lib.adj_mpi_bind.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int64,
                                 ctypes.POINTER(ctypes.c_int64), ctypes.c_int64]
    lib.adj_mpi_bind.restype = ctypes.c_int64
    lib.adj_mpi_set_timeout.argtypes = [ctypes.c_double]
    lib.adj_mpi_timeout.restype = ctypes.c_double
    lib.adj_mpi_add_comm.argtypes = [ctypes.c_int64]
    lib.adj_mpi_set_check.argtypes = [ctypes.c_int64]
    lib.adj_mpi_status.restype = ctypes.c_int64
    lib.adj_mpi_error.restype = ctypes.c_char_p
    lib.adj_mpi_fail.argtypes = [ctypes.c_char_p]
    lib.adj_mpi_abort.argtypes = [ctypes.c_int64]
    lib.adj_mpi_scalar.argtypes = [ctypes.c_double, ctypes.c_int64, ctypes.c_int64,
                                   ctypes.c_int64]
    lib.adj_mpi_scalar.restype = ctypes.c_double
    lib.adj_mpi_rank.argtypes = [ctypes.c_int64]
    lib.adj_mpi_rank.restype = ctypes.c_int64
    return lib


@functools.cache
def start():
    """Binds MPI into the native runtime (once); returns mpi4py's MPI module and the failure
    channel (a duplicate of COMM_WORLD that only failure notices travel on)."""
    global ABORT_GRACE_S
    # The settings first: a value that is not valid is refused before MPI is touched.
    timeout, check = _timeout_setting(), read("ADJIT_MPI_CHECK")
    ABORT_GRACE_S = read("ADJIT_MPI_ABORT_GRACE")
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError("adjit.mpi needs mpi4py and an MPI library: pip install "
                          "'adjit[mpi]' (mpi4py and the mpich wheel)") from e
    version = MPI.Get_library_version()
    if not any(name in version for name in ("MPICH", "Intel(R) MPI", "MVAPICH", "CRAY MPICH")):
        raise RuntimeError("adjit.mpi calls MPI through the MPICH ABI (MPICH, Intel MPI, "
                           "Cray MPICH, MVAPICH); mpi4py is built against another MPI: "
                           + version.splitlines()[0])
    mpi = ctypes.CDLL(MPI.__file__)      # dlsym through it finds libmpi's functions
    functions = (ctypes.c_void_p * len(_FUNCTIONS))(*[
        ctypes.cast(getattr(mpi, "MPI_" + name), ctypes.c_void_p).value
        for name in _FUNCTIONS])
    fail_comm = MPI.COMM_WORLD.Dup()
    fail_comm.Set_errhandler(MPI.ERRORS_RETURN)
    values = [_handle(MPI.DOUBLE), _handle(MPI.FLOAT), _handle(MPI.INT64_T),
              _handle(MPI.INT32_T), _handle(MPI.DOUBLE_INT), _handle(MPI.CHAR),
              _handle(MPI.SUM), _handle(MPI.MAX), _handle(MPI.MIN), _handle(MPI.MAXLOC),
              _handle(MPI.MINLOC), MPI.PROC_NULL, MPI.ANY_SOURCE, MPI.CART,
              _handle(MPI.REQUEST_NULL), _handle(fail_comm)]
    constants = (ctypes.c_int64 * len(values))(*values)
    lib = library()
    if lib.adj_mpi_bind(functions, len(_FUNCTIONS), constants, len(values)) != 0:
        raise RuntimeError("adjit.mpi: the native extension is out of date (reinstall adjit)")
    lib.adj_mpi_set_timeout(timeout)
    # The ranks' agreement on each collective operation (mpi.cpp's `agree`: one small
    # allreduce before each, a global synchronisation a halo exchange otherwise lacks):
    # ADJIT_MPI_CHECK=0 skips it, for runs whose program is known to be consistent.
    lib.adj_mpi_set_check(check)
    _install_excepthook()
    return MPI, fail_comm


# How long an operation waits for the other ranks before it fails (every rank then raises):
# a rank that ended (sys.exit, a crash) or never reaches the operation would otherwise leave
# the others waiting forever. ADJIT_MPI_TIMEOUT overrides it; 0 waits forever.
DEFAULT_TIMEOUT_S = default("ADJIT_MPI_TIMEOUT")


def _timeout_setting() -> float:
    return read("ADJIT_MPI_TIMEOUT")


def timeout() -> float:
    """The seconds an operation waits for the other ranks (0: forever)."""
    start()
    return library().adj_mpi_timeout()


def add_comm(comm: int) -> None:
    """Records `comm` (an adjit.mpi.Comm's handle) as one the operations take."""
    library().adj_mpi_add_comm(comm)


def status() -> int:
    return library().adj_mpi_status()


def error() -> str:
    return library().adj_mpi_error().decode(errors="replace")


def fail(why: str) -> None:
    """Records a failure on this rank and tells every other rank."""
    library().adj_mpi_fail(why.encode(errors="replace")[:480])


# How long a rank whose Python code raised waits, after telling the others, before it ends
# the job (MPI_Abort): time for them to raise and print their own errors. Read when MPI
# starts (`start`), with the other settings, so that a bad value is refused there.
ABORT_GRACE_S = default("ADJIT_MPI_ABORT_GRACE")


def _install_excepthook() -> None:
    """An exception that ends a rank's program tells the other ranks (each raises where it
    communicates next, instead of waiting forever for this one), prints, then ends the job:
    MPI_Finalize could otherwise wait for ranks that never come (as `python -m mpi4py`)."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        if status() == 0:
            fail(f"{kind.__name__}: {value}")
        previous(kind, value, tb)
        sys.stderr.flush()
        import time
        time.sleep(ABORT_GRACE_S)
        library().adj_mpi_abort(1)

    sys.excepthook = hook
