"""The GPU gets the gather-form reverse kernels (passes/autodiff/generate/gather.py, issue 9.6): the same
generated kernels go through the PTX pipeline (assembled by ptxas for sm_90, no atomics in the
gather kernel), and a function launching a stencil runs its gradient through the fake driver
(fake_driver.py, the kernels compiled for the CPU from the same module: cpu_device.py), gather
kernel first, matching the CPU gradient and a float64 NumPy reference."""
from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

pytest.importorskip("mlir")

import adjit                                                      # noqa: E402
from adjit import Const, Duplicated, Reverse, ReverseWithPrimal  # noqa: E402
from adjit.core.types import ArrayType, weak_f64, weak_i64    # noqa: E402
from adjit.passes.lower_gpu import compile_text                   # noqa: E402
from fake_driver import install                                   # noqa: E402
from test_ptx import assemble                                     # noqa: E402

STENCIL = """
func.func private @heat(%u: memref<?x?xf32>, %v: memref<?x?xf32>)
    attributes {adj.kernel, adj.ndim = 2 : i64} {
  %i = "adj.global_id"() {dim = 0 : i64} : () -> index
  %j = "adj.global_id"() {dim = 1 : i64} : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %u, %c0 : memref<?x?xf32>
  %m = memref.dim %u, %c1 : memref<?x?xf32>
  %n1 = arith.subi %n, %c1 : index
  %m1 = arith.subi %m, %c1 : index
  %a = arith.cmpi ugt, %i, %c0 : index
  %b = arith.cmpi ult, %i, %n1 : index
  %c = arith.cmpi ugt, %j, %c0 : index
  %d = arith.cmpi ult, %j, %m1 : index
  %ab = arith.andi %a, %b : i1
  %cd = arith.andi %c, %d : i1
  %inside = arith.andi %ab, %cd : i1
  scf.if %inside {
    %im = arith.subi %i, %c1 : index
    %ip = arith.addi %i, %c1 : index
    %jm = arith.subi %j, %c1 : index
    %jp = arith.addi %j, %c1 : index
    %uc = memref.load %u[%i, %j] : memref<?x?xf32>
    %un = memref.load %u[%im, %j] : memref<?x?xf32>
    %us = memref.load %u[%ip, %j] : memref<?x?xf32>
    %uw = memref.load %u[%i, %jm] : memref<?x?xf32>
    %ue = memref.load %u[%i, %jp] : memref<?x?xf32>
    %s1 = arith.addf %un, %us : f32
    %s2 = arith.addf %s1, %uw : f32
    %s3 = arith.addf %s2, %ue : f32
    %r = arith.mulf %s3, %uc : f32
    memref.store %r, %v[%i, %j] : memref<?x?xf32>
  }
  return
}
func.func @step(%u: memref<?x?xf32>, %v: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %u, %c0 : memref<?x?xf32>
  %m = memref.dim %u, %c1 : memref<?x?xf32>
  "adj.launch"(%n, %m) ({
    func.call @heat(%u, %v) : (memref<?x?xf32>, memref<?x?xf32>) -> ()
    gpu.yield
  }) {kernel = @heat} : (index, index) -> ()
  return
}
"adj.autodiff"() {sym_name = "grad", fn = @step, mode = "reverse", activity = ["dup", "dup"], ret_activity = "const"} : () -> ()
"""

_ATOMIC = re.compile(r"\b(atom|red)\.")


def test_gather_and_reverse_kernels_assemble_the_gather_kernel_without_atomics(tmp_path):
    gather = compile_text(STENCIL, "__adj_heat_rev_dd_c_gather0")
    # The reverse kernel's parameters, then the two ndrange extents (index: u64).
    assert gather.ndim == 2 and len(gather.params) == 4 + 2
    assert not _ATOMIC.search(gather.ptx)
    assemble(gather.ptx, tmp_path)
    rev = compile_text(STENCIL, "__adj_heat_rev_dd_c_rev")
    assert not _ATOMIC.search(rev.ptx)     # what is left: reading and zeroing dv
    assemble(rev.ptx, tmp_path)


