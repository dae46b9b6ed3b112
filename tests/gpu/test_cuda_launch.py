"""Kernel launches with device="cuda" (frontend/cuda_launch.py) on a machine without a GPU:
through the fake driver, from the disk cache, and from a process that cannot import MLIR."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("mlir")

import adjit                                          # noqa: E402
from adjit.frontend import cuda_launch                # noqa: E402
from adjit.runtime import cuda                        # noqa: E402
from fake_driver import install, saxpy as fake_saxpy  # noqa: E402

SCALE = 2.0


@adjit.func
def twice(v):
    return 2.0 * v


@adjit.kernel
def saxpy(a: adjit.f32, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


@adjit.func
def identity(v):
    return v


@adjit.kernel
def scaled(x):
    i = adjit.index()
    x[i] = twice(x[i]) * SCALE


F32_1D = adjit.Array[adjit.f32, 1]


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """An empty kernel cache, and kernels that have not met this process's memo."""
    for var in ("ADJIT_DEBUG", "ADJIT_CUDA_CHIP"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    for k in (saxpy, scaled):
        monkeypatch.setattr(k, "_cache", {})
    return tmp_path / "cache" / "gpu"


def entries(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def test_launch_compiles_once_into_the_cache(monkeypatch, cache_dir):
    entry = cuda_launch.gpu_kernel(saxpy, [adjit.f32, F32_1D, F32_1D], 1).entry
    fake = install(monkeypatch, {entry: fake_saxpy})
    x, y = np.arange(1000, dtype=np.float32), np.ones(1000, np.float32)
    saxpy(2.0, x, y, ndrange=1000, device="cuda")
    np.testing.assert_array_equal(y, 2 * np.arange(1000) + 1)
    dx, dy = adjit.to_device(x), adjit.DeviceArray.zeros(1000, np.float32)
    saxpy(np.float64(0.5), dx, dy, ndrange=(1000,), workgroupsize=64, device="cuda")
    np.testing.assert_array_equal(dy.numpy(), x / 2)
    # One compiled kernel for NumPy and device arrays and any block size.
    assert fake.launches == [(entry, 4, 256), (entry, 16, 64)]
    assert len(entries(cache_dir)) == 2


def test_a_process_without_mlir_launches_from_the_cache(tmp_path, cache_dir):
    (tmp_path / "user_kernels.py").write_text(textwrap.dedent("""
        import adjit

        OFFSET = 1.5

        @adjit.func
        def shift(v):
            return v + OFFSET

        @adjit.kernel
        def shifted(x, y):
            i = adjit.index()
            y[i] = shift(x[i])
        """))
    run = textwrap.dedent("""
        import json, sys
        import numpy as np
        from adjit.frontend import cuda_launch
        from user_kernels import shifted
        x = np.ones(8, np.float32)
        types, _ = cuda_launch.specialise_cuda(shifted, [x, x])
        kernel = cuda_launch.gpu_kernel(shifted, types, 1)
        print(json.dumps([cuda_launch.cache_key(shifted, types, 1, False, "sm_90"),
                          kernel.to_dict()]))
        try:
            shifted(x, x, ndrange=8, device="cuda")
            print("launch: done", file=sys.stderr)
        except RuntimeError as e:
            print("launch:", e, file=sys.stderr)
        if WITHOUT_MLIR:          # f64 was never compiled
            try:
                shifted(x.astype(np.float64), x.astype(np.float64), ndrange=8, device="cuda")
            except RuntimeError as e:
                print("miss:", e, file=sys.stderr)
        """)
    env = {k: v for k, v in os.environ.items() if k not in ("ADJIT_DEBUG", "ADJIT_CUDA_CHIP")}

    def python(prelude: str) -> subprocess.CompletedProcess:
        result = subprocess.run([sys.executable, "-c", prelude + run], capture_output=True,
                                text=True, cwd=tmp_path, env=dict(env, PYTHONPATH=str(tmp_path)))
        assert result.returncode == 0, result.stderr
        return result

    launched = "launch: done" if cuda.is_available() else "launch: CUDA is not available"
    here = python("WITHOUT_MLIR = False\n")     # compiles
    assert launched in here.stderr
    assert len(entries(cache_dir)) == 2
    there = python("import sys; sys.modules['mlir'] = None; WITHOUT_MLIR = True\n")
    assert json.loads(there.stdout) == json.loads(here.stdout)
    assert launched in there.stderr               # found in the cache
    assert "miss: kernel shifted" in there.stderr and "MLIR" in there.stderr
    assert len(entries(cache_dir)) == 2


def test_key_follows_what_the_kernel_depends_on(monkeypatch):
    def key(types=(F32_1D,), ndim=1, debug=False, chip="sm_90"):
        return cuda_launch.cache_key(scaled, list(types), ndim, debug, chip)

    base = key()
    assert key() == base
    others = {key(types=(adjit.Array[adjit.f64, 1],)), key(ndim=2), key(debug=True),
              key(chip="sm_100")}
    monkeypatch.setitem(scaled.pyfn.__globals__, "SCALE", 3.0)           # a global constant
    others.add(key())
    monkeypatch.setitem(scaled.pyfn.__globals__, "twice", identity)   # another callee
    others.add(key())
    assert base not in others and len(others) == 6


def test_without_a_gpu_the_error_says_so(monkeypatch, cache_dir):
    monkeypatch.setattr(cuda, "_driver", None)
    monkeypatch.setattr(cuda, "_driver_error", RuntimeError("no CUDA driver on this machine"))
    x = np.ones(4, np.float32)
    with pytest.raises(RuntimeError, match="CUDA is not available: no CUDA driver"):
        saxpy(1.0, x, x, ndrange=4, device="cuda")
    assert len(entries(cache_dir)) == 2     # compiled before the driver was needed


def test_device_arrays_are_for_cuda_launches():
    y = np.zeros(4, np.float32)
    borrowed = adjit.DeviceArray(4, np.float32, ptr=1, owner=None)   # no driver needed
    with pytest.raises(TypeError, match="GPU memory.*device='cuda'"):
        saxpy(1.0, borrowed, y, ndrange=4)


def test_lower_for_cuda_goes_through_the_cache(cache_dir):
    x = np.ones(16, np.float32)
    lowered = scaled.lower(x, ndrange=16, device="cuda")
    assert "adj.kernel" in lowered.adj()
    assert lowered.ptx() == cuda_launch.gpu_kernel(scaled, [F32_1D], 1).ptx
    assert ".entry" in lowered.ptx() and len(entries(cache_dir)) == 2
    with pytest.raises(ValueError, match="llvm"):
        lowered.llvm()
