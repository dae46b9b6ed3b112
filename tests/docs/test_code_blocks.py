"""Every ```python block of README.md and docs/**/*.md runs as pasted.

One test per page; each page's blocks run in a process of their own (run_page_blocks.py:
each block a file of its own in a fresh temporary folder, run with runpy in a fresh
namespace), so a failure names the page and the line of the block that failed. Generated
folders (docs/_build, the gallery sphinx-gallery writes) are not pages.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from run_page_blocks import python_blocks

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ("docs/_build/", "docs/gallery/")


def markdown_pages() -> list[str]:
    pages = ["README.md"] + sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))
    return [p for p in pages if not p.startswith(GENERATED)]


def run_blocks(pages: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    # This checkout's adjit, whatever else is installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["MPLBACKEND"] = "Agg"
    return subprocess.run(
        [sys.executable, str(Path(__file__).with_name("run_page_blocks.py")), *pages],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("page", [p for p in markdown_pages()
                                  if python_blocks((ROOT / p).read_text(encoding="utf-8"))])
def test_python_blocks_run_as_pasted(page):
    result = run_blocks([page])
    assert result.returncode == 0, (
        f"a Python block of {page} failed (each FAILED line names the page and the line of "
        f"the block's opening fence):\n{result.stdout}\n{result.stderr}")
    assert "0 failed" in result.stdout


def test_the_harness_reports_the_page_and_line_of_a_failing_block(tmp_path):
    """A block that raises fails its page, named by file and line; the blocks around it
    still run, each in a namespace of its own."""
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\n```python\nx = 1\nprint('first', x)\n```\n\n"
        "- a list item with an indented block:\n\n"
        "  ```python\n  print('second', 'x' in globals())\n  ```\n\n"
        "```python\nraise ValueError('the third block fails')\n```\n\n"
        "```bash\nexit 1\n```\n"
        "````python\ns = \"\"\"\n```\n\"\"\"\nprint('fourth', s.strip())\n````\n")
    result = run_blocks([str(page)])
    assert result.returncode == 1
    assert "first 1" in result.stdout
    assert "second False" in result.stdout          # a fresh namespace
    assert f"FAILED {page}:14" in result.stdout      # the line of the failing block's fence
    assert "ValueError: the third block fails" in result.stdout
    assert "fourth ```" in result.stdout            # a longer fence holds a shorter one
    assert "exit 1" not in result.stdout and "4 Python blocks, 1 failed" in result.stdout
