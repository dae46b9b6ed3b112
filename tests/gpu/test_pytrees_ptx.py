"""Pytrees on the GPU path, without a GPU: a kernel taking a NamedTuple of arrays and a
dict (its variant for their structures, lang/pytrees.py; a device function taking the
NamedTuple) compiles to PTX that ptxas accepts for sm_90, and so do its forward and reverse
derivative kernels for Duplicated trees."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

pytest.importorskip("mlir", reason="compiling kernels needs MLIR")

import adjit                                                      # noqa: E402
from adjit import Duplicated, Forward, Reverse                    # noqa: E402
from adjit.api import pytree_calls                                # noqa: E402
from adjit.api.cuda_launch import gpu_kernel                      # noqa: E402
from adjit.lang.functions import specialise                       # noqa: E402
from adjit.lang.modes import Annotation, Const                    # noqa: E402
from test_ptx import assemble                                     # noqa: E402


class State(NamedTuple):
    x: np.ndarray
    v: np.ndarray


@adjit.func
def speed(s, i):
    return s.v[i] * s.v[i]


@adjit.kernel
def integrate(s, coeffs, dt: adjit.f32):
    i = adjit.index()
    s.v[i] = s.v[i] - coeffs["k"] * s.x[i] * dt
    s.x[i] = s.x[i] + (s.v[i] + coeffs["drag"] * speed(s, i)) * dt


def _args(n=8):
    r = np.random.default_rng(0)
    return (State(r.random(n, np.float32), r.random(n, np.float32)),
            {"k": np.float32(2.0), "drag": np.float32(0.1)}, 0.01)


def _variant_and_types(args):
    route = pytree_calls.route(integrate, args)
    v = route.variant
    return v, specialise(v.__name__, v.params, v.annotations, route.flat)[0]


def test_a_kernel_taking_trees_assembles(tmp_path):
    variant, types = _variant_and_types(_args())
    kernel = gpu_kernel(variant, types, 1)
    assert ".extern" not in kernel.ptx and "__nv_" not in kernel.ptx
    assemble(kernel.ptx, tmp_path)


@pytest.mark.parametrize("mode", [Forward, Reverse], ids=["forward", "reverse"])
def test_its_derivative_kernels_assemble(mode, tmp_path):
    from adjit.compiler.derivative import Derivative
    s, coeffs, dt = _args()
    ds = State(np.zeros_like(s.x), np.zeros_like(s.v))
    variant, flat, _ = pytree_calls.annotations(
        integrate, [Duplicated(s, ds), coeffs, dt], mode)
    _, types = _variant_and_types((s, coeffs, dt))
    flat = [a if isinstance(a, Annotation) else Const(a) for a in flat]
    d = Derivative(variant, mode, flat, types, (8,), None)
    _, program = d.host_program("t", "sm_90")
    assert program.kernels
    for k in program.kernels:
        assert ".entry" in k.ptx and ".extern" not in k.ptx and "__nv_" not in k.ptx, k.entry
        assemble(k.ptx, tmp_path)


def test_it_runs_on_the_cpu_as_numpy_says():
    s, coeffs, dt = _args()
    x, v = s.x.copy(), s.v.copy()
    integrate(s, coeffs, dt, ndrange=8)
    v = v - coeffs["k"] * x * np.float32(dt)
    np.testing.assert_allclose(s.v, v, rtol=1e-6)
    np.testing.assert_allclose(s.x, x + (v + coeffs["drag"] * v * v) * np.float32(dt),
                               rtol=1e-6)


@adjit.jit
def advance(state, coeffs):
    return State(x=state.x + state.v * coeffs["dt"], v=state.v * 2.0), {"n": state.x.shape[0]}


def test_a_host_program_takes_and_returns_trees(monkeypatch, tmp_path):
    """@adjit.jit(device="cuda") with trees in and out (host code on the CPU behind the fake
    driver: no GPU needed): the result comes back with its structure."""
    import shutil
    if shutil.which("cc") is None:
        pytest.skip("building host programs needs a C compiler (cc)")
    from fake_driver import install
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    install(monkeypatch, {})
    s = State(np.arange(3.0), np.ones(3))
    state, info = advance(s, {"dt": 0.5}, device="cuda")
    assert type(state) is State and list(info) == ["n"] and info["n"] == 3
    np.testing.assert_array_equal(state.x, np.arange(3.0) + 0.5)
    np.testing.assert_array_equal(state.v, np.full(3, 2.0))
