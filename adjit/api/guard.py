"""The one door compilation goes through (a call's specialisation, `lower`, a derivative, a
GPU kernel or host program): what escapes it is the user's to read.

- An exception that no user error explains becomes an InternalCompilerError at the user's
  line (the code generator's visitor places those of code generation at the construct being
  compiled, errors.located; those of later passes are placed here, at the function's
  `def`), with the exception chained as its cause.
- A RecursionError (an expression of thousands of operations, @adjit.func calls nested
  thousands deep) is compiled again on a thread with a deep stack and a raised recursion
  limit (core/deep_stack.py); only programs that need it pay for the thread. Deeper
  still, it is a CompilationError at the innermost construct reached.
- A Ctrl-C that the MLIR bindings turned into a RuntimeError in a callback is a
  KeyboardInterrupt again.

Importing this module needs no MLIR.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ..core.errors import CompilationError, located

if TYPE_CHECKING:
    from ..lang.source import SourceInfo

T = TypeVar("T")

# Deep enough for ~20,000 chained binary operations or ~3,000 nested @adjit.func calls.
DEEP_RECURSION_LIMIT = 100_000


def compiling(target: Any, build: Callable[[], T]) -> T:
    """`build()`, which compiles (something of) `target`, an adjit Function or Kernel."""
    try:
        return _located(target, build)
    except RecursionError:
        pass          # retried outside this handler, so that the retry is not chained to it
    from ..core import deep_stack
    try:
        return _located(target, lambda: deep_stack.call(build, DEEP_RECURSION_LIMIT))
    except RecursionError as e:
        source, node = e.__dict__.get("adjit_where", (target.source, None))
        raise _too_deep(source, node) from None


def _located(target: Any, build: Callable[[], T]) -> T:
    try:
        return build()
    except RecursionError:
        raise
    except Exception as e:
        # A deliberate TypeError here is the API's own (autodiff of a function returning
        # an array, say): kept as it is.
        raise located(e, target.source.error(None, ""), checks_as_they_are=True)


def _too_deep(source: SourceInfo, node: Any) -> CompilationError:
    return source.error(node, "this is nested too deeply for adjit to compile (an expression "
                              "of tens of thousands of operations, or @adjit.func calls "
                              "nested thousands deep): split the expression with "
                              "intermediate variables, or make the calls shallower")
