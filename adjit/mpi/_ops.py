"""adjit.mpi's operations as `@adjit.func`s with custom rules (lang/rules.py), so that
every mode differentiates them where compiled code calls them, all-Const calls included
(the rules run there too, so every rank takes part in every communication).

The rules are the transposes of linear maps between ranks (Enzyme's MPI adjoints):
- halo exchange: each ghost cell becomes a copy of a cell another rank owns; the adjoint
  sends the ghosts' adjoints back, the owner adds them into its cell, the ghosts' adjoints
  become 0 (runtime/native/mpi.cpp, `halo`);
- sum-allreduce: y = sum over ranks of x; the adjoint of every x is the sum over ranks of
  the adjoints of y (an allreduce of the adjoints); max/min: the same sum, to the rank that
  held the extreme only;
- broadcast from root: the root's adjoint is the sum over ranks of theirs (a reduce), the
  other ranks' become 0 (their values were overwritten);
- send/recv: the adjoint of a send receives the adjoint of what was sent and adds it; the
  adjoint of a recv sends the buffer's adjoint back and zeroes it.
Forward mode applies the same operation to the tangents (each is linear in its data; a
max/min's tangent is the holder's, summed with zeros from the others).

What is differentiated is the program of all ranks together, each rank seeding its own
result: the derivative of the sum over ranks of their results (see `replicated`).

The primal bodies do not check the status of what they call (the last argument 0): the
caller does, at its own line (adjit/mpi/__init__.py's compile handlers, `_run` for a call from
Python), so that a failure names the user's line and not one of this file. The rules, which
only derivatives call, check inside (at no location: the traceback has the user's call)."""
from __future__ import annotations

from ..compiler import callables
from ..lang import rules
from ..lang.functions import device_function as func, jit
from ._intrinsics import (ALLREDUCE_SUM, BCAST, CHANNEL, HALO, RECV, S_BCAST, S_MAX, S_MIN, S_SUM, SEND,
                          array_call, comm_rank, held_extreme, scalar_call)


# ---- halo exchange ----------------------------------------------------------------------
@func
def halo_exchange(u, width, comm):
    array_call(u, HALO, comm, width, 0, 0, 0)


@rules.forward(halo_exchange)
def _halo_forward(config, u, width, comm):
    array_call(u.val, HALO, comm.val, width.val, 0, 0)
    if u.dval is not None:
        array_call(u.dval, HALO, comm.val, width.val, 0, 0)


@rules.augmented_primal(halo_exchange)
def _halo_augmented(config, u, width, comm):
    array_call(u.val, HALO, comm.val, width.val, 0, 0)
    return rules.AugmentedReturn(None, None, None)


@rules.reverse(halo_exchange)
def _halo_reverse(config, dret, tape, u, width, comm):
    if u.dval is not None:
        array_call(u.dval, HALO, comm.val, width.val, 0, 1)
    return None, None, None


# ---- allreduce of an array (sum, in place): its own transpose ------------------------------
@func
def allreduce_array(u, comm):
    array_call(u, ALLREDUCE_SUM, comm, 0, 0, 0, 0)


@rules.forward(allreduce_array)
def _allreduce_array_forward(config, u, comm):
    array_call(u.val, ALLREDUCE_SUM, comm.val, 0, 0, 0)
    if u.dval is not None:
        array_call(u.dval, ALLREDUCE_SUM, comm.val, 0, 0, 0)


@rules.augmented_primal(allreduce_array)
def _allreduce_array_augmented(config, u, comm):
    array_call(u.val, ALLREDUCE_SUM, comm.val, 0, 0, 0)
    return rules.AugmentedReturn(None, None, None)


@rules.reverse(allreduce_array)
def _allreduce_array_reverse(config, dret, tape, u, comm):
    if u.dval is not None:
        array_call(u.dval, ALLREDUCE_SUM, comm.val, 0, 0, 1)
    return None, None


# ---- broadcast of an array (in place) -----------------------------------------------------
@func
def bcast_array(u, root, comm):
    array_call(u, BCAST, comm, root, 0, 0, 0)


@rules.forward(bcast_array)
def _bcast_array_forward(config, u, root, comm):
    array_call(u.val, BCAST, comm.val, root.val, 0, 0)
    if u.dval is not None:
        array_call(u.dval, BCAST, comm.val, root.val, 0, 0)


@rules.augmented_primal(bcast_array)
def _bcast_array_augmented(config, u, root, comm):
    array_call(u.val, BCAST, comm.val, root.val, 0, 0)
    return rules.AugmentedReturn(None, None, None)


