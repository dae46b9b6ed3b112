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


class UserError(Exception):
    """Raised by code generation helpers that do not know the AST node; the visitor turns it
    into a CompilationError at the node being compiled."""
