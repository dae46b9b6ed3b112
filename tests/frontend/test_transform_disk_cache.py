"""Transforms compiled whole and called from Python (adjit.grad(adjit.grad(f)), jacfwd,
jacrev: service.transform) are kept in the disk cache's source records, keyed by the
innermost function's fingerprint and every transform's attributes: a later process loads
them without importing MLIR (they used to be compiled again in every process), gets the
same numbers, and a transform with other attributes, or an edited function, is never
served another's code.

Each case runs fresh Python processes with a cache folder of its own."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

BLOCK_MLIR = "import sys\nsys.modules['mlir'] = None     # any import of mlir now fails\n"

PROGRAM = """
import sys
import numpy as np
import adjit

@adjit.jit
def f(x, y):
    return x * x * x * y + 2.0 * x * y * y

@adjit.jit
def resid(x):
    return x * x * 0.5 + x

xs = np.linspace(-1.0, 2.0, 5)
out = {"mlir_before": "mlir.ir" in sys.modules}
if "xx" in sys.argv:
    out["gg_xx"] = float(adjit.grad(adjit.grad(f, 0), 0)(1.25, -0.5))
if "yy" in sys.argv:
    out["gg_yy"] = float(adjit.grad(adjit.grad(f, 1), 1)(1.25, -0.5))
if "jac" in sys.argv:
    out["jf"] = adjit.jacfwd(resid)(xs).tolist()
    out["jr"] = adjit.jacrev(resid)(xs).tolist()
out["mlir"] = "mlir.ir" in sys.modules
print(out)
if "--wait" in sys.argv:
    assert adjit.wait_for_builds(120)
"""


def run(tmp_path: Path, cache: Path, *args: str, block_mlir: bool = False,
        program: str = PROGRAM) -> dict:
    script = tmp_path / "user_code.py"
    script.write_text((BLOCK_MLIR if block_mlir else "") + textwrap.dedent(program))
    env = {**os.environ, "ADJIT_CACHE_DIR": str(cache), "ADJIT_DISK_CACHE": "1"}
    env.pop("ADJIT_DEBUG", None)
    result = subprocess.run([sys.executable, str(script), *args], capture_output=True,
                            text=True, cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    return eval(result.stdout.strip().splitlines()[-1])


def _expected(x=1.25, y=-0.5):
    # f = x^3 y + 2 x y^2: d2f/dx2 = 6 x y, d2f/dy2 = 4 x (exact in float64 here)
    return 6.0 * x * y, 4.0 * x


def _finite_difference_second(x=1.25, y=-0.5, h=1e-4):
    def f(a, b):
        return a ** 3 * b + 2.0 * a * b * b
    return ((f(x + h, y) - 2 * f(x, y) + f(x - h, y)) / h ** 2,
            (f(x, y + h) - 2 * f(x, y) + f(x, y - h)) / h ** 2)


def test_grad_of_grad_and_jacobians_load_without_mlir(tmp_path):
    cache = tmp_path / "cache"
    first = run(tmp_path, cache, "xx", "jac", "--wait")
    assert first["mlir"]
    again = run(tmp_path, cache, "xx", "jac", block_mlir=True)
    assert not again["mlir"]                      # loaded from the records, not compiled
    assert {**again, "mlir": True} == first       # the same numbers
    xx, _ = _expected()
    assert first["gg_xx"] == pytest.approx(xx, rel=1e-14)
    assert first["gg_xx"] == pytest.approx(_finite_difference_second()[0], rel=1e-5)
    xs = np.linspace(-1.0, 2.0, 5)
    np.testing.assert_allclose(first["jf"], np.diag(xs + 1.0), rtol=1e-15, atol=0)
    np.testing.assert_allclose(first["jr"], np.diag(xs + 1.0), rtol=1e-15, atol=0)


def test_other_transform_attributes_are_not_served_the_record(tmp_path):
    cache = tmp_path / "cache"
    run(tmp_path, cache, "xx", "--wait")
    # argnums (1, 1) over the same function: another key, compiled (MLIR), its own answer.
    other = run(tmp_path, cache, "yy", "--wait")
    assert other["mlir"]
    _, yy = _expected()
    assert other["gg_yy"] == pytest.approx(yy, rel=1e-14)
    assert other["gg_yy"] == pytest.approx(_finite_difference_second()[1], rel=1e-5)
    # and both now load without MLIR, each its own
    both = run(tmp_path, cache, "xx", "yy", block_mlir=True)
    assert not both["mlir"]
    assert both["gg_xx"] == pytest.approx(_expected()[0], rel=1e-14)
    assert both["gg_yy"] == pytest.approx(yy, rel=1e-14)


def test_an_edited_function_is_compiled_again(tmp_path):
    cache = tmp_path / "cache"
    run(tmp_path, cache, "xx", "--wait")
    edited = PROGRAM.replace("x * x * x * y + 2.0", "2.0 * x * x * x * y + 2.0")
    got = run(tmp_path, cache, "xx", program=edited)
    assert got["mlir"]                            # not the old record
    assert got["gg_xx"] == pytest.approx(2.0 * _expected()[0], rel=1e-14)
