"""Every `ADJIT_*` environment variable adjit reads, in one table: its name, what it accepts,
its default, what it does and the page that explains it. This table is the contract: the
docs' list (docs/tutorials/errors.md, "Every environment variable") is generated from it,
and tests check that no other module reads an `ADJIT_*` variable itself.

`read(name)` is the one reader: a value is checked where it is read (most at the first
compile, ADJIT_NUM_THREADS at import, the MPI settings when MPI starts) and one that is not
valid raises EnvironmentValueError naming the variable, the value and what is accepted;
nothing falls back to a default silently. Unset, or set to blank, means the default (except
ADJIT_CACHE_DIR, where an empty value turns the caches off).

One read stays outside: the native dispatcher (runtime/native/dispatch.cpp) reads ADJIT_DEBUG
with getenv at every call and only compares it with the text a specialisation was compiled
under; a different text is a miss, which takes the Python path, whose `debug_enabled` reads
it here and so refuses a value that is not valid before anything is compiled with it. Its
`debug_enabled` and `interpret_enabled` (ADJIT_INTERPRET) only say whether the variable is
set to other than "" or "0", a cheap first look on the Python path, which then reads the
value here.

`warn_unknown()` runs at `import adjit`: an `ADJIT_*` name in the environment that adjit
does not read (a typo, `ADJIT_NUM_THREAD`) gets one warning naming the closest known name,
rather than an error (a script setting a variable for a newer adjit still runs) or nothing
(the typo would silently leave the setting at its default).

MLIR-free and importing nothing of adjit's but core/errors.py.
"""
from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from . import user_warnings
from .errors import EnvironmentValueError

PREFIX = "ADJIT_"


class Refused(ValueError):
    """A parser's refusal with a reason worth adding to the message ("no such folder"); any
    other ValueError (int("abc")'s) says no more than what is accepted."""


# A switch is 0 or 1, as the docs write every one: "yes", "true" or "off" are refused by
# name rather than read one way or the other (ADJIT_DEBUG read anything but "0" as on).
SWITCH = "0 or 1"


def _switch(text: str) -> bool:
    value = text.strip()
    if value not in ("0", "1"):
        raise ValueError
    return value == "1"


def _whole_number(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text.strip())          # "1e3", "2.0", "abc": ValueError
        if not low <= value <= high:
            raise ValueError
        return value
    return parse


def _finite_at_least_zero(text: str) -> float:
    """A finite number >= 0 ("nan", "inf", "-1" refused: a typo, not a choice)."""
    value = float(text.strip())
    if not (math.isfinite(value) and value >= 0):
        raise ValueError
    return value


def _compile_tier(text: str) -> int:
    value = text.strip()
    if value not in ("0", "1", "2", "3"):
        raise ValueError
    return int(value)


# sm_XY or sm_XYZ with NVPTX's suffixes for architecture-specific (a) and family (f) features.
_CHIP = re.compile(r"sm_[1-9][0-9]{1,2}[af]?")


def _cuda_chip(text: str) -> str:
    value = text.strip()
    if not _CHIP.fullmatch(value):
        raise ValueError
    return value


def _cache_dir(text: str) -> Path | None:
    """None for an empty value (the caches off), else the path. A path that is not a usable
    folder is not refused here: the caches then miss and store nothing, and the program runs
    (runtime/files.py, tests/runtime/test_rt_disk_cache.py), as with a folder others can
    write (runtime/trust.py)."""
    if not text.strip():
        return None
    return Path(text).expanduser()


# What ADJIT_DUMP_IR=1 asks for: the IR printed to stdout.
STDOUT = "stdout"


def _dump_ir(text: str) -> Path | str | None:
    """None (off), STDOUT, or the existing folder the IR files go to (made by the user:
    adjit writes where it was asked and creates no folder of its own)."""
    value = text.strip()
    if value == "0":
        return None
    if value == "1":
        return STDOUT
    path = Path(text).expanduser()
    if not path.exists():
        raise Refused("no such folder")
    if not path.is_dir():
        raise Refused("it is not a folder")
    return path


