"""Compiler-internal exceptions (issue 8.13) and Ctrl-C in MLIR callbacks (issue 19.12).

A fault inside adjit (a code-generation helper, a pass, the MLIR bindings) reaches the user
as an InternalCompilerError (a CompilationError) that says so, at the user's file, line and
source line with a caret, with the fault chained as `__cause__`. A TypeError that adjit
raises on purpose is a plain CompilationError at the line. A KeyboardInterrupt raised in a
Python callback of an MLIR walk stays a KeyboardInterrupt. Faults are injected by
monkeypatching a helper to raise."""
from __future__ import annotations

import re

import numpy as np
import pytest

import adjit
from fe_helpers import marker_line
from adjit.api import cuda_launch
from adjit.api import guard
from adjit.compiler import scalar_ops as S
from adjit.core.errors import InternalCompilerError, located

pytest.importorskip("mlir")
from mlir import ir  # noqa: E402


def line_of(marker: str) -> int:
    return marker_line(__file__, marker)


def expect_internal(call, marker: str, cause: type) -> InternalCompilerError:
    with pytest.raises(InternalCompilerError) as info:
        call()
    e = info.value
    assert isinstance(e, adjit.CompilationError)
    line = line_of(marker)
    assert (e.filename, e.lineno) == (__file__, line), str(e)
    text = str(e)
    assert text.startswith(f"{__file__}:{line}:")
    assert "internal error in adjit" in text
    source = open(__file__).read().splitlines()[line - 1].strip()
    assert source in text and text.rstrip().endswith("^")      # the line, with a caret
    assert isinstance(e.__cause__, cause), repr(e.__cause__)
    assert type(e.__cause__).__name__ in text and str(e.__cause__) in text
    return e


def test_a_fault_in_a_code_generation_helper(monkeypatch):
    @adjit.jit
    def f(x):
        y = x * 2.0 + 1.0  # helper-fault
        return y

    def broken(*args, **kwargs):
        raise AttributeError("injected fault")

    monkeypatch.setattr(S, "binary", broken)
    e = expect_internal(lambda: f(1.5), "helper-fault", AttributeError)
    assert isinstance(e, adjit.InternalCompilerError)          # public, for except clauses


def test_a_fault_in_the_mlir_bindings(monkeypatch):
    @adjit.kernel
    def k(x):
        i = adjit.index()
        x[i] = x[i] - 3.0  # binding-fault

    def misuse(*args, **kwargs):            # the bindings refuse a wrong argument type
        return ir.FloatAttr.get(ir.F64Type.get(), "not a float")

    monkeypatch.setattr(S, "binary", misuse)
    expect_internal(lambda: k(np.zeros(4), ndrange=4), "binding-fault", TypeError)


def test_a_fault_in_a_called_function_points_into_it(monkeypatch):
    @adjit.func
    def inner(v):
        return v + 1.0  # callee-fault

    @adjit.jit
    def outer(x):
        return inner(x)

    def broken(*args, **kwargs):
        raise KeyError("injected")

    monkeypatch.setattr(S, "binary", broken)
    expect_internal(lambda: outer(1.0), "callee-fault", KeyError)


def test_a_fault_in_a_pass_after_code_generation(monkeypatch):
    from adjit.passes import written

    @adjit.jit
    def f(x):  # pass-fault
        return x * x

    def broken(*args, **kwargs):
        return {}["no such entry"]

    monkeypatch.setattr(written, "written_arguments", broken)
    expect_internal(lambda: f(2.0), "pass-fault", KeyError)


def test_a_fault_in_the_autodiff_pass(monkeypatch):
    import adjit.passes.autodiff as autodiff_pass

    @adjit.jit
    def f(x):  # autodiff-fault
        return x * x

    assert f(3.0) == 9.0                   # the primal compiles
    monkeypatch.setattr(autodiff_pass, "run_autodiff",
                        lambda *a, **k: int("not a number"))      # ValueError, not raised
    e = expect_internal(lambda: adjit.grad(f)(3.0), "autodiff-fault", ValueError)
    assert "invalid literal" in str(e)


def test_a_fault_compiling_for_the_gpu(monkeypatch, tmp_path):
    from adjit.passes import lower_gpu

    @adjit.kernel
    def k(x):  # gpu-fault
        i = adjit.index()
        x[i] = 2.0 * x[i]

    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(lower_gpu, "kernel_to_ptx", lambda *a: [][0])
    with cuda_launch.compile_only():
        expect_internal(lambda: k(np.zeros(4, np.float32), ndrange=4, device="cuda"),
                        "gpu-fault", IndexError)


