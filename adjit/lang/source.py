"""A decorated function's Python source: parsed once when it is decorated, and digested for
keys of the disk cache.

Kept apart from the code generator so that decorating, and finding compiled code in the disk
cache, need no MLIR (which is imported only to compile).
"""
from __future__ import annotations

import ast
import builtins
import enum
import functools
import hashlib
import importlib.util
import inspect
import linecache
import os
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from ..core.errors import CompilationError
from .structs import StructType, layout_text


@dataclass
class SourceInfo:
    tree: ast.FunctionDef
    filename: str
    first_line: int
    lines: list[str]
    # The indentation textwrap.dedent removed before parsing (a method or a function defined
    # inside another): the tree's columns are counted from the dedented text, the user's
    # file from the real one.
    indent: int = 0

    def column(self, node: ast.AST | None) -> int:
        """The 0-based column of `node` in the user's file."""
        return getattr(node, "col_offset", 0) + self.indent

    def error(self, node: ast.AST | None, message: str) -> CompilationError:
        """A CompilationError at `node` of the tree (the `def` line if None), with its
        source line."""
        node = node or self.tree
        rel = getattr(node, "lineno", 1)
        line = self.lines[rel - 1] if 0 < rel <= len(self.lines) else None
        return CompilationError(message, self.filename, self.first_line + rel - 1,
                                self.column(node), line)


def parse_source(pyfn: Callable) -> SourceInfo:
    """The parsed `def` of `pyfn`; a CompilationError, at the function where Python knows
    where it was defined, if adjit cannot compile it from its source."""
    name = getattr(pyfn, "__qualname__", None) or repr(pyfn)
    code = getattr(pyfn, "__code__", None)
    if not isinstance(code, types.CodeType):
        raise CompilationError(f"cannot compile {name}: adjit compiles Python functions "
                               "(written with def) from their source, and this is a "
                               f"{type(pyfn).__name__}")
    where = (code.co_filename, code.co_firstlineno)
    try:
        lines, first = inspect.getsourcelines(pyfn)
    except (OSError, TypeError) as e:
        raise _no_source(name, *where, e) from None
    if pyfn.__name__ == "<lambda>":
        return _parse_lambda(pyfn, name, where)
    try:
        tree = ast.parse(textwrap.dedent("".join(lines))).body[0]
    except (SyntaxError, IndexError):
        tree = None
    if not isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise CompilationError(f"cannot compile {name}: adjit compiles functions written "
                               "with def (or lambda), and the source Python gives for it is "
                               "not a def statement", *where,
                               source_line=linecache.getline(*where) or None)
    indent = len(lines[0]) - len(lines[0].lstrip(" \t"))
    info = SourceInfo(tree, inspect.getsourcefile(pyfn) or code.co_filename, first,
                      [l.rstrip("\n") for l in lines], indent)
    if isinstance(tree, ast.AsyncFunctionDef):
        raise info.error(tree, f"{name} is an async def: adjit compiles plain def functions "
                               "(coroutines have no meaning in compiled code)")
    return info


def _parse_lambda(pyfn: Callable, name: str, where: tuple[str, int]) -> SourceInfo:
    """A lambda's SourceInfo: its expression as the body of an equivalent def
    (`def <lambda>(x): return x * x`). Python gives a lambda's source only as the lines of
    the statement around it, which need not parse alone (a call's last arguments), so the
    lambda is found in its whole file: on its first line, the lambda whose body spans every
    position its code has (two lambdas on one line are told apart by them). The tree keeps
    the file's lines and columns (`first_line` its first line, no indent)."""
    code = pyfn.__code__
    filename = inspect.getsourcefile(pyfn) or code.co_filename
    text = "".join(linecache.getlines(filename))
    try:
        module = ast.parse(text)
    except SyntaxError:
        module = None
    spans = [p for p in code.co_positions() if None not in p and p[0] >= code.co_firstlineno
             and p[2:] != (0, 0)]
    params = list(code.co_varnames[:code.co_argcount])

    def encloses(node: ast.expr) -> bool:
        lo, hi = (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)
        return all(lo <= (p[0], p[2]) and (p[1], p[3]) <= hi for p in spans)

    found = [n for n in (ast.walk(module) if module is not None else ())
             if isinstance(n, ast.Lambda) and n.lineno == code.co_firstlineno
             and [a.arg for a in n.args.posonlyargs + n.args.args] == params
             and encloses(n.body)]
    if len(found) != 1:
        raise CompilationError(f"cannot compile {name}: its source in {filename} could not "
                               "be told apart from the text around it; write it as a def",
                               *where, source_line=linecache.getline(*where) or None)
    lam = found[0]
    tree = ast.FunctionDef(name="<lambda>", args=lam.args,
                           body=[ast.copy_location(ast.Return(value=lam.body), lam.body)],
                           decorator_list=[], returns=None, type_comment=None)
    ast.copy_location(tree, lam)
    tree.end_lineno, tree.end_col_offset = lam.end_lineno, lam.end_col_offset
    first = lam.lineno
    ast.increment_lineno(tree, 1 - first)     # line 1: the lambda's first line, as for a def
    lines = text.splitlines()[first - 1:lam.end_lineno]
    return SourceInfo(tree, filename, first, lines, 0)


