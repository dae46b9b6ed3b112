"""Helpers for the frontend tests: NumPy is the reference for every result."""
from __future__ import annotations

import re

import numpy as np

# Every dtype adjit takes, as NumPy dtypes, and the numeric ones.
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]
NUMERIC = [np.float32, np.float64, np.int32, np.int64]
FLOATS = [np.float32, np.float64]


def sample(shape, dtype, seed: int = 0, lo: int = -9, hi: int = 9) -> np.ndarray:
    """A C-contiguous array of `dtype` with negative and positive values (no zeros for
    integers, so that it can divide)."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.floating):
        return rng.uniform(lo, hi, shape).astype(dtype)
    a = rng.integers(lo, hi, shape).astype(dtype)
    a[a == 0] = 1
    return a


def assert_same(got, want, rtol: float | None = None) -> None:
    """`got` equals `want` in value and dtype (floats to a tolerance fitting the dtype)."""
    got_a, want_a = np.asarray(got), np.asarray(want)
    assert got_a.dtype == want_a.dtype, f"dtype {got_a.dtype}, expected {want_a.dtype}"
    assert got_a.shape == want_a.shape, f"shape {got_a.shape}, expected {want_a.shape}"
    if np.issubdtype(want_a.dtype, np.floating):
        if rtol is None:
            rtol = 2e-6 if want_a.dtype == np.float32 else 1e-13
        np.testing.assert_allclose(got_a, want_a, rtol=rtol, atol=rtol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got_a, want_a)


def marker_line(path: str, marker: str) -> int:
    """The line of the file `path` that carries the comment `# marker` (followed by
    whitespace or the end of the line): where a test expects an error to point."""
    with open(path) as f:
        for n, line in enumerate(f, start=1):
            if re.search(rf"# {re.escape(marker)}(\s|$)", line):
                return n
    raise LookupError(marker)