def test_fallback_atomics_stay_relaxed_in_ptx(tmp_path):
    text = STENCIL.replace("%un = memref.load %u[%im, %j]",
                           "%ii = arith.muli %i, %c1 : index\n"
                           "    %i2 = arith.addi %ii, %i : index\n"
                           "    %un = memref.load %u[%i2, %j]")
    rev = compile_text(text, "__adj_heat_rev_dd_c_rev")     # u[2*i, j]: not gathered
    assert re.search(r"(atom|red)\.global\.add\.f32", rev.ptx)
    assert "fence" not in rev.ptx and "acq_rel" not in rev.ptx and "membar" not in rev.ptx
    assemble(rev.ptx, tmp_path)


@adjit.kernel
def diffuse(u, v, c):
    i, j = adjit.index_nd()
    n, m = u.shape
    if i > 0 and i < n - 1 and j > 0 and j < m - 1:
        v[i, j] = u[i, j] + c * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                                 - 4.0 * u[i, j])
    else:
        v[i, j] = u[i, j]


@adjit.jit
def energy(u0, steps: int, c):
    u = u0.copy()
    v = adjit.empty_like(u)
    for _ in range(steps):
        diffuse(u, v, c, ndrange=u.shape)
        u, v = v, u
    return adjit.sum(u * u)


def _energy_gradient_numpy(u0, steps, c):
    """d/du0 of |A^steps u0|^2 by the transposed stencil, float64."""
    def step(u):
        v = u.copy()
        v[1:-1, 1:-1] = u[1:-1, 1:-1] + c * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2]
                                             + u[1:-1, 2:] - 4 * u[1:-1, 1:-1])
        return v

    def transposed(w):
        g = w.copy()
        inner = w[1:-1, 1:-1]
        g[1:-1, 1:-1] -= 4 * c * inner
        for sl in [(slice(None, -2), slice(1, -1)), (slice(2, None), slice(1, -1)),
                   (slice(1, -1), slice(None, -2)), (slice(1, -1), slice(2, None))]:
            g[sl] += c * inner
        return g

    u = u0.copy()
    for _ in range(steps):
        u = step(u)
    g = 2 * u
    for _ in range(steps):
        g = transposed(g)
    return g


@pytest.mark.skipif(shutil.which("cc") is None, reason="building host programs needs cc")
def test_stencil_gradient_through_the_fake_driver(monkeypatch, tmp_path):
    from adjit.compiler.derivative import Derivative
    from cpu_device import kernels_on_cpu
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(5)
    u0, c, steps = rng.random((9, 12)), 0.2, 3
    anns = [Duplicated(u0, np.zeros_like(u0)), Const(steps), Const(c)]
    types = [ArrayType(adjit.f64, 2), weak_i64, weak_f64]   # (Python scalars)
    fake = install(monkeypatch, kernels_on_cpu(
        Derivative(energy, Reverse, anns, types, None, None).adj_text))
    du = np.zeros_like(u0)
    _, primal = adjit.autodiff(ReverseWithPrimal, energy, Duplicated(u0, du), steps, c,
                               device="cuda")
    names = [f for f, *_ in fake.launches]
    gathers = [k for k, f in enumerate(names) if "gather" in f]
    assert len(gathers) == steps
    # each gather launch is followed by its reverse kernel (which zeroes dv after it)
    assert all(names[k + 1].endswith("_rev") for k in gathers)
    du_cpu = np.zeros_like(u0)
    adjit.autodiff(Reverse, energy, Duplicated(u0, du_cpu), steps, c)
    np.testing.assert_allclose(du, du_cpu, rtol=1e-12)
    np.testing.assert_allclose(du, _energy_gradient_numpy(u0, steps, c), rtol=1e-12)
    h, k = 1e-6, (4, 5)
    e = np.zeros_like(u0)
    e[k] = h
    fd = (energy(u0 + e, steps, c) - energy(u0 - e, steps, c)) / (2 * h)
    np.testing.assert_allclose(du[k], fd, rtol=1e-6)
