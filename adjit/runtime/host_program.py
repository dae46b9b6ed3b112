"""Host programs: `@adjit.jit` functions compiled for `device="cuda"`, stored and run
without MLIR.

A host program is the function's own code compiled for the CPU as a shared object
(passes/lower_cuda_host.py) plus the GPU kernels it launches (`GpuKernel`s, by launch slot).
The shared object calls the runtime through function pointers that `LoadedProgram` fills:
- allocation and free go to CUDA managed memory, which the host code and the kernels
  address alike: element-wise array code and reductions run on the CPU, launches on the
  GPU, and the driver moves pages where they are used;
- a launch hands the kernel's packed parameter words to cuLaunchKernel as they are
  (runtime/cuda.py: launch_words), then synchronizes, as every launch does;
- a copy (each contiguous memref.copy of the host code: a checkpointed loop's snapshots and
  restores, passes/lower_cuda_host.py) is a cuMemcpy, then a wait for it: on the device,
  where a CPU copy would migrate the managed pages to the host and back;
- an allocation in host memory (the working snapshots of a checkpointed loop with
  `spill=True`) is pinned host memory (cuda_driver.alloc_host), which the free hook frees
  like the rest;
- the checkpointing schedule of a checkpointed loop's reverse pass (`adj_ckpt_*`,
  CHECKPOINT_SYMBOLS) is the native extension's (runtime/native/checkpoint.cpp), called
  directly, not through Python; so are the matrix products (`adj_gemm_*`, GEMM_SYMBOLS:
  gemm.cpp, NumPy's OpenBLAS on the CPU, reading and writing managed memory).

Array arguments are copied into managed memory before the call and back afterwards (NumPy
arrays by the CPU, GPU arrays by the driver): the host code may touch any of them, which
memory that cuMemAlloc made would not allow. Returned arrays are NumPy arrays over managed
memory, freed when NumPy frees them.

A host program is stored in the GPU kernel cache folder as `<key>.so` and `<key>.json`
(format FORMAT_VERSION, the shared object's size and SHA-256, the signature, the kernels
with their PTX): a machine with a GPU and no compiler runs what one with MLIR compiled.
This module must not import MLIR.
"""
from __future__ import annotations

import ctypes
import os
import signal
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.symbols import (ALLOC_SYMBOL, CHECKPOINT_SYMBOLS, COPY_SYMBOL, FREE_SYMBOL,
                            GEMM_SYMBOLS, HOOK_PREFIX, HOST_ALLOC_SYMBOL, LAUNCH_SYMBOL)
from ..core.types import ArrayType, parse_type
from . import cuda, cuda_driver, profiling
from .abi import check_error, make_caller
from .device_array import DeviceArray, array_identity
from .files import DamagedEntry, read_entry, write_entry
from .kernel_cache import GpuKernel, KernelCacheError

# 2: an entry of a program with checks takes the call's error cell as its last argument.
# 3: the metadata records its key and is checksummed (files.write_entry).
FORMAT_VERSION = 4     # 4: `meta["sites"]` (api/service.py) and kernels' `sites`

_ALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int64)
_FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_LAUNCH = ctypes.CFUNCTYPE(None, *[ctypes.c_int64] * 5)
_COPY = ctypes.CFUNCTYPE(None, *[ctypes.c_int64] * 3)


@dataclass(frozen=True)
class HostProgram:
    """A compiled `device="cuda"` function (or derivative): `library` (the shared object's
    bytes) has an entry function per `entries` item, name: (argument type codes, result type
    codes), and calls `kernels[slot]` for each launch; `errors[i]` is (Python error name,
    message) of check number i+1; `hooks` are the pointer globals the runtime fills; `meta`
    is what the frontend records about the function (JSON values); `written[name]` are the
    indices of the array arguments entry `name` may write."""
    name: str
    entries: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]
    written: dict[str, tuple[int, ...]]
    kernels: tuple[GpuKernel, ...]
    errors: tuple[tuple[str, str], ...]
    hooks: tuple[str, ...]
    library: bytes
    meta: dict = field(default_factory=dict)


