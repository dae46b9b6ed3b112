"""Issue 9 item 4: tapes no larger than needed, measured as the bytes a gradient holds above
those in use before it (adjit.memory_stats, the benchmark's "grad extra" column).

G2's heat step is linear and its border guard (`0 < i < n - 1 and 0 < j < m - 1`, an
scf.if yielding an i1) follows from the item's ids and the array's sizes: the reverse
kernel recomputes it, so the step keeps nothing per item and the gradient's memory does
not grow with the number of steps (before: one i1 per item and step, copied again into the
function's i1 stack). Every gradient here is checked against the float64 NumPy reference
and against central finite differences of the float64 loss."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_grad_workloads as bench  # noqa: E402
from timing import extra_bytes  # noqa: E402

GRID = 64


def _workload(steps: int, reaction: bool):
    return bench.stencil_workload(GRID, steps, reaction, np.random.default_rng(3))


def _check_gradient(wl) -> None:
    (g,), value = wl.grad()
    (ref,), ref_value = wl.reference()
    assert bench.rel_error(((g,), value), ((ref,), ref_value)) < 1e-5
    u64 = wl.wrt[0]
    d = np.random.default_rng(5).standard_normal(u64.shape)
    h = 1e-6
    fd = (wl.ref_loss(u64 + h * d) - wl.ref_loss(u64 - h * d)) / (2 * h)
    assert float(np.sum(g * d)) == pytest.approx(fd, rel=1e-4)


@pytest.mark.parametrize("reaction", [False, True], ids=["G2", "G2b"])
def test_gradient_matches_references(reaction):
    _check_gradient(_workload(7, reaction))


def test_linear_stencil_tape_does_not_grow_with_steps():
    few, many = _workload(3, False), _workload(20, False)
    few.grad(), many.grad()   # compiled and warm: what is measured is the gradient call
    growth = extra_bytes(many.grad) - extra_bytes(few.grad)
    # Allowed: the function's index stack (a few indices per iteration, whatever the grid).
    # One i1 per item and step, as before, would be 17 * GRID**2 bytes (twice that copied).
    assert growth < 17 * GRID * GRID // 8, growth
    _check_gradient(many)
