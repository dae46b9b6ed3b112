"""Source positions in MLIR locations' text, and in the messages of runtime checks.

MLIR-free (as all of core/): the passes give `str(op.location)`, the frontend an error's
location text. The frontend locates every op at the user's `file:line:col` (a file location);
inlining wraps it in a call site (`callsite(callee at caller)`), and a name or fused location
may hold it too. The position that matters is the first file location in the text: the
innermost user line, a call site's callee.
"""
from __future__ import annotations

import re

# A quoted string of a location's text, then `:line:col` when it is a file location's file.
# Matched from left to right, so that a closing quote never starts a string.
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"(?::(\d+):(\d+))?')
# What MLIR's printer escapes in a string: a backslash (doubled) and any byte not printable
# ASCII, `"` included, as two hex digits (`\C3\A9` for é).
_ESCAPE = re.compile(rb"\\(\\|[0-9A-Fa-f]{2})")


def file_position(location: str) -> tuple[str, int, int] | None:
    """(file, line, column from 1) of the first file location in an MLIR location's text
    (`loc("f.py":12:5)`, `loc(callsite("f.py":12:5 at "g.py":3:1))`...), None if it has none
    (an unknown location, a name alone)."""
    for m in _QUOTED.finditer(location):
        if m.group(2) is not None:
            return _unescape(m.group(1)), int(m.group(2)), int(m.group(3))
    return None


def _unescape(text: str) -> str:
    raw = _ESCAPE.sub(lambda m: b"\\" if m.group(1) == b"\\" else bytes([int(m.group(1), 16)]),
                      text.encode())
    return raw.decode(errors="replace")


# A runtime check's message (an adj.check's, lowered by passes/lower_cpu.py) ends with the user
# line it checks, which runtime/source_index.py moves when the same source is found elsewhere.
_AT_SUFFIX = re.compile(r"(.*) \(at (.+):(\d+)\)", re.DOTALL)


def with_line(message: str, filename: str, line: int) -> str:
    """`message (at file:line)`: a runtime check's message and the user line it checks."""
    return f"{message} (at {filename}:{line})"


def split_line(message: str) -> tuple[str, str, int] | None:
    """(message, file, line) of a message `with_line` made, None for any other."""
    m = _AT_SUFFIX.fullmatch(message)
    return None if m is None else (m.group(1), m.group(2), int(m.group(3)))
