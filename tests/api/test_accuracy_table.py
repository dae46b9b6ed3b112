"""The accuracy table of the math builtins (issue 29, the instrument's item 3): every builtin,
f32 and f64, kernels and @jit, values and derivatives, within its documented bound, and
docs/accuracy.md listing them all with those bounds. The sweep, the references and the
bounds are in accuracy_sweep.py (`python tests/api/accuracy_sweep.py --write` regenerates the
docs table)."""
import math
import re

import numpy as np
import pytest

import accuracy_sweep as S
from adjit.lang import builtins


@pytest.fixture(scope="module")
def rows():
    return S.measure()       # one kernel and one @jit function per dtype, every builtin


def test_every_math_builtin_is_in_the_sweep():
    wanted = set(builtins.UNARY_MATH) | set(builtins.BINARY_MATH)
    wanted |= {"floor", "ceil", "abs", "degrees", "radians"}
    assert wanted <= set(S.NAMES), sorted(wanted - set(S.NAMES))


def test_values_and_derivatives_within_bounds(rows):
    over = []
    for r in rows:
        value_bound, derivative_bound, _ = S.bound(r.name)
        for where, err in r.value.items():
            if not err <= value_bound:
                over.append(f"{r.name} {where}: value {err} ulp > {value_bound}")
        for where, err in r.derivative.items():
            if not err <= derivative_bound:
                over.append(f"{r.name} {where}: derivative {err} ulp > {derivative_bound}")
    assert not over, "\n".join(over)
    # and every cell was measured: both dtypes, both places
    for r in rows:
        assert len(r.value) == len(r.derivative) == len(S.DTYPES) * len(S.PLACES)


def test_special_values_agree_with_numpy(rows):
    special = [s for r in rows for s in r.special]
    assert not special, "\n".join(special)


def test_the_ulp_measure():
    f32 = np.float32
    one = np.array([1.0], f32)
    assert S.ulps(np.nextafter(one, f32(2)), one, f32)[0] == 1
    assert S.ulps(np.array([np.nan], f32), np.array([np.nan], f32), f32)[0] == 0
    assert S.ulps(np.array([0.0], f32), np.array([np.nan], f32), f32)[0] == math.inf
    assert S.ulps(np.array([np.inf], f32), np.array([-np.inf], f32), f32)[0] == math.inf
    assert S.ulps(np.array([3e38], f32), np.array([np.inf], f32), f32)[0] == math.inf


def test_exact_derivatives_agree_with_jax():
    """The reference formulas (mpmath) against JAX's float64 grad, wherever both are finite
    and the point is one the table counts: a typo in a formula cannot hide an error."""
    for name in S.NAMES:
        if name in S.UNARY:
            args = (S.unary_points(np.float64),)
        else:
            args = S.binary_points(np.float64)
        exact = S.exact_derivatives(name, args)
        with np.errstate(all="ignore"):
            jax_d = S.jax_derivatives(name, args)
        skip = S._skip_derivative(name, args)
        if name == "pow":      # JAX's b * a^(b - 1): b - 1 == b, the parity wrong at a = -1
            skip = skip | (np.abs(args[1]) >= 2.0 ** 53)
        with np.errstate(all="ignore"):    # JAX's hypot' where hypot overflows: 1.06, not 0.71
            skip = skip | ~np.isfinite(S._numpy(name)(*args))
        for k, (e, j) in enumerate(zip(exact, jax_d)):
            both = np.isfinite(e) & np.isfinite(j) & ~skip
            assert both.sum() > 10, name
            # JAX's own float64 functions are off by up to ~1e-13 relative (exp2 near
            # overflow), and its expm1' (y + 1) and tanh' (1 - y^2) cancel to 0 where the
            # derivative is below 1e-16: an absolute 1e-15 besides
            off = np.abs(e[both] - j[both]) - 1e-9 * np.abs(e[both]) - 1e-15
            assert off.max() <= 0, (name, k, float(off.max()))


def _doc_rows() -> dict[str, list[str]]:
    rows = {}
    for line in S.DOC.read_text().splitlines():
        m = re.match(r"\| `(\w+)` \|(.*)\|$", line)
        if m:
            rows[m.group(1)] = [c.strip() for c in m.group(2).split("|")]
    return rows


def test_docs_table_lists_every_builtin_with_its_bounds():
    doc = _doc_rows()
    assert list(doc) == S.NAMES, "docs/accuracy.md: rerun tests/api/accuracy_sweep.py --write"
    for name, cells in doc.items():
        value_bound, derivative_bound, why = S.bound(name)
        assert cells[-1] == f"{S._fmt(value_bound)} / {S._fmt(derivative_bound)}", name
        if why:
            assert why in S.DOC.read_text(), name


def test_docs_numbers_are_within_the_bounds():
    """The committed numbers (this machine's when written) respect the bounds too."""
    for name, cells in _doc_rows().items():
        value_bound, derivative_bound, _ = S.bound(name)
        n = len(S.DTYPES) * len(S.PLACES)
        assert all(float(c) <= value_bound for c in cells[:n]), name
        assert all(float(c) <= derivative_bound for c in cells[n:2 * n]), name
