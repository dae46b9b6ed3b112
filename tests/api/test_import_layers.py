"""The layers of adjit, read from its import graph (every import statement of every module,
function-local and TYPE_CHECKING ones included, relative ones resolved): contracts at the
bottom (core/), then the dialect and the runtime, the passes, the language (lang/), the
compiler (compiler/) and the API (api/); MPI's operations and the interop with PyTorch and
JAX on top.

- core/ imports no other part of adjit; runtime/ only core/ (what a GPU machine without
  MLIR runs); dialects/ only core/; passes/ only core/ and dialects/;
- lang/ (what users write against) only core/ and runtime/: no compiler, no API;
- compiler/ only those and lang/: no API (the API registers its objects with the
  compiler's registry of callables, a downward import);
- api/ anything below it; mpi/ anything below the API (it needs none of it); interop/
  anything below it, the API included;
- MLIR is imported (anywhere in a module: function-local and TYPE_CHECKING imports count)
  only by dialects/, passes/, compiler/ and mpi/ (whose intrinsics compile to calls of its
  native runtime: their handlers are its own); so not by core/, whose contracts must not
  need MLIR to be read, nor runtime/, lang/, api/;
- No import cycle among the modules (TYPE_CHECKING imports count: a dependency for the
  annotations is a dependency of the design; an interface goes below both sides instead).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import adjit

PACKAGE = Path(adjit.__file__).parent

# What each layer may import from adjit (its own modules always): only layers below it.
_BELOW_API = {"core", "runtime", "dialects", "passes", "lang", "compiler"}
ALLOWED = {
    "core": set(),
    "runtime": {"core"},
    "dialects": {"core"},
    "passes": {"core", "dialects"},
    "lang": {"core", "runtime"},
    "compiler": {"core", "runtime", "dialects", "passes", "lang"},
    "api": _BELOW_API,
    "mpi": _BELOW_API,
    "interop": _BELOW_API | {"api"},
}
# The layers that may import MLIR (the others must not, anywhere: `import adjit` and the
# language need none, and a GPU machine without MLIR runs the runtime).
WITH_MLIR = {"dialects", "passes", "compiler", "mpi"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}


def _imports(name: str, path: Path, modules: dict[str, Path]) -> tuple[set[str], set[str]]:
    """(the adjit modules `name` imports anywhere in its body, the external top-level
    packages it imports anywhere in its body)."""
    tree = ast.parse(path.read_text())
    package = name.split(".")[:-1]          # a module's package; __init__'s is itself
    found, external = set(), set()

    def resolve(target: str) -> None:
        parts = target.split(".")
        for k in range(len(parts), 0, -1):   # the longest prefix that is a module
            candidate = ".".join(parts[:k])
            for known in (candidate, f"{candidate}.__init__"):
                if known in modules and known != name:
                    found.add(known)
                    return

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.startswith("adjit."):
                target = node.module[len("adjit."):]
            elif node.module == "adjit":
                target = ""
            else:
                if node.module:
                    external.add(node.module.split(".")[0])
                continue
            for alias in node.names:             # `from . import x` names a module
                resolve(f"{target}.{alias.name}" if target else alias.name)
            if target:
                resolve(target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("adjit."):
                    resolve(alias.name[len("adjit."):])
                else:
                    external.add(alias.name.split(".")[0])
    return found, external


@pytest.fixture(scope="module")
def graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    modules = _modules()
    edges, external = {}, {}
    for name, path in modules.items():
        edges[name], external[name] = _imports(name, path, modules)
    return edges, external


def _layer(name: str) -> str:
    """A module's layer: its folder; adjit/__init__.py (the public face, which may import
    any layer) is "adjit"."""
    return name.split(".")[0] if "." in name else "adjit"


def test_every_folder_has_a_layer():
    # (a new folder gets its place in ALLOWED, or the test below would not check it)
    assert {_layer(m) for m in _modules()} - {"adjit"} == set(ALLOWED)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_each_layer_imports_only_those_below(graph, layer):
    edges, external = graph
    wrong = sorted((a, b) for a, targets in edges.items() if _layer(a) == layer
                   for b in targets if _layer(b) != layer and _layer(b) not in ALLOWED[layer])
    assert not wrong, f"{layer}/ imports above itself: {wrong}"
    if layer not in WITH_MLIR:
        with_mlir = sorted(a for a, pkgs in external.items() if _layer(a) == layer
                           and "mlir" in pkgs)
        assert not with_mlir, f"{layer}/ imports MLIR: {with_mlir}"


def _cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle(graph):
    edges, _ = graph
    assert _cycles(edges) == [], "import cycles: " + "; ".join(
        " <-> ".join(sorted(c)) for c in _cycles(edges))


def test_the_cycle_finder_finds_cycles():
    # (so that the test above cannot pass by finding nothing)
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def test_the_graph_sees_imports():
    # The parser finds what it must: a relative import, a function-local one, `from . import`.
    modules = _modules()
    found, external = _imports("runtime.kernel_cache", modules["runtime.kernel_cache"], modules)
    assert {"core.kernel", "runtime.files"} <= found
    found, _ = _imports("api.guard", modules["api.guard"], modules)
    assert "core.deep_stack" in found                    # imported inside a function
    assert "numpy" in _imports("runtime.memory", modules["runtime.memory"], modules)[1]
    # an external package imported only inside functions (as a layer that must not import
    # MLIR could)
    assert "mlir" in _imports("mpi._intrinsics", modules["mpi._intrinsics"], modules)[1]


def test_the_graph_sees_type_checking_and_local_imports(tmp_path):
    # An upward import only for annotations, or only inside a function, is an edge (and a
    # layer's MLIR imported inside a function is its MLIR).
    path = tmp_path / "declarations.py"
    path.write_text("from typing import TYPE_CHECKING\n"
                    "if TYPE_CHECKING:\n"
                    "    from ..compiler.codegen import CodeGenerator\n"
                    "def compile_it():\n"
                    "    from mlir import ir\n"
                    "    from ..api import service\n")
    modules = {"lang.declarations": path, "compiler.codegen": path, "api.service": path}
    found, external = _imports("lang.declarations", path, modules)
    assert found == {"compiler.codegen", "api.service"}
    assert "mlir" in external