def _home_cache() -> Path:
    return Path.home() / ".cache" / "adjit"


# ADJIT_LOG's categories: "compile" logs each compile to the "adjit.compile" logger
# (runtime/profiling.py).
LOG_CATEGORIES = ("compile",)


def _log_categories(text: str) -> frozenset[str]:
    names = frozenset(v.strip() for v in text.split(",") if v.strip())
    unknown = sorted(names - set(LOG_CATEGORIES))
    if unknown:
        raise Refused(f"unknown category {unknown[0]!r}")
    return names


@dataclass(frozen=True)
class Variable:
    name: str
    parse: Callable[[str], Any]   # the value's text to what it means; ValueError if not valid
    accepted: str                 # what it accepts, as the error and the docs say it
    default: Any                  # its meaning when unset, or a function giving it
    default_text: str             # the default, as the docs say it
    meaning: str                  # what it does (Markdown, one line)
    page: str                     # the page that explains it, relative to docs/
    takes_empty: bool = False     # whether an empty value means something (else: unset)
    pure: bool = True             # whether the meaning depends on the text alone (not on files)


_PERFORMANCE = "tutorials/performance-guide.md"
_ERRORS = "tutorials/errors.md"
_MPI = "tutorials/mpi.md"

VARIABLES: dict[str, Variable] = {v.name: v for v in [
    Variable("ADJIT_DEBUG", _switch, SWITCH, False, "`0`",
             "`1`: bounds-check every array access (`IndexError`); read at every call",
             _ERRORS),
    Variable("ADJIT_INTERPRET", _switch, SWITCH, False, "`0`",
             "`1`: run kernels, `@func` and `@jit` code as Python over NumPy (the interpreter "
             "mode: print, pdb); read at each call Python handles", "tutorials/debugging.md"),
    Variable("ADJIT_DUMP_IR", _dump_ir,
             "0 (off), 1 (print the IR to stdout) or the path of an existing folder "
             "(one new file per compile's IR)", None, "`0`",
             "`1`: print the adj and LLVM-dialect IR of each compile; a folder: write it there",
             _ERRORS, pure=False),
    Variable("ADJIT_LOG", _log_categories,
             f"a comma-separated list of categories (known: {', '.join(LOG_CATEGORIES)})",
             frozenset(), "none",
             "`compile`: log each compile (what, for which types, each phase's time, disk cache "
             "hit or miss) to the `adjit.compile` logger, on stderr", "tutorials/debugging.md"),
    Variable("ADJIT_CACHE_DIR", _cache_dir, "the path of a folder (empty: the disk caches off)",
             _home_cache, "`~/.cache/adjit`",
             "the disk caches' root (`cpu/`, `gpu/`); set but empty: caches off",
             _PERFORMANCE, takes_empty=True, pure=False),     # (~ is $HOME's, read now)
    Variable("ADJIT_DISK_CACHE", _switch, SWITCH, True, "`1`",
             "`0`: no disk cache (nothing reused or kept)", _PERFORMANCE),
    Variable("ADJIT_CACHE_SHARED", _switch, SWITCH, False, "`0`",
             "`1`: a cache shared with its root folder's group (group-writable folders and "
             "members' entries trusted)", "security.md"),
    Variable("ADJIT_CACHE_MAX_MB", _finite_at_least_zero,
             "a finite number of megabytes >= 0 (0: no cap)", 2048.0, "`2048`",
             "each cache folder's cap in MB; `0`: no cap", _PERFORMANCE),
    Variable("ADJIT_COMPILE_TIER", _compile_tier,
             "0, 1, 2 or 3 (the LLVM level of a first compile; 3: O3 at once, no tiers)", 3,
             "`3`", "`0`, `1`, `2`: compile at that LLVM level first, O3 swapped in later",
             _PERFORMANCE),
    # parallel.cpp's pool runs at most 1024 threads: a larger count would be cut silently.
    Variable("ADJIT_NUM_THREADS", _whole_number(1, 1024), "a whole number from 1 to 1024",
             None, "the CPUs the process may use",
             "CPU threads for launches and array loops", _PERFORMANCE),
    Variable("ADJIT_CUDA_CHIP", _cuda_chip, "a CUDA architecture such as sm_80, sm_90 or sm_90a",
             "sm_90", "`sm_90`", "the GPU architecture kernels compile for",
             "tutorials/gpu.md"),
    Variable("ADJIT_MPI_TIMEOUT", _finite_at_least_zero,
             "a finite number of seconds >= 0 (0: wait forever)", 300.0, "`300`",
             "seconds an MPI operation waits for a message; `0`: forever", _MPI),
    Variable("ADJIT_MPI_CHECK", _switch, SWITCH, True, "`1`",
             "`0`: skip the ranks' agreement check before each collective", _MPI),
    Variable("ADJIT_MPI_ABORT_GRACE", _finite_at_least_zero, "a finite number of seconds >= 0", 1.0,
             "`1`", "seconds before `MPI_Abort` after an uncaught exception on a rank", _MPI),
]}

