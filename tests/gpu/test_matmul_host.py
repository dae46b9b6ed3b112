"""Matrix products in a device="cuda" host program (its own code runs on the CPU over managed
memory): the product is a hooked runtime call (lower_cuda_host.HOOKS: gemm.cpp, the native
extension's), run here behind the fake driver, no GPU needed."""
import shutil

import numpy as np
import pytest

import adjit
from adjit.core.symbols import GEMM_SYMBOLS


@adjit.jit
def layer(x, w):
    return np.tanh(x @ w)


def test_the_products_are_hooked():
    from adjit.passes.lower_cuda_host import HOOKS
    from adjit.runtime.extension import runtime_symbols
    assert set(GEMM_SYMBOLS) <= set(HOOKS) and set(GEMM_SYMBOLS) <= set(runtime_symbols())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_product_in_a_host_program(dtype, monkeypatch, tmp_path):
    if shutil.which("cc") is None:
        pytest.skip("building host programs needs a C compiler (cc)")
    from fake_driver import install
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    install(monkeypatch, {})
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((5, 4)).astype(dtype), rng.standard_normal((4, 3)).astype(dtype)
    got = layer(x, w, device="cuda")
    np.testing.assert_allclose(got, np.tanh(x @ w), rtol=1e-5)
