"""Errors raised while compiling user code, pointing at the user's source line."""
from __future__ import annotations

from .locations import file_position


class CompilationError(Exception):
    """Code adjit cannot compile: names the problem, the file, line and column, and shows
    the source line with a caret, as Triton does. ``.message``, ``.filename``, ``.lineno``
    and ``.col`` are kept for tools; an error in a compiled callee also names the calls
    that led to it ("called from file:line").

    Raised at the first call (or launch, or derivative) that compiles the code.

    Example:
        ::

            import adjit

            @adjit.jit
            def f(x: adjit.f64) -> adjit.f64:
                return x.no_such_attribute

            try:
                f(1.0)
            except adjit.CompilationError as e:
                print(e)              # file:line:col: what is wrong, the line, a caret
                print(e.lineno, e.message)
    """

    def __init__(self, message: str, filename: str = "<unknown>", lineno: int = 0,
                 col: int = 0, source_line: str | None = None):
        self.message, self.filename, self.lineno, self.col = message, filename, lineno, col
        self.source_line = source_line
        # The calls that led here when the error is in a compiled callee: (filename, lineno,
        # col, source line), innermost first.
        self.call_sites: list[tuple[str, int, int, str | None]] = []
        super().__init__(f"{filename}:{lineno}:{col + 1}: {message}" +
                         _caret(source_line, col))

    def add_call_site(self, filename: str, lineno: int, col: int,
                      source_line: str | None) -> None:
        """Records the call (in the caller's code) through which the erroneous callee was
        compiled: the message then names it under the error's own position."""
        self.call_sites.append((filename, lineno, col, source_line))
        self.args = (f"{self.args[0]}\n  called from {filename}:{lineno}:{col + 1}" +
                     _caret(source_line, col),)

    def in_lines(self, filename: str, first: int, last: int) -> bool:
        """Whether the error, or a call that led to it, is at lines first..last of
        `filename` (a function's own code)."""
        return any(f == filename and first <= line <= last for f, line, *_ in
                   [(self.filename, self.lineno), *self.call_sites])

    def __reduce__(self):
        # Pickled (multiprocessing, a process pool) with its text and fields, not rebuilt from
        # its text alone; a field that cannot be pickled (an internal error's cause) travels
        # as its type and text.
        import pickle
        state = {}
        for key, value in self.__dict__.items():
            try:
                pickle.dumps(value)
            except Exception:
                value = RuntimeError(f"{type(value).__name__}: {value}")
            state[key] = value
        return (_restore, (type(self), self.args, state))

    @classmethod
    def at_location(cls, message: str, location: str) -> "CompilationError":
        """An error at an MLIR location (`loc("file.py":12:5)`, as the frontend gives every
        op), with the source line read back."""
        import linecache
        at = file_position(location)
        if at is None:
            return cls(message)
        filename, line, col = at
        return cls(message, filename, line, col - 1, linecache.getline(filename, line) or None)


def _caret(source_line: str | None, col: int) -> str:
    """The source line and a caret under column `col`, as text under a position."""
    return f"\n    {source_line.rstrip()}\n    {' ' * col}^" if source_line else ""


def _restore(cls: type, args: tuple, state: dict) -> CompilationError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class UserError(Exception):
    """Raised by code generation helpers that do not know the AST node; the visitor turns it
    into a CompilationError at the node being compiled."""


class CacheTrustWarning(UserWarning):
    """Warned once per process for a disk cache folder adjit will not use: a folder on the
    way to it, or a file in it, that others could write (the warning names it, says why and
    how to fix it: ``chmod go-w``, ``ADJIT_CACHE_SHARED=1`` for a group's cache, or another
    ``ADJIT_CACHE_DIR``). The process then compiles without that cache. A category of its
    own, so that it can be filtered or turned into an error.

    Example:
        ::

            import warnings
            import adjit

            with warnings.catch_warnings():
                # An untrusted cache as an error rather than a warning, in this block:
                warnings.simplefilter("error", adjit.CacheTrustWarning)
                try:
                    warnings.warn("a cache folder", adjit.CacheTrustWarning)
                except adjit.CacheTrustWarning as e:
                    print("refused:", e)
    """


class ArtifactError(ValueError):
    """A file that :func:`adjit.load` refuses: one it cannot trust (others could write it
    or a folder on the way to it), not an artifact of :func:`adjit.export`, of another
    format or adjit version, damaged (a member or the manifest not matching its SHA-256),
    or holding code for a CPU with features this one lacks. The message names the file and
    the problem, and how to fix it.

    Example:
        ::

            import os, tempfile
            import adjit

            path = os.path.join(tempfile.mkdtemp(), "not-an-artifact.adjit")
            with open(path, "w") as f:
                f.write("hello")
            try:
                adjit.load(path)
            except adjit.ArtifactError as e:
                print(e)          # ... is not an artifact of adjit.export ...
    """


class EnvironmentValueError(ValueError):
    """An ``ADJIT_*`` environment variable set to a value adjit does not accept. The message
    names the variable, its value and what it accepts (``.name``, ``.value`` and
    ``.accepted`` are kept for tools). Raised where the value is read (most at the first
    compile, ``ADJIT_NUM_THREADS`` at import), instead of a default taken silently; a
    ``ValueError``. Every variable: docs/tutorials/errors.md.

    Example:
        ::

            import os
            import adjit

            os.environ["ADJIT_COMPILE_TIER"] = "fast"

            @adjit.jit
            def f(x: adjit.f64) -> adjit.f64:
                return 2.0 * x

            try:
                f(1.0)
            except adjit.EnvironmentValueError as e:
                print(e)        # ADJIT_COMPILE_TIER must be 0, 1, 2 or 3 (...), got 'fast'
                print(e.name, e.value)
            finally:
                del os.environ["ADJIT_COMPILE_TIER"]
    """

    def __init__(self, name: str, value: str, accepted: str, reason: str = ""):
        self.name, self.value, self.accepted, self.reason = name, value, accepted, reason
        super().__init__(f"{name} must be {accepted}, got {value!r}"
                         + (f" ({reason})" if reason else ""))

    def __reduce__(self):
        return (type(self), (self.name, self.value, self.accepted, self.reason))


