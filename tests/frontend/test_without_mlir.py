"""`import adjit`, decorating functions and building the API's objects need no MLIR: a GPU
machine without the compiler runs kernels from the cache (issue 4, "compile here, run
there"). MLIR is imported when something is compiled."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

BLOCK_MLIR = "import sys\nsys.modules['mlir'] = None     # any import of mlir now fails\n"


def run_without_mlir(tmp_path, code: str) -> subprocess.CompletedProcess:
    """Runs `code` as a script file (adjit reads decorated functions' source from it)."""
    script = tmp_path / "user_code.py"
    script.write_text(BLOCK_MLIR + textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          cwd=tmp_path)


def test_the_api_without_mlir(tmp_path):
    result = run_without_mlir(tmp_path, """
        import numpy as np
        import adjit
        from adjit import Active, Const, Duplicated, Reverse

        @adjit.func
        def softplus(x):
            return adjit.log(1.0 + adjit.exp(x))

        @adjit.rules.forward(softplus)
        def _(config, x):
            return softplus(x.val), x.dval / (1.0 + adjit.exp(-x.val))

        @adjit.kernel
        def saxpy(a: adjit.f32, x: adjit.Array[adjit.f32, 1], y):
            i = adjit.index()
            y[i] = a * x[i] + y[i]

        @adjit.jit
        def total(x):
            return adjit.sum(x)

        assert adjit.sin(0.0) == 0.0 and adjit.max(np.arange(3)) == 2   # NumPy outside
        assert adjit.f32(1.5) == np.float32(1.5)
        assert repr(adjit.Array[adjit.f64, 2]) == "adjit.Array[adjit.f64, 2]"
        assert adjit.DeviceArray.__name__ == "DeviceArray" and callable(adjit.to_device)
        Active(1.0), Const(2.0), Duplicated(np.ones(2), np.zeros(2)), Reverse
        import adjit.runtime
        assert not [m for m in sys.modules if m.startswith("mlir.")], "MLIR was imported"
        try:
            total(np.ones(3))
        except ImportError as e:
            print("compiling needs MLIR:", e)
        """)
    assert result.returncode == 0, result.stderr
    assert "compiling needs MLIR" in result.stdout


def test_every_builtin_has_a_compile_handler():
    pytest.importorskip("mlir")
    from adjit.compiler import builtin_calls
    from adjit.compiler import codegen   # noqa: F401 (its modules register their handlers)
    from adjit.lang.builtins import namespace
    assert [name for name, b in namespace.items() if builtin_calls.lookup(b) is None] == []
