"""`adjit-opt`: the mlir-opt of adjit, to run its passes on IR files and test them with FileCheck.

    adjit-opt [file.mlir|-] [--pass-pipeline='builtin.module(...)'] [--adj-autodiff]
              [--adj-lower-cpu] [--adj-lower-gpu] [--adj-lower-cuda-host]
              [--emit=mlir|llvm|ptx]
              [--mlir-print-ir-after-all] [--mlir-print-debuginfo] [-o out]

Passes run in command-line order; `--emit` then lowers what is left and prints the result.
Every user error (bad IR, a failed pass, a malformed adj op) is printed as an MLIR diagnostic
`file:line:col: error: message` with exit status 1, never as a Python traceback.
"""
from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from mlir import ir, passmanager

from ..dialects import make_context
from ..dialects.adj import AdjError
from ..core import deep_stack
from .lower_cpu import ERROR_TABLE_ATTR, lower_cpu
from .walk import walk

Pass = Callable[[ir.Module], None]   # rewrites the module in place


class ToolError(Exception):
    """A problem that no IR location explains: a pass not written yet, a bad pipeline string."""


def _lazy(module: str, name: str) -> Pass:
    """A pass imported only when it runs (the tool starts without importing every pass);
    keyword options go to its function."""
    def run(m: ir.Module, **options: str) -> None:
        getattr(importlib.import_module(module), name)(m, **options)
    return run


# Each entry becomes the flag --<name>; adding a pass is one line here.
PASSES: dict[str, Pass] = {
    "adj-autodiff": _lazy("adjit.passes.autodiff", "run_autodiff"),
    "adj-lower-cpu": lambda m, **options: lower_cpu(m.operation, **options),
    "adj-lower-gpu": _lazy("adjit.passes.lower_gpu", "lower_gpu"),
    "adj-lower-cuda-host": _lazy("adjit.passes.lower_cuda_host", "lower_cuda_host"),
    "adj-annotate-written": _lazy("adjit.passes.written", "annotate_written"),
    "adj-expand-item-sums": _lazy("adjit.passes.autodiff.reduction", "expand_all_item_sums"),
    "adj-serialise-small-loops": _lazy("adjit.passes.small_loops", "serialise_small_loops"),
    "adj-split-interior": _lazy("adjit.passes.interior", "split_interior"),
    "adj-parallel-for": _lazy("adjit.passes.parallel_for", "outline_parallel_loops"),
}


def run_pipeline(module: ir.Module, text: str, print_ir_after_all: bool = False) -> None:
    """Runs a textual pipeline, `builtin.module(...)` of upstream passes and adjit's (with
    options: `adj-lower-gpu{chip=sm_80}`), in order. Runs of upstream passes go to one
    PassManager each, which prints its own IR dumps to stderr; adjit's passes run between
    them (not inside a PassManager: some build IR in contexts of their own, or run upstream
    pipelines, which a running PassManager's context forbids)."""
    elements = _module_elements(text)
    if elements is None or not any(_pass_name(e) in PASSES for e in elements):
        _run_upstream(module, text, print_ir_after_all)
        return
    upstream: list[str] = []
    for element in [*elements, None]:
        name = None if element is None else _pass_name(element)
        if element is not None and name not in PASSES:
            upstream.append(element)
            continue
        if upstream:
            _run_upstream(module, f"builtin.module({','.join(upstream)})", print_ir_after_all)
            upstream = []
        if element is not None:
            run_pass(module, name, _options(element), print_ir_after_all)


def run_pass(module: ir.Module, name: str, options: dict[str, str],
             print_ir_after_all: bool = False) -> None:
    """Runs adjit's pass `name` with keyword `options`; verifies the IR after it."""
    try:
        PASSES[name](module, **options)
    except TypeError as e:
        if "unexpected keyword argument" not in str(e):
            raise
        raise ToolError(f"{name} takes no option "
                        f"{str(e).rsplit(' ', 1)[-1]}") from None
    module.operation.verify()   # a pass that leaves invalid IR fails here, at the op it broke
    if print_ir_after_all:
        print(f"// -----// IR Dump After {name} //----- //\n{module.operation}\n",
              file=sys.stderr)


def _run_upstream(module: ir.Module, text: str, print_ir_after_all: bool) -> None:
    try:
        pm = passmanager.PassManager.parse(text)
    except ValueError as e:   # the bindings report a bad pipeline string this way
        raise ToolError(f"invalid pass pipeline: {e}") from None
    if print_ir_after_all:
        pm.enable_ir_printing()
    pm.run(module.operation)
    module.operation.verify()