def store(directory: str | os.PathLike, key: str, program: HostProgram) -> Path:
    """Writes `<key>.so` then `<key>.json`, each atomically (the JSON marks a whole entry,
    sealed by files.write_entry: key, format, the .so's hash, its own checksum, which covers
    the kernels' PTX it holds); returns the shared object's path. OSError if the folder
    cannot be written."""
    write_entry(Path(directory), key, {"format": FORMAT_VERSION, **to_record(program)},
                {"so": program.library})
    return Path(directory) / f"{key}.so"


def to_record(program: HostProgram) -> dict:
    """`program` as JSON but its shared object (the kernels' PTX included), as the kernel
    cache's entries and adjit.export's artifacts keep it; from_record reads it back."""
    return {"name": program.name, "entries": program.entries, "written": program.written,
            "kernels": [k.to_dict() for k in program.kernels], "errors": program.errors,
            "hooks": program.hooks, "meta": program.meta}


def from_record(meta: dict, library: bytes) -> HostProgram:
    """The program `to_record` wrote, with its shared object `library`; KeyError, TypeError
    or ValueError for a record of another shape."""
    program = HostProgram(
        name=meta["name"],
        entries={str(name): (tuple(args), tuple(results))
                 for name, (args, results) in meta["entries"].items()},
        written={str(name): tuple(int(k) for k in indices)
                 for name, indices in meta["written"].items()},
        kernels=tuple(GpuKernel.from_dict(k) for k in meta["kernels"]),
        errors=tuple((str(e), str(m)) for e, m in meta["errors"]),
        hooks=tuple(meta["hooks"]), library=library, meta=dict(meta["meta"]))
    for args, results in program.entries.values():
        for code in (*args, *results):
            parse_type(code)
    return program


def load(directory: str | os.PathLike, key: str) -> tuple[HostProgram, Path] | None:
    """(the program stored under `key`, its shared object's path), or None if there is
    none; KernelCacheError, naming the file that is wrong, if the entry has another format
    version, is damaged, misfiled under another key or cannot be read."""
    meta_path = Path(directory) / f"{key}.json"
    try:
        found = read_entry(Path(directory), key, FORMAT_VERSION, "host program cache entry")
    except DamagedEntry as e:
        raise KernelCacheError(str(e)) from e
    if found is None:
        return None
    meta, files = found
    try:
        program = from_record(meta, files["so"])
    except (KeyError, TypeError, ValueError) as e:
        raise KernelCacheError(f"damaged host program cache entry {meta_path}: {e}") from e
    return program, meta_path.with_suffix(".so")


class _ManagedBlock:
    """A block of managed memory that a returned array lives in, freed with the array."""
    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = ptr

    def __del__(self) -> None:
        try:
            cuda_driver.free(self.ptr)
        except Exception:       # interpreter shutdown: the driver may be gone already
            pass


