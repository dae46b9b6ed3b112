"""What compiled CPU code is to Python: `Compiled`, a Function or Kernel specialisation,
callable; `LoadedDerivative`, a derivative's entries. Both are made from a compiled module
and its meta, which the disk cache records (service.py's CPU disk, runtime/source_index.py)
so that a new process whose code is all cached makes them without MLIR.
"""
from __future__ import annotations

import functools
import re
import weakref
from typing import TYPE_CHECKING

from ..runtime import native_dispatch
from ..runtime.compiled_module import CompiledModule
from ..core.derivative_abi import DerivativeABI, DerivativeEntries
from ..core.kernel import bound_fact
from ..core.types import ScalarType, VecType, parse_type, type_code
from ..lang import pytrees
from ..lang.structs import (StructType, class_name, class_named, field_at, from_leaf_values,
                            leaves, struct_type)

if TYPE_CHECKING:
    from ..lang.functions import Function, Kernel


class Compiled:
    """A compiled specialisation: its module (adj-level text in `adj_text`), and the call of
    its entry in two halves for functions.py's fast path (`convert_all`, `invoke`)."""

    def __init__(self, module: CompiledModule, entry: str, arg_types: list, result_types: list,
                 tuple_result: bool, written, target: Function | Kernel, adj_text: str,
                 vectors: list | None = None, tree=None):
        self.module, self.adj_text = module, adj_text
        self._target = target
        self._native_spec = (entry, arg_types, result_types, tuple_result, written,
                             target.__name__)
        # Vector and tree results are regrouped in Python (below): such calls stay on that
        # path.
        self._regrouped = bool(vectors and any(vectors)) or tree is not None
        self.meta = {"entry": entry, "args": [type_code(t) for t in arg_types],
                     "results": [type_code(t) for t in result_types], "tuple": tuple_result,
                     "written": sorted(written)}
        if vectors and any(vectors):
            self.meta["vectors"] = [_layout_code(v) for v in vectors]
        if tree is not None:
            self.meta["tree"] = pytrees.to_record(tree)
        call = module.function(entry, arg_types, result_types, written, target.__name__,
                               target.params)
        self.convert_all = call.convert_all
        if vectors and any(vectors):
            # The entry returns a vector's components one by one (the compiler's view of
            # it); Python gets a NumPy array of its shape, as outside compiled code.
            regroup = regrouping(vectors, tuple_result)
            self.call = lambda *args: regroup(call(*args))
            self.invoke = lambda values: regroup(call.invoke(values))
        elif tuple_result and len(result_types) == 1:   # `return (x,)` stays a tuple
            self.call = lambda *args: (call(*args),)
            self.invoke = lambda values: (call.invoke(values),)
        else:
            self.call, self.invoke = call, call.invoke
        if tree is not None:
            # A tree result (lang/pytrees.py): the entry returns its leaves.
            flat_call, flat_invoke = self.call, self.invoke

            def leaves(out):
                return out if isinstance(out, tuple) else () if out is None else (out,)
            self.call = lambda *args: pytrees.unflatten(tree, leaves(flat_call(*args)))
            self.invoke = lambda values: pytrees.unflatten(tree, leaves(flat_invoke(values)))

    def register_native(self, dispatcher, values: tuple, extents: int = 0) -> None:
        """Lets `dispatcher` (runtime/native_dispatch.py) take calls like the one with
        arguments `values` (and `extents` ndrange extents) natively."""
        entry, arg_types, result_types, tuple_result, written, label = self._native_spec
        if self._regrouped:
            return
        tiered = self.module.tiered     # (read first: packed() may then be the O3 build's)
        packed, cell, after_call = self.module.packed(entry, label)
        native_dispatch.add(dispatcher, values, extents, arg_types, result_types, tuple_result,
                            written, packed, cell, after_call, self)
        if tiered:
            self.module.on_swap(functools.partial(_register_again, weakref.ref(self._target),
                                                  dispatcher))

    @classmethod
    def from_meta(cls, module: CompiledModule, meta: dict, target: Function | Kernel,
                  adj_text: str) -> Compiled:
        vectors = [_layout_type(c) for c in meta.get("vectors", ())]
        tree = pytrees.from_record(meta["tree"]) if "tree" in meta else None
        return cls(module, meta["entry"], [parse_type(c) for c in meta["args"]],
                   [parse_type(c) for c in meta["results"]], bool(meta["tuple"]),
                   meta["written"], target, adj_text, vectors or None, tree)


def _register_again(target_ref, dispatcher) -> None:
    """After a tiered module's swap (engine.py): the native dispatcher `dispatcher` holds its
    first tier's packed addresses. The declaration gets a new, empty dispatcher and forgets
    its fast paths, so that each call signature's next call takes the Python path and
    registers the O3 code. (The old dispatcher is not cleared: a call on another thread may
    be running one of its specs; it holds its own reference.)"""
    target = target_ref()
    # (None: a declaration without native dispatch, struct parameters: it stays without)
    if target is None or dispatcher is None or getattr(target, "_native", None) is not dispatcher:
        return
    target._native = native_dispatch.dispatcher()
    target._fast.clear()


