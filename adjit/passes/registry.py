"""adjit's passes by name, and the runner of pipelines that mix them with upstream ones.

Each pass is a small class in the module that implements it (xDSL's shape): a `name` (its
`adjit-opt` flag and its pipeline element), options as dataclass fields (pipeline syntax
`adj-lower-gpu{chip=sm_80}`), and `apply(module)` on the `builtin.module` operation. Adding
a pass is its class plus one line in REGISTRY.

`run_pipeline` runs `builtin.module(...)` text in order: runs of upstream passes in one
PassManager each, adjit's passes between them, never inside a PassManager (some load
dialects or run pipelines of their own, which MLIR forbids while a PassManager runs: an
assertion). The CPU pipeline (pipeline.py) and `adjit-opt --pass-pipeline` both go through
it, so the tool reproduces the runtime's lowering exactly.
"""
from __future__ import annotations

import dataclasses
import importlib
import re
import sys
from typing import ClassVar

from mlir import ir, passmanager


class PassError(ValueError):
    """A pipeline that cannot run: an unknown option, a malformed element."""


@dataclasses.dataclass
class AdjPass:
    """One of adjit's passes; subclasses set `name` and may add options as fields."""
    name: ClassVar[str] = ""

    def apply(self, module: ir.Operation) -> None:
        raise NotImplementedError


# name -> "module:Class", imported when first used (the tool starts without every pass).
REGISTRY: dict[str, str] = {
    "adj-autodiff": "adjit.passes.autodiff:AutodiffPass",
    "adj-lower-cpu": "adjit.passes.lower_cpu:LowerCpu",
    "adj-lower-gpu": "adjit.passes.lower_gpu:LowerGpu",
    "adj-outline-kernels": "adjit.passes.lower_gpu:OutlineKernels",
    "adj-relax-gpu-atomics": "adjit.passes.lower_gpu:RelaxGpuAtomics",
    "adj-lower-cuda-host": "adjit.passes.lower_cuda_host:LowerCudaHost",
    "adj-hook-runtime-calls": "adjit.passes.lower_cuda_host:HookRuntimeCalls",
    "adj-annotate-written": "adjit.passes.written:AnnotateWritten",
    "adj-ndrange-bounds": "adjit.passes.ndrange_bounds:NdrangeBounds",
    "adj-expand-item-sums": "adjit.passes.summation:ExpandItemSums",
    "adj-expand-math": "adjit.passes.math_approx:ExpandMath",
    "adj-privatize-helpers": "adjit.passes.pipeline:PrivatizeHelpers",
    "adj-widen-bool-memrefs": "adjit.passes.pipeline:WidenBoolMemrefs",
    "adj-expand-log1p-expm1": "adjit.passes.cpu_math:ExpandLog1pExpm1",
    "adj-serialise-small-loops": "adjit.passes.small_loops:SerialiseSmallLoops",
    "adj-parallel-for": "adjit.passes.parallel_for:ParallelFor",
    "adj-split-interior": "adjit.passes.interior:SplitInterior",
    "adj-relax-atomics": "adjit.passes.lower_cpu:RelaxAtomics",
    "adj-define-launchers": "adjit.passes.parallel_for:DefineLaunchers",
    "adj-packed-entries": "adjit.passes.packed_entries:PackedEntries",
}


def pass_class(name: str) -> type[AdjPass]:
    module, cls = REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)


def make_pass(name: str, options: dict[str, str]) -> AdjPass:
    """An instance of pass `name` with `options` (text values, converted to the fields'
    types); PassError for an option it does not take or a value of the wrong form."""
    cls = pass_class(name)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values = {}
    for key, text in options.items():
        field = fields.get(key.replace("-", "_"))
        if field is None:
            raise PassError(f"{name} takes no option {key!r}"
                            + (f" (its options: {', '.join(sorted(fields))})" if fields else ""))
        kind = (field.type if isinstance(field.type, type) else
                {"int": int, "bool": bool, "str": str}.get(str(field.type), str))
        try:
            values[field.name] = (text.lower() in ("1", "true") if kind is bool else kind(text))
        except ValueError:
            raise PassError(f"option {key} of {name} must be {kind.__name__}, "
                            f"got {text!r}") from None
    return cls(**values)


def elements(text: str) -> list[str] | None:
    """The top-level elements of `builtin.module(a, b{x=1}, func.func(c))`, or None for
    another form."""
    text = text.strip()
    if not (text.startswith("builtin.module(") and text.endswith(")")):
        return None
    inner, out, depth, start = text[len("builtin.module("):-1], [], 0, 0
    for i, ch in enumerate(inner):
        if ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(inner[start:i].strip())
            start = i + 1
    out.append(inner[start:].strip())
    return [e for e in out if e]


def element_name(element: str) -> str:
    return re.split(r"[({]", element, maxsplit=1)[0].strip()


def element_options(element: str) -> dict[str, str]:
    """`{key=value key2=value2}` of a pipeline element."""
    match = re.fullmatch(r"[\w.-]+\s*(?:\{(.*)\})?", element.strip(), re.S)
    if match is None:
        raise PassError(f"invalid pass pipeline element {element!r}: adjit's passes take "
                        "options in braces, {key=value ...}")
    options = {}
    for item in (match.group(1) or "").split():
        key, eq, value = item.partition("=")
        if not eq:
            raise PassError(f"invalid option {item!r} of {element_name(element)}: key=value")
        options[key] = value
    return options


def run_pipeline(module: ir.Operation, text: str, *, print_ir_after_all: bool = False,
                 verify: bool = False) -> None:
    """Runs pipeline `text` on `module` (the module docstring says how); ValueError for a
    pipeline MLIR's parser refuses, PassError for one of adjit's elements."""
    parts = elements(text)
    if parts is None or not any(element_name(e) in REGISTRY for e in parts):
        _run_upstream(module, text, print_ir_after_all, verify)
        return
    passes = [make_pass(element_name(e), element_options(e))
              if element_name(e) in REGISTRY else e for e in parts]   # checked before any runs
    upstream: list[str] = []
    for p in [*passes, None]:
        if isinstance(p, str):
            upstream.append(p)
            continue
        if upstream:
            _run_upstream(module, f"builtin.module({','.join(upstream)})",
                          print_ir_after_all, verify)
            upstream = []
        if p is not None:
            run_pass(module, p, print_ir_after_all=print_ir_after_all, verify=verify)


def run_pass(module: ir.Operation, p: AdjPass, *, print_ir_after_all: bool = False,
             verify: bool = False) -> None:
    with module.context, module.location:
        p.apply(module)
    if verify:
        module.verify()     # a pass that leaves invalid IR fails here, at the op it broke
    if print_ir_after_all:
        print(f"// -----// IR Dump After {p.name} //----- //\n{module}\n", file=sys.stderr)


def _run_upstream(module: ir.Operation, text: str, print_ir_after_all: bool,
                  verify: bool) -> None:
    pm = passmanager.PassManager.parse(text, module.context)
    if print_ir_after_all:
        pm.enable_ir_printing()
    pm.run(module)
    if verify:
        module.verify()