def _no_source(name: str, filename: str, line: int, e: Exception) -> CompilationError:
    """Why the source of function `name`, defined at `filename`:`line`, cannot be read."""
    if filename.startswith("<") and filename.endswith(">"):
        # (Python 3.13's prompt and IPython keep their inputs in linecache: those read)
        why = (f"{name} was defined in {filename} (by exec() or compile(), `python -c`, or "
               "at the interactive prompt of Python 3.12 or older), and Python keeps no "
               "source text for such functions; adjit compiles a function from its source: "
               "define it in a .py file (or a notebook cell) and import it")
    else:
        why = (f"its file {filename} cannot be read ({e}); adjit compiles a function from "
               "its source: keep the .py file next to its compiled form")
    return CompilationError(f"cannot read the source of {name}: {why}", filename, line)


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


def code_sites(obj: Any) -> list[tuple[str, int, int]]:
    """Where the sources `fingerprint(obj)` digests live: (file, first line, last line) of
    each, in the order they are digested. Two declarations with one fingerprint have the
    same sources in the same order, wherever they are: the disk cache records these with a
    compiled product, so that a product compiled from one file names the lines of another
    (runtime/source_index.relocated) when that other file's declaration loads it."""
    sites = _Sites()
    _feed(obj, sites, set())
    return sites.sites


class _Sites:
    """A digest for `_feed` that keeps, instead of a hash, where each source it reads is."""

    def __init__(self) -> None:
        self.sites: list[tuple[str, int, int]] = []

    def update(self, data: bytes) -> None:
        pass


def _feed(obj: Any, digest: Any, seen: set[int]) -> None:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    # (an @adjit.struct parameter's layout: code compiled for it reads fields by position)
    for st in getattr(obj, "struct_layout", None) or ():
        if st is not None:
            from .structs import layout_text
            digest.update(b"\0" + layout_text(st).encode())
    # (a variant's tree structures, pytrees.py: its code reads the leaves by position)
    for tree in getattr(obj, "tree_layout", None) or ():
        if tree is not None:
            from .pytrees import text
            digest.update(b"\0tree " + text(tree).encode())
    sources = [(obj.pyfn, obj.source), *getattr(obj, "rules", {}).values()]
    for pyfn, source in sources:
        if isinstance(digest, _Sites):
            digest.sites.append((source.filename, source.first_line,
                                 source.first_line + len(source.lines) - 1))
        digest.update(b"\0" + "\n".join(source.lines).encode())
        if pyfn.__name__ == "<lambda>":   # (two on one line share its text: not their trees)
            digest.update(ast.dump(source.tree).encode())
        for name, value in _referenced(pyfn, source.tree):
            digest.update(f"\0{name}=".encode())
            _feed_value(value, digest, seen, {}, 0)


# Deeper than this, a global is not something the code generator could reach by indexing
# and attribute chains of a few levels: it is summarised by its type.
_MAX_DEPTH = 32