def regrouping(layout: list, tuple_result: bool):
    """A function from an entry's flat results to the function's: each vector's components
    (VecType in `layout`, one entry per result of the Python function) as one array, each
    struct's leaves (StructType) as an instance of its class, scalar fields NumPy scalars."""
    import numpy as np

    def vector(v, flat):
        return np.array([next(flat) for _ in range(v.size)], v.dtype.np_dtype).reshape(v.shape)

    def struct(st, flat):
        values = (vector(t, flat) if isinstance(t, VecType) else next(flat)
                  for _, t, _ in leaves(st, ""))
        return from_leaf_values(st, values)

    def regroup(out):
        flat = iter(out if isinstance(out, tuple) else (out,))
        items = [next(flat) if v is None else struct(v, flat) if isinstance(v, StructType)
                 else vector(v, flat) for v in layout]
        return tuple(items) if tuple_result or len(items) != 1 else items[0]
    return regroup


def float_leaves(value) -> list:
    """The float scalars of a struct or vector value (a cotangent of a function returning
    one), in the order of the compiled function's results (structs.leaves)."""
    import numpy as np
    st = struct_type(value)
    if st is None:
        arr = np.asarray(value)
        return list(arr.ravel()) if arr.dtype.kind == "f" else []
    out = []
    for _, t, path in leaves(st, ""):
        v = field_at(value, path)
        if isinstance(t, VecType) or isinstance(t, ScalarType) and t.is_float:
            out.extend(np.asarray(v, dtype=t.dtype.np_dtype if isinstance(t, VecType)
                                  else t.np_dtype).ravel().tolist())
    return out


def _layout_code(t) -> str | None:
    """How a compiled function's record spells a result's layout: a vector's type code, a
    struct's class name (structs.class_name), None for any other result."""
    if isinstance(t, StructType):
        return "struct:" + class_name(t.cls)
    return type_code(t) if t is not None else None


def _layout_type(code: str | None):
    if code is None:
        return None
    if code.startswith("struct:"):
        try:
            return class_named(code[len("struct:"):])
        except KeyError:
            raise ValueError(f"the struct class {code[7:]} is not defined in this process"
                             ) from None
    return _vec_type(code)


def _vec_type(code: str) -> VecType:
    """The VecType that type_code spelled `code` ('v3f32', 'm33f64', 'q4f32')."""
    match = re.fullmatch(r"([vmqt])(\d+)(f32|f64)", code)
    if match is None:
        raise ValueError(f"{code!r} is not a vector type code")
    kind = {"v": "vec", "m": "mat", "q": "quat", "t": "transform"}[match.group(1)]
    return VecType(kind, tuple(int(c) for c in match.group(2)),
                   parse_type(match.group(3)))


class LoadedDerivative(DerivativeEntries):
    """What autodiff calls of a Derivative (derivative.py), made from a source record
    without MLIR: the module's entries (`calls`) and the facts about them."""

    def __init__(self, module: CompiledModule, meta: dict, name: str):
        self.module, self.name = module, name
        self.entries = {e: ([parse_type(c) for c in ins], [parse_type(c) for c in outs])
                        for e, (ins, outs) in meta["entries"].items()}
        self.written = {e: frozenset(w) for e, w in meta["written"].items()}
        self.results = [parse_type(c) for c in meta["results"]]
        self.tuple_result = bool(meta["tuple"])
        self.abi = DerivativeABI.from_record(meta["abi"])
        self.ndrange_bounds = tuple(bound_fact(b) for b in meta["ndrange_bounds"])
        if meta.get("layout"):
            self.layout = [_layout_type(c) for c in meta["layout"]]
        self.cotangents = meta.get("cotangents", 1)
        if meta.get("tree"):
            self.result_tree = pytrees.from_record(meta["tree"])
        self.adj_text = module.source
        self.calls = {e: module.function(e, ins, outs, self.written[e], f"{name} ({e})")
                      for e, (ins, outs) in self.entries.items()}


def derivative_meta(d) -> dict:
    """The record of a compiled Derivative that LoadedDerivative reads back."""
    return {"entries": {e: [[type_code(t) for t in ins], [type_code(t) for t in outs]]
                        for e, (ins, outs) in d.entries.items()},
            "written": {e: sorted(w) for e, w in d.written.items()},
            "results": [type_code(t) for t in d.results], "tuple": bool(d.tuple_result),
            "abi": d.abi.to_record(), "ndrange_bounds": [list(b) for b in d.ndrange_bounds],
            "layout": [_layout_code(t) for t in d.layout] if d.layout else None,
            "cotangents": d.cotangents,
            "tree": None if d.result_tree is None else pytrees.to_record(d.result_tree)}
