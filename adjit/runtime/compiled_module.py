"""`CompiledModule`: the callables of a compiled CPU module, however it was made (an
ExecutionEngine, or a shared object from the disk cache), without MLIR."""
from __future__ import annotations

import functools
from typing import Callable, Sequence

from ..core.threads import default_num_threads
from . import source_index
from .abi import Type, check_error, exception_class, make_caller
from .memory import Block


class CompiledModule:
    """A compiled module: `function()` gives callables for its entry functions.

    `lookup` gives a symbol's address in the module's code (0 if absent), which `owner`, an
    ExecutionEngine or a cache entry's shared object, holds. `source`: the adj-level text it
    was compiled from (the compiler makes its LLVM text from it when asked: engine.llvm_text);
    `key`: its CPU cache key."""

    def __init__(self, lookup: Callable[[str], int], owner: object,
                 errors: Sequence[tuple[str, str]], source: str, num_threads: int,
                 opt_level: int = 3, key: str = ""):
        self._lookup, self._owner = lookup, owner
        self._errors = [(exception_class(kind), message) for kind, message in errors]
        self._source, self._num_threads = source, num_threads
        self._opt_level, self.key = opt_level, key

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
        return make_caller(address, label or name, arg_types, result_types,
                           report, Block, written, params,
                           error_cell=bool(self._errors))

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
    sources are (frontend/source.code_sites), which its failed checks name."""
    found = source_index.load_entry(skey, sites)
    if found is None:
        return None
    entry, source, meta, errors = found
    return (CompiledModule(entry.address, entry, errors, source,
                           default_num_threads(), opt_level, entry.key), meta)
