"""`@adjit.jit` functions called with device="cuda", without a GPU: the host program (the
function compiled for the CPU, runtime/host_program.py) runs for real, and its launches go to
the fake driver (fake_driver.py), whose "kernels" are NumPy stand-ins reading the parameter
words the host code packed. So the host lowering, the packing, managed memory, the copies in
and out, errors and the cache are all checked in CI; test_gpu_exec.py and
test_user_kernels.py run the same on a GPU."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import adjit
from adjit import Active, Const, Duplicated, Forward, Reverse, ReverseWithPrimal
from adjit.api.cuda_launch import compile_only
from adjit.core.types import ArrayType, weak_f64, weak_i64
from adjit.core.errors import CompilationError
from adjit.runtime import host_program
from adjit.core.kernel import KernelCacheError
from cuda_jit_cases import KERNELS, divide_twice, scale, scale_often, scale_twice, simulate
from fake_driver import error_cell, install
from user_kernels import relaxed_energy

pytest.importorskip("mlir", reason="compiling host programs needs MLIR")
if shutil.which("cc") is None:
    pytest.skip("building host programs needs a C compiler (cc)", allow_module_level=True)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    return install(monkeypatch, KERNELS)


def test_simulate_matches_the_cpu(fake):
    u0 = np.random.default_rng(0).random((40, 70), dtype=np.float32)
    total, u = simulate(u0, 5, np.float32(0.1), device="cuda")
    want_total, want_u = simulate(u0, 5, np.float32(0.1))
    np.testing.assert_allclose(u, want_u, rtol=1e-6)
    np.testing.assert_allclose(total, want_total, rtol=1e-6)
    assert isinstance(u, np.ndarray) and u.shape == (40, 70) and u.dtype == np.float32
    assert len(fake.launches) == 5 and {bx for _, _, bx in fake.launches} == {256}
    assert fake.loaded == 1                          # one kernel, loaded once
    assert fake.managed >= 3                         # u0's copy, u, v: managed memory


def test_managed_memory_is_freed_and_counted(fake):
    u0 = np.ones((8, 8), np.float32)
    before = adjit.memory_stats()["device_bytes_in_use"]
    adjit.reset_peak_memory()
    result = simulate(u0, 2, np.float32(0.1), device="cuda")
    assert len(fake.buffers) == 1                    # the returned array's block
    stats = adjit.memory_stats()
    assert stats["device_bytes_in_use"] - before == u0.nbytes
    assert stats["device_peak_bytes"] - before >= 3 * u0.nbytes   # u0's copy, u and v
    del result
    assert not fake.buffers
    assert adjit.memory_stats()["device_bytes_in_use"] == before


def test_arguments_written_in_place_reach_the_caller(fake):
    x = np.arange(1000, dtype=np.float64)
    scale_twice(x, 3.0)                               # the decorator's device="cuda"
    np.testing.assert_array_equal(x, 9 * np.arange(1000))
    assert [bx for _, _, bx in fake.launches] == [128, 256]
    read_only = np.arange(10.0)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="argument 1 of scale_twice is written .* read-only"):
        scale_twice(read_only, 2.0)
    np.testing.assert_array_equal(read_only, np.arange(10.0))
    scale_twice(np.zeros(0), 2.0)                     # no work items: no launch
    assert len(fake.launches) == 2


def test_device_arrays_are_copied_in_and_out(fake):
    x = adjit.to_device(np.arange(100, dtype=np.float64))
    scale_twice(x, 2.0)
    np.testing.assert_array_equal(x.numpy(), 4 * np.arange(100))


def test_a_failed_check_in_a_kernel_raises(fake):
    def failing(api, params, grid, block):
        # what the compiled kernel stores for i // 0, in its error cell after (x, k, extent)
        error_cell(params, 7)[0] = 1
    fake.kernels["divide__a1f64_wi64__1d"] = failing
    with pytest.raises(ZeroDivisionError, match=r"cuda_jit_cases.py:\d+"):
        divide_twice(np.ones(4), 0, device="cuda")
    assert len(fake.launches) == 1                     # the second launch did not run


def test_host_code_errors_name_the_line(fake):
    @adjit.jit
    def mismatched(a, b):
        return a + b

    with pytest.raises(ValueError, match=r"test_cuda_jit.py:\d+"):
        mismatched(np.ones(3), np.ones(4), device="cuda")


def test_wrong_arguments_are_refused(fake):
    with pytest.raises(TypeError, match="takes 3 arguments"):
        simulate(np.ones((4, 4), np.float32), 3, device="cuda")
    with pytest.raises(ValueError, match="device must be 'cpu' or 'cuda'"):
        simulate(np.ones((4, 4), np.float32), 3, 0.1, device="gpu")


def test_device_inside_compiled_code_is_refused(fake):
    @adjit.jit
    def launches_with_device(x):
        scale(x, 2.0, ndrange=x.shape[0], device="cuda")

    with pytest.raises(CompilationError, match="device= inside compiled code"):
        launches_with_device(np.ones(3))


def test_lower_shows_host_llvm_and_kernel_ptx(fake):
    lowered = simulate.lower(np.ones((4, 4), np.float32), 3, 0.1, device="cuda")
    assert "adj.launch" in lowered.adj()
    assert "__adjit_hook___adjit_cuda_launch" in lowered.llvm()
    assert ".entry heat_step__a2f32_a2f32_f32__2d" in lowered.ptx()


def test_compile_only_stores_a_versioned_entry(fake, tmp_path, monkeypatch):
    simulate._cache.clear()          # compiled by earlier tests, into their cache folders
    with compile_only():
        assert simulate(np.ones((4, 4), np.float32), 3, 0.1, device="cuda") is None
    assert not fake.launches
    (meta_path,) = (tmp_path / "cache" / "gpu").glob("*.json")
    meta = json.loads(meta_path.read_text())
    assert meta["format"] == host_program.FORMAT_VERSION and meta["entries"]["entry"] == [["a2f32", "wi64", "f32"], ["f32", "a2f32"]]
    assert [k["name"] for k in meta["kernels"]] == ["heat_step__a2f32_a2f32_f32__2d"]
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(meta_path.with_suffix(".so"))],
                               capture_output=True, text=True)
    if undefined.returncode == 0:     # nothing but libc: it loads where MLIR is not
        names = {line.split()[-1].split("@")[0] for line in undefined.stdout.splitlines()}
        assert names <= {"memcpy", "memset", "__cxa_finalize", "_ITM_deregisterTMCloneTable",
                         "_ITM_registerTMCloneTable", "__gmon_start__"}, names
    meta["format"] = 99
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(KernelCacheError, match="format 99"):
        host_program.load(meta_path.parent, meta_path.stem)
    simulate._cache.clear()
    monkeypatch.setenv("ADJIT_DISK_CACHE", "1")      # read as a cache: rebuilt, not refused
    simulate(np.ones((4, 4), np.float32), 3, 0.1, device="cuda")
    assert json.loads(meta_path.read_text())["format"] == host_program.FORMAT_VERSION


def test_runs_from_the_cache_without_mlir(fake, tmp_path):
    """What a GPU machine does: the program compiled here runs in a process where MLIR
    cannot be imported (the fake driver standing in for the GPU)."""
    cache = tmp_path / "cache"
    here = Path(__file__).parent
    code = textwrap.dedent(f"""
        import sys
        sys.modules["mlir"] = None
        sys.path.insert(0, {str(here)!r})
        import numpy as np
        import pytest
        import cuda_jit_cases as t
        from fake_driver import install
        with pytest.MonkeyPatch.context() as mp:
            install(mp, t.KERNELS)
            u0 = np.random.default_rng(1).random((12, 9), dtype=np.float32)
            total, u = t.simulate(u0, 3, np.float32(0.2), device="cuda")
            print(repr(float(total)), "mlir" in sys.modules and sys.modules["mlir"] is not None)
    """)
    u0 = np.random.default_rng(1).random((12, 9), dtype=np.float32)
    simulate._cache.clear()
    with compile_only():
        simulate(u0, 3, np.float32(0.2), device="cuda")
    env = {"ADJIT_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    total, mlir_loaded = done.stdout.split()
    assert mlir_loaded == "False"
    np.testing.assert_allclose(float(total), simulate(u0, 3, np.float32(0.2))[0], rtol=1e-6)


def derivative_kernels_on_cpu(mode, anns, types):
    """Fake-driver kernels for the derivative kernels of relaxed_energy, compiled for the CPU
    from the same module the host program is compiled from."""
    from adjit.compiler.derivative import Derivative
    from cpu_device import kernels_on_cpu
    return kernels_on_cpu(Derivative(relaxed_energy, mode, anns, types, None, None).adj_text)


def _relaxed_energy_numpy(u0, steps, w):
    u = u0.copy()
    for _ in range(steps):
        v = u.copy()
        v[1:-1] = (1 - w) * u[1:-1] + 0.5 * w * (u[:-2] + u[2:])
        u = v
    return np.sum(u * u)


def test_reverse_mode_of_a_function_with_launches(monkeypatch, tmp_path):
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(3)
    u0, w, steps = rng.random(50), 0.3, 4
    anns = [Duplicated(u0, np.zeros(50)), Const(steps), Active(w)]
    types = [ArrayType(adjit.f64, 1), weak_i64, weak_f64]   # (Python scalars)
    fake = install(monkeypatch, derivative_kernels_on_cpu(Reverse, anns, types))
    du = np.zeros(50)
    (_, _, dw), primal = adjit.autodiff(ReverseWithPrimal, relaxed_energy, Duplicated(u0, du),
                                        Const(steps), Active(w), device="cuda")
    assert len(fake.launches) >= 2 * steps           # the augmented and the reverse kernels
    du_cpu = np.zeros(50)
    (_, _, dw_cpu), primal_cpu = adjit.autodiff(ReverseWithPrimal, relaxed_energy,
                                                Duplicated(u0, du_cpu), Const(steps), Active(w))
    np.testing.assert_allclose(du, du_cpu, rtol=1e-12)
    np.testing.assert_allclose([dw, primal], [dw_cpu, primal_cpu], rtol=1e-12)
    np.testing.assert_allclose(primal, _relaxed_energy_numpy(u0, steps, w), rtol=1e-12)
    h = 1e-6                                          # against central differences
    fd_w = (_relaxed_energy_numpy(u0, steps, w + h) - _relaxed_energy_numpy(u0, steps, w - h)) / (2 * h)
    np.testing.assert_allclose(dw, fd_w, rtol=1e-6)
    k = 17
    e = np.zeros(50)
    e[k] = h
    fd_u = (_relaxed_energy_numpy(u0 + e, steps, w) - _relaxed_energy_numpy(u0 - e, steps, w)) / (2 * h)
    np.testing.assert_allclose(du[k], fd_u, rtol=1e-6)


def test_forward_mode_of_a_function_with_launches(monkeypatch, tmp_path):
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(4)
    u0, w, steps = rng.random(40), 0.45, 3
    du0 = rng.random(40)
    anns = [Duplicated(u0, du0), Const(steps), Duplicated(w, 1.0)]
    types = [ArrayType(adjit.f64, 1), weak_i64, weak_f64]   # (Python scalars)
    install(monkeypatch, derivative_kernels_on_cpu(Forward, anns, types))
    tangent = adjit.autodiff(Forward, relaxed_energy, *anns, device="cuda")
    want = adjit.autodiff(Forward, relaxed_energy, *anns)
    np.testing.assert_allclose(tangent, want, rtol=1e-12)
    h = 1e-6
    fd = (_relaxed_energy_numpy(u0 + h * du0, steps, w + h)
          - _relaxed_energy_numpy(u0 - h * du0, steps, w - h)) / (2 * h)
    np.testing.assert_allclose(tangent, fd, rtol=1e-6)


def test_autodiff_under_compile_only_compiles_and_returns_zeros(monkeypatch, tmp_path):
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    relaxed_energy._cache.clear()
    u0 = np.ones(8)
    with compile_only():
        grads = adjit.autodiff(Reverse, relaxed_energy, Duplicated(u0, np.zeros(8)), 2,
                               Active(0.5), device="cuda")
        assert adjit.autodiff(Forward, relaxed_energy, Duplicated(u0, np.ones(8)), 2,
                              Duplicated(0.5, 1.0), device="cuda") is None
    assert grads == (None, None, 0.0)
    entries = [sorted(json.loads(p.read_text()).get("entries", {}))
               for p in (tmp_path / "cache" / "gpu").glob("*.json")]
    assert ["fwd"] in entries and ["aug", "rev", "rev_all"] in entries


def test_launch_words_do_not_grow_the_stack_in_loops(fake):
    """The words of a launch live in a stack slot of its launcher, which is not inlined:
    inlined into the loop (the helper is), a slot would be taken on every iteration."""
    llvm_ir = scale_often.lower(np.ones(4), 3, device="cuda").llvm()
    functions = {f.split("(")[0].split("@")[-1]: f for f in llvm_ir.split("\ndefine ")[1:]}
    launchers = [name for name in functions if name.startswith("__adjit_launch__")]
    assert launchers and all("alloca" in functions[name] for name in launchers)
    assert not any("alloca" in body for name, body in functions.items() if name not in launchers)
    x = np.arange(4.0)
    scale_often(x, 50, device="cuda")
    np.testing.assert_array_equal(x, np.arange(4.0))
    assert len(fake.launches) == 50


def test_a_profile_sees_the_launches_of_a_host_program(fake):
    """adjit.profile() (runtime/profiling.py): a device="cuda" function's call, and each
    launch its host program makes (through the host's launch hook), device "cuda"."""
    u0 = np.ones((8, 8), np.float32)
    simulate(u0, 3, np.float32(0.1), device="cuda")          # (compiled before)
    with adjit.profile() as p:
        simulate(u0, 3, np.float32(0.1), device="cuda")
    (call,) = [e for e in p.events if e.kind == "call"]
    launches = [e for e in p.events if e.kind == "launch"]
    assert call.name == "simulate" and call.args["device"] == "cuda"
    assert len(launches) == 3 and all(e.args["device"] == "cuda" and e.args["work_items"] == 64
                                      for e in launches)
    assert all(call.start <= e.start and e.start + e.dur <= call.start + call.dur
               for e in launches)
