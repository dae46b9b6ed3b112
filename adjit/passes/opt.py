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
import re
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from mlir import ir

from ..dialects import make_context
from ..dialects.adj import AdjError
from ..core import deep_stack
from . import registry
from .lower_cpu import ERROR_TABLE_ATTR
from .walk import walk


class ToolError(Exception):
    """A problem that no IR location explains: a pass not written yet, a bad pipeline string."""


def run_pipeline(module: ir.Module, text: str, print_ir_after_all: bool = False) -> None:
    """Runs a textual pipeline of upstream passes and adjit's (registry.py), in order."""
    try:
        registry.run_pipeline(module.operation, text, print_ir_after_all=print_ir_after_all,
                              verify=True)
    except registry.PassError as e:
        raise ToolError(str(e)) from None
    except ValueError as e:   # the bindings report a bad pipeline string this way
        raise ToolError(f"invalid pass pipeline: {e}") from None


def run_pass(module: ir.Module, name: str, print_ir_after_all: bool = False) -> None:
    registry.run_pass(module.operation, registry.make_pass(name, {}),
                      print_ir_after_all=print_ir_after_all, verify=True)


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
        run_pass(module, "adj-lower-gpu")
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
    for name in registry.REGISTRY:
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
            run_pass(module, name, args.mlir_print_ir_after_all)
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