def _module_elements(text: str) -> list[str] | None:
    """The top-level elements of `builtin.module(a, b{x=1}, func.func(c))`, or None for
    another form (left to MLIR's parser)."""
    text = text.strip()
    if not (text.startswith("builtin.module(") and text.endswith(")")):
        return None
    inner, elements, depth, start = text[len("builtin.module("):-1], [], 0, 0
    for i, ch in enumerate(inner):
        if ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
        elif ch == "," and depth == 0:
            elements.append(inner[start:i].strip())
            start = i + 1
    elements.append(inner[start:].strip())
    return [e for e in elements if e]


def _pass_name(element: str) -> str:
    return re.split(r"[({]", element, maxsplit=1)[0].strip()


def _options(element: str) -> dict[str, str]:
    """`{key=value key2=value2}` of a pipeline element, as keyword arguments."""
    match = re.fullmatch(r"[\w.-]+\s*(?:\{(.*)\})?", element.strip(), re.S)
    if match is None:
        raise ToolError(f"invalid pass pipeline element {element!r}: adjit's passes take "
                        "options in braces, {key=value ...}")
    options = {}
    for item in (match.group(1) or "").split():
        key, eq, value = item.partition("=")
        if not eq:
            raise ToolError(f"invalid option {item!r} of {_pass_name(element)}: key=value")
        options[key.replace("-", "_")] = value
    return options


def _ops(root: ir.Operation, keep: Callable[[ir.Operation], bool]) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if keep(op):
            found.append(op)
        return ir.WalkResult.ADVANCE

    walk(root, visit)
    return found


def _emit_llvm(module: ir.Module) -> str:
    """LLVM IR of the module, lowered as the runtime lowers it (the runtime's own pipeline)."""
    from mlir.dialects import llvm
    from .pipeline import lower_to_llvm, run_cpu_pipeline
    if ERROR_TABLE_ATTR in module.operation.attributes:   # lower_cpu ran: do not run it twice
        run_cpu_pipeline(module)
    else:
        lower_to_llvm(module)
    op = module.operation
    # Translating an op with no LLVM translation crashes the process: refuse it first.
    left = _ops(op, lambda o: o.name != "builtin.module" and not o.name.startswith("llvm."))
    if left:
        raise AdjError(left[0], f"'{left[0].name}' is left after lowering to the LLVM dialect "
                                "and cannot be translated to LLVM IR (a pass is missing)")
    return str(llvm.translate_module_to_llvmir(op))


def _emit_ptx(module: ir.Module) -> str:
    """The PTX that --adj-lower-gpu (run here unless it already ran) left in gpu.binary ops."""
    from mlir.dialects import gpu
    op = module.operation
    if not _ops(op, lambda o: o.name == "gpu.binary"):
        PASSES["adj-lower-gpu"](module)
    ptx = [gpu.ObjectAttr(obj).object.decode()
           for binary in _ops(op, lambda o: o.name == "gpu.binary")
           for obj in ir.ArrayAttr(binary.attributes["objects"])
           if gpu.ObjectAttr(obj).format == gpu.CompilationTarget.Assembly]
    if not ptx:
        raise ToolError("no PTX in the module: no gpu.binary holds an object in assembly format")
    return "".join(ptx)


def _where(loc: ir.Location) -> str | None:
    """`file:line:col` of the first file location inside `loc`, None if it has none."""
    if loc.is_a_file():
        return f"{loc.filename}:{loc.start_line}:{loc.start_col}"
    if loc.is_a_name():
        return _where(loc.child_loc)
    if loc.is_a_callsite():
        return _where(loc.callee)
    if loc.is_a_fused():
        return next(filter(None, map(_where, loc.locations)), None)
    return None


def _report(loc: ir.Location | None, severity: str, message: str) -> None:
    where = _where(loc) if loc is not None else None
    print(f"{where or 'adjit-opt'}: {severity}: {message}", file=sys.stderr)


def _report_diagnostic(diag: Any) -> None:
    """Prints an ir.Diagnostic or ir.DiagnosticInfo (same fields) and its notes."""
    severity = str(diag.severity).rsplit(".", 1)[-1].lower()
    _report(diag.location, severity, diag.message)
    for note in diag.notes:
        _report_diagnostic(note)


