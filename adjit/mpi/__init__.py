"""adjit.mpi: differentiable communication between MPI ranks, in compiled code and around it.

A program's shape (``global_u``, ``step`` are the program's own)::

    from adjit import mpi
    comm = mpi.Comm().cart((2, 2))            # a 2x2 process grid over the ranks
    u = comm.scatter(global_u, width=1)       # this rank's block, with 1 ghost layer

    @adjit.jit
    def loss(u0, steps: int, comm: int):      # a communicator is passed as an int
        u = u0.copy(); v = adjit.empty_like(u)
        for _ in range(steps):
            mpi.halo_exchange(u, 1, comm)     # ghosts of width 1 from the neighbours
            step(u, v, ndrange=u.shape)
            u, v = v, u
        return mpi.replicated(mpi.allreduce(adjit.sum(u * u), comm), comm)

    g = adjit.grad(loss)(u, 10, comm)         # the gradient, on every rank its own block

Operations (compiled code and Python alike; arrays are changed in place):

- `halo_exchange(u, width, comm)`: fills `u`'s ghost layers (`width` cells on each side of
  each decomposed axis: the first axes, one per dimension of `comm`'s process grid, or axis
  0 for a communicator without one) from the neighbours' owned cells; ghosts at the edge of
  a non-periodic grid are left as they are (the boundary condition is the caller's).
- `allreduce(x, comm, op="sum")` (also "max", "min") of a float, the same on every rank;
  `allreduce_array(u, comm)`: the element-wise sum over ranks, in place.
- `bcast(x, root, comm)` of a float; `bcast_array(u, root, comm)` in place.
- `send(u, dest, tag, comm)` / `recv(u, source, tag, comm)`: blocking, paired.
- `replicated(y, comm)`: y; for the one result every rank returns (a loss): see below.

Derivatives (custom rules, _ops.py) in every mode. Each rank seeds its own result, so what
adjit differentiates is the sum over ranks of their results: a loss that every rank returns
(an allreduce) is counted once through `replicated`, which gives each copy 1/size of the
seed. Then `adjit.grad` on every rank gives each its block of the single-process gradient.

Errors: every operation checks its status; a rank that finds an error (a message whose
size differs from what its array needs, an MPI error, `ADJIT_MPI_TIMEOUT` seconds without a
message) or whose Python code raises tells every rank, and each raises a RuntimeError where
it communicates next instead of waiting; `last_error()` says what happened. An uncaught
exception then ends the job (MPI_Abort, after ADJIT_MPI_ABORT_GRACE seconds).
The MPI library is mpi4py's (MPICH's ABI: the `mpich` wheel, Intel MPI, Cray MPICH); CPU
code only (`device="cuda"` functions cannot call these yet).
"""
from __future__ import annotations

import inspect

import numpy as np

from ..compiler import callables
from ..runtime.abi import register_exception as _register_exception
from . import _intrinsics, _ops
from ._native import (add_comm as _add_comm, error as _error, start as _start,
                      status as _status)

__all__ = ["Comm", "CommunicationError", "halo_exchange", "allreduce", "allreduce_array", "bcast", "bcast_array",
           "send", "recv", "replicated", "last_error", "failed"]

_OPS = {"sum": _ops.allreduce_sum, "max": _ops.allreduce_max, "min": _ops.allreduce_min}


class CommunicationError(RuntimeError):
    """A failed adjit.mpi operation (raised on every rank): the ranks disagree about it
    (array shapes or dtypes, which operation they call), a rank failed or ended, or a wait
    timed out (``ADJIT_MPI_TIMEOUT`` seconds). The message names the operation, the user's
    line and what the runtime found (:func:`last_error`). A subclass of RuntimeError.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import mpi

            comm = mpi.Comm()
            try:
                mpi.bcast(1.0, 0, comm)
            except mpi.CommunicationError as e:   # raised on every rank alike
                print("failed:", e, mpi.last_error())
            else:
                print("no failure:", mpi.failed())
    """

    def __init__(self, message: str = ""):
        # Raised by compiled code's check right after the failure (so the runtime's record
        # is this failure's), with the check's message "adjit.mpi.<op> failed (at
        # file:line)": made "file:line: adjit.mpi.<op> failed: <what the runtime found>".
        found = _error() if _status() else ""
        if found and found not in message:
            head, at, where = message.rpartition(" (at ")
            if at and where.endswith(")"):
                message = f"{where[:-1]}: {head}"
            else:   # a check of a derivative's rule: the user's Python line that called it
                frame = _user_frame()
                if frame is not None:
                    message = f"{frame.f_code.co_filename}:{frame.f_lineno}: {message}"
            message = f"{message}: {found}"
        super().__init__(message)


