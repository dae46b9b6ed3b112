"""The forward code of kernels and of @jit array code vectorises (issue 11: "the LLVM IR of the
forward kernels carries vector instructions"): every launch loop of the module, optimised as
the runtime builds it (opt -O3, libmvec) for AVX2, is vectorised by LLVM's loop vectoriser
(or becomes a memset). A loop that stopped vectorising (an aliasing doubt, a store under a
branch merged into a select of addresses, a non-reassociable reduction) fails here."""
import numpy as np
import pytest

import adjit
from adjit.dialects import make_context
from ad_helpers import vectorised_launch_loops


@adjit.kernel
def saxpy(a: adjit.f32, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


@adjit.kernel
def stencil(u, v):
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    if 0 < i < n - 1 and 0 < j < m - 1:
        v[i, j] = u[i, j] + 0.1 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                                   - 4.0 * u[i, j])
    else:
        v[i, j] = u[i, j]


@adjit.jit
def transcendental(x, z):
    return adjit.sin(adjit.exp(x)) * z + 0.5 * x * x


@adjit.jit
def sum_squares(x):
    return adjit.sum(x * x)


def llvm_ir(lowered) -> str:
    from mlir import ir
    from adjit.passes.pipeline import llvm_ir_text
    with make_context():
        return llvm_ir_text(ir.Module.parse(lowered.adj()), num_threads=2)


x32, y32 = np.ones(64, np.float32), np.ones(64, np.float32)
CASES = {
    "saxpy": lambda: saxpy.lower(np.float32(2.0), x32, y32, ndrange=64),
    "stencil": lambda: stencil.lower(np.ones((8, 8)), np.zeros((8, 8)), ndrange=(8, 8)),
    "transcendental": lambda: transcendental.lower(x32, y32),
    "sum": lambda: sum_squares.lower(np.ones(64)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_forward_launch_loops_vectorise(name, tmp_path):
    loops, vectorised = vectorised_launch_loops(llvm_ir(CASES[name]()), tmp_path)
    assert loops, "no parallel launch loop in the module"
    assert vectorised == loops
