"""Loops over views whose sizes may be 1 at run time (issue 30): the frontend emits such a loop
twice, `if any size is 1 {indices through select(size == 1, 0, i)} else {plain indices}`
(arrays._unit_versions), so that the common case, nothing broadcasting, has plain indices
LLVM vectorises (a stencil written with slices ran one element at a time). Both versions
give NumPy's results, dtype included."""
import numpy as np
import pytest
from mlir import ir

import adjit
from adjit.dialects import make_context


def heat_step(u, un):
    un[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:]
                                            + u[1:-1, :-2] - 4.0 * u[1:-1, 1:-1])
    return un


def rows(u):
    return u[1:, :] * u[:1, :] + u[:-1, :]


def cols(u):
    return u[:, 1:] - 2.0 * u[:, :1] * u[:, :-1]


def line(u):
    return u[2:] + u[:-2] * u[1:-1]


@pytest.mark.parametrize("fn,shapes", [
    (rows, [(5, 3), (2, 4), (1, 3), (3, 1)]),
    (cols, [(3, 5), (4, 2), (3, 1), (1, 4)]),
    (line, [(7,), (3,), (2,)]),
], ids=["rows", "cols", "line"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_both_versions_give_numpy_s_results(fn, shapes, dtype):
    jitted = adjit.jit(fn)
    for shape in shapes:
        u = np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype)
        got, want = jitted(u), fn(u)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-15)


@pytest.mark.parametrize("shape", [(7, 6), (3, 3), (3, 4), (4, 3)])
def test_the_stencil_step_is_numpy_s(shape):
    u = np.random.default_rng(7).standard_normal(shape)
    got = adjit.jit(heat_step)(u, u.copy())
    np.testing.assert_array_equal(got, heat_step(u, u.copy()))


def _select_indexed(loop) -> bool:
    """Whether a load inside `loop` takes an index made by arith.select."""
    found = []

    def visit(op):
        op = op.operation
        if op.name == "memref.load" and any(
                isinstance(v, ir.OpResult) and v.owner.operation.name == "arith.select"
                for v in list(op.operands)[1:]):
            found.append(op)
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    visit(inner)
    visit(loop)
    return bool(found)


def test_the_stencil_loop_has_a_version_with_plain_indices():
    u = np.ones((6, 6))
    text = adjit.jit(heat_step).lower(u, u.copy()).adj()
    with make_context():
        module = ir.Module.parse(text)
        loops = []

        def collect(op):
            op = op.operation
            if op.name == "scf.parallel":
                loops.append(op)
                return
            for region in op.regions:
                for block in region.blocks:
                    for inner in block.operations:
                        collect(inner)
        collect(module.operation)
        stencil = [lp for lp in loops if sum(1 for _ in _loads(lp)) >= 5]
        assert len(stencil) == 2, len(stencil)       # the two versions
        plain = [lp for lp in stencil if not _select_indexed(lp)]
        assert len(plain) == 1
        assert plain[0].parent.name == "scf.if"


def _loads(op):
    op = op.operation
    if op.name == "memref.load":
        yield op
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                yield from _loads(inner)