_register_exception(_intrinsics.ERROR_NAME, CommunicationError)


class Comm(int):
    """A communicator: an int (its MPI handle, which compiled code takes as an ``int``
    argument) with mpi4py's communicator behind it (``.mpi``).

    ``Comm()`` duplicates COMM_WORLD (collective: every rank makes it), ``Comm(c)`` the
    mpi4py communicator ``c``, so that adjit's messages never meet the program's own. Its
    ``rank``, ``size``, ``dims`` (the process grid), ``periods`` and ``coords`` say where
    this rank is. :meth:`cart` arranges the ranks in a grid; :meth:`scatter`,
    :meth:`owned` and :meth:`gather` cut a global array into blocks with ghost layers and
    back (Python helpers, not differentiated). A Comm cannot be pickled ("an adjit.mpi.Comm
    belongs to its process").

    Args:
        mpi_comm: an mpi4py communicator to duplicate; None: COMM_WORLD.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import mpi

            comm = mpi.Comm()
            grid = comm.cart((comm.size, 1))          # ranks along axis 0
            print(grid)                                # adjit.mpi.Comm(rank 0 of 1, grid (1, 1))
            block = grid.scatter(np.arange(16.0).reshape(4, 4), width=1)
            print(block.shape)                         # (6, 6) on one rank: 4x4 and ghosts
            assert np.array_equal(grid.gather(block, width=1), np.arange(16.0).reshape(4, 4))
    """

    def __new__(cls, mpi_comm=None, *, _own=None):
        MPI, _ = _start()
        if _own is None:
            base = MPI.COMM_WORLD if mpi_comm is None else mpi_comm
            _own = base.Dup()
            _own.Set_errhandler(MPI.ERRORS_RETURN)
        self = super().__new__(cls, _own.handle & 0xFFFFFFFF)
        _add_comm(int(self))
        _HANDLES.add(int(self))
        self.mpi = _own
        self.rank, self.size = _own.Get_rank(), _own.Get_size()
        topo = _own.Get_topology()
        self.dims = tuple(_own.dims) if topo == MPI.CART else (self.size,)
        self.periods = tuple(bool(p) for p in _own.periods) if topo == MPI.CART else (False,)
        self.coords = tuple(_own.coords) if topo == MPI.CART else (self.rank,)
        return self

    def __repr__(self) -> str:
        return f"adjit.mpi.Comm(rank {self.rank} of {self.size}, grid {self.dims})"

    def __reduce__(self):
        raise TypeError("an adjit.mpi.Comm belongs to its process")

    def cart(self, dims, periods=False) -> "Comm":
        """A communicator over the same ranks arranged in a process grid `dims` (a tuple
        whose product is the number of ranks; a 0 entry is chosen by MPI_Dims_create);
        `periods`: a bool or one per axis. Collective."""
        MPI, _ = _start()
        dims = list(MPI.Compute_dims(self.size, list(dims)))
        if int(np.prod(dims)) != self.size:
            raise ValueError(f"adjit.mpi: a process grid {tuple(dims)} needs "
                             f"{int(np.prod(dims))} ranks, the communicator has {self.size}")
        periods = [bool(periods)] * len(dims) if isinstance(periods, bool) else list(periods)
        cart = self.mpi.Create_cart(dims, periods=periods, reorder=False)
        cart.Set_errhandler(MPI.ERRORS_RETURN)
        return Comm(_own=cart)

    # ---- blocks of a global array (Python helpers, not differentiated) -------------------
    def _block(self, shape, width: int):
        shape = tuple(shape)
        if len(shape) < len(self.dims):
            raise ValueError(f"adjit.mpi: a {len(shape)}-D array on a {len(self.dims)}-D "
                             "process grid")
        starts, sizes = [], []
        for d, (n, p, c) in enumerate(zip(shape, self.dims, self.coords)):
            if n % p:
                raise ValueError(f"adjit.mpi: axis {d} of length {n} does not split evenly "
                                 f"over {p} ranks")
            starts.append(c * (n // p))
            sizes.append(n // p)
        return starts, sizes

    def scatter(self, global_array, width: int = 1) -> np.ndarray:
        """This rank's block of `global_array` (which every rank holds), with `width` ghost
        cells on each side of each decomposed axis: owned cells copied, ghosts filled from
        the global array where it has them (wrapping around on periodic axes), else 0."""
        a = np.asarray(global_array)
        starts, sizes = self._block(a.shape, width)
        index = []
        for d, (s, n) in enumerate(zip(starts, sizes)):
            idx = np.arange(s - width, s + n + width)
            if self.periods[d]:
                idx %= a.shape[d]
            index.append(idx)
        k = len(index)
        out = np.zeros([n + 2 * width for n in sizes] + list(a.shape[k:]), a.dtype)
        valid = [(i >= 0) & (i < a.shape[d]) for d, i in enumerate(index)]
        src = a[np.ix_(*[np.clip(i, 0, a.shape[d] - 1) for d, i in enumerate(index)])]
        mask = np.ix_(*valid) if k > 1 else (valid[0],)
        keep = np.zeros(out.shape[:k], bool)
        keep[mask] = True
        out[keep] = src[keep]
        return out

    def owned(self, local, width: int = 1) -> np.ndarray:
        """The cells of a local block this rank owns (without its ghosts): a view."""
        k = len(self.dims)
        return local[tuple(slice(width, n - width) for n in local.shape[:k])]

    def gather(self, local, width: int = 1) -> np.ndarray:
        """The global array from every rank's block (its owned cells), on every rank."""
        mine = np.ascontiguousarray(self.owned(local, width))
        blocks = self.mpi.allgather((self.coords, mine))
        k = len(self.dims)
        shape = [mine.shape[d] * self.dims[d] for d in range(k)] + list(mine.shape[k:])
        out = np.empty(shape, mine.dtype)
        for coords, b in blocks:
            out[tuple(slice(c * b.shape[d], (c + 1) * b.shape[d])
                      for d, c in enumerate(coords))] = b
        return out


def last_error() -> str:
    """What failed (on this rank, or the notice of the rank that failed), or ``''``.

    Returns:
        str: the runtime's description of the failure, or ``''`` when nothing failed.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import mpi

            comm = mpi.Comm()
            print(repr(mpi.last_error()))   # ''
    """
    return _error() if failed() else ""


def failed() -> bool:
    """Whether a communication failed (here or on another rank): adjit.mpi's operations
    then raise :class:`CommunicationError` at once, on every rank.

    Returns:
        bool: True after a failure.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import mpi

            comm = mpi.Comm()
            print(mpi.allreduce(2.0, comm), mpi.failed())   # 2.0 False
    """
    _start()
    return _status() != 0


# ---- the operations, callable from Python and from compiled code ----------------------------
_HANDLES: set = set()     # the handles of the communicators Comm made (all the operations take)


def _check_comm(name: str, comm) -> None:
    """Refuses, before anything is compiled or sent, a communicator argument that is not an
    adjit.mpi.Comm (a str, an mpi4py communicator, an int that is no Comm's handle: MPI
    would take such an int as garbage, silently doing nothing on some ranks)."""
    if isinstance(comm, Comm) or (type(comm) is int and comm in _HANDLES):
        return
    hint = (": wrap it, adjit.mpi.Comm(c) (collective)" if hasattr(comm, "Get_rank")
            else ": adjit.mpi.Comm() (all ranks) or comm.cart(dims)")
    raise TypeError(f"adjit.mpi.{name}: the communicator argument must be an adjit.mpi.Comm,"
                    f" got {type(comm).__name__} {comm!r:.60}{hint}")


def _user_frame():
    """The innermost caller outside adjit (the user's line that called the operation)."""
    import os
    import sys
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(here):
        frame = frame.f_back
    return frame


def _run(name: str, wrapper, args):
    """Runs an operation's compiled wrapper for a call from Python; a failed communication
    raises at the user's line with what failed (the compiled check names adjit's line)."""
    _check_comm(name, args[-1])
    try:
        result = wrapper(*args)
    except RuntimeError as e:
        if not failed():
            raise
        raise _failure(name) from e
    if failed():     # (the wrapper's body does not check: _ops.py says why)
        raise _failure(name) from None
    return result


def _failure(name: str) -> RuntimeError:
    """The error of a failed operation `name` called from Python, at the user's line."""
    import linecache
    frame = _user_frame()
    where, code = "", ""
    if frame is not None:
        where = f"{frame.f_code.co_filename}:{frame.f_lineno}: "
        code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    return CommunicationError(f"{where}adjit.mpi.{name} failed: {last_error()}"
                              + (f"\n    {code}" if code else ""))


def _checked_call(fn, name: str):
    """What a call of `fn` compiles to, then a check of the status at the caller's line."""
    def compile_call(gen, args: list, kwargs: dict):
        from ._intrinsics import check_status
        result = callables.call(gen, fn, args, kwargs)
        check_status(gen, name)
        return result
    return compile_call


def _forward(fn, doc: str):
    """A Python-level operation whose calls in compiled code compile `fn` (an @adjit.func
    with rules), and from Python run `fn` compiled; `doc` is its docstring."""
    def python_call(*args):
        _start()
        return _run(fn.__name__, _python_wrapper(fn), args)

    python_call.__name__ = fn.__name__
    python_call.__doc__ = doc
    # (what help() and the API reference show: the operation's parameters, not *args)
    python_call.__signature__ = inspect.signature(getattr(fn, "pyfn", fn))
    callables.register(python_call, _checked_call(fn, fn.__name__))
    return python_call


_WRAPPERS: dict = {}


def _python_wrapper(fn):
    """An @adjit.jit function that calls `fn` (what a call from Python runs)."""
    if fn not in _WRAPPERS:
        _WRAPPERS[fn] = _ops.python_entry(fn)
    return _WRAPPERS[fn]


# The opening of the operations' examples: each runs as pasted, on one rank or under mpiexec.
_EXAMPLE_HEAD = """
    Example:
        Every example runs as pasted in one process (a communicator of one rank); run it
        with ``mpiexec -n 2 python example.py`` for two::

            import numpy as np
            import adjit
            from adjit import mpi

            comm = mpi.Comm()
"""
halo_exchange = _forward(_ops.halo_exchange, """halo_exchange(u, width, comm): fills the
    ghost layers of this rank's block ``u`` from the neighbours' owned cells, in place.

    The ghosts are ``width`` cells on each side of each decomposed axis: the first axes, one
    per dimension of ``comm``'s process grid (axis 0 for a communicator without one). Ghosts
    at the edge of a non-periodic grid are left as they are (the boundary condition is the
    caller's). Collective. Differentiable: the adjoint sends the ghosts' adjoints back to
    their owners, who add them into their cells.

    Args:
        u: this rank's block (a float array with its ghost layers, as
            :meth:`Comm.scatter` makes it).
        width: the ghost width, in cells.
        comm: an :class:`adjit.mpi.Comm` (in compiled code, passed as an ``int`` argument).

    Raises:
        TypeError: a ``comm`` that is not an adjit.mpi.Comm.
        CommunicationError: the ranks disagree about the call, or a rank failed.
""" + _EXAMPLE_HEAD + """
            ring = comm.cart((comm.size,), periods=True)      # a periodic 1-D grid
            u = ring.scatter(np.arange(4.0 * ring.size), width=1)
            u[0] = u[-1] = -1.0                               # ghosts to be filled
            mpi.halo_exchange(u, 1, ring)
            print(u)   # on one rank: [3. 0. 1. 2. 3. 0.]
""")
allreduce_array = _forward(_ops.allreduce_array, """allreduce_array(u, comm): the
    element-wise sum of ``u`` over the ranks, into ``u`` on every rank (in place).

    Collective; every rank's ``u`` has the same shape and dtype. Its adjoint is the sum
    over ranks of the adjoints, to every rank.

    Args:
        u: a float array.
        comm: an :class:`adjit.mpi.Comm`.

    Raises:
        TypeError: a ``comm`` that is not an adjit.mpi.Comm.
        CommunicationError: the ranks' arrays differ in shape or dtype, or a rank failed.
""" + _EXAMPLE_HEAD + """
            u = np.full(3, float(comm.rank + 1))
            mpi.allreduce_array(u, comm)
            print(u)   # on one rank: [1. 1. 1.]; on two: [3. 3. 3.]
""")
bcast = _forward(_ops.bcast, """bcast(x, root, comm): the float ``x`` of rank ``root``, on
    every rank.

    Collective. Its adjoint: the root's is the sum of every rank's adjoint.

    Args:
        x: a float.
        root: the rank whose value is broadcast.
        comm: an :class:`adjit.mpi.Comm`.

    Returns:
        float: root's ``x``.

    Raises:
        TypeError: a ``comm`` that is not an adjit.mpi.Comm.
        CommunicationError: a rank failed.
""" + _EXAMPLE_HEAD + """
            print(mpi.bcast(10.0 + comm.rank, 0, comm))   # 10.0 on every rank
""")
bcast_array = _forward(_ops.bcast_array, """bcast_array(u, root, comm): copies rank
    ``root``'s array ``u`` into ``u`` on every rank (in place).

    Collective; every rank's ``u`` has the same shape and dtype.

    Args:
        u: a float array.
        root: the rank whose array is broadcast.
        comm: an :class:`adjit.mpi.Comm`.

    Raises:
        TypeError: a ``comm`` that is not an adjit.mpi.Comm.
        CommunicationError: the ranks' arrays differ, or a rank failed.
""" + _EXAMPLE_HEAD + """
            u = np.full(2, float(comm.rank))
            mpi.bcast_array(u, 0, comm)
            print(u)   # [0. 0.] on every rank
""")
_SEND_RECV_EXAMPLE = _EXAMPLE_HEAD + """
            @adjit.jit
            def exchange(u: adjit.Array[adjit.f64, 1], v: adjit.Array[adjit.f64, 1],
                         rank: int, comm: int) -> adjit.f64:
                if rank == 0:
                    mpi.send(u, 1, 7, comm)        # to rank 1, tag 7
                else:
                    mpi.recv(v, 0, 7, comm)        # from rank 0, tag 7
                return adjit.sum(v * v)

            u, v = np.arange(3.0), np.zeros(3)
            if comm.size >= 2 and comm.rank < 2:   # ranks 0 and 1 pair up
                print(comm.rank, exchange(u, v, comm.rank, comm))   # rank 1: 5.0
            else:
                print("one rank: no one to send to")
"""
send = _forward(_ops.send, """send(u, peer, tag, comm): sends the array ``u`` to rank
    ``peer`` (blocking; paired with a :func:`recv` of the same ``tag`` on ``peer``).

    Differentiable: the adjoint of a send receives the adjoint of what was sent and adds it
    into ``u``'s. In compiled code, a send and the recv it pairs with are in one compiled
    function (the SPMD branches ``if rank == 0: send(...) else: recv(...)``); kernels
    cannot call it.

    Args:
        u: a float array.
        peer: the receiving rank.
        tag: an int the recv names too.
        comm: an :class:`adjit.mpi.Comm`.

    Raises:
        TypeError: a ``comm`` that is not an adjit.mpi.Comm.
        CommunicationError: sizes that differ from the recv's, a rank that failed, or
            ``ADJIT_MPI_TIMEOUT`` seconds without the matching recv.
""" + _SEND_RECV_EXAMPLE)
recv = _forward(_ops.recv, """recv(u, peer, tag, comm): receives into the array ``u``
    what rank ``peer`` sends with ``tag`` (blocking; paired with a :func:`send`).

    Differentiable: the adjoint of a recv sends the adjoint of ``u`` back and zeroes it.

    Args:
        u: a float array, of the size the send sends.
        peer: the sending rank.
        tag: the send's tag.
        comm: an :class:`adjit.mpi.Comm`.

    Raises:
        TypeError: a ``comm`` that is not an adjit.mpi.Comm.
        CommunicationError: a size that differs from the send's, or a timeout.
""" + _SEND_RECV_EXAMPLE)
replicated = _forward(_ops.replicated, """replicated(x, comm): ``x``, marked as the one
    result that every rank returns (a loss after an allreduce).

    adjit differentiates the program of all ranks together, each rank seeding its own
    result: the derivative of the sum over ranks of their results. A loss that every rank
    holds (an allreduce's) would count ``size`` times; ``replicated`` gives each copy
    1/size of the seed, so that ``adjit.grad`` on every rank gives each its block of the
    single-process gradient.

    Args:
        x: a float, the same on every rank.
        comm: an :class:`adjit.mpi.Comm`.

    Returns:
        float: ``x``.
""" + _EXAMPLE_HEAD + """
            @adjit.jit
            def loss(u: adjit.Array[adjit.f64, 1], comm: int) -> adjit.f64:
                total = mpi.allreduce(adjit.sum(u * u), comm)
                return mpi.replicated(total, comm)

            u = np.arange(3.0)
            print(loss(u, comm), adjit.grad(loss)(u, comm))   # one rank: 5.0 [0. 2. 4.]
""")


def allreduce(x, comm, op: str = "sum"):
    """The sum (``op="sum"``), maximum or minimum over the ranks of the float ``x``, on every
    rank (computed in f64).

    Collective; callable from Python and compiled code (where ``op`` is a constant). Its
    adjoint: the sum over ranks of the result's adjoints, to every rank (sum) or to the rank
    that held the extreme (max, min; the lowest such rank).

    Args:
        x: a float.
        comm: an :class:`adjit.mpi.Comm`.
        op: ``"sum"``, ``"max"`` or ``"min"``.

    Returns:
        float: the reduction, the same on every rank.

    Raises:
        ValueError: another ``op`` ("adjit.mpi.allreduce: op must be 'sum', 'max' or 'min',
            not 'mean'").
        TypeError: a ``comm`` that is not an adjit.mpi.Comm.
        CommunicationError: a rank failed or the ranks disagree about the call.

    Example:
        Every example runs as pasted in one process (a communicator of one rank); run it
        with ``mpiexec -n 2 python example.py`` for two::

            import numpy as np
            import adjit
            from adjit import mpi

            comm = mpi.Comm()
            print(mpi.allreduce(1.0 + comm.rank, comm))             # 1.0 on one rank
            print(mpi.allreduce(1.0 + comm.rank, comm, op="max"))
            try:
                mpi.allreduce(1.0, comm, op="mean")
            except ValueError as e:
                print(e)
    """
    if op not in _OPS:
        raise ValueError(f"adjit.mpi.allreduce: op must be 'sum', 'max' or 'min', not {op!r}")
    _start()
    return _run(f"allreduce(op={op!r})", _python_wrapper(_OPS[op]), (x, comm))


def _compile_allreduce(gen, args: list, kwargs: dict):
    from ..core.errors import UserError
    from ..compiler.values import Literal, PyObj
    args = list(args)
    op = kwargs.pop("op", None)
    if len(args) == 3 and op is None:
        op = args.pop()
    if kwargs or len(args) != 2:
        raise UserError("adjit.mpi.allreduce(x, comm, op='sum') takes x, comm and op")
    name = ("sum" if op is None else op.value if isinstance(op, Literal)
            else op.obj if isinstance(op, PyObj) else None)
    if name not in _OPS:
        raise UserError("adjit.mpi.allreduce: op must be the constant 'sum', 'max' or 'min'")
    return _checked_call(_OPS[name], f"allreduce(op={name!r})")(gen, args, {})


callables.register(allreduce, _compile_allreduce)
