"""Run every Python block of one Markdown page, as a reader would paste them.

    python tests/docs/run_page_blocks.py docs/tutorials/kernels.md [more pages...]

tests/docs/test_code_blocks.py runs this once per page (README.md and docs/**/*.md), in a
process of its own. Each ```python block is written to a file of its own in a fresh
temporary folder, which is also the working directory, and run there by runpy.run_path in a
fresh namespace (as `__main__`): adjit compiles a function from its source file, so a block
must be a file, not a string given to exec. Blocks share the process (adjit's compiled-code
memo, imported modules) but nothing else: each must bring its own imports and data.

What is executed: every fenced block whose info string names Python (```python, ```py,
```python3, and MyST's {code-block}/{code}/{code-cell} with one of those); nothing else, and
there is no way to mark a Python block as not to be run. Every failure is reported with the
page and the line of the block's opening fence; the exit status is 1 if any block failed.
"""
import os
import re
import runpy
import sys
import tempfile
import time
import traceback
from pathlib import Path

PYTHON_NAMES = ("python", "py", "python3", "ipython3")
# The opening fence: its indentation (a block inside a list item), the fence itself (3 or
# more backticks or tildes) and the info string.
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def is_python(info: str) -> bool:
    words = info.strip().split()
    if not words:
        return False
    if words[0] in PYTHON_NAMES:
        return True
    return (words[0] in ("{code-block}", "{code}", "{code-cell}", "{sourcecode}")
            and len(words) > 1 and words[1] in PYTHON_NAMES)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """The Python blocks of a Markdown page: (line of the opening fence, 1-based; source)."""
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or (m["fence"][0] == "`" and "`" in m["info"]):
            i += 1
            continue
        indent, fence, info = len(m["indent"]), m["fence"], m["info"]
        start = i
        body = []
        i += 1
        # The block ends at a fence of the same character at least as long, nothing after it.
        while i < len(lines):
            stripped = lines[i].strip()
            if (stripped.startswith(fence[0] * len(fence))
                    and set(stripped) == {fence[0]}):
                break
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        i += 1
        if is_python(info):
            # MyST directive options (`:caption: ...`) at the top of a {code-block} are not code.
            if info.strip().startswith("{"):
                while body and re.match(r"^:[\w-]+:", body[0]):
                    body.pop(0)
            blocks.append((start + 1, "\n".join(body) + "\n"))
    return blocks


def block_file_name(page: Path, line: int) -> str:
    """A file name that says where the block comes from (it shows in tracebacks and in
    adjit's error messages)."""
    stem = re.sub(r"[^0-9A-Za-z]+", "_", str(page).removesuffix(".md")).strip("_")
    return f"{stem}_line{line}.py"


def run_page(page: Path) -> int:
    """Run the page's blocks (`page` as the reader names it, relative to the working
    directory); print one line per block and every failure. The number of failed blocks."""
    blocks = python_blocks(page.read_text(encoding="utf-8"))
    here = os.getcwd()
    failures = 0
    with tempfile.TemporaryDirectory(prefix="adjit-doc-blocks-") as folder:
        os.chdir(folder)
        for line, source in blocks:
            path = Path(folder) / block_file_name(page, line)
            path.write_text(source, encoding="utf-8")
            where = f"{page}:{line}"
            print(f"--- {where}: running", flush=True)
            start = time.perf_counter()
            try:
                runpy.run_path(str(path), run_name="__main__")
            except BaseException as error:  # noqa: BLE001 - a block's SystemExit fails too
                if isinstance(error, SystemExit) and error.code in (None, 0):
                    pass
                else:
                    failures += 1
                    print(f"FAILED {where}: the block opening at line {line} of {page} "
                          f"raised {type(error).__name__}", flush=True)
                    traceback.print_exc(file=sys.stdout)
                    continue
            finally:
                sys.stdout.flush()
            print(f"--- {where}: ok in {time.perf_counter() - start:.2f} s", flush=True)
        os.chdir(here)
    print(f"{page}: {len(blocks)} Python blocks, {failures} failed", flush=True)
    return failures


def main(argv: list[str]) -> int:
    # Figures are drawn to files, never to a window that would wait for the reader.
    os.environ.setdefault("MPLBACKEND", "Agg")
    failed = sum(run_page(Path(page)) for page in argv)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
