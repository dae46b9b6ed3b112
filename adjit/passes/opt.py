"""`adjit-opt`: the mlir-opt of adjit, to run its passes on IR files and test them with FileCheck.

    adjit-opt [file.mlir|-] [--pass-pipeline='builtin.module(...)'] [--adj-autodiff]
              [--adj-lower-cpu] [--adj-lower-gpu] [--adj-lower-cuda-host] [--adj-...]
              [--emit=mlir|llvm|ptx] [--split-input-file] [--verify-diagnostics]
              [--mlir-print-ir-after-all] [--mlir-print-debuginfo] [-o out]

Passes run in command-line order (flags, or adjit's passes with options inside
--pass-pipeline: passes/registry.py); `--emit` then lowers what is left and prints the
result. Every user error (bad IR, a failed pass, a malformed adj op) is printed as an MLIR
diagnostic `file:line:col: error: message` with exit status 1, never as a Python traceback.
As with mlir-opt, `--split-input-file` runs each part between `// -----` lines on its own
(diagnostics keep the whole file's lines), and `--verify-diagnostics` checks the diagnostics
against `// expected-error @+1 {{text}}` comments (-warning, -note, -remark; `@-N`, `@above`,
`@below`) instead of printing them: status 0 when each is produced and nothing else.
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
from ..core.locations import file_position
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


class _Sink:
    """Where diagnostics go: printed as `file:line:col: severity: message` (`file` renamed from
    `-` to `name`, for the parts of a split input), or, with `collect`, kept for
    --verify-diagnostics as (line or None, severity, message, printed form)."""

    def __init__(self, name: str = "-", collect: bool = False):
        self.name, self.collect = name, collect
        self.kept: list[tuple[int | None, str, str, str]] = []

    def report(self, loc: ir.Location | None, severity: str, message: str) -> None:
        at = file_position(str(loc)) if loc is not None else None
        where = "adjit-opt"
        if at is not None:
            filename, line, col = at
            where = f"{self.name if filename == '-' else filename}:{line}:{col}"
        text = f"{where}: {severity}: {message}"
        if self.collect:
            self.kept.append((at[1] if at else None, severity, message, text))
        else:
            print(text, file=sys.stderr)


_sink = _Sink()


def _report(loc: ir.Location | None, severity: str, message: str) -> None:
    _sink.report(loc, severity, message)


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
    p.add_argument("--split-input-file", action="store_true",
                   help="run each part of the input between `// -----` lines on its own")
    p.add_argument("--verify-diagnostics", action="store_true",
                   help="check the diagnostics against the input's `// expected-error` "
                        "(-warning, -note, -remark) comments instead of printing them")
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


def _read(source: str) -> bytes:
    return sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()


def _parse(source: str, data: bytes | None = None) -> ir.Module:
    """The module in file `source` (`-`: stdin), read as bytes: text in any encoding, or
    MLIR bytecode, is the parser's to judge, with a diagnostic at the offending character.
    `data`: the text itself (a part of a split input, its locations named `-`)."""
    whole = data is None
    data = _read(source) if whole else data
    if not data.startswith(_BYTECODE_MAGIC):
        depth = _nesting(data)
        if depth > MAX_NESTING:
            raise ToolError(f"{source}: regions nest {depth} deep, more than adjit-opt's "
                            f"limit of {MAX_NESTING}")
    if whole and source != "-" and Path(source).is_file():
        return ir.Module.parseFile(source)   # locations then name the file
    return ir.Module.parse(data)             # (a pipe cannot be read twice)


def _run(args: argparse.Namespace, data: bytes | None = None) -> str:
    module = _parse(args.input, data)
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


def _parts(data: bytes) -> list[bytes]:
    """The parts of a split input, each padded with the empty lines before it, so that
    their diagnostics give the lines of the whole file."""
    lines = data.split(b"\n")
    parts, start = [], 0
    for i, line in enumerate(lines + [b"// -----"]):
        if line.strip() == b"// -----":
            parts.append(b"\n" * start + b"\n".join(lines[start:i]))
            start = i + 1
    return parts


def _main(args: argparse.Namespace) -> int:
    global _sink
    if args.split_input_file or args.verify_diagnostics:
        data = _read(args.input)
        parts = _parts(data) if args.split_input_file else [data]
        _sink = _Sink(args.input, collect=args.verify_diagnostics)
    else:
        parts = [None]
    outputs, status = [], 0
    for part in parts:
        if args.verify_diagnostics:
            _sink.kept = []
        text, failed = _run_part(args, part)
        if args.verify_diagnostics:
            status |= _verify(args.input, part, _sink.kept)
        elif failed:
            status = 1
        elif text is not None:
            outputs.append(text)
    if args.verify_diagnostics or status:
        return status
    text = "// -----\n".join(outputs)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
    return 0


def _run_part(args: argparse.Namespace, data: bytes | None) -> tuple[str | None, bool]:
    """(the output for one input or part of a split one, whether it failed)."""
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
            text = _run(args, data)
        return (None, True) if failed else (text, False)
    except ir.MLIRError as e:
        for diag in e.error_diagnostics:
            _report_diagnostic(diag)
        if not e.error_diagnostics:
            _report(None, "error", e.message)
    except AdjError as e:
        _report(e.op.location, "error", str(e))
    except (ToolError, OSError) as e:
        _report(None, "error", str(e))
    return None, True


_EXPECTED = re.compile(rb"//\s*expected-(error|warning|note|remark)\s*"
                       rb"(?:@(above|below|[+-]\d+))?\s*\{\{(.*?)\}\}")


def _verify(name: str, data: bytes, kept: list[tuple[int | None, str, str, str]]) -> int:
    """--verify-diagnostics for one input (part): 0 if the diagnostics reported are exactly
    those its `expected-*` comments ask for (each message containing the expected text, on
    the line the comment names), else 1, printing each difference."""
    expected = []
    for number, line in enumerate(data.split(b"\n"), 1):
        for m in _EXPECTED.finditer(line):
            offset = m.group(2)
            at = number + (-1 if offset == b"above" else 1 if offset == b"below"
                           else int(offset) if offset else 0)
            expected.append((at, m.group(1).decode(), m.group(3).decode(errors="replace")))
    # MLIR attaches "see current operation" notes to verifier errors (mlir-opt turns them
    # off when it verifies diagnostics; the bindings cannot): not the pass's diagnostics.
    unmatched = [k for k in kept if not (k[1] == "note"
                                         and k[2].startswith("see current operation"))]
    status = 0
    for at, severity, text in expected:
        match = next((k for k in unmatched if k[0] == at and k[1] == severity and text in k[2]),
                     None)
        if match is None:
            print(f"{name}:{at}: error: expected {severity} \"{text}\" was not produced",
                  file=sys.stderr)
            status = 1
        else:
            unmatched.remove(match)
    for _, severity, _, printed in unmatched:
        print(f"unexpected {severity}: {printed}", file=sys.stderr)
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
