"""adjit-opt on hostile input: regions nested thousands deep (issue 19.3), bytes that are not
UTF-8 on stdin or in a file (issues 19.13, 8.12), MLIR bytecode, Ctrl-C (issue 19.12). Each
ends in a diagnostic and a non-zero exit status or in the right output, never in a crash or
a Python traceback."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mlir")
from mlir import ir  # noqa: E402

from adjit.passes import opt  # noqa: E402

TOOL = [sys.executable, "-m", "adjit.passes.opt"]


def adjit_opt(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([*TOOL, *args], input=stdin, capture_output=True, timeout=300)


def nested_ifs(depth: int) -> str:
    return "\n".join(["func.func @f(%c: i1) {", *["scf.if %c {"] * depth, *["}"] * depth,
                      "return", "}"]) + "\n"


def test_regions_nested_4000_deep_do_not_crash(tmp_path):
    """The recursive parser overflowed the 8 MiB main stack (SIGSEGV) from ~3,500 levels;
    it runs on a deep stack now. Canonicalize erases the empty ifs, so the output is small."""
    path = tmp_path / "deep.mlir"
    path.write_text(nested_ifs(4000))
    done = adjit_opt(str(path), "--pass-pipeline=builtin.module(canonicalize)")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    out = done.stdout.decode()
    assert "func.func @f" in out and "return" in out and "scf.if" not in out


def test_nesting_past_the_limit_is_a_clean_error(tmp_path, monkeypatch, capsys):
    path = tmp_path / "deep.mlir"
    path.write_text(nested_ifs(60))
    monkeypatch.setattr(opt, "MAX_NESTING", 50)
    assert opt.main([str(path)]) == 1
    err = capsys.readouterr().err
    assert "error: " in err and "nest 61 deep" in err and "limit of 50" in err


def test_nesting_counts_braces_outside_strings_and_comments():
    text = b'// {{{{\n"x" { a = "}}}{\\"{" { { } } }\n{ }\n'
    assert opt._nesting(text) == 3


@pytest.mark.parametrize("data, where", [
    (b"\xff\xfe\x00garbage", "-:1:1"),
    (b"func.func @f() {\n  \xe9\n}\n", "-:2:3"),
])
def test_bytes_that_are_not_utf8_on_stdin(data, where):
    done = adjit_opt(stdin=data)
    err = done.stderr.decode(errors="replace")
    assert done.returncode == 1
    assert f"{where}: error: unexpected character" in err
    assert "Traceback" not in err


def test_binary_file(tmp_path):
    path = tmp_path / "random.mlir"
    path.write_bytes(bytes(range(256)) * 4)
    done = adjit_opt(str(path))
    err = done.stderr.decode(errors="replace")
    assert done.returncode == 1 and "Traceback" not in err
    assert f"{path}:1:" in err and "error: unexpected character" in err


def test_non_utf8_bytes_in_a_comment_are_fine():
    done = adjit_opt(stdin=b"// caf\xe9\nfunc.func @f() {\n  return\n}\n")
    assert done.returncode == 0, done.stderr
    assert b"func.func @f()" in done.stdout


def test_bytecode_on_stdin(tmp_path):
    from adjit.dialects import make_context
    path = tmp_path / "f.mlirbc"
    with make_context():
        module = ir.Module.parse("func.func @f() {\n  return\n}\n")
        with open(path, "wb") as f:
            module.operation.write_bytecode(f)
    assert path.read_bytes().startswith(b"ML\xefR")
    done = adjit_opt(stdin=path.read_bytes())
    assert done.returncode == 0, done.stderr
    assert b"func.func @f()" in done.stdout


def test_ctrl_c_in_a_pass_callback_exits_130(tmp_path, monkeypatch, capsys):
    """A KeyboardInterrupt raised in a walk callback of a pass (as Ctrl-C would) stops the
    tool with status 130 and one line, not RuntimeError("Exception raised in callback")."""
    from adjit.passes.lower_cpu import LowerCpu
    from adjit.passes.walk import walk

    def interrupted_pass(self, module: ir.Operation) -> None:
        def visit(op):
            raise KeyboardInterrupt
        walk(module, visit)

    monkeypatch.setattr(LowerCpu, "apply", interrupted_pass)
    path = tmp_path / "f.mlir"
    path.write_text("func.func @f() {\n  return\n}\n")
    assert opt.main([str(path), "--adj-lower-cpu"]) == 130
    assert "adjit-opt: error: interrupted" in capsys.readouterr().err


def test_the_tool_still_works_on_ordinary_input(tmp_path):
    path = Path(tmp_path / "f.mlir")
    path.write_text("func.func @f(%x: f32) -> f32 {\n  return %x : f32\n}\n")
    done = adjit_opt(str(path))
    assert done.returncode == 0 and b"return %arg0 : f32" in done.stdout


def test_a_pipe_named_as_the_input_is_read_once():
    done = adjit_opt("/dev/stdin", stdin=b"func.func @f() {\n  return\n}\n")
    assert done.returncode == 0, done.stderr
    assert b"func.func @f()" in done.stdout


def test_verify_diagnostics_fails_on_a_missing_or_an_unexpected_diagnostic(tmp_path, capsys):
    path = tmp_path / "cases.mlir"
    good = ("func.func @f(%x: i32) {\n"
            "  // expected-error @+1 {{expected 'i1' but got 'i32'}}\n"
            "  \"adj.check\"(%x) {error = \"IndexError\", message = \"m\"} : (i32) -> ()\n"
            "  return\n}\n")
    path.write_text(good)
    assert opt.main([str(path), "--verify-diagnostics"]) == 0
    # The expectation on the wrong line: one not produced, one unexpected.
    path.write_text(good.replace("@+1", "@+2"))
    assert opt.main([str(path), "--verify-diagnostics"]) == 1
    err = capsys.readouterr().err
    assert f"{path}:4: error: expected error \"expected 'i1' but got 'i32'\" was not produced" \
        in err
    assert f"unexpected error: {path}:3:3: error: expected 'i1' but got 'i32'" in err
    # No diagnostic where one is expected.
    path.write_text("// expected-error @+1 {{anything}}\nfunc.func @f() {\n  return\n}\n")
    assert opt.main([str(path), "--verify-diagnostics"]) == 1
    assert "was not produced" in capsys.readouterr().err


def test_split_input_file_runs_each_part_and_keeps_the_lines(tmp_path, capsys):
    path = tmp_path / "parts.mlir"
    path.write_text("func.func @a() {\n  return\n}\n// -----\n"
                    "func.func @b() {\n  return\n}\n// -----\n\n\n"
                    "func.func @c() {\n  %i = = \"adj.index\"() : () -> index\n}\n")
    assert opt.main([str(path), "--split-input-file"]) == 1
    assert f"{path}:12:7: error:" in capsys.readouterr().err     # the whole file's line
    path.write_text("func.func @a() {\n  return\n}\n// -----\nfunc.func @b() {\n  return\n}\n")
    assert opt.main([str(path), "--split-input-file"]) == 0
    out = capsys.readouterr().out
    assert out.count("// -----") == 1 and out.index("@a") < out.index("// -----") < out.index("@b")


def test_the_gpu_lowering_as_one_pipeline_string(tmp_path, capsys):
    # pipeline.gpu_pipeline is what --adj-lower-gpu runs: the tool given the string makes the
    # same PTX, for the chip it names.
    from adjit.passes.pipeline import gpu_pipeline
    path = tmp_path / "k.mlir"
    path.write_text(KERNEL_AND_LAUNCH)
    text = gpu_pipeline("sm_80")
    assert text.startswith("builtin.module(adj-outline-kernels,nvvm-attach-target{chip=sm_80")
    assert opt.main([str(path), f"--pass-pipeline={text}", "--emit=ptx"]) == 0
    as_string = capsys.readouterr().out
    assert opt.main([str(path), "--pass-pipeline=builtin.module(adj-lower-gpu{chip=sm_80})",
                     "--emit=ptx"]) == 0
    assert capsys.readouterr().out == as_string and ".target sm_80" in as_string


KERNEL_AND_LAUNCH = """
func.func @k(%x: memref<?xf32>) attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %v = memref.load %x[%i] : memref<?xf32>
  %w = arith.addf %v, %v : f32
  memref.store %w, %x[%i] : memref<?xf32>
  return
}
func.func @main(%x: memref<?xf32>, %n: index) attributes {adj.entry} {
  "adj.launch"(%n) ({
    func.call @k(%x) : (memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @k} : (index) -> ()
  return
}
"""
