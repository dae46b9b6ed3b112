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
from adjit.runtime import cuda, cuda_driver           # noqa: E402
from fake_driver import as_f32, device_view, install, saxpy as fake_saxpy, slots  # noqa: E402

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


@adjit.kernel
def square_and_clear(a: adjit.f32, x, y):
    i = adjit.index()
    v = x[i]
    x[i] = 0.0            # overwritten: the reverse pass needs v from the tape
    y[i] = a * v * v


F32_1D = adjit.Array[adjit.f32, 1]
F64_1D = adjit.Array[adjit.f64, 1]


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """An empty kernel cache, and kernels that have not met this process's memo."""
    for var in ("ADJIT_DEBUG", "ADJIT_CUDA_CHIP"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ADJIT_DISK_CACHE", "1")     # these tests are about the kernel cache
    for k in (saxpy, scaled, square_and_clear, cuda_launch._sum_into):
        monkeypatch.setattr(k, "_cache", {})
    return tmp_path / "cache" / "gpu"


def entries(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def test_launch_compiles_once_into_the_cache(monkeypatch, cache_dir):
    kernel = cuda_launch.gpu_kernel(saxpy, [adjit.f32, F32_1D, F32_1D], 1)
    assert kernel.written == (2,)                  # y, not x: x may be read-only
    assert {b[:3] for b in kernel.ndrange_bounds} == {(1, 0, 0), (2, 0, 0)}   # x[i], y[i]
    fake = install(monkeypatch, {kernel.entry: fake_saxpy})
    x, y = np.arange(1000, dtype=np.float32), np.ones(1000, np.float32)
    saxpy(2.0, x, y, ndrange=1000, device="cuda")
    np.testing.assert_array_equal(y, 2 * np.arange(1000) + 1)
    dx, dy = adjit.to_device(x), adjit.DeviceArray.zeros(1000, np.float32)
    saxpy(np.float64(0.5), dx, dy, ndrange=(1000,), workgroupsize=64, device="cuda")
    np.testing.assert_array_equal(dy.numpy(), x / 2)
    # One compiled kernel for NumPy and device arrays and any block size.
    assert fake.launches == [(kernel.entry, 4, 256), (kernel.entry, 16, 64)]
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
    monkeypatch.setattr(cuda_driver, "_driver", None)
    monkeypatch.setattr(cuda_driver, "_driver_error", RuntimeError("no CUDA driver on this machine"))
    x = np.ones(4, np.float32)
    with pytest.raises(RuntimeError, match="CUDA is not available: no CUDA driver"):
        saxpy(1.0, x, x, ndrange=4, device="cuda")
    assert len(entries(cache_dir)) == 2     # compiled before the driver was needed


def test_compile_only_compiles_and_runs_nothing(monkeypatch, cache_dir):
    monkeypatch.setattr(cuda_driver, "_driver", None)
    monkeypatch.setattr(cuda_driver, "_driver_error", RuntimeError("no CUDA driver on this machine"))
    x = np.ones(4, np.float32)
    with cuda_launch.compile_only():
        saxpy(1.0, x, x, ndrange=4, device="cuda")
        grads = adjit.autodiff(adjit.Reverse, square_and_clear, adjit.Active(2.0),
                               adjit.Duplicated(x, x.copy()), adjit.Duplicated(x, x.copy()),
                               ndrange=4, device="cuda")
    assert grads == (0.0, None, None) and type(grads[0]) is np.float32
    np.testing.assert_array_equal(x, 1)
    assert len(entries(cache_dir)) == 2 * 4      # saxpy; aug, rev and _sum_into
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        saxpy(1.0, x, x, ndrange=4, device="cuda")


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


# Stand-ins for square_and_clear's derivative kernels (ABI: passes/autodiff/__init__.py): a
# scalar takes a slot, a 1-D memref five (allocated, aligned, offset, size, stride), then n.
def unpack(params, n_scalars: int, n_memrefs: int):
    values = slots(params, n_scalars + 5 * n_memrefs + 1)
    scalars = [as_f32(v) for v in values[:n_scalars]]
    arrays = [device_view(values[n_scalars + 5 * k + 1], values[n_scalars + 5 * k + 3], np.float32)
              for k in range(n_memrefs)]
    return scalars, arrays, values[-1]


def fake_forward(api, params, grid, block):
    (a, da), (x, dx, y, dy), n = unpack(params, 2, 4)
    v, t = x[:n].copy(), dx[:n].copy()
    x[:n], dx[:n] = 0, 0
    y[:n], dy[:n] = a * v * v, da * v * v + 2 * a * v * t


def fake_aug(api, params, grid, block):
    (a,), (x, dx, y, dy, tape), n = unpack(params, 1, 5)
    assert len(tape) == n                      # one slot per work item
    tape[:n] = x[:n]
    x[:n], y[:n] = 0, a * tape[:n] * tape[:n]


def fake_rev(api, params, grid, block):
    (a,), (x, dx, y, dy, tape, da_items), n = unpack(params, 1, 6)
    v, g = tape[:n], dy[:n].copy()
    da_items[:n], dx[:n], dy[:n] = g * v * v, 2 * a * v * g, 0


def fake_sum_into(api, params, grid, block):
    _, (x, _), _ = unpack(params, 0, 2)
    values = slots(params, 11)
    total = device_view(values[6], values[8], np.float64)    # a float64 total
    total[0] += x.astype(np.float64).sum()         # all work items at once


def test_autodiff_of_a_launch_on_the_gpu(monkeypatch):
    types, activity = [adjit.f32, F32_1D, F32_1D], ("active", "dup", "dup")
    rev = cuda_launch.derivative_kernels(square_and_clear, types, 1, "reverse", activity)
    fwd = cuda_launch.derivative_kernels(square_and_clear, types, 1, "forward", ("dup",) * 3)
    sum_into = cuda_launch.gpu_kernel(cuda_launch._sum_into, [F32_1D, F64_1D], 1)
    assert rev["aug"].tape_per_item == (1,)
    fake = install(monkeypatch, {rev["aug"].entry: fake_aug, rev["rev"].entry: fake_rev,
                                 fwd["forward"].entry: fake_forward, sum_into.entry: fake_sum_into})
    rng = np.random.default_rng(0)
    x, dx, y, dy = (rng.standard_normal(100).astype(np.float32) for _ in range(4))

    def run(device, wrap):
        x_, dx_, y_, dy_ = (wrap(a.copy()) for a in (x, dx, y, dy))
        grads = adjit.autodiff(adjit.ReverseWithPrimal, square_and_clear,
                               adjit.Active(np.float32(1.5)), adjit.Duplicated(x_, dx_),
                               adjit.Duplicated(y_, dy_), ndrange=100, device=device)
        tx, ty = wrap(x + 1), wrap(y - 1)
        tangent = adjit.autodiff(adjit.Forward, square_and_clear,
                                 adjit.Duplicated(np.float32(1.5), 0.5), adjit.Duplicated(x_, tx),
                                 adjit.Duplicated(y_, ty), ndrange=100, device=device)
        arrays = [a if isinstance(a, np.ndarray) else a.numpy()
                  for a in (x_, dx_, y_, dy_, tx, ty)]
        return grads, tangent, arrays

    (cpu_grads, _), _, cpu_arrays = run("cpu", lambda a: a)
    for wrap in (lambda a: a, adjit.to_device):      # NumPy arrays, then device arrays
        (grads, primal), tangent, arrays = run("cuda", wrap)
        assert primal is None and tangent is None and grads[1:] == (None, None)
        np.testing.assert_allclose(grads[0], cpu_grads[0], rtol=1e-5)
        assert type(grads[0]) is np.float32
        for got, want in zip(arrays, cpu_arrays):
            np.testing.assert_allclose(got, want, rtol=1e-6)
    assert [entry for entry, _, _ in fake.launches] == \
        [rev["aug"].entry, rev["rev"].entry, sum_into.entry, fwd["forward"].entry] * 2


def test_autodiff_on_the_gpu_takes_kernels_and_jit_functions_only():
    with pytest.raises(TypeError, match="twice is an @adjit.func"):
        adjit.autodiff(adjit.Reverse, twice, adjit.Active(1.0), device="cuda")
