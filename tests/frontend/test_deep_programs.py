"""Deep programs compile (issue 19.11): an expression of 1,000 chained operations and a chain
of 150 nested @adjit.func calls raised a raw RecursionError without a source position. A
compile that runs out of recursion depth is compiled again on a deep stack with a raised
limit (api/guard.py, core/deep_stack.py); deeper still, it is a CompilationError at
the user's line. Results are checked against Python and NumPy, derivatives against their
analytic form and finite differences."""
from __future__ import annotations

import contextvars
import importlib.util
import sys
import threading
import time

import numpy as np
import pytest

import adjit
from adjit.api import guard
from adjit.core import deep_stack

pytest.importorskip("mlir")

TERMS = 1000          # v*c0 + v + v + v + v*c4 + ...: 1,000 terms, 999 chained additions
DEPTH = 150           # f150 calls f149 ... calls f0


def coefficient(k: int) -> float:
    return 1.0 + k / 1000.0 if k % 4 == 0 else 1.0


def term(k: int) -> str:
    return f"v * {coefficient(k)!r}" if k % 4 == 0 else "v"


def write_module(folder, name: str) -> object:
    """A module (a real file: adjit compiles from source) with the deep functions."""
    terms = " + ".join(term(k) for k in range(TERMS))
    lines = ["import adjit", "",
             "@adjit.jit", "def wide(v):", f"    return {terms}", "",
             "@adjit.kernel", "def wide_kernel(x, y):", "    i = adjit.index()",
             "    v = x[i]", f"    y[i] = {terms}", "",
             "@adjit.func", "def f0(v):", "    return v + 0.5", ""]
    for d in range(1, DEPTH + 1):
        lines += ["@adjit.func", f"def f{d}(v):", f"    return f{d - 1}(v) * 1.01 + 0.5", ""]
    lines += ["@adjit.jit", "def chain(x):", f"    return f{DEPTH}(x)", "",
              "@adjit.kernel", "def chain_kernel(x, y):", "    i = adjit.index()",
              f"    y[i] = f{DEPTH}(x[i])", ""]
    path = folder / f"{name}.py"
    path.write_text("\n".join(lines))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def deep(tmp_path_factory):
    module = write_module(tmp_path_factory.mktemp("deep"), "adjit_deep_programs")
    yield module
    sys.modules.pop("adjit_deep_programs", None)


def chain_value(x: float) -> float:
    v = x + 0.5
    for _ in range(DEPTH):
        v = v * 1.01 + 0.5
    return v


def test_an_expression_of_1000_chained_operations(deep):
    assert deep.wide(0.75) == pytest.approx(deep.wide.pyfn(0.75), rel=1e-13)
    x = np.linspace(-2.0, 2.0, 16)
    y = np.zeros_like(x)
    deep.wide_kernel(x, y, ndrange=x.size)
    want = sum(x * coefficient(k) for k in range(TERMS))
    np.testing.assert_allclose(y, want, rtol=1e-12)


def test_the_derivative_of_1000_chained_operations(deep):
    x = 0.75
    analytic = sum(coefficient(k) for k in range(TERMS))
    got = adjit.grad(deep.wide)(x)
    h = 1e-6
    finite = (deep.wide.pyfn(x + h) - deep.wide.pyfn(x - h)) / (2 * h)
    assert got == pytest.approx(analytic, rel=1e-12)
    assert got == pytest.approx(finite, rel=1e-7)


def test_a_chain_of_150_nested_function_calls(deep):
    assert deep.chain(2.0) == pytest.approx(chain_value(2.0), rel=1e-13)
    x = np.linspace(-1.0, 1.0, 8)
    y = np.zeros_like(x)
    deep.chain_kernel(x, y, ndrange=x.size)
    np.testing.assert_allclose(y, [chain_value(v) for v in x], rtol=1e-13)
    got = adjit.grad(deep.chain)(2.0)
    h = 1e-5
    assert got == pytest.approx(1.01 ** DEPTH, rel=1e-12)
    assert got == pytest.approx((chain_value(2.0 + h) - chain_value(2.0 - h)) / (2 * h),
                                rel=1e-7)


def test_deeper_than_the_raised_limit_is_an_error_at_the_line(tmp_path, monkeypatch):
    module = write_module(tmp_path, "adjit_too_deep")
    try:
        monkeypatch.setattr(guard, "DEEP_RECURSION_LIMIT", 1500)
        with pytest.raises(adjit.CompilationError) as info:
            module.wide(1.0)
        e = info.value
        assert not isinstance(e, RecursionError)
        assert e.filename == str(tmp_path / "adjit_too_deep.py") and e.lineno == 5
        assert "nested too deeply" in str(e) and "return v * 1.0 + v + v + v" in str(e)
        assert "internal error" not in str(e)
    finally:
        sys.modules.pop("adjit_too_deep", None)


def test_shallow_programs_compile_on_the_callers_thread(monkeypatch):
    """Only a compile that needs it pays for the deep stack's thread."""
    calls = []
    monkeypatch.setattr(deep_stack, "call", lambda *a: calls.append(a))

    @adjit.jit
    def f(x):
        return x * 2.0 + 1.0

    assert f(1.5) == 4.0 and calls == []


# ---- core/deep_stack.py ------------------------------------------------------------------

def test_deep_stack_returns_raises_and_keeps_context_variables():
    var = contextvars.ContextVar("adjit_test_var", default="unset")
    var.set("caller's")
    limit = sys.getrecursionlimit()

    def work():
        assert threading.current_thread() is not threading.main_thread()
        assert sys.getrecursionlimit() == 50_000
        assert deep_stack.call(lambda: "nested") == "nested"   # no second thread
        return var.get()

    assert deep_stack.call(work, 50_000) == "caller's"
    assert sys.getrecursionlimit() == limit                     # restored

    def fail():
        raise LookupError("from the worker")

    with pytest.raises(LookupError, match="from the worker"):
        deep_stack.call(fail)

    def recurse(n):
        return 0 if n == 0 else 1 + recurse(n - 1)

    assert deep_stack.call(lambda: recurse(20_000), 50_000) == 20_000


def test_ctrl_c_while_waiting_stops_the_worker():
    """A KeyboardInterrupt in the waiting (main) thread is passed on to the worker, which
    stops; then the caller raises it."""
    import _thread
    started, stopped = threading.Event(), threading.Event()

    def work():
        try:
            started.set()
            while True:            # Python instructions: the passed-on interrupt lands here
                time.sleep(0.001)
        finally:
            stopped.set()

    timer = threading.Thread(target=lambda: started.wait() and _thread.interrupt_main())
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        deep_stack.call(work)
    timer.join()
    assert stopped.is_set()
