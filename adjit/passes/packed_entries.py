"""`_adj_packed_<name>`: each entry's C interface behind one signature, `void(void **)`.

The C interface `_mlir_ciface_<name>` that `llvm.emit_c_interface` gives an entry takes its
memrefs as pointers to descriptors and its scalars by value, so each entry has a signature
of its own: ctypes builds a call for it at run time (runtime/abi.py), and native code cannot
call it without knowing it at compile time. The packed entry takes an array of pointers,
one per parameter of the C interface (a memref's descriptor, a scalar's storage), then,
for an entry returning a scalar, one to the result's storage; it loads each value and calls
the C interface. runtime/native/dispatch.cpp calls it (what `mlir::ExecutionEngine`'s own
packed wrappers do, which exist only inside an engine, not in the shared objects of the
disk cache).

Runs on the LLVM dialect, after the lowering made the C interfaces (pipeline.lower_to_llvm).
"""
from __future__ import annotations

import re

from mlir import ir
from .registry import AdjPass

CIFACE = "_mlir_ciface_"
PACKED = "_adj_packed_"


def add_packed_entries(module: ir.Module) -> None:
    """Adds `_adj_packed_<name>` beside every `_mlir_ciface_<name>` function defined."""
    body = getattr(module, "operation", module).regions[0].blocks[0]
    cifaces = [op for op in body.operations if op.operation.name == "llvm.func"
               and ir.StringAttr(op.attributes["sym_name"]).value.startswith(CIFACE)
               and len(op.regions[0].blocks)]
    for op in cifaces:
        name = ir.StringAttr(op.attributes["sym_name"]).value
        params = [str(a.type) for a in op.regions[0].blocks[0].arguments]
        result = _result_type(str(op.attributes["function_type"]))
        text = _wrapper(name, params, result)
        snippet = ir.Module.parse(text, module.context)
        wrapper = [o for o in snippet.body.operations
                   if ir.StringAttr(o.attributes["sym_name"]).value.startswith(PACKED)][0]
        body.append(wrapper.operation)


def _result_type(function_type: str) -> str | None:
    """`f32` from `!llvm.func<f32 (ptr, i64)>`; None for void."""
    match = re.match(r"!llvm\.func<(.*?) \(", function_type)
    result = match.group(1) if match else "void"
    return None if result == "void" else result


def _wrapper(ciface: str, params: list[str], result: str | None) -> str:
    name = PACKED + ciface[len(CIFACE):]
    lines = [f"llvm.func @{ciface}({', '.join(params)}){' -> ' + result if result else ''}",
             f"llvm.func @{name}(%args: !llvm.ptr) {{"]
    values = []
    for j, t in enumerate(params + ([result] if result else [])):
        lines.append(f"  %p{j} = llvm.getelementptr %args[{j}] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr")
        lines.append(f"  %q{j} = llvm.load %p{j} : !llvm.ptr -> !llvm.ptr")
        if j < len(params):
            if t == "!llvm.ptr":
                values.append(f"%q{j}")
            else:
                lines.append(f"  %v{j} = llvm.load %q{j} : !llvm.ptr -> {t}")
                values.append(f"%v{j}")
    call = (f"llvm.call @{ciface}({', '.join(values)}) : ({', '.join(params)})"
            f" -> {result if result else '()'}")
    if result:
        lines.append(f"  %r = {call}")
        lines.append(f"  llvm.store %r, %q{len(params)} : {result}, !llvm.ptr")
    else:
        lines.append(f"  {call}")
    lines += ["  llvm.return", "}"]
    return "\n".join(lines)


class PackedEntries(AdjPass):
    """--adj-packed-entries: `_adj_packed_<entry>` for every C interface (the module
    docstring), on the LLVM dialect."""
    name = "adj-packed-entries"

    def apply(self, module: ir.Operation) -> None:
        add_packed_entries(module)
