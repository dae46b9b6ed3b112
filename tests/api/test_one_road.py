"""One road: every transform called from Python (grad, value_and_grad, jvp, vjp, grad of
grad, jacfwd, jacrev, hessian, hvp, autodiff of a grad, their batched forms) is a product of
the compile service, kept in the disk cache: a new process with the same cache folder runs
each without building IR (MLIR cannot even be imported there) and gets the first process's
numbers exactly. hvp and autodiff of a grad were compiled again in every process before.

The processes run with a cache folder of their own."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import adjit
from adjit.api import service
from adjit.core.types import type_of_value

BLOCK_MLIR = "import sys\nsys.modules['mlir'] = None     # any import of mlir now fails\n"

PROGRAM = """
import sys
import numpy as np
import adjit

@adjit.jit
def energy(x):
    s = 0.0
    for i in range(len(x) - 1):
        s += (1.0 - x[i]) ** 2 + 10.0 * (x[i + 1] - x[i] * x[i]) ** 2
    return s

@adjit.jit
def resid(x):
    y = adjit.empty_like(x)
    for i in range(len(x)):
        y[i] = adjit.sin(x[i]) * x[(i + 1) % len(x)] + x[i] * x[i]
    return y

@adjit.jit
def poly(x, y):
    return x * x * x * y + 2.0 * x * y * y

@adjit.jit
def fit(p, x):                     # p: a dict (a pytree)
    return np.sum((p["w"] * x + p["b"]) ** 2)

@adjit.jit
def parts(x):                      # a tree result
    return {"s": np.sin(x), "t": (x * x, np.cos(x))}

@adjit.jit
def shout(x):                      # prints: from the cache too (C's printf, flushed)
    print("shout", x)
    return 3.0 * adjit.debug.print_adjoint(x, label="at x") ** 2

x = np.linspace(-0.8, 1.3, 5)
v = np.cos(np.arange(5.0))
w = np.sin(np.arange(5.0) + 0.5)
params = {"w": np.linspace(0.5, 1.0, 5), "b": np.ones(5)}

def plain(value):
    if isinstance(value, dict):
        return {k: plain(e) for k, e in value.items()}
    if isinstance(value, (tuple, list)):
        return [plain(e) for e in value]
    return None if value is None else np.asarray(value).tolist()

CASES = {
    "grad": lambda: adjit.grad(energy)(x),
    "value_and_grad": lambda: adjit.value_and_grad(energy)(x),
    "jvp": lambda: adjit.jvp(resid, (x,), (v,)),
    "jvp_batched": lambda: adjit.jvp(resid, (x,), ((v, w),), width=2),
    "vjp": lambda: adjit.vjp(resid, x)[1](w),
    "grad_of_grad": lambda: adjit.grad(adjit.grad(poly, 0), 0)(1.25, -0.5),
    "value_and_grad_of_grad": lambda: adjit.value_and_grad(adjit.grad(poly, 0), 1)(1.25, -0.5),
    "jacfwd": lambda: adjit.jacfwd(resid)(x),
    "jacfwd_batched": lambda: adjit.jacfwd(resid, width=2)(x),
    "jacrev": lambda: adjit.jacrev(resid)(x),
    "hessian": lambda: adjit.hessian(energy)(x),
    "hessian_batched": lambda: adjit.hessian(energy, width=2)(x),
    "jacrev_of_grad": lambda: adjit.jacrev(adjit.grad(energy))(x),
    "hvp": lambda: adjit.hvp(energy, (x,), (v,)),
    "hvp_batched": lambda: adjit.hvp(energy, (x,), ((v, w),), width=2),
    "forward_of_grad": lambda: adjit.autodiff(adjit.Forward, adjit.grad(energy),
                                              adjit.Duplicated(x, v)),
    # one lane of batched tangents: the tangent as a 1-tuple, another key than Duplicated's
    "forward_of_grad_one_lane": lambda: adjit.autodiff(
        adjit.Forward, adjit.grad(energy), adjit.BatchDuplicated(x, (v,))),
    "reverse_of_grad": lambda: adjit.autodiff(adjit.ReverseWithPrimal, adjit.grad(poly, 0),
                                              adjit.Active(1.25), adjit.Const(-0.5)),
    # pytrees: a dict argument's derivatives, a tree result's
    "grad_tree": lambda: adjit.grad(fit)(params, x),
    "jacrev_tree": lambda: adjit.jacrev(fit)(params, x),
    "hessian_tree": lambda: adjit.hessian(fit)(params, x),
    "jvp_tree_result": lambda: adjit.jvp(parts, (x,), (v,)),
    "vjp_tree_result": lambda: adjit.vjp(parts, x)[1]({"s": v, "t": (w, v)}),
    "grad_printing": lambda: adjit.grad(shout)(1.5),
}
out, failed = {}, {}
for name, case in CASES.items():
    try:
        out[name] = plain(case())
    except Exception as e:
        failed[name] = f"{type(e).__name__}: {e}"
