"""Sums in @jit array code (compiler/arrays.reduce), issue 30's W4 (`sum(x*x)` f32): a chunk's
four accumulators take a quarter of the chunk each (blocked lanes), so each lane's loads are
contiguous and LLVM vectorises them without de-interleaving shuffles (lane k at j + k made
every vector go through vpermps: W4 1.5-2.4x slower). Checked: the optimised chunk loop has no
shufflevector; results against NumPy (dtype included) at sizes around the lanes and chunks;
f32 sums still within half an f32 ulp of the exact sum; the gradient through the new loop
against a float64 reference and central differences."""
from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import adjit


@adjit.jit
def sum_squares(x):
    return adjit.sum(x * x)


@adjit.jit
def total(x):
    return adjit.sum(x)


@adjit.jit
def least_squares(a: float, b: float, x, y):
    r = a * x + b - y
    return adjit.sum(r * r)


def optimised_chunk_loops(adj_text: str, tmp_path) -> list[str]:
    """The launch-loop functions of a module after opt -O3 for AVX2, as the runtime builds it."""
    import llvm
    from mlir import ir
    from adjit.dialects import make_context
    from adjit.passes.pipeline import llvm_ir_text
    with make_context():
        ll = llvm_ir_text(ir.Module.parse(adj_text), num_threads=2)
    path = tmp_path / "m.ll"
    path.write_text(ll)
    opt = Path(list(llvm.__path__)[0]) / "bin" / "opt"
    out = subprocess.run([str(opt), "-O3", "-mtriple=x86_64-unknown-linux-gnu",
                          "-mcpu=x86-64-v3", "-vector-library=LIBMVEC", str(path), "-S",
                          "-o", "-"], check=True, capture_output=True, text=True).stdout
    return re.findall(r"define internal void @__adj_thunk_\w+\(.*?\n}\n", out, re.S)


@pytest.mark.parametrize("fn", [sum_squares, total], ids=["sum(x*x)", "sum(x)"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_float_sum_vectorises_without_shuffles(fn, dtype, tmp_path):
    loops = optimised_chunk_loops(fn.lower(np.ones(64, dtype)).adj(), tmp_path)
    assert len(loops) == 1, "one parallel loop over the chunks"
    elem = "float" if dtype == np.float32 else "double"
    assert re.search(rf"load <\d+ x {elem}>", loops[0]), "the chunk loop is not vectorised"
    assert "shufflevector" not in loops[0], "the lanes' loads are de-interleaved"


SIZES = [0, 1, 3, 4, 5, 7, 4095, 4096, 4097, 4 * 4096 + 6, 100_003]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.bool_])
def test_sums_against_numpy(n, dtype):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 10).astype(dtype) if dtype != np.bool_ else rng.random(n) > 0.5
    got = total(x)
    want = np.sum(x)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    if dtype in (np.float32, np.float64):
        sq = sum_squares(x)
        assert np.asarray(sq).dtype == dtype
        for value, terms in ((got, x), (sq, x * x)):
            exact = math.fsum(terms.astype(np.float64))
            if dtype == np.float32:     # f64 accumulators: the exact sum, rounded once
                bound = 0.5 * np.spacing(np.float32(abs(exact)))
            else:                       # pairwise over chunks: NumPy's kind of bound
                bound = (math.log2(n + 1) + 8) * 2.0 ** -53 * float(np.sum(np.abs(terms)))
            assert abs(float(value) - exact) <= bound
    else:
        assert got == want


def test_f32_sums_of_a_million_stay_within_half_an_ulp():
    """The accuracy the f64 accumulators give (as before the blocked lanes): the error of an
    f32 sum of 1e6 elements (four kinds of data) against math.fsum, in ulps of the result."""
    rng = np.random.default_rng(1)
    n = 1_000_000
    for x in (rng.random(n), rng.standard_normal(n),
              rng.standard_normal(n) * np.exp(rng.uniform(-20, 20, n)), rng.random(n) + 1e3):
        x = x.astype(np.float32)
        for got, exact in ((total(x), math.fsum(x.astype(np.float64))),
                           (sum_squares(x), math.fsum((x * x).astype(np.float64)))):
            assert type(got) is np.float32
            assert abs(float(got) - exact) <= 0.5 * np.spacing(np.float32(abs(exact)))


@pytest.mark.parametrize("n", [5, 4097, 3 * 4096 + 3])
def test_the_gradient_through_blocked_lanes(n):
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    a, b = 0.7, -0.3
    da, db = adjit.autodiff(adjit.Reverse, least_squares, adjit.Active(a), adjit.Active(b),
                            adjit.Const(x), adjit.Const(y))[:2]
    r = a * x + b - y
    assert da == pytest.approx(math.fsum(2 * r * x), rel=1e-12)
    assert db == pytest.approx(math.fsum(2 * r), rel=1e-12)
    h = 1e-6
    fd = (least_squares(a + h, b, x, y) - least_squares(a - h, b, x, y)) / (2 * h)
    assert da == pytest.approx(fd, rel=1e-6)