class LoadedProgram:
    """A host program's shared object, loaded, with its runtime calls connected; calling it
    runs the function on the CPU and its launches on the GPU."""

    def __init__(self, program: HostProgram, so_path: Path | None):
        self.program = program
        if so_path is None:     # not stored (caches off, read-only folder): loaded, then removed
            with tempfile.NamedTemporaryFile(prefix="adjit-", suffix=".so") as so:
                so.write(program.library)
                so.flush()
                self._library = ctypes.CDLL(so.name, mode=ctypes.RTLD_LOCAL)
        else:
            self._library = ctypes.CDLL(str(so_path), mode=ctypes.RTLD_LOCAL)
        # What a runtime call raised, to re-raise when the call returns: per thread, as the
        # callbacks run on the thread of the call they serve.
        self._local = threading.local()
        # Kept alive as long as the library: compiled code holds their addresses.
        self._callbacks = {ALLOC_SYMBOL: _ALLOC(self._alloc), FREE_SYMBOL: _FREE(self._free),
                           LAUNCH_SYMBOL: _LAUNCH(self._launch), COPY_SYMBOL: _COPY(self._copy),
                           HOST_ALLOC_SYMBOL: _ALLOC(self._alloc_host)}
        for hook in program.hooks:
            slot = ctypes.c_void_p.in_dll(self._library, hook)
            slot.value = self._hook_address(hook.removeprefix(HOOK_PREFIX))
        self._functions: dict[str, Callable[..., Any]] = {}

    def _hook_address(self, symbol: str) -> int:
        """What the hook of runtime call `symbol` points at: a Python callback, or a function
        of the native extension (the checkpointing schedule: C++ state, no Python)."""
        if symbol in self._callbacks:
            return ctypes.cast(self._callbacks[symbol], ctypes.c_void_p).value
        if symbol in CHECKPOINT_SYMBOLS or symbol in GEMM_SYMBOLS:
            from .extension import address
            return address(symbol)
        raise KernelCacheError(f"host program {self.program.name} calls runtime function "
                               f"{symbol!r}, which this version of adjit does not provide")

    def function(self, name: str) -> Callable[..., Any]:
        """A callable for entry `name`: takes NumPy or GPU arrays and scalars, as the entry's
        signature says, and returns None, one value or a tuple. Made once per entry."""
        found = self._functions.get(name)
        if found is None:
            found = self._functions[name] = self._make_function(name)
        return found

    def _make_function(self, name: str) -> Callable[..., Any]:
        arg_codes, result_codes = self.program.entries[name]
        arg_types = [parse_type(c) for c in arg_codes]
        address = ctypes.cast(self._library[f"_mlir_ciface_{name}"], ctypes.c_void_p).value
        call = make_caller(address, f"{self.program.name} ({name})", arg_types,
                           [parse_type(c) for c in result_codes], self._after_call,
                           _ManagedBlock, error_cell=bool(self.program.errors))

        written = self.program.written[name]

        def staged(*args: Any) -> Any:
            # One copy per distinct array, so that an array passed twice stays one array.
            copies: dict[tuple, tuple[Any, np.ndarray, int]] = {}
            values = []
            # What an earlier call on this thread left unread (a Ctrl-C between its return
            # and its _after_call) is not this call's.
            self._local.pending = []
            interrupt = self._local.interrupt = _DeferredInterrupt.start()
            try:
                for position, (t, a) in enumerate(zip(arg_types, args)):
                    if isinstance(t, ArrayType):
                        if (position in written and isinstance(a, np.ndarray)
                                and not a.flags.writeable):
                            raise ValueError(f"argument {position + 1} of {self.program.name} "
                                             "is written by the compiled code, but this NumPy "
                                             "array is read-only")
                        key = array_identity(a)
                        if key not in copies:
                            copies[key] = (a, *_stage_in(a, t))
                        a = copies[key][1]
                    values.append(a)
                return call(*values)
            finally:
                for original, view, ptr in copies.values():
                    _stage_out(original, view)
                    cuda_driver.free(ptr)
                self._local.interrupt = None
                if interrupt is not None:
                    interrupt.stop()     # raises the KeyboardInterrupt of a Ctrl-C meanwhile

        return staged

    def _alloc(self, nbytes: int) -> int:
        try:
            return cuda_driver.alloc_managed(nbytes)
        except BaseException as e:     # noqa: BLE001 (no exception may cross into C)
            self._pending().append(e)
            return 0

    def _alloc_host(self, nbytes: int) -> int:
        try:
            return cuda_driver.alloc_host(nbytes)
        except BaseException as e:     # noqa: BLE001
            self._pending().append(e)
            return 0

    def _free(self, ptr: int | None) -> None:
        if ptr:
            try:
                cuda_driver.free(ptr)
            except BaseException as e:     # noqa: BLE001
                self._pending().append(e)

    def _launch(self, slot: int, words: int, nwords: int, items: int, block: int) -> None:
        # A launch failed (what it would have written is not there), or Ctrl-C was pressed:
        # the rest of the call's launches are skipped.
        interrupt = getattr(self._local, "interrupt", None)
        if self._pending() or (interrupt is not None and interrupt.hit):
            return
        kernel = self.program.kernels[slot]
        try:
            if profiling.ACTIVE is None:
                cuda.launch_words(kernel, words, nwords, items, block)
            else:        # (each of the program's launches, for the open profile)
                with profiling.span(kernel.name, "launch", work_items=items, block=block,
                                    device="cuda", program=self.program.name):
                    cuda.launch_words(kernel, words, nwords, items, block)
        except BaseException as e:     # noqa: BLE001
            self._pending().append(e)

    def _copy(self, dst: int, src: int, nbytes: int) -> None:
        # After a failed call (a NULL allocation among them), nothing more is copied.
        if self._pending():
            return
        try:
            cuda_driver.copy_and_wait(dst, src, nbytes)
        except BaseException as e:     # noqa: BLE001
            self._pending().append(e)

    def _pending(self) -> list[BaseException]:
        pending = getattr(self._local, "pending", None)
        if pending is None:
            pending = self._local.pending = []
        return pending

    def _after_call(self, number: int) -> None:
        # `number`: the failed check the call's own error cell reports (runtime/abi.py).
        pending, self._local.pending = self._pending(), []
        if pending:
            raise pending[0]
        if number:
            raise check_error(self.program.errors, number, f"host program {self.program.name}")