class InternalCompilerError(CompilationError):
    """A bug in adjit, met while compiling the user's code: an exception that no user error
    explains (from a helper of the code generator, a pass, or the MLIR bindings), at the
    user's line being compiled when it happened. The exception is chained (`__cause__`),
    with the traceback a bug report needs. A subclass of :class:`CompilationError`, so
    ``except adjit.CompilationError`` catches both; please report it, with the code.

    Example:
        ::

            import adjit

            @adjit.jit
            def f(x: adjit.f64) -> adjit.f64:
                return 2.0 * x

            try:
                print(f(1.0))                   # 2.0: no error here
            except adjit.InternalCompilerError as e:
                print("a bug in adjit:", e, e.__cause__)
            assert issubclass(adjit.InternalCompilerError, adjit.CompilationError)
    """

    def __init__(self, cause: BaseException, filename: str = "<unknown>", lineno: int = 0,
                 col: int = 0, source_line: str | None = None):
        self.cause = cause
        super().__init__(f"internal error in adjit while compiling this: "
                         f"{type(cause).__name__}: {cause} (a bug in adjit, not in this "
                         "code: please report it, with the traceback of the cause below)",
                         filename, lineno, col, source_line)


# Exception types adjit raises on purpose for what the user asked (a bad argument, a value
# out of range, a missing tool): such an exception, raised by a `raise` statement of adjit's
# own code, is a user error. From anywhere else (a failed attribute access, the MLIR
# bindings, NumPy), or of another type (AttributeError, KeyError, AssertionError...), it is a
# bug in adjit.
_DELIBERATE = (TypeError, ValueError, ArithmeticError, RuntimeError)
# Not the compiler's fault wherever they come from: a module that cannot be imported (MLIR
# absent on a GPU machine, which cuda_launch turns into its own error), the file system.
_ENVIRONMENT = (ImportError, OSError, MemoryError)


def _package_folders() -> tuple[str, ...]:
    import os
    return (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,)   # adjit/


_ADJIT_FOLDERS = _package_folders()


def _raised_by_adjit(e: BaseException) -> bool:
    """Whether `e` was raised by a `raise` statement in adjit's source."""
    import linecache
    tb = e.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    filename = tb.tb_frame.f_code.co_filename
    return (filename.startswith(_ADJIT_FOLDERS)
            and linecache.getline(filename, tb.tb_lineno).lstrip().startswith("raise"))


def interrupted(e: BaseException | None) -> bool:
    """Whether `e` is a KeyboardInterrupt that the MLIR bindings turned into
    RuntimeError("Exception raised in callback: ...") when it landed in a Python callback
    (passes walk IR with them: passes/walk.py keeps the exception itself, this is for the
    other callbacks), or an error caused by one."""
    while e is not None:
        if isinstance(e, KeyboardInterrupt):
            return True
        if isinstance(e, RuntimeError) and str(e).startswith("Exception raised in callback"):
            if is_wrapped_interrupt(e):
                return True
        e = e.__cause__
    return False


def _is_adj_error(e: BaseException) -> bool:
    """An AdjError (dialects/adj.py: what a pass refuses, at its op), without importing MLIR."""
    return any(c.__name__ == "AdjError" and c.__module__.endswith("dialects.adj")
               for c in type(e).__mro__)


def located(e: Exception, where: CompilationError, checks_as_they_are: bool = False
            ) -> BaseException:
    """What `e`, raised while compiling the code at `where` (a CompilationError giving the
    position), reaches the user as: itself if it is already a user-facing error; if adjit
    raised it on purpose (TypeError from a type check, say), a CompilationError with its
    message at `where`, or, with `checks_as_they_are`, itself (the TypeError the API
    promises for an argument it refuses); else an InternalCompilerError chaining it. Raise
    the result."""
    # (An environment value is not the code's fault: it reaches the user as itself, not at
    # the line being compiled.)
    if (isinstance(e, (CompilationError, EnvironmentValueError, *_ENVIRONMENT))
            or _is_adj_error(e)):
        return e
    if interrupted(e):
        out: BaseException = KeyboardInterrupt()
        out.__cause__, out.__suppress_context__ = None, True
        return out
    at = (where.filename, where.lineno, where.col, where.source_line)
    deliberate = isinstance(e, _DELIBERATE) and _raised_by_adjit(e)
    if deliberate and checks_as_they_are:
        return e
    if isinstance(e, UserError) or deliberate:
        out = CompilationError(str(e), *at)
        out.__suppress_context__ = True
        return out
    out = InternalCompilerError(e, *at)
    out.__cause__ = e
    return out


def is_wrapped_interrupt(e: BaseException) -> bool:
    """Whether `e` is the RuntimeError the bindings made of a KeyboardInterrupt raised in a
    callback (of a walk, a diagnostic handler...)."""
    text = str(e) if isinstance(e, RuntimeError) else ""
    return (text.startswith("Exception raised in callback")
            and text.rstrip().rsplit("\n", 1)[-1].startswith("KeyboardInterrupt"))
