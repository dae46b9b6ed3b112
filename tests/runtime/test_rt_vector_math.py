"""Modules that call math functions are built by opt/llc/cc with glibc's vector math library
(runtime/engine.py: _vectorizable_math); where a tool fails they are compiled in-process, with
the same results."""
from __future__ import annotations

import numpy as np
import pytest

import adjit
from adjit.runtime import cpu_cache


def make_wave():
    @adjit.jit
    def wave(x):
        return adjit.sin(adjit.exp(x)) * 0.5 + x * x
    return wave


def test_vector_math_is_used_where_glibc_has_it():
    opt_flags, link_flags = cpu_cache.vector_math()
    if not opt_flags:
        pytest.skip("no libmvec here: math calls stay scalar")
    assert opt_flags == ("-vector-library=LIBMVEC",) and link_flags[0].startswith("-l:libmvec")
    x = np.random.default_rng(0).random(10_001).astype(np.float32)
    np.testing.assert_allclose(make_wave()(x), np.sin(np.exp(x)) * 0.5 + x * x, rtol=2e-6)


@adjit.jit
def damped(x):
    return adjit.exp(-x) * adjit.cos(3.0 * x)


def test_a_failed_build_falls_back_to_compiling_in_process(monkeypatch):
    calls = []

    def broken(*args, **kwargs):
        calls.append(args)
        raise RuntimeError("llc failed: (a broken toolchain)")
    monkeypatch.setattr(cpu_cache, "build_shared_object", broken)
    x = np.linspace(-1, 1, 999)
    np.testing.assert_allclose(damped(x), np.exp(-x) * np.cos(3.0 * x), rtol=1e-14)
    assert calls or not cpu_cache.vector_math()[0]     # the build was tried, and failed