# Read by adjit's own test suite and scripts, not by adjit: known, so not warned about.
TEST_SUITE_VARIABLES = ("ADJIT_DIFFERENTIAL_EXAMPLES", "ADJIT_DIFFERENTIAL_SEED",
                        "ADJIT_DIFFERENTIAL_DIR", "ADJIT_DIFFERENTIAL_REPORT",
                        "ADJIT_GPU_TEST_KERNELS")

# (name, text) -> meaning, for the variables whose meaning is the text's alone: a setting
# read at every call (ADJIT_CUDA_CHIP in a GPU launch's key) is parsed once.
_parsed: dict[tuple[str, str], Any] = {}


def read(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """What variable `name` says now (its default when unset or blank), from `environ`
    (os.environ by default). EnvironmentValueError when its value is not valid."""
    variable = VARIABLES[name]
    text = (os.environ if environ is None else environ).get(name)
    if text is None or (not text.strip() and not variable.takes_empty):
        return default(name)
    if variable.pure and (name, text) in _parsed:
        return _parsed[name, text]
    try:
        value = variable.parse(text)
    except ValueError as e:
        reason = str(e) if isinstance(e, Refused) else ""
        raise EnvironmentValueError(name, text, variable.accepted, reason) from None
    if variable.pure:
        _parsed[name, text] = value
    return value


def default(name: str) -> Any:
    """Variable `name`'s meaning when unset."""
    value = VARIABLES[name].default
    return value() if callable(value) else value


def closest(name: str) -> str | None:
    """The known variable most like `name` (a typo's fix), or None."""
    found = difflib.get_close_matches(name, [*VARIABLES, *TEST_SUITE_VARIABLES], n=1,
                                      cutoff=0.6)
    return found[0] if found else None


def unknown(environ: Mapping[str, str] | None = None) -> list[str]:
    """The `ADJIT_*` names in `environ` that adjit does not know."""
    environ = os.environ if environ is None else environ
    return sorted(k for k in environ if k.startswith(PREFIX)
                  and k not in VARIABLES and k not in TEST_SUITE_VARIABLES)


def warn_unknown(environ: Mapping[str, str] | None = None) -> None:
    """One warning per unknown `ADJIT_*` name in the environment, naming the closest known
    one (run once, at import: a few microseconds)."""
    for name in unknown(environ):
        near = closest(name)
        hint = f"; did you mean {near}?" if near else ""
        user_warnings.warn(f"{name} is set but adjit does not read it{hint} (adjit's "
                           "variables: docs/tutorials/errors.md, 'Every environment "
                           "variable')", UserWarning)