@rules.reverse(bcast_array)
def _bcast_array_reverse(config, dret, tape, u, root, comm):
    if u.dval is not None:
        array_call(u.dval, BCAST, comm.val, root.val, 0, 1)
    return None, None, None


# ---- send and recv (blocking, in pairs) ---------------------------------------------------
# The values a send passes reach the array a recv fills on another rank, which the activity
# analysis cannot see: it would find the sent array useless and the received one unvaried,
# and prune both rules' derivative work (a wrong gradient). So every send and recv of a
# compiled function also takes one hidden float array of that function, the channel
# (`_channel`), which the runtime never touches: a send writes it, a recv reads it, so what
# is sent varies what is received and what is received being useful makes what is sent
# useful. (Across compiled functions the channel is not shared: a send and the recv it
# pairs with go in one function; the SPMD branches `if rank == 0: send(...) else: recv(...)`
# are in one.)
@func
def _send(u, dest, tag, comm, channel):
    array_call(u, SEND, comm, dest, tag, 0, 0)
    array_call(channel, CHANNEL, comm, 0, 0, 0)


@rules.forward(_send)
def _send_forward(config, u, dest, tag, comm, channel):
    array_call(u.val, SEND, comm.val, dest.val, tag.val, 0)
    if u.dval is not None:
        array_call(u.dval, SEND, comm.val, dest.val, tag.val, 0)


@rules.augmented_primal(_send)
def _send_augmented(config, u, dest, tag, comm, channel):
    array_call(u.val, SEND, comm.val, dest.val, tag.val, 0)
    return rules.AugmentedReturn(None, None, None)


@rules.reverse(_send)
def _send_reverse(config, dret, tape, u, dest, tag, comm, channel):
    if u.dval is not None:
        array_call(u.dval, SEND, comm.val, dest.val, tag.val, 1)
    return None, None, None, None, None


@func
def _recv(u, source, tag, comm, channel):
    array_call(u, RECV, comm, source, tag, 0, 0)
    array_call(channel, CHANNEL, comm, 0, 0, 0)


@rules.forward(_recv)
def _recv_forward(config, u, source, tag, comm, channel):
    array_call(u.val, RECV, comm.val, source.val, tag.val, 0)
    if u.dval is not None:
        array_call(u.dval, RECV, comm.val, source.val, tag.val, 0)


@rules.augmented_primal(_recv)
def _recv_augmented(config, u, source, tag, comm, channel):
    array_call(u.val, RECV, comm.val, source.val, tag.val, 0)
    return rules.AugmentedReturn(None, None, None)


@rules.reverse(_recv)
def _recv_reverse(config, dret, tape, u, source, tag, comm, channel):
    if u.dval is not None:
        array_call(u.dval, RECV, comm.val, source.val, tag.val, 1)
    return None, None, None, None, None


def _channel(gen):
    """The function's channel: a 1-element f64 array made at its entry (once)."""
    from mlir import ir
    from mlir.dialects import arith
    from ..core.errors import UserError
    from ..core.types import f64
    from ..compiler import arrays as A
    if gen.kind == "kernel":
        raise UserError("adjit.mpi.send/recv are called from @adjit.jit code, not kernels")
    cached = getattr(gen, "_adjit_mpi_channel", None)
    if cached is not None and cached[0] == gen.entry_block:
        return cached[1]
    with ir.InsertionPoint.at_block_begin(gen.entry_block), ir.Location.unknown():
        channel = A.alloc(f64, [arith.constant(ir.IndexType.get(), 1)])
    gen._adjit_mpi_channel = (gen.entry_block, channel)
    return channel


def _with_channel(fn, name: str):
    def operation(u, peer, tag, comm):
        raise RuntimeError(f"adjit.mpi.{name} from Python goes through adjit.mpi")

    def compile_call(gen, args: list, kwargs: dict):
        from ..core.errors import UserError
        if kwargs or len(args) != 4:
            raise UserError(f"adjit.mpi.{name}(array, {'dest' if name == 'send' else 'source'}"
                            ", tag, comm) takes four arguments")
        return callables.call(gen, fn, list(args) + [_channel(gen)], {})

    operation.__name__ = name
    callables.register(operation, compile_call)
    return operation


send = _with_channel(_send, "send")
recv = _with_channel(_recv, "recv")


# ---- scalar collectives -------------------------------------------------------------------
@func
def allreduce_sum(x, comm):
    return scalar_call(x, S_SUM, comm, 0, 0)


@rules.forward(allreduce_sum)
def _sum_forward(config, x, comm):
    y = scalar_call(x.val, S_SUM, comm.val, 0)
    if x.dval is None:
        return y, None
    return y, scalar_call(x.dval, S_SUM, comm.val, 0)