def _feed_value(value: Any, digest: Any, seen: set[int], fed: dict[int, int],
                depth: int) -> None:
    """Feeds what the code generator can compile in from `value`: every constant it holds,
    through tuples, lists, dicts and attributes (`COEFFS[1]`, `cfg.coeffs[0]`, `cfg.N`), and
    the source of the adjit functions among them. Only text that is the same in every
    process goes in (no default `repr`, which shows an address; no set order, which follows
    the string hash seed), or the GPU disk cache would miss in each new process. `fed`
    numbers the containers already fed, which a second path to them (or a cycle) names by
    that number, so that each is read once."""
    def put(text: str) -> None:
        digest.update(text.encode() + b"\1")

    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        put(f"{type(value).__name__}:{value!r}")
    elif isinstance(value, np.generic):
        put(f"np:{value.dtype.str}:{value.item()!r}")
    elif isinstance(value, np.dtype):
        put(f"dtype:{value.str}")
    elif isinstance(value, np.ndarray):        # refused by the code generator
        put(f"ndarray:{value.dtype.str}:{value.shape}")
    elif isinstance(_attr(value, "source"), SourceInfo):
        put(f"adjit:{getattr(value, 'kind', '')}:{value.__name__}")
        _feed(value, digest, seen)
    elif isinstance(value, types.ModuleType):
        put(f"module:{value.__name__}")       # the attributes read are fed by name
    elif isinstance(value, type) and isinstance(getattr(value, "__adjit_struct__", None),
                                                StructType):
        # (a struct class the code constructs: its fields and defaults are compiled in)
        put(layout_text(value.__adjit_struct__))
    elif isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
        put(f"{type(value).__name__}:{getattr(value, '__module__', None)}."
            f"{getattr(value, '__qualname__', None)}")
    elif id(value) in fed:
        put(f"fed:{fed[id(value)]}")
    elif depth >= _MAX_DEPTH:
        put(f"...:{_type_name(value)}")
    else:
        fed[id(value)] = len(fed)
        name = _attr(value, "__name__")                  # np.sin or np.cos (ufuncs)
        put(f"{_type_name(value)}:{name if isinstance(name, str) else ''}[")
        for item in _parts(value):
            _feed_value(item, digest, seen, fed, depth + 1)
        put("]")


def _type_name(value: Any) -> str:
    t = type(value)
    return f"{t.__module__}.{t.__qualname__}"


def _parts(value: Any) -> list:
    """The values a container or object holds, in an order that is the same in every
    process: items of sequences, keys and values of mappings, attributes (by name) of
    other objects."""
    if isinstance(value, enum.Enum):
        return [value.name, value.value]
    if isinstance(value, (tuple, list)):
        return list(value)
    if isinstance(value, dict):
        return [part for k, v in value.items() for part in (k, v)]
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=_sort_key)
    fields = dict(_attr(value, "__dict__") or {})
    slots = _attr(type(value), "__slots__") or ()
    for name in [slots] if isinstance(slots, str) else slots:
        if isinstance(name, str) and name not in fields:
            fields[name] = _attr(value, name)
    return [part for k in sorted(fields) for part in (k, fields[k])]


def _attr(value: Any, name: str) -> Any:
    """getattr(value, name, None), None too where the object's own attribute code fails."""
    try:
        return getattr(value, name, None)
    except Exception:
        return None


def _sort_key(value: Any) -> str:
    digest = hashlib.sha256()
    _feed_value(value, digest, set(), {}, 0)
    return digest.hexdigest()


class Name(enum.Enum):
    """Where a free name of a compiled function was found (`resolve_name`)."""
    CLOSURE = "closure"
    GLOBAL = "global"
    BUILTIN = "builtin"
    UNASSIGNED = "unassigned"     # a closure variable not assigned yet
    MISSING = "missing"


def resolve_name(pyfn: Callable, name: str) -> tuple[Name, Any]:
    """(where, value) of a name the body of `pyfn` reads and does not bind: its closure,
    then its globals, then Python's builtins. The one rule both the code generator and the
    cache key (`fingerprint`) use, so that what is compiled is what is digested."""
    closure = pyfn.__code__.co_freevars
    if name in closure:
        cell = (pyfn.__closure__ or ())[closure.index(name)]
        try:
            return Name.CLOSURE, cell.cell_contents
        except ValueError:
            return Name.UNASSIGNED, None
    if name in pyfn.__globals__:
        return Name.GLOBAL, pyfn.__globals__[name]
    if hasattr(builtins, name):
        return Name.BUILTIN, getattr(builtins, name)
    return Name.MISSING, None


