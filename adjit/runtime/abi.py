"""Calling compiled entry functions from Python through their C interface.

An entry marked `llvm.emit_c_interface` gets a wrapper `_mlir_ciface_<name>` that takes:
- each memref argument as a pointer to its descriptor
  {allocated, aligned, offset, sizes[rank], strides[rank]} (all 64-bit);
- each scalar by value (i1 as a C bool; index as i64);
- when there is a memref result or more than one result, first of all a pointer to a struct
  that receives the results in order (descriptors inline). A single scalar is returned;
- in a module with checks, last of all the call's error cell, a memref<1xi64> descriptor
  (new_error_cell).
Booleans in memory are bytes on both sides (passes/pipeline.py: widen_bool_memrefs).

Calls go through ctypes (which releases the GIL) with everything that depends only on the
signature prepared once: converters per parameter, the result struct class, the CFUNCTYPE.
No MLIR is imported: GPU machines without the compiler call host programs through this
(runtime/host_program.py).
"""
from __future__ import annotations

import builtins
import ctypes
import operator
import struct
from functools import lru_cache
from math import prod
from typing import Callable, Sequence

import numpy as np

from ..core.errors import InternalCompilerError
from ..core.types import ArrayType, ScalarType

Type = ScalarType | ArrayType


@lru_cache(maxsize=None)
def descriptor_class(rank: int) -> type[ctypes.Structure]:
    """The ctypes layout of a rank-`rank` memref descriptor."""
    fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_int64)]
    if rank:
        fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
    return type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": fields})


def _ctype(t: Type):
    return descriptor_class(t.ndim) if isinstance(t, ArrayType) else t.ctype


def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


# The common ranks spelled out: a call's cost is mostly such Python-level steps.
_STRIDES = {0: lambda shape: (), 1: lambda shape: (1,), 2: lambda shape: (shape[1], 1)}
_NO_BYTES = ctypes.c_char * 0


def _array_converter(t: ArrayType, where: str, written: bool) -> Callable[[object], bytes]:
    # A descriptor is packed into bytes, which ctypes passes as a pointer to their contents:
    # several times cheaper than filling a ctypes Structure.
    if t.strided:
        return _strided_converter(t, where, written)
    dtype, rank = t.dtype.memory_dtype, t.ndim
    pack = struct.Struct(f"{3 + 2 * rank}q").pack
    strides = _STRIDES.get(rank, row_major_strides)
    address, from_buffer, ndarray = ctypes.addressof, _NO_BYTES.from_buffer, np.ndarray

    def refuse(a) -> None:
        if not isinstance(a, ndarray):
            raise TypeError(f"{where} must be a {rank}-D NumPy array of {dtype}, got {type(a).__name__}")
        if a.dtype != dtype or a.ndim != rank:
            raise TypeError(f"{where} must be a {rank}-D NumPy array of {dtype}, "
                            f"got a {a.ndim}-D array of {a.dtype}")
        raise ValueError(f"{where} must be C-contiguous (np.ascontiguousarray makes a copy that is)")

    def convert(a) -> bytes:
        if (not isinstance(a, ndarray) or (a.dtype is not dtype and a.dtype != dtype)
                or a.ndim != rank or not a.flags.c_contiguous):
            refuse(a)
        try:   # the fastest way to an ndarray's address; read-only arrays refuse it
            ptr = address(from_buffer(a))
        except TypeError:
            if written:
                raise ValueError(f"{where} is written by the compiled code, but this NumPy "
                                 "array is read-only") from None
            ptr = a.ctypes.data
        shape = a.shape
        return pack(ptr, ptr, 0, *shape, *strides(shape))

    return convert