@rules.augmented_primal(allreduce_sum)
def _sum_augmented(config, x, comm):
    return rules.AugmentedReturn(scalar_call(x.val, S_SUM, comm.val, 0), None, None)


@rules.reverse(allreduce_sum)
def _sum_reverse(config, dret, tape, x, comm):
    if x.is_const:
        return None, None
    if dret is None:
        return 0.0, None
    return scalar_call(dret, S_SUM, comm.val, 0), None


def _extremum(op: int, name: str):
    """The allreduce of the max (op S_MAX) or the min (S_MIN) of a scalar: its derivative
    goes to the rank that held the extreme (held_extreme: 1.0 there, 0.0 elsewhere), whose
    tangent, or adjoint, the others receive as a sum. One body for both (`op` a constant of
    the code, a closure's)."""
    def extremum(x, comm):
        return scalar_call(x, op, comm, 0, 0)
    extremum.__name__ = extremum.__qualname__ = name
    extremum = func(extremum)

    @rules.forward(extremum)
    def _forward(config, x, comm):
        y = scalar_call(x.val, op, comm.val, 0)
        if x.dval is None:
            return y, None
        # The holder's tangent; the other ranks add zeros.
        held = float(held_extreme())
        return y, scalar_call(held * x.dval, S_SUM, comm.val, 0)

    @rules.augmented_primal(extremum)
    def _augmented(config, x, comm):
        y = scalar_call(x.val, op, comm.val, 0)
        return rules.AugmentedReturn(y, None, float(held_extreme()))

    @rules.reverse(extremum)
    def _reverse(config, dret, tape, x, comm):
        if x.is_const:
            return None, None
        if dret is None:
            return 0.0, None
        return tape * scalar_call(dret, S_SUM, comm.val, 0), None

    return extremum


allreduce_max = _extremum(S_MAX, "allreduce_max")
allreduce_min = _extremum(S_MIN, "allreduce_min")


@func
def bcast(x, root, comm):
    return scalar_call(x, S_BCAST, comm, root, 0)


@rules.forward(bcast)
def _bcast_forward(config, x, root, comm):
    y = scalar_call(x.val, S_BCAST, comm.val, root.val)
    if x.dval is None:
        return y, None
    return y, scalar_call(x.dval, S_BCAST, comm.val, root.val)


@rules.augmented_primal(bcast)
def _bcast_augmented(config, x, root, comm):
    return rules.AugmentedReturn(scalar_call(x.val, S_BCAST, comm.val, root.val), None, None)


@rules.reverse(bcast)
def _bcast_reverse(config, dret, tape, x, root, comm):
    if x.is_const:
        return None, None, None
    if dret is None:
        return 0.0, None, None
    total = scalar_call(dret, S_SUM, comm.val, 0)
    if comm_rank(comm.val) == root.val:
        return total, None, None
    return 0.0, None, None


# ---- one result of the whole program ----------------------------------------------------
@func
def replicated(x, comm):
    return x


@rules.forward(replicated)
def _replicated_forward(config, x, comm):
    if x.dval is None:
        return x.val, None
    return x.val, x.dval


@rules.augmented_primal(replicated)
def _replicated_augmented(config, x, comm):
    return rules.AugmentedReturn(x.val, None, None)


@rules.reverse(replicated)
def _replicated_reverse(config, dret, tape, x, comm):
    if x.is_const:
        return None, None
    if dret is None:
        return 0.0, None
    # Every rank holds this value and seeds it: the program's derivative counts one copy.
    return dret / scalar_call(1.0, S_SUM, comm.val, 0), None


# ---- what a call from Python runs ---------------------------------------------------------
@jit
def _py_halo_exchange(u, width, comm):
    halo_exchange(u, width, comm)


@jit
def _py_allreduce_array(u, comm):
    allreduce_array(u, comm)


@jit
def _py_bcast_array(u, root, comm):
    bcast_array(u, root, comm)


@jit
def _py_send(u, dest, tag, comm):
    send(u, dest, tag, comm)


@jit
def _py_recv(u, source, tag, comm):
    recv(u, source, tag, comm)


@jit
def _py_allreduce_sum(x, comm):
    return allreduce_sum(x, comm)


@jit
def _py_allreduce_max(x, comm):
    return allreduce_max(x, comm)


@jit
def _py_allreduce_min(x, comm):
    return allreduce_min(x, comm)


@jit
def _py_bcast(x, root, comm):
    return bcast(x, root, comm)


@jit
def _py_replicated(x, comm):
    return replicated(x, comm)


def python_entry(fn):
    """The @adjit.jit function that runs operation `fn` for a call from Python."""
    return globals()["_py_" + fn.__name__]