def _referenced(pyfn: Callable, tree: ast.AST) -> Iterator[tuple[str, Any]]:
    """(dotted name, value) of each name and attribute chain (`N`, `cfg.N`) that `tree`
    reads from its closure or globals (builtins are part of Python, not of the key)."""
    for node in ast.walk(tree):
        chain = []
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            continue
        where, value = resolve_name(pyfn, node.id)
        if where not in (Name.CLOSURE, Name.GLOBAL):
            continue
        for attr in reversed(chain):
            value = getattr(value, attr, None)
        yield ".".join([node.id, *reversed(chain)]), value


# Every package whose code decides what a compiled kernel is.
COMPILER_PACKAGES = ("adjit.lang", "adjit.compiler", "adjit.api", "adjit.dialects", "adjit.passes")


@functools.cache
def compiler_fingerprint() -> str:
    """A digest of adjit's compiler (the frontend, dialect and passes sources): a cached
    kernel is reused only by the compiler version that made it.

    Reading and hashing the ~100 files took 3.3 ms of every process, half of a cache hit's
    first call; so the digest is kept in the cache folder (`compiler/`) under a digest of the
    files' paths and stat signatures (size, modification and change times in ns, inode),
    which costs 0.5 ms to make: an edited, replaced or added file changes the signature, and
    the digest is made again from the files' bytes."""
    files = [(package, path) for package in COMPILER_PACKAGES
             for path in _compiler_files(package)]
    signature = hashlib.sha256()
    for package, (relative, path) in files:
        st = os.stat(path)
        signature.update(f"\0{package}\0{relative}\0{st.st_size}\0{st.st_mtime_ns}\0"
                         f"{st.st_ctime_ns}\0{st.st_ino}".encode())
    kept = _kept_fingerprint(signature.hexdigest()[:40])
    found = kept.read() if kept is not None else None
    if found is not None:
        return found
    digest = hashlib.sha256()
    for _, (relative, path) in files:
        digest.update(f"\0{relative}\0".encode())
        with open(path, "rb") as f:
            digest.update(f.read())
    value = digest.hexdigest()
    if kept is not None:
        kept.write(value)
    return value


def _compiler_files(package: str) -> list[tuple[str, str]]:
    """(path relative to the package's folder, path) of its .py and .mlir files, in the order
    of sorted(root.rglob("*")), which the digest has always followed (os.walk without
    __pycache__: rglob took 1 ms)."""
    root = os.path.dirname(importlib.util.find_spec(package).origin)
    found = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = [d for d in subfolders if d != "__pycache__"]
        for name in names:
            if name.endswith((".py", ".mlir")):
                relative = os.path.relpath(os.path.join(folder, name), root)
                found.append((tuple(relative.split(os.sep)), relative))
    found.sort()
    return [(relative, os.path.join(root, relative)) for _, relative in found]


@dataclass(frozen=True)
class _KeptFingerprint:
    """The compiler's digest kept for one stat signature of its files: a file holding the
    signature and the digest (a damaged one reads as absent)."""
    path: Path
    signature: str

    def read(self) -> str | None:
        from ..runtime.files import read_file
        try:     # (refused when the folder or the file is not trusted: runtime/trust.py)
            text = read_file(self.path).decode()
        except (OSError, ValueError):     # (UnicodeDecodeError, a setting not valid)
            return None
        signature, _, value = text.partition(" ")
        ok = (signature == self.signature and len(value) == 64
              and all(c in "0123456789abcdef" for c in value))
        return value if ok else None

    def write(self, value: str) -> None:
        from ..runtime.files import cache_settings, write_atomic
        try:      # (a new file renamed into place: readers see all of it or none)
            cache_settings().make(self.path.parent)
            write_atomic(self.path, f"{self.signature} {value}")
        except (OSError, ValueError):  # a folder that cannot be written: made again next time
            pass


def _kept_fingerprint(signature: str) -> _KeptFingerprint | None:
    from ..runtime.files import cache_settings
    try:
        folder = cache_settings().folder("compiler")
    except ValueError:     # a setting not valid: refused by name where the cache is used
        return None
    return None if folder is None else _KeptFingerprint(folder / signature, signature)
