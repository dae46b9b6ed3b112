"""DuplicatedNoNeed: like Duplicated for what the shadow receives (the primal result of the
argument may go unused, which lets the pass skip work)."""
import numpy as np
import pytest

import adjit
from adjit import Active, Const, Duplicated, DuplicatedNoNeed, Forward, Reverse, autodiff


@adjit.jit
def scaled_energy(a: float, x):
    s = 0.0
    for i in range(x.shape[0]):
        s += a * x[i] * x[i]
    return s


def test_duplicated_no_need_matches_duplicated():
    x = np.linspace(-1, 1, 9)
    d1, d2 = np.zeros(9), np.zeros(9)
    g1 = autodiff(Reverse, scaled_energy, Active(1.5), Duplicated(x, d1))
    g2 = autodiff(Reverse, scaled_energy, Active(1.5), DuplicatedNoNeed(x, d2))
    np.testing.assert_allclose(d1, 2 * 1.5 * x, rtol=1e-12)
    np.testing.assert_array_equal(d1, d2)
    assert g1[0] == pytest.approx(np.sum(x * x)) and g2[0] == pytest.approx(g1[0])
    t = autodiff(Forward, scaled_energy, Const(1.5), DuplicatedNoNeed(x, np.ones(9)))
    assert t == pytest.approx(np.sum(2 * 1.5 * x))
