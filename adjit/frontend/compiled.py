"""What compiled CPU code is to Python: `Compiled`, a Function or Kernel specialisation,
callable; `LoadedDerivative`, a derivative's entries. Both are made from a compiled module
and its meta, which the disk cache records (service.py's CPU disk, runtime/source_index.py)
so that a new process whose code is all cached makes them without MLIR.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..runtime import native_dispatch
from ..runtime.compiled_module import CompiledModule
from ..core.types import parse_type, type_code

if TYPE_CHECKING:
    from .functions import Function, Kernel


class Compiled:
    """A compiled specialisation: its module (adj-level text in `adj_text`), and the call of
    its entry in two halves for functions.py's fast path (`convert_all`, `invoke`)."""

    def __init__(self, module: CompiledModule, entry: str, arg_types: list, result_types: list,
                 tuple_result: bool, written, target: Function | Kernel, adj_text: str):
        self.module, self.adj_text = module, adj_text
        self._native_spec = (entry, arg_types, result_types, tuple_result, written,
                             target.__name__)
        self.meta = {"entry": entry, "args": [type_code(t) for t in arg_types],
                     "results": [type_code(t) for t in result_types], "tuple": tuple_result,
                     "written": sorted(written)}
        call = module.function(entry, arg_types, result_types, written, target.__name__,
                               target.params)
        self.convert_all = call.convert_all
        if tuple_result and len(result_types) == 1:   # `return (x,)` stays a tuple
            self.call = lambda *args: (call(*args),)
            self.invoke = lambda values: (call.invoke(values),)
        else:
            self.call, self.invoke = call, call.invoke

    def register_native(self, dispatcher, values: tuple, extents: int = 0) -> None:
        """Lets `dispatcher` (runtime/native_dispatch.py) take calls like the one with
        arguments `values` (and `extents` ndrange extents) natively."""
        entry, arg_types, result_types, tuple_result, written, label = self._native_spec
        packed, cell, after_call = self.module.packed(entry, label)
        native_dispatch.add(dispatcher, values, extents, arg_types, result_types, tuple_result,
                            written, packed, cell, after_call, self)

    @classmethod
    def from_meta(cls, module: CompiledModule, meta: dict, target: Function | Kernel,
                  adj_text: str) -> Compiled:
        return cls(module, meta["entry"], [parse_type(c) for c in meta["args"]],
                   [parse_type(c) for c in meta["results"]], bool(meta["tuple"]),
                   meta["written"], target, adj_text)


class LoadedDerivative:
    """What autodiff calls of a Derivative (derivative.py), made from a source record
    without MLIR: the module's entries (`calls`) and the facts about them."""

    def __init__(self, module: CompiledModule, meta: dict, name: str):
        self.module, self.name = module, name
        self.entries = {e: ([parse_type(c) for c in ins], [parse_type(c) for c in outs])
                        for e, (ins, outs) in meta["entries"].items()}
        self.written = {e: frozenset(w) for e, w in meta["written"].items()}
        self.results = [parse_type(c) for c in meta["results"]]
        self.tuple_result = bool(meta["tuple"])
        self.ret_activity = str(meta["ret_activity"])
        self.ndrange_bounds = tuple((int(p), int(d), int(k), str(m))
                                    for p, d, k, m in meta["ndrange_bounds"])
        self.adj_text = module.source
        self.calls = {e: module.function(e, ins, outs, self.written[e], f"{name} ({e})")
                      for e, (ins, outs) in self.entries.items()}


def derivative_meta(d) -> dict:
    """The record of a compiled Derivative that LoadedDerivative reads back."""
    return {"entries": {e: [[type_code(t) for t in ins], [type_code(t) for t in outs]]
                        for e, (ins, outs) in d.entries.items()},
            "written": {e: sorted(w) for e, w in d.written.items()},
            "results": [type_code(t) for t in d.results], "tuple": bool(d.tuple_result),
            "ret_activity": d.ret_activity, "ndrange_bounds": [list(b) for b in d.ndrange_bounds]}
