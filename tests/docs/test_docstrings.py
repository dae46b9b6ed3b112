"""The API reference's contract (docs/api/): every public name of adjit, adjit.rules,
adjit.torch, adjit.jax and adjit.mpi has a docstring with an Example section, and every
example runs as pasted.

A name's docstring is what Sphinx's autodoc shows for it: its own `__doc__` (modules,
classes, functions, the builtins' objects), or, for a value such as `adjit.f32` or
`adjit.Forward`, the `#:` comment above its assignment in the module that exports it. An
example is the literal block (after `::`) of the docstring's `Example:` section. adjit
compiles functions from their source file, so each example is written to its own file and
run with runpy.run_path, all in this one process.
"""
from __future__ import annotations

import inspect
import os
import re
import runpy
import textwrap

import pytest
from sphinx.pycode import ModuleAnalyzer

import adjit
import adjit.mpi
from adjit.lang import builtins

MODULES = {"adjit": adjit, "adjit.rules": adjit.rules, "adjit.debug": adjit.debug,
           "adjit.torch": adjit.torch,
           "adjit.jax": adjit.jax, "adjit.mpi": adjit.mpi}


def public_names(module) -> list[str]:
    """What the module exports: its __all__, else what it defines without an underscore
    (not what it imports)."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [n for n, v in vars(module).items() if not n.startswith("_")
            and getattr(v, "__module__", module.__name__) == module.__name__
            and not inspect.ismodule(v)]


def attribute_docs(module) -> dict[str, str]:
    """The `#:` comments of a module's assignments, as autodoc reads them."""
    docs = ModuleAnalyzer.for_module(module.__name__).find_attr_docs()
    return {name: "\n".join(lines) for (scope, name), lines in docs.items() if scope == ""}


def docstring(module, name: str) -> str | None:
    obj = getattr(module, name)
    if name in builtins.namespace and module is adjit:
        return vars(obj).get("__doc__")     # each Builtin object's own
    if inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isroutine(obj):
        return obj.__doc__
    own = vars(obj).get("__doc__") if hasattr(obj, "__dict__") else None
    return own or attribute_docs(module).get(name)   # a value: its `#:` comment


def examples(doc: str) -> list[str]:
    """The code of the literal blocks in the docstring's Example(s) section."""
    lines = inspect.cleandoc(doc).splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() in ("Example:", "Examples:")]
    if not starts:
        return []
    section_indent = len(lines[starts[0]]) - len(lines[starts[0]].lstrip())
    blocks, i = [], starts[0] + 1
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        if line.strip() and indent <= section_indent:
            break    # the next section
        if line.rstrip().endswith("::"):
            body, i = [], i + 1
            while i < len(lines) and (not lines[i].strip()
                                      or len(lines[i]) - len(lines[i].lstrip()) > indent):
                body.append(lines[i])
                i += 1
            blocks.append(textwrap.dedent("\n".join(body)).strip() + "\n")
            continue
        i += 1
    return blocks


def documented() -> list[tuple[str, str]]:
    return [(m, n) for m, module in MODULES.items() for n in public_names(module)]


def all_examples() -> list[tuple[str, str]]:
    """(where, code) of every example: the public names', and the builtins' group example
    (in adjit/lang/builtins.py's docstring, which the reference's table comes from)."""
    out = []
    for m, n in documented():
        if m == "adjit" and n in builtins.namespace:
            continue        # documented as a group, whose examples follow
        for k, code in enumerate(examples(docstring(MODULES[m], n) or "")):
            out.append((f"{m}.{n}[{k}]", code))
    for k, code in enumerate(examples(builtins.__doc__)):
        out.append((f"adjit builtins[{k}]", code))
    # A group's names share one docstring (vec2 ... quatd): its example runs once.
    return list({code: (where, code) for where, code in reversed(out)}.values())[::-1]


def test_every_public_name_has_a_docstring_with_an_example():
    missing = [f"{m}.{n}" for m, n in documented() if not docstring(MODULES[m], n)]
    assert not missing, f"no docstring: {missing}"
    no_example = [f"{m}.{n}" for m, n in documented()
                  if not (m == "adjit" and n in builtins.namespace)
                  and not examples(docstring(MODULES[m], n))]
    assert not no_example, f"no Example section with a `::` code block: {no_example}"
    assert examples(builtins.__doc__), "the builtins' group docstring has no example"


def test_the_builtins_reference_table_lists_every_builtin():
    table = builtins.reference_table()
    for name, obj in builtins.namespace.items():
        assert f"``adjit.{name}``" in table and vars(obj)["__doc__"].splitlines()[0] in table


def test_the_extractor_finds_the_examples_of_a_section_and_stops_at_the_next():
    doc = """Summary.

    Example:
        Some text::

            a = 1
            b = a + 1

        More::

            c = 3

    Note:
        Not code::

            not_an_example = 1
    """
    assert examples(doc) == ["a = 1\nb = a + 1\n", "c = 3\n"]
    assert examples("No example here.") == []


@pytest.mark.parametrize("code", [pytest.param(code, id=where) for where, code in all_examples()])
def test_docstring_example_runs_as_pasted(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "example.py"
    path.write_text(code)
    runpy.run_path(os.fspath(path), run_name="__main__")


def test_the_reference_pages_list_every_public_name():
    """docs/api/: adjit's page names each of its public names (an autodoc directive, or a
    py:data line of a group); the other modules' pages document their whole __all__
    (automodule), the builtins' table is the builtins module's docstring."""
    pages = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "api")
    text = open(os.path.join(pages, "adjit.md")).read()
    unlisted = [n for n in adjit.__all__
                if n not in builtins.namespace and n not in ("rules", "debug")
                and not re.search(rf"(:: adjit\.{n}\b|^ *(\.\. py:data:: )?{n}$)", text, re.M)]
    assert not unlisted, f"docs/api/adjit.md does not list {unlisted}"
    assert ".. automodule:: adjit.lang.builtins" in text
    for m in ("rules", "debug", "torch", "jax", "mpi"):
        page = open(os.path.join(pages, f"{m}.md")).read()
        assert f".. automodule:: adjit.{m}\n" in page and hasattr(MODULES[f"adjit.{m}"], "__all__")
