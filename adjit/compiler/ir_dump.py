"""ADJIT_DUMP_IR: the IR of each compile, where the user asked for it and nowhere else.

- `1`: printed to stdout (the adj IR of each module, then its LLVM-dialect IR).
- the path of an existing folder: each text goes to a new file there,
  `adjit-<pid>-<n>-<what>.mlir` (`n` counts this process's dumps, so a module's adj and LLVM
  texts sort together), created with O_CREAT | O_EXCL | O_NOFOLLOW and mode 0600 through a
  descriptor of the folder: a name that exists already, a symlink someone planted included,
  is never opened or followed (the next number is taken instead), and nothing is written to
  the cache, the working folder or anywhere but that folder. adjit creates no folder for it.
- `0` or unset: nothing.
The value is checked where it is read (core/environment.py): a path that is not a folder is
refused by name.
"""
from __future__ import annotations

import itertools
import os
import re

from ..core.environment import STDOUT, read

_numbers = itertools.count()
_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
          | getattr(os, "O_CLOEXEC", 0))
# Names taken by others before a free one is found; far more than any folder can explain but
# someone racing this process for its names.
_TRIES = 1000


def wanted() -> bool:
    """Whether ADJIT_DUMP_IR asks for the IR (the CPU disk cache is then bypassed, so that
    the lowering is seen happening)."""
    return read("ADJIT_DUMP_IR") is not None


def dump(what: str, text: str) -> None:
    """`text` (the IR of `what`: "entry (adj)", "LLVM dialect") where ADJIT_DUMP_IR says."""
    target = read("ADJIT_DUMP_IR")
    if target is None:
        return
    header = f"// ----- adjit: {what} -----\n"
    if target == STDOUT:
        print(f"{header}{text}")
        return
    slug = re.sub(r"[^A-Za-z0-9_.]+", "-", what).strip("-") or "ir"
    folder = os.open(target, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for _ in range(_TRIES):
            name = f"adjit-{os.getpid()}-{next(_numbers):04d}-{slug}.mlir"
            try:
                fd = os.open(name, _FLAGS, 0o600, dir_fd=folder)
            except FileExistsError:
                continue
            with os.fdopen(fd, "w") as f:
                f.write(header + text + "\n")
            return
        raise FileExistsError(f"ADJIT_DUMP_IR: no free file name in {target} after {_TRIES} "
                              "tries (someone else is creating adjit's names there)")
    finally:
        os.close(folder)