class _DeferredInterrupt:
    """Ctrl-C during a host program's call, on the main thread: recorded, and raised when
    the call returns. The host code calls back into Python (the allocator, the launch hook),
    where Python runs signal handlers; a KeyboardInterrupt raised there cannot cross into
    compiled code (ctypes prints it and goes on: a skipped launch, or a NULL allocation the
    host code then writes through). So while the call runs, SIGINT only sets `hit`, which
    makes the launch hook skip the call's remaining launches: the call ends after the launch
    under way, then `stop` raises KeyboardInterrupt (or calls the handler there was)."""

    def __init__(self, previous: Any):
        self.previous, self.hit = previous, False

    @classmethod
    def start(cls) -> _DeferredInterrupt | None:
        """Installed for a call on the main thread (where signal handlers run) that has a
        Python SIGINT handler; else None (~2 us: two sigaction calls)."""
        if threading.current_thread() is not threading.main_thread():
            return None
        previous = signal.getsignal(signal.SIGINT)
        if not callable(previous):     # SIG_IGN, SIG_DFL, or a handler set outside Python
            return None
        deferred = cls(previous)
        signal.signal(signal.SIGINT, deferred._record)
        return deferred

    def _record(self, signum: int, frame: Any) -> None:
        self.hit = True

    def stop(self) -> None:
        signal.signal(signal.SIGINT, self.previous)
        if self.hit:
            self.previous(signal.SIGINT, None)   # default_int_handler raises KeyboardInterrupt


def _stage_in(a: Any, t: ArrayType) -> tuple[np.ndarray, int]:
    """A copy of array argument `a` in managed memory: (a NumPy view of it, its address)."""
    dtype = t.dtype.np_dtype
    nbytes = int(np.prod(a.shape)) * dtype.itemsize
    ptr = cuda_driver.alloc_managed(nbytes)
    view = _view(ptr, a.shape, dtype)
    if isinstance(a, DeviceArray):
        cuda_driver.copy(ptr, a.ptr, nbytes)
    else:
        view[...] = a
    return view, ptr


def _stage_out(original: Any, view: np.ndarray) -> None:
    """Copies what the call left in `view` back into the argument it was copied from."""
    if isinstance(original, DeviceArray):
        cuda_driver.copy(original.ptr, view.ctypes.data, view.nbytes)
    elif original.flags.writeable:
        original[...] = view


def _view(ptr: int, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    n = int(np.prod(shape)) * dtype.itemsize
    return np.ndarray(tuple(shape), dtype, (ctypes.c_char * n).from_address(ptr))