def test_a_deliberate_type_error_is_a_plain_compilation_error():
    half = np.float16(0.5)

    @adjit.jit
    def f(x):
        return x * half  # float16-constant

    with pytest.raises(adjit.CompilationError) as info:
        f(1.0)
    e = info.value
    assert type(e) is adjit.CompilationError
    assert (e.filename, e.lineno) == (__file__, line_of("float16-constant"))
    assert "float16 is not supported" in str(e) and "internal error" not in str(e)


def test_user_errors_stay_user_errors():
    """A CompilationError or a TypeError that adjit raises on purpose is not re-labelled."""
    @adjit.jit
    def f(x):
        return x.no_such_attribute  # user-error

    with pytest.raises(adjit.CompilationError) as info:
        f(np.ones(3))
    assert type(info.value) is adjit.CompilationError
    assert info.value.lineno == line_of("user-error")

    @adjit.jit
    def g(x):
        return x

    with pytest.raises(TypeError, match="takes 1 arguments"):
        g(1.0, 2.0)


# ---- Ctrl-C inside MLIR callbacks (issue 19.12) ---------------------------------------------

class _InterruptingWalkResult:
    """Stands in for ir.WalkResult: the passes' walk callbacks return `.ADVANCE`, which raises
    KeyboardInterrupt the first time, as a Ctrl-C landing in a callback would."""

    def __init__(self):
        self.fired = False
        self.INTERRUPT, self.SKIP = ir.WalkResult.INTERRUPT, ir.WalkResult.SKIP

    @property
    def ADVANCE(self):
        if not self.fired:
            self.fired = True
            raise KeyboardInterrupt
        return ir.WalkResult.ADVANCE


def test_ctrl_c_in_a_walk_callback_is_a_keyboard_interrupt(monkeypatch):
    @adjit.kernel
    def k(x):
        i = adjit.index()
        x[i] = x[i] * 3.0 + 1.0

    fake = _InterruptingWalkResult()
    with monkeypatch.context() as m:
        m.setattr(ir, "WalkResult", fake)
        with pytest.raises(KeyboardInterrupt):
            k(np.ones(4), ndrange=4)
    assert fake.fired
    x = np.arange(4.0)                       # and the next compile is whole
    k(x, ndrange=4)
    np.testing.assert_array_equal(x, np.arange(4.0) * 3.0 + 1.0)


def test_walk_keeps_what_its_callback_raises():
    from adjit.dialects import make_context
    from adjit.dialects.adj import AdjError
    from adjit.passes.walk import walk
    with make_context() as ctx, ir.Location.unknown(ctx):
        module = ir.Module.parse("func.func @f() { return }")
        op = module.operation

        def raising(exc):
            def visit(o):
                raise exc
            return visit

        for exc in (KeyboardInterrupt(), ValueError("boom"), AdjError(op, "refused")):
            with pytest.raises(type(exc)) as info:
                walk(op, raising(exc))
            assert info.value is exc
        seen = []
        walk(op, lambda o: seen.append(o.name) or ir.WalkResult.ADVANCE)
        assert seen == ["func.return", "func.func", "builtin.module"]


def _wrapped_interrupt() -> RuntimeError:
    """What the bindings make of a KeyboardInterrupt raised in a callback of a raw walk."""
    from adjit.dialects import make_context
    with make_context() as ctx, ir.Location.unknown(ctx):
        module = ir.Module.parse("func.func @f() { return }")

        def visit(op):
            raise KeyboardInterrupt

        with pytest.raises(RuntimeError, match="Exception raised in callback") as raw:
            module.operation.walk(visit)
    return raw.value


def test_an_interrupt_the_bindings_wrapped_is_a_keyboard_interrupt_again():
    """Other callbacks (not walks) still get the bindings' RuntimeError: the compile entry
    makes a KeyboardInterrupt of it."""
    wrapped = _wrapped_interrupt()

    @adjit.jit
    def f(x):
        return x

    out = located(wrapped, f.source.error(None, ""))
    assert isinstance(out, KeyboardInterrupt)

    def build():
        raise wrapped

    with pytest.raises(KeyboardInterrupt):
        guard.compiling(f, build)
    other = RuntimeError("Exception raised in callback: Traceback ...\nValueError: boom")
    assert isinstance(located(other, f.source.error(None, "")), InternalCompilerError)
