"""The differential generator (diff_programs.py) draws every unary math builtin adjit has
(lang/builtins.py UNARY_MATH), each wrapped into its domain: its value and its
derivative (central differences) finite and moderate for any finite input, checked on a
wide grid in float64."""
import os
import sys
import types

import numpy as np
import pytest
from scipy.special import erf

from adjit.lang.builtins import UNARY_MATH

sys.path.insert(0, os.path.dirname(__file__))
from diff_programs import UNARY  # noqa: E402

# The forms' `adjit.` builtins, in NumPy.
_ADJIT = types.SimpleNamespace(erf=erf, rsqrt=lambda x: 1.0 / np.sqrt(x))


def test_every_unary_builtin_is_drawn():
    assert set(UNARY_MATH) <= set(UNARY), sorted(set(UNARY_MATH) - set(UNARY))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_each_form_is_finite_with_a_moderate_derivative(name):
    form = eval("lambda x: " + UNARY[name].format("x"), {"np": np, "adjit": _ADJIT})
    x = np.concatenate([np.linspace(-60.0, 60.0, 20001), [0.0, 1e-12, -1e-12]])
    h = 1e-6
    with np.errstate(all="raise"):
        value = form(x)
        slope = (form(x + h) - form(x - h)) / (2 * h)
    assert np.isfinite(value).all() and np.isfinite(slope).all()
    assert np.abs(slope).max() < 1e4, f"{name}: a slope of {np.abs(slope).max():.3g}"
