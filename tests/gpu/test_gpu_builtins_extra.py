"""hypot, copysign, isnan/isinf/isfinite, maximum/minimum on the GPU path, without a GPU: the
kernels and their derivative kernels compile to PTX that ptxas accepts and that calls nothing
(no libdevice), math.copysign's expansion is exact, and host programs (`@jit` with
device="cuda") run full, arange and the element-wise functions against NumPy."""
from __future__ import annotations

import math
import re
import shutil

import numpy as np
import pytest

import adjit

pytest.importorskip("mlir")
from adjit.passes.lower_gpu import compile_text                    # noqa: E402
from fake_driver import install                                    # noqa: E402
from test_math_approx import run_elementwise                       # noqa: E402
from test_ptx import assemble                                      # noqa: E402


@adjit.kernel
def extra_math(x, y, out, flags):
    i = adjit.index()
    a, b = x[i], y[i]
    out[i] = (adjit.hypot(a, b) + adjit.copysign(a, b) + adjit.maximum(a, b)
              + adjit.minimum(a, 0.5) + math.hypot(a, b, 2.0) * math.copysign(1.0, b))
    flags[i] = adjit.isnan(a) or math.isinf(b) or not adjit.isfinite(a * b)


def _lowered(dtype):
    x = np.ones(8, dtype)
    return extra_math.lower(x, x, x, np.zeros(8, np.bool_), ndrange=8, device="cuda")


def _no_calls(ptx: str) -> None:
    assert ".extern" not in ptx and "__nv_" not in ptx and "call" not in ptx


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64],
                         ids=["f32", "f64", "i32", "i64"])
def test_kernel_assembles(dtype, tmp_path):
    ptx = _lowered(dtype).ptx()
    _no_calls(ptx)
    assert ("copysign.f32" if dtype == np.float32 else "copysign.f64") in ptx
    assemble(ptx, tmp_path)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_derivative_kernels_assemble(dtype, mode, tmp_path):
    text = _lowered(dtype).adj()
    kernel = re.search(r"func\.func private @(\w+)", text).group(1)
    request = (f'"adj.autodiff"() {{sym_name = "d", fn = @{kernel}, mode = "{mode}", '
               f'activity = ["dup", "dup", "dup", "const"], ret_activity = "const"}} : () -> ()')
    text = text.rstrip().removesuffix("}") + request + "\n}"
    for name in (["d"] if mode == "forward" else ["d_aug", "d_rev"]):
        ptx = compile_text(text, name).ptx
        _no_calls(ptx)
        assemble(ptx, tmp_path)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_copysign_expansion_is_exact(dtype):
    special = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, -np.nan, 1e-38], dtype)
    x, y = (a.ravel() for a in np.meshgrid(special, special))
    got = run_elementwise("math.copysign", dtype, x, y)
    want = np.copysign(x, y)
    assert (np.signbit(got) == np.signbit(want)).all()
    np.testing.assert_array_equal(got, want)


@adjit.jit
def host_arrays(x, n: int):
    r = adjit.arange(n) * 0.5 + adjit.full(n, 1.5)
    return (adjit.hypot(x, r), adjit.maximum(x, r), adjit.minimum(x, 0.0), adjit.isfinite(x),
            adjit.copysign(r, x), adjit.full_like(x, 2), adjit.sum(adjit.arange(1.0, 4.0, 0.5)))


@pytest.mark.skipif(shutil.which("cc") is None, reason="host programs need a C compiler")
def test_host_program_runs_them(monkeypatch, tmp_path):
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    install(monkeypatch, {})
    x = np.array([3.0, -1.0, np.nan, np.inf, -0.5, 2.0])
    r = np.arange(6) * 0.5 + np.full(6, 1.5)
    want = (np.hypot(x, r), np.maximum(x, r), np.minimum(x, 0.0), np.isfinite(x),
            np.copysign(r, x), np.full_like(x, 2), np.sum(np.arange(1.0, 4.0, 0.5)))
    got = host_arrays(x, 6, device="cuda")
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g, w, rtol=1e-15)
