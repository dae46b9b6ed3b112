"""The list of NumPy functions `@jit` compiles, in docs/tutorials/numpy-in-jit.md, is the
registry's (adjit/compiler/callables.py): a function registered or dropped without the page
following fails here. `python tests/docs/test_numpy_list.py` rewrites the list."""
from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import numpy as np

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tutorials" / "numpy-in-jit.md"
START, END = "<!-- numpy-list:start -->\n", "<!-- numpy-list:end -->"


def registered() -> list[str]:
    """NumPy's public functions with a compile handler in the registry."""
    import adjit.compiler.codegen  # noqa: F401  (its imports fill the registry)
    from adjit.compiler import callables
    return sorted([n for n in dir(np)
                   if not n.startswith("_") and callables.lookup(getattr(np, n)) is not None]
                  + [f"linalg.{n}" for n in dir(np.linalg)
                     if not n.startswith("_") and callables.lookup(getattr(np.linalg, n))
                     is not None])


def listed(text: str) -> list[str]:
    body = text[text.index(START) + len(START):text.index(END)]
    return re.findall(r"`([a-z0-9_.]+)`", body)


def rendered(names: list[str]) -> str:
    return textwrap.fill(", ".join(f"`{n}`" for n in names), width=92) + "\n"


def test_the_page_lists_what_the_registry_compiles():
    names, page = registered(), listed(PAGE.read_text())
    assert page == sorted(page), "the page's list is not sorted"
    missing, extra = sorted(set(names) - set(page)), sorted(set(page) - set(names))
    assert not missing and not extra, (
        f"docs/tutorials/numpy-in-jit.md: compiled but not listed {missing}, listed but not "
        f"compiled {extra}; run `python {Path(__file__).relative_to(PAGE.parents[2])}`")


def test_the_list_is_not_empty():
    # the registry is filled by imports: an empty list would mean they no longer run
    assert {"sin", "sum", "matmul", "where", "reshape"} <= set(registered())


if __name__ == "__main__":
    text = PAGE.read_text()
    head, rest = text.split(START)
    PAGE.write_text(head + START + rendered(registered()) + END + rest.split(END, 1)[1])
    sys.exit(0)