def _strided_converter(t: ArrayType, where: str, written: bool) -> Callable[[object], bytes]:
    """A strided parameter takes any array of its dtype and rank: its own strides (in
    elements, negative ones included) go into the descriptor, its data pointer (the address
    of element 0) is the aligned pointer, offset 0. Nothing is copied."""
    dtype, rank = t.dtype.memory_dtype, t.ndim
    pack = struct.Struct(f"{3 + 2 * rank}q").pack
    size = dtype.itemsize

    def convert(a) -> bytes:
        if not isinstance(a, np.ndarray) or a.dtype != dtype or a.ndim != rank:
            got = (f"a {a.ndim}-D array of {a.dtype}" if isinstance(a, np.ndarray)
                   else type(a).__name__)
            raise TypeError(f"{where} must be a {rank}-D NumPy array of {dtype}, got {got}")
        if written and not a.flags.writeable:
            raise ValueError(f"{where} is written by the compiled code, but this NumPy "
                             "array is read-only")
        if any(s % size for s in a.strides):
            raise ValueError(f"{where} has strides {a.strides} (bytes) that are not whole "
                             f"elements of {size} bytes; adjit takes such an array as a copy "
                             "(np.ascontiguousarray)")
        ptr = a.ctypes.data
        return pack(ptr, ptr, 0, *a.shape, *(s // size for s in a.strides))

    return convert


def _scalar_converter(t: ScalarType, where: str) -> Callable[[object], object]:
    if t.name in ("f32", "f64"):
        def convert(v) -> float:
            if isinstance(v, (float, int, np.floating, np.integer, np.bool_)):
                return float(v)
            raise TypeError(f"{where} must be a real number ({t!r}), got {type(v).__name__}")
        return convert
    if t.name == "bool":
        def convert(v) -> bool:
            if isinstance(v, (bool, np.bool_)):
                return bool(v)
            raise TypeError(f"{where} must be a bool, got {type(v).__name__}")
        return convert
    bits = 32 if t.name == "i32" else 64
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def convert(v) -> int:
        try:
            i = operator.index(v)
        except TypeError:
            raise TypeError(f"{where} must be an integer ({t!r}), got {type(v).__name__}") from None
        if not lo <= i <= hi:
            raise OverflowError(f"{where} = {i} does not fit in {t!r}")
        return i

    return convert


def _python_scalar(t: ScalarType) -> Callable[[object], object]:
    """What a scalar result of type `t` is in Python: a NumPy scalar of its dtype, or for a
    weak one (a Python float or int in the compiled code: core/types.py) a Python float or
    int, as NumPy 2 gives for arithmetic on Python scalars (NEP 50)."""
    if t.weak:
        return float if t.is_float else int
    return t.memory_dtype.type


def _result_reader(t: Type, field: str,
                   owner: Callable[[int], object]) -> Callable[[ctypes.Structure, dict], object]:
    # `blocks` maps each block already returned by this call to its owner: an entry may
    # return one array twice, which must not be freed twice.
    dtype = (t.dtype if isinstance(t, ArrayType) else t).memory_dtype
    if isinstance(t, ScalarType):
        convert = _python_scalar(t)
        return lambda res, blocks: convert(getattr(res, field))

    def read(res, blocks: dict) -> np.ndarray:
        d = getattr(res, field)
        block = blocks.get(d.allocated)
        if block is None:
            block = blocks[d.allocated] = owner(d.allocated)
        shape = tuple(d.sizes) if t.ndim else ()
        return array_over(block, d.aligned + d.offset * dtype.itemsize, shape, dtype)

    return read


def array_over(block: object, data: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A C-contiguous array at address `data`, inside `block`, which it keeps alive."""
    # NumPy keeps the ctypes buffer as the array's base, and the buffer keeps the block:
    # cheaper than an object with __array_interface__.
    buffer = (ctypes.c_char * (prod(shape) * dtype.itemsize)).from_address(data)
    buffer.block = block
    return np.ndarray(shape, dtype, buffer)


# Exception classes of adjit's own that `adj.check`s may name, by name (register_exception).
# (np.linalg's error: compiled linear algebra reports a singular matrix as NumPy does)
_REGISTERED: dict[str, type[Exception]] = {"LinAlgError": np.linalg.LinAlgError}


def register_exception(name: str, cls: type[Exception]) -> None:
    """Lets checks name `cls` as `name` (adjit.mpi's error, whose message adds what the
    runtime found: a check's message is fixed when it is compiled)."""
    _REGISTERED[name] = cls


def exception_class(name: str) -> type[Exception]:
    """The exception class an `adj.check` names (a built-in one, IndexError..., or one
    registered), else RuntimeError."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    cls = getattr(builtins, name, None)
    return cls if isinstance(cls, type) and issubclass(cls, Exception) else RuntimeError


class UnknownCheckError(InternalCompilerError):
    """Compiled code reported a failed check whose number its module's error table does not
    have: the code and the table it was compiled with do not match (a bug in adjit, or a
    cache entry altered past its seal). Raised rather than returning as if nothing failed.
    `cause` is None: no Python exception led to it."""

    def __init__(self, where: str, number: int, entries: int):
        self.where, self.number, self.entries = where, number, entries
        self.cause = None
        table = ("no entries" if entries == 0 else "1 entry" if entries == 1
                 else f"{entries} entries (1 to {entries})")
        self.message = (f"internal error in adjit: {where} reported failed check number "
                        f"{number}, but its module's error table has {table}: the compiled "
                        "code and its error table do not match (a bug in adjit, or a damaged "
                        "cache entry); please report it")
        self.filename, self.lineno, self.col, self.source_line = "<unknown>", 0, 0, None
        Exception.__init__(self, self.message)


def check_error(errors: Sequence[tuple], number: int, where: str) -> Exception:
    """The exception to raise for failed check `number` (1, 2...) of compiled code whose
    module's error table is `errors` ((exception class or its name, message) each); an
    UnknownCheckError naming `where` (the function, host program or kernel) when the number
    is outside the table."""
    if not 0 < number <= len(errors):
        return UnknownCheckError(where, number, len(errors))
    kind, message = errors[number - 1]
    return (kind if isinstance(kind, type) else exception_class(kind))(message)


_pack_cell = struct.Struct("5q").pack


def new_error_cell() -> tuple[ctypes.c_int64, bytes]:
    """(a zeroed error cell, its memref<1xi64> descriptor as packed bytes).

    A module with checks takes such a cell as its entries' last argument
    (passes/lower_cpu.py); a failed check stores its number there, from whichever thread
    runs it (a worker of a parallel launch included). Each call of a caller takes a cell of
    its own from the caller's free list (made when the list is empty, so one per call in
    flight), zeroes it, reads it after the call and puts it back: no other call, on another
    thread or later on this one (after a Ctrl-C between a call and the reading of its cell,
    say), can see its error or leave one. Inline in the calls (~0.6 us less than methods)."""
    cell = ctypes.c_int64(0)
    a = ctypes.addressof(cell)
    return cell, _pack_cell(a, a, 0, 1, 1)


def make_caller(address: int, name: str, arg_types: Sequence[Type], result_types: Sequence[Type],
                after_call: Callable[[int], None], owner: Callable[[int], object],
                written: Sequence[int] = (), params: Sequence[str] = (),
                error_cell: bool = False) -> Callable:
    """A Python callable for `_mlir_ciface_<name>` at `address`: converts and checks the
    arguments (those at indices `written` may be written, so read-only arrays are refused
    there), calls, runs `after_call(number)` (which raises the error of check `number`, 0 for
    none), and returns None, one value, or a tuple. With `error_cell` the entry takes the
    call's error cell as a last, hidden, argument (new_error_cell); without, `number` is 0. A
    returned array's memory block at address `a` is kept alive, and freed, by `owner(a)`.
    Messages name the arguments by `params`, where given."""
    arg_types, result_types = tuple(arg_types), tuple(result_types)
    where = [f"{name}(): argument {params[i]!r}" if i < len(params) else
             f"argument {i + 1} of {name}" for i in range(len(arg_types))]
    converters = [_array_converter(t, where[i], i in written) if isinstance(t, ArrayType)
                  else _scalar_converter(t, where[i]) for i, t in enumerate(arg_types)]
    params = [ctypes.c_char_p if isinstance(t, ArrayType) else t.ctype for t in arg_types]
    if error_cell:
        params.append(ctypes.c_char_p)
    nargs = len(arg_types)
    free: list[tuple[ctypes.c_int64, bytes]] = []   # error cells (new_error_cell)
    take, put = free.pop, free.append

    def convert_all(args) -> list:
        if len(args) != nargs:
            raise TypeError(f"{name} takes {nargs} arguments, got {len(args)}")
        return [convert(v) for convert, v in zip(converters, args)]

    if not result_types or (len(result_types) == 1 and isinstance(result_types[0], ScalarType)):
        fn = ctypes.CFUNCTYPE(result_types[0].ctype if result_types else None, *params)(address)
        as_python = _python_scalar(result_types[0]) if result_types else None

        if not error_cell:
            def invoke(values):
                r = fn(*values)
                after_call(0)
                return None if as_python is None else as_python(r)
        else:
            def invoke(values):
                try:
                    taken = take()     # atomic: list.pop holds the GIL
                except IndexError:
                    taken = new_error_cell()
                cell = taken[0]
                cell.value = 0
                try:
                    r = fn(*values, taken[1])
                    number = cell.value
                finally:
                    put(taken)
                after_call(number)
                return None if as_python is None else as_python(r)
        return caller_of(convert_all, invoke)

    fields = [f"r{i}" for i in range(len(result_types))]
    results = type(f"{name}_results", (ctypes.Structure,),
                   {"_fields_": [(f, _ctype(t)) for f, t in zip(fields, result_types)]})
    fn = ctypes.CFUNCTYPE(None, ctypes.POINTER(results), *params)(address)
    readers = [_result_reader(t, f, owner) for t, f in zip(result_types, fields)]
    single = len(result_types) == 1

    def invoke(values):
        res = results()
        if error_cell:
            try:
                taken = take()
            except IndexError:
                taken = new_error_cell()
            cell = taken[0]
            cell.value = 0
            try:
                fn(ctypes.byref(res), *values, taken[1])
                number = cell.value
            finally:
                put(taken)
        else:
            fn(ctypes.byref(res), *values)
            number = 0
        blocks: dict = {}
        try:
            values = [read(res, blocks) for read in readers]   # owned now: freed if after_call raises
        except (TypeError, ValueError, OverflowError):
            # A failed check can leave results no array can be made of (an allocation
            # that failed is a null pointer): its error is the one to raise.
            after_call(number)
            raise
        after_call(number)
        return values[0] if single else tuple(values)

    return caller_of(convert_all, invoke)


def caller_of(convert_all: Callable, invoke: Callable) -> Callable:
    """The caller: converts, then invokes. `.convert_all` and `.invoke` are its two halves,
    for a caller that converts first and, when conversion refuses the arguments, takes its
    own slower path (functions.py: the canonical message for them) before anything has run."""

    def call(*args):
        return invoke(convert_all(args))
    call.convert_all, call.invoke = convert_all, invoke
    return call
