"""Fancy indexing, scatter and sort in a device="cuda" host program (its own code runs on
the CPU over managed memory, behind the fake driver here: no GPU needed): the gathers'
IndexError checks, the serial scatter loops and the merge sort's @adjit.func go through the
host lowering as through the CPU's."""
import shutil

import numpy as np
import pytest

import adjit


@adjit.jit
def ranked(x, idx, v):
    y = x[idx] * 2.0
    w = x.copy()
    np.add.at(w, idx, v)
    return y, w, np.sort(x), np.argsort(x)


def test_gather_scatter_and_sort_in_a_host_program(monkeypatch, tmp_path):
    if shutil.which("cc") is None:
        pytest.skip("building host programs needs a C compiler (cc)")
    from fake_driver import install
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    install(monkeypatch, {})
    x = np.array([3.0, -1.0, 2.0, 2.0, 0.5])
    idx, v = np.array([4, 0, 4, -1]), np.array([1.0, 2.0, 3.0, 4.0])
    w = x.copy()
    np.add.at(w, idx, v)
    want = (x[idx] * 2.0, w, np.sort(x), np.argsort(x, kind="stable"))
    for got, exp in zip(ranked(x, idx, v, device="cuda"), want):
        np.testing.assert_array_equal(got, exp)
    with pytest.raises(IndexError):
        ranked(x, np.array([5]), v[:1], device="cuda")
