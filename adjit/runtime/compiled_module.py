"""`CompiledModule`: the callables of a compiled CPU module, however it was made (an
ExecutionEngine, or a shared object from the disk cache), without MLIR.

A module of the first compile tier (compiler/engine.py: LLVM at a low level, for a fast first
call) is `tiered`: its callables call through a cell that `swap` re-points at the O3 build
once the background writer has built it, and `on_swap` tells native callers to register
again (their specs hold the old addresses)."""
from __future__ import annotations

import functools
import os
import threading
from typing import Callable, Sequence

from ..core.threads import default_num_threads
from . import source_index
from .abi import Type, caller_of, check_error, exception_class, make_caller
from .memory import Block

_lock = threading.Lock()


def _after_fork_in_child() -> None:
    # A lock another thread held at the fork would never be released in the child.
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


class CompiledModule:
    """A compiled module: `function()` gives callables for its entry functions.

    `lookup` gives a symbol's address in the module's code (0 if absent), which `owner`, an
    ExecutionEngine or a cache entry's shared object, holds. `source`: the adj-level text it
    was compiled from (the compiler makes its LLVM text from it when asked: engine.llvm_text);
    `key`: its CPU cache key."""

    def __init__(self, lookup: Callable[[str], int], owner: object,
                 errors: Sequence[tuple[str, str]], source: str, num_threads: int,
                 opt_level: int = 3, key: str = "", tiered: bool = False):
        self._lookup, self._owner = lookup, owner
        self._errors = [(exception_class(kind), message) for kind, message in errors]
        self._source, self._num_threads = source, num_threads
        self._opt_level, self.key = opt_level, key
        self.tiered = tiered
        # tiered: (cell, make) per callable handed out, where cell[0] is the caller it calls
        # and make() makes it again for the current code; the functions to run after a swap.
        self._callers: list[tuple[list, Callable]] = []
        self._listeners: list[Callable[[], None]] = []
        # The code replaced by a swap: never unloaded (another thread may be running it).
        self._retired: list[object] = []

    @property
    def opt_level(self) -> int:
        """The LLVM optimisation level of the code its callables run now."""
        return self._opt_level

    @property
    def source(self) -> str:
        """The adj-level text the module was compiled from."""
        return self._source

    def _raise_reported_error(self, number: int, where: str = "compiled code") -> None:
        """Raises the error of check `number` (1, 2...) that a call's cell reported (an
        InternalCompilerError naming `where` for a number the table lacks: abi.check_error)."""
        if number:
            raise check_error(self._errors, number, where)

    @property
    def num_threads(self) -> int:
        """The threads its parallel loops were compiled for."""
        return self._num_threads

    def function(self, name: str, arg_types: Sequence[Type], result_types: Sequence[Type] = (),
                 written: Sequence[int] = (), label: str | None = None,
                 params: Sequence[str] = ()) -> Callable:
        """A callable for entry function `name` with these adjit parameter and result
        types, which may write the arrays at indices `written`: it takes Python values and
        returns None, one value or a tuple; arrays come back as NumPy arrays that own their
        memory. Errors name the function `label` and its `params`."""
        address = self._lookup(f"_mlir_ciface_{name}")
        if not address:
            raise KeyError(f"no entry function {name!r} with a C interface in this module")
        # A module with checks passes each call an error cell of its own (passes/lower_cpu.py).
        report = functools.partial(self._raise_reported_error,
                                   where=f"{label or name} (entry function {name})")

        def make() -> Callable:
            return make_caller(self._lookup(f"_mlir_ciface_{name}"), label or name, arg_types,
                               result_types, report, Block, written, params,
                               error_cell=bool(self._errors))
        with _lock:
            if not self.tiered:
                return make()
            # Through a cell that swap() re-points (one more Python call on the Python
            # path; native dispatchers register again instead: on_swap).
            cell = [make()]
            self._callers.append((cell, make))

        def invoke(values):
            return cell[0].invoke(values)
        return caller_of(cell[0].convert_all, invoke)

    def on_swap(self, listener: Callable[[], None]) -> None:
        """Runs `listener()` once this tiered module's code is replaced by its O3 build (for
        what holds the addresses of `packed`); at once if that has happened (the addresses
        `packed` gave may be the old code's)."""
        with _lock:
            if self.tiered:
                self._listeners.append(listener)
                return
        listener()

    def swap(self, lookup: Callable[[str], int], owner: object, opt_level: int = 3) -> None:
        """Replaces the module's code by the same module built at `opt_level` (`lookup`
        finds its symbols, which `owner` holds): every callable handed out calls the new
        code from its next call on, and the on_swap listeners run. The old code stays
        loaded. Called on the cache writer's thread."""
        with _lock:
            if not self.tiered:
                return
            self._retired.append(self._owner)
            self._lookup, self._owner, self._opt_level = lookup, owner, opt_level
            self.tiered = False        # later callables are made for the new code directly
            callers, listeners = self._callers, self._listeners
            self._callers, self._listeners = [], []
        for cell, make in callers:
            cell[0] = make()
        for listener in listeners:
            listener()

    def packed(self, name: str, label: str | None = None) -> tuple[int, bool, Callable]:
        """For a native caller (native_dispatch.py) of entry `name`: the address of its
        packed entry `_adj_packed_<name>` (0 if absent), whether it takes an error cell,
        and the function that raises a failed check's error, as `function()`'s callables do."""
        where = f"{label or name} (entry function {name})"
        return (self._lookup(f"_adj_packed_{name}"), bool(self._errors),
                functools.partial(self._raise_reported_error, where=where))


def from_source_key(skey: str, opt_level: int = 3, sites: Sequence[source_index.Site] = ()
                    ) -> tuple[CompiledModule, dict] | None:
    """The module recorded under source key `skey` (runtime/source_index.py), loaded and
    ready to call, with the record's meta; None on a miss. `sites`: where the caller's
    sources are (lang/source.code_sites), which its failed checks name."""
    found = source_index.load_entry(skey, sites)
    if found is None:
        return None
    entry, source, meta, errors = found
    return (CompiledModule(entry.address, entry, errors, source,
                           default_num_threads(), opt_level, entry.key), meta)
