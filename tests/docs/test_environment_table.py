"""The list of ADJIT_* environment variables in docs/tutorials/errors.md is the table of
adjit/core/environment.py, rendered: a variable added, dropped or changed without the page
following fails here (`python tests/docs/test_environment_table.py` rewrites the list). And
the table is complete: every ADJIT_* name the docs or adjit's source mention is in it (or is
one of the test suite's own), and no module but core/environment.py reads one itself."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from adjit.core.environment import TEST_SUITE_VARIABLES, VARIABLES

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorials" / "errors.md"
START, END = "<!-- environment-table:start -->\n", "<!-- environment-table:end -->"
# An ADJIT_* name (not a longer identifier ending in one, such as _ADJIT_FOLDERS).
NAME = re.compile(r"(?<![A-Za-z0-9_])ADJIT_[A-Z0-9_]*[A-Z0-9]")
# A read of the environment by name, in Python (os.environ.get/[...]/getenv) or C++ (getenv);
# not an assignment or a `del` (a docstring's example setting one).
DIRECT_READ = re.compile(r"""(environ\.get\(|getenv\()\s*["']ADJIT_"""
                         r"""|(?<!del os\.)environ\[\s*["']ADJIT_\w+["']\](?!\s*=[^=])""")
# Names the docs give as a typo's example (the unknown-name warning's).
TYPOS = {"ADJIT_NUM_THREAD"}
# dispatch.cpp compares ADJIT_DEBUG's text with its specialisation's at every call, and its
# debug_enabled and interpret_enabled say whether ADJIT_DEBUG and ADJIT_INTERPRET are set,
# and nothing else (core/environment.py's docstring): the Python path checks the value.
NATIVE_READERS = {"adjit/runtime/native/dispatch.cpp": {"ADJIT_DEBUG", "ADJIT_INTERPRET"}}


def _title(page: Path) -> str:
    return page.read_text().split("\n", 1)[0].lstrip("# ").strip()


def rendered() -> str:
    rows = ["| variable | default | accepts | what | see |", "|---|---|---|---|---|"]
    for v in VARIABLES.values():
        target = ROOT / "docs" / v.page
        see = ("above" if target == PAGE
               else f"[{_title(target)}]({os.path.relpath(target, PAGE.parent)})")
        rows.append(f"| `{v.name}` | {v.default_text} | {v.accepted} | {v.meaning} | {see} |")
    return "\n".join(rows) + "\n"


def _listed(text: str) -> str:
    return text[text.index(START) + len(START):text.index(END)]


def test_the_page_lists_the_table():
    assert _listed(PAGE.read_text()) == rendered(), (
        "docs/tutorials/errors.md's list of ADJIT_* variables is not core/environment.py's "
        f"table: run `python {Path(__file__).relative_to(ROOT)}`")


def _mentions(paths) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in paths:
        for name in NAME.findall(path.read_text(errors="replace")):
            found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_variable_mentioned_is_in_the_table():
    paths = [*ROOT.glob("docs/**/*.md"), *ROOT.glob("adjit/**/*.py"),
             *ROOT.glob("adjit/**/*.cpp"), *ROOT.glob("adjit/**/*.h"),
             *ROOT.glob("examples/**/*.py"), ROOT / "README.md"]
    known = set(VARIABLES) | set(TEST_SUITE_VARIABLES) | TYPOS
    unknown = {n: sorted(where) for n, where in _mentions(paths).items() if n not in known}
    assert not unknown, f"ADJIT_* names not in core/environment.py's table: {unknown}"
    assert set(VARIABLES) <= set(_mentions([PAGE])), "a variable missing from errors.md"


def test_no_module_reads_a_variable_but_the_table():
    readers = {}
    for path in [*ROOT.glob("adjit/**/*.py"), *ROOT.glob("adjit/**/*.cpp")]:
        where = str(path.relative_to(ROOT))
        for line in path.read_text().splitlines():
            if DIRECT_READ.search(line) and where != "adjit/core/environment.py":
                names = set(NAME.findall(line))
                if not names <= NATIVE_READERS.get(where, set()):
                    readers.setdefault(where, []).append(line.strip())
    assert not readers, ("read ADJIT_* variables through adjit.core.environment.read (and add "
                         f"them to its table), not directly: {readers}")


def test_the_table_is_not_empty():
    assert {"ADJIT_DEBUG", "ADJIT_CACHE_DIR", "ADJIT_NUM_THREADS"} <= set(VARIABLES)


if __name__ == "__main__":
    text = PAGE.read_text()
    head, rest = text.split(START)
    PAGE.write_text(head + START + rendered() + END + rest.split(END, 1)[1])
    sys.exit(0)