class _Step(argparse.Action):
    """Appends (pass name, pipeline text or None) to args.steps: passes run in argv order."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        pipeline = values if isinstance(values, str) else None   # flags get values == []
        namespace.steps = [*namespace.steps, (self.dest, pipeline)]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="adjit-opt", description=__doc__.split("\n")[0])
    p.add_argument("input", nargs="?", default="-", help="input .mlir file, or - for stdin")
    p.add_argument("--pass-pipeline", dest="pass-pipeline", action=_Step, metavar="PIPELINE",
                   help="upstream passes, e.g. 'builtin.module(canonicalize)'")
    for name in PASSES:
        p.add_argument(f"--{name}", dest=name, action=_Step, nargs=0, help=f"run {name}")
    p.add_argument("--emit", choices=["mlir", "llvm", "ptx"], default="mlir",
                   help="mlir: the IR after the passes; llvm: LLVM IR (CPU); ptx: GPU kernels")
    p.add_argument("--mlir-print-ir-after-all", action="store_true",
                   help="print the IR to stderr after each pass")
    p.add_argument("--mlir-print-debuginfo", action="store_true", help="print locations")
    p.add_argument("-o", dest="output", default="-", help="output file (default: stdout)")
    p.set_defaults(steps=[])
    return p


# MLIR's parser, verifier and printer recurse once per nested region, ~2.5 KiB of stack a
# level: the tool runs on a thread whose stack (core/deep_stack.py) holds this many.
MAX_NESTING = 100_000
_BYTECODE_MAGIC = b"ML\xefR"
_BRACES = re.compile(rb'"(?:[^"\\\n]|\\.)*"|//[^\n]*|[{}]')


def _nesting(data: bytes) -> int:
    """How deeply the braces of IR text `data` nest (outside strings and comments)."""
    depth = deepest = 0
    for m in _BRACES.finditer(data):
        token = m.group()
        if token == b"{":
            depth += 1
            deepest = max(deepest, depth)
        elif token == b"}":
            depth -= 1
    return deepest


def _parse(source: str) -> ir.Module:
    """The module in file `source` (`-`: stdin), read as bytes: text in any encoding, or
    MLIR bytecode, is the parser's to judge, with a diagnostic at the offending character."""
    data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    if not data.startswith(_BYTECODE_MAGIC):
        depth = _nesting(data)
        if depth > MAX_NESTING:
            raise ToolError(f"{source}: regions nest {depth} deep, more than adjit-opt's "
                            f"limit of {MAX_NESTING}")
    if source != "-" and Path(source).is_file():
        return ir.Module.parseFile(source)   # locations then name the file
    return ir.Module.parse(data)             # (a pipe cannot be read twice)


def _run(args: argparse.Namespace) -> str:
    module = _parse(args.input)
    op = module.operation
    for name, pipeline in args.steps:
        if pipeline is not None:
            run_pipeline(module, pipeline, args.mlir_print_ir_after_all)
        else:
            run_pass(module, name, {}, args.mlir_print_ir_after_all)
    if args.emit == "llvm":
        return _emit_llvm(module)
    if args.emit == "ptx":
        return _emit_ptx(module)
    return op.get_asm(enable_debug_info=args.mlir_print_debuginfo) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        # See MAX_NESTING; the passes written in Python recurse over nested regions too.
        return deep_stack.call(lambda: _main(args), recursion_limit=MAX_NESTING)
    except KeyboardInterrupt:
        _report(None, "error", "interrupted")
        return 130
    except RecursionError:
        _report(None, "error", "the IR is nested too deeply for the passes")
        return 1


def _main(args: argparse.Namespace) -> int:
    ctx = make_context()
    failed = False

    def on_diagnostic(diag: ir.Diagnostic) -> bool:
        # Diagnostics a pass emits without raising; raised ones arrive in ir.MLIRError.
        nonlocal failed
        failed |= diag.severity == ir.DiagnosticSeverity.ERROR
        _report_diagnostic(diag)
        return True

    ctx.attach_diagnostic_handler(on_diagnostic)
    try:
        with ctx, ir.Location.unknown():
            text = _run(args)
        if failed:
            return 1
        if args.output == "-":
            sys.stdout.write(text)
        else:
            Path(args.output).write_text(text)
    except ir.MLIRError as e:
        for diag in e.error_diagnostics:
            _report_diagnostic(diag)
        if not e.error_diagnostics:
            _report(None, "error", e.message)
        return 1
    except AdjError as e:
        _report(e.op.location, "error", str(e))
        return 1
    except (ToolError, OSError) as e:
        _report(None, "error", str(e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
