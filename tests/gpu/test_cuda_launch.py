"""Kernel launches with device="cuda" (api/cuda_launch.py) on a machine without a GPU:
through the fake driver, from the disk cache, and from a process that cannot import MLIR; and
their derivatives, host programs (api/cuda_jit.py) whose kernels run on the CPU behind
the fake driver (cpu_device.py)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("mlir")

import adjit                                          # noqa: E402
from adjit.api import cuda_launch  # noqa: E402
from adjit.runtime import cuda, cuda_driver           # noqa: E402
from fake_driver import install, saxpy as fake_saxpy  # noqa: E402

SCALE = 2.0
# A launch's derivative is a host program, which cc links.
needs_cc = pytest.mark.skipif(shutil.which("cc") is None,
                              reason="building host programs needs a C compiler (cc)")


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
    for k in (saxpy, scaled, square_and_clear):
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
        from adjit.api import cuda_launch
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


@needs_cc
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
    # saxpy's kernel (.ptx, .json); the derivative's host program (.so, .json: its kernels'
    # PTX inside)
    assert len(entries(cache_dir)) == 2 + 2
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


def derivative_kernels(mode, activity_args, ndrange, workgroupsize=None):
    """Fake-driver kernels: square_and_clear's derivative host program's kernels, compiled for
    the CPU from the module the host program is compiled from."""
    from cpu_device import derivative_kernels_on_cpu
    return derivative_kernels_on_cpu(square_and_clear, mode, activity_args,
                                     [adjit.f32, F32_1D, F32_1D], ndrange, workgroupsize)


@needs_cc
def test_autodiff_of_a_launch_on_the_gpu(monkeypatch):
    z = np.zeros(100, np.float32)
    reverse = derivative_kernels(adjit.ReverseWithPrimal, [adjit.Active(np.float32(1)),
                                 adjit.Duplicated(z, z), adjit.Duplicated(z, z)], (100,))
    forward = derivative_kernels(adjit.Forward, [adjit.Duplicated(np.float32(1), 1.0),
                                 adjit.Duplicated(z, z), adjit.Duplicated(z, z)], (100,))
    fake = install(monkeypatch, {**reverse, **forward})
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
    # Each kernel once, in order: augmented, reverse, the f64 sum of a's per-item adjoints
    # (a chunk's, then the chunks' pairwise: the launch rule's, on the device), forward.
    launched = [entry for entry, _, _ in fake.launches]
    (aug,) = (name for name in reverse if name.endswith("_aug"))
    (rev,) = (name for name in reverse if name.endswith("_rev"))
    (fwd,) = (name for name in forward if "_fwd_" in name)
    assert launched == [aug, rev, "__adj_item_sums_f32", "__adj_pairwise_f64", fwd] * 2


@needs_cc
def test_a_launch_derivatives_workgroup_size_is_its_own(monkeypatch):
    """The host program's launchers pass the launch's block size as a constant: another
    workgroupsize is another host program, whose kernels run in blocks of that size."""
    x = np.arange(64, dtype=np.float32)

    def gradient(device, **workgroupsize):
        return adjit.autodiff(adjit.Reverse, square_and_clear, adjit.Active(np.float32(2.0)),
                              adjit.Duplicated(x.copy(), np.zeros(64, np.float32)),
                              adjit.Duplicated(np.zeros(64, np.float32),
                                               np.ones(64, np.float32)),
                              ndrange=64, device=device, **workgroupsize)[0]

    fake = install(monkeypatch, derivative_kernels(
        adjit.Reverse, [adjit.Active(np.float32(1)), adjit.Duplicated(x, x),
                        adjit.Duplicated(x, x)], (64,)))
    want = np.float32(np.sum(x.astype(np.float64) ** 2))
    blocks = []
    for workgroupsize in ({"workgroupsize": 32}, {}, {"workgroupsize": (16,)}):
        assert gradient("cuda", **workgroupsize) == gradient("cpu", **workgroupsize) == want
        blocks.append({bx for entry, _, bx in fake.launches if entry.startswith("__adj_sq")})
        fake.launches.clear()
    assert blocks == [{32}, {256}, {16}]


@needs_cc
def test_a_launch_derivative_refuses_a_too_large_ndrange_before_anything_runs(monkeypatch):
    fake = install(monkeypatch, {})         # no kernel may run: a launch would fail the test
    x = np.ones(100, np.float32)
    for mode, a in ((adjit.Reverse, adjit.Active(np.float32(1))),
                    (adjit.Forward, adjit.Duplicated(np.float32(1), 1.0))):
        with pytest.raises(IndexError):
            adjit.autodiff(mode, square_and_clear, a, adjit.Duplicated(x, x.copy()),
                           adjit.Duplicated(x.copy(), x.copy()), ndrange=101, device="cuda")
    assert not fake.launches and not getattr(fake, "managed", 0)
    np.testing.assert_array_equal(x, 1)


def test_autodiff_on_the_gpu_takes_kernels_and_jit_functions_only():
    with pytest.raises(TypeError, match="twice is an @adjit.func"):
        adjit.autodiff(adjit.Reverse, twice, adjit.Active(1.0), device="cuda")
