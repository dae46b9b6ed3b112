"""A decorated function's Python source: parsed once when it is decorated, and digested for
keys of the disk cache.

Kept apart from the code generator so that decorating, and finding compiled code in the disk
cache, need no MLIR (which is imported only to compile).
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from .errors import CompilationError


@dataclass
class SourceInfo:
    tree: ast.FunctionDef
    filename: str
    first_line: int
    lines: list[str]


def parse_source(pyfn: Callable) -> SourceInfo:
    try:
        lines, first = inspect.getsourcelines(pyfn)
    except (OSError, TypeError) as e:
        raise CompilationError(f"cannot read the source of {pyfn.__qualname__}: {e}") from None
    src = textwrap.dedent("".join(lines))
    tree = ast.parse(src).body[0]
    if not isinstance(tree, ast.FunctionDef):
        raise CompilationError(f"{pyfn.__qualname__} is not a plain function definition")
    return SourceInfo(tree, inspect.getsourcefile(pyfn) or "<unknown>", first,
                      [l.rstrip("\n") for l in lines])


def fingerprint(obj: Any) -> str:
    """A digest of what compiling `obj` (an adjit Function or Kernel) depends on, as far as
    Python sees it without compiling: its source text and, transitively, that of the adjit
    functions it names (and of their custom rules), and the values of the global constants
    it reads, which compile in as constants. Editing any of them changes the digest, so a
    disk cache keyed on it never serves code compiled from an older version. Where the code
    lives (file, module name: `__main__` or not) does not change what it compiles to, and is
    left out, so that the digest is the same on a machine with another checkout path."""
    digest = hashlib.sha256()
    _feed(obj, digest, set())
    return digest.hexdigest()


def _feed(obj: Any, digest: Any, seen: set[int]) -> None:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    sources = [(obj.pyfn, obj.source), *getattr(obj, "rules", {}).values()]
    for pyfn, source in sources:
        digest.update(b"\0" + "\n".join(source.lines).encode())
        for name, value in _referenced(pyfn, source.tree):
            if isinstance(value, (bool, int, float, np.generic)):
                digest.update(f"\0{name}={type(value).__name__}:{value!r}".encode())
            elif isinstance(getattr(value, "source", None), SourceInfo):
                _feed(value, digest, seen)


def _referenced(pyfn: Callable, tree: ast.AST) -> Iterator[tuple[str, Any]]:
    """(dotted name, value) of each name and attribute chain (`N`, `cfg.N`) that `tree`
    reads, resolved as the code generator resolves them: closure, then globals."""
    closure = dict(zip(pyfn.__code__.co_freevars, pyfn.__closure__ or ()))
    for node in ast.walk(tree):
        chain = []
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            continue
        if node.id in closure:
            try:
                value = closure[node.id].cell_contents
            except ValueError:          # not assigned yet
                continue
        elif node.id in pyfn.__globals__:
            value = pyfn.__globals__[node.id]
        else:
            continue
        for attr in reversed(chain):
            value = getattr(value, attr, None)
        yield ".".join([node.id, *reversed(chain)]), value
