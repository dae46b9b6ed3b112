"""Errors raised while compiling user code, pointing at the user's source line."""
from __future__ import annotations


class CompilationError(Exception):
    """Code adjit cannot compile: names the problem, the file, line and column, and shows
    the source line with a caret, as Triton does. `.lineno`/`.filename` are kept for tools."""

    def __init__(self, message: str, filename: str = "<unknown>", lineno: int = 0,
                 col: int = 0, source_line: str | None = None):
        self.message, self.filename, self.lineno, self.col = message, filename, lineno, col
        text = f"{filename}:{lineno}:{col + 1}: {message}"
        if source_line:
            text += f"\n    {source_line.rstrip()}\n    {' ' * col}^"
        super().__init__(text)

    @classmethod
    def at_location(cls, message: str, location: str) -> "CompilationError":
        """An error at an MLIR location (`loc("file.py":12:5)`, as the frontend gives every
        op), with the source line read back."""
        import linecache
        import re
        m = re.search(r'"([^"]+)":(\d+):(\d+)', location)
        if m is None:
            return cls(message)
        filename, line, col = m.group(1), int(m.group(2)), int(m.group(3)) - 1
        return cls(message, filename, line, col, linecache.getline(filename, line) or None)


class UserError(Exception):
    """Raised by code generation helpers that do not know the AST node; the visitor turns it
    into a CompilationError at the node being compiled."""