assert adjit.wait_for_builds(120)
print({"mlir": "mlir.ir" in sys.modules, "out": out, "failed": failed})
"""


def run(tmp_path: Path, cache: Path, block_mlir: bool = False) -> dict:
    script = tmp_path / "user_code.py"
    script.write_text((BLOCK_MLIR if block_mlir else "") + textwrap.dedent(PROGRAM))
    env = {**os.environ, "ADJIT_CACHE_DIR": str(cache), "ADJIT_DISK_CACHE": "1"}
    env.pop("ADJIT_DEBUG", None)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    *printed, last = result.stdout.strip().splitlines()
    return {**eval(last), "printed": printed}


def test_every_transform_loads_from_the_disk_cache_in_a_new_process(tmp_path):
    cache = tmp_path / "cache"
    first = run(tmp_path, cache)
    assert first["failed"] == {}
    assert first["mlir"]
    again = run(tmp_path, cache, block_mlir=True)
    # (a transform that missed the disk needed MLIR to build its IR: named here)
    assert again["failed"] == {}
    assert not again["mlir"]
    for name, value in first["out"].items():
        assert again["out"][name] == value, name          # the same numbers, bit for bit
    # what compiled code prints, printed by the loaded code too
    assert first["printed"] == again["printed"] == ["shout 1.5", "at x adjoint: 9.0"]

    out = first["out"]
    hessian = np.array(out["hessian"])
    v = np.cos(np.arange(5.0))
    np.testing.assert_allclose(out["hvp"], hessian @ v, rtol=1e-12, atol=1e-12)
    assert out["forward_of_grad"] == out["hvp"]
    assert out["forward_of_grad_one_lane"] == [out["hvp"]]
    assert out["hvp_batched"][0] == out["hvp"]
    np.testing.assert_allclose(out["hessian_batched"], hessian, rtol=1e-14, atol=0)
    np.testing.assert_allclose(out["jacrev_of_grad"], hessian, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out["jacfwd_batched"], out["jacfwd"], rtol=1e-14, atol=0)
    np.testing.assert_allclose(out["jacrev"], out["jacfwd"], rtol=1e-14, atol=1e-15)
    # poly = x^3 y + 2 x y^2 at (1.25, -0.5): d2/dx2 = 6 x y; d/dy of df/dx = 3 x^2 + 4 y
    assert out["grad_of_grad"] == pytest.approx(6 * 1.25 * -0.5, rel=1e-14)
    assert out["value_and_grad_of_grad"][1] == pytest.approx(3 * 1.25 ** 2 - 2.0, rel=1e-14)
    assert out["reverse_of_grad"][0] == [out["grad_of_grad"], None]
    # the trees come back with their structure (from the disk record too: bit for bit above)
    pw, pb = np.linspace(0.5, 1.0, 5), np.ones(5)
    x, w = np.linspace(-0.8, 1.3, 5), np.sin(np.arange(5.0) + 0.5)
    np.testing.assert_allclose(out["grad_tree"]["b"], 2 * (pw * x + pb), rtol=1e-14)
    np.testing.assert_allclose(out["jacrev_tree"]["w"], out["grad_tree"]["w"], rtol=1e-14)
    np.testing.assert_allclose(out["hessian_tree"]["b"]["b"], 2 * np.eye(5), rtol=1e-14)
    assert set(out["jvp_tree_result"][1]) == {"s", "t"}
    np.testing.assert_allclose(out["jvp_tree_result"][1]["s"], np.cos(x) * v, rtol=1e-14)
    np.testing.assert_allclose(out["vjp_tree_result"][0], np.cos(x) * v + 2 * x * w
                               - np.sin(x) * v, rtol=1e-12, atol=1e-15)


@adjit.jit
def cubic(x):
    return adjit.sum(x * x * x)


def test_a_transform_memoises_only_what_the_service_keys():
    """Transform.compiled is the service's memo for that transform: its keys are the
    service's (service.Key), one per product, whichever entry point asked for it."""
    x = np.linspace(0.5, 1.5, 4)
    g = adjit.grad(cubic)
    adjit.hvp(cubic, (x,), (np.ones(4),))
    adjit.autodiff(adjit.ForwardWithPrimal, g, adjit.Duplicated(x, np.ones(4)))   # hvp's
    adjit.hessian(cubic)(x)
    assert len(g.compiled) == 1
    assert all(type(k) is service.Key and k.product == "transform" for k in g.compiled)
    jac = adjit.hessian(cubic)
    (key,) = jac.compiled
    assert key == service.Key(None, (), "transform", (type_of_value(x),), None, None, None,
                              key.debug)
    np.testing.assert_allclose(jac(x), np.diag(6 * x), rtol=1e-14)
