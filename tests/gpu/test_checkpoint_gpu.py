"""Checkpointed loops (`adjit.checkpointed`) differentiated with device="cuda": the reverse
pass's schedule (runtime/native/checkpoint.cpp, `adj_ckpt_*`) is called through host-program
hooks (passes/lower_cuda_host.py: HOOKS) that the runtime fills with the native extension's
addresses (runtime/host_program.py), so the shared object still refers to nothing but libc and
libm; the snapshots and restores are copies on the device (each memref.copy of the host code
a call of the copy hook: cuMemcpy), the steps (primal, augmented, reverse) kernel launches.
With `spill=True` the working snapshots are allocated in (pinned) host memory by a hook of
their own, and the copies to and from them are device<->host transfers. Without a GPU: the
host program of a reaction-diffusion loop (a kernel launched per step, `u, v = v, u`; 16x16
f64, 7 steps, snapshots=2 and every=3, each with and without spill) runs behind the fake
driver (fake_driver.py; its kernels compiled for the CPU from the same module: cpu_device.py)
and gives the CPU's gradient of the same function and the store-all gradient, running again
the steps the CPU does, copying through the copy hook (device<->host only with spill) and
freeing all it allocates; its kernels assemble with ptxas. On a GPU machine the same
gradients are checked on the GPU."""
from __future__ import annotations

import ctypes
import re
import shutil
import subprocess

import numpy as np
import pytest

import adjit
from adjit.core.symbols import CHECKPOINT_SYMBOLS, HOOK_PREFIX
from adjit.core.types import ArrayType

pytest.importorskip("mlir", reason="compiling host programs needs MLIR")
from test_ptx import assemble                                      # noqa: E402
from test_checkpoint import store_all, with_schedule                # noqa: E402

N, STEPS = 16, 7
TYPES = [ArrayType(adjit.f64, 2), adjit.i64]


# G2b and its checkpointed variants, as the CPU tests have them
two_snapshots, every_three = with_schedule(snapshots=2), with_schedule(every=3)
two_snapshots_spilled = with_schedule(snapshots=2, spill=True)
every_three_spilled = with_schedule(every=3, spill=True)


SCHEDULES = {"snapshots2": two_snapshots, "every3": every_three}
SPILLED = {"snapshots2": two_snapshots_spilled, "every3": every_three_spilled}


def initial(n: int = N) -> np.ndarray:
    return np.random.default_rng(3).uniform(0.0, 1.0, (n, n))


def annotations(u0: np.ndarray, g: np.ndarray, steps: int = STEPS) -> list:
    return [adjit.Duplicated(u0.copy(), g), adjit.Const(steps)]


def gradient(f, u0: np.ndarray, steps: int = STEPS, device: str = "cpu") -> np.ndarray:
    g = np.zeros_like(u0)
    adjit.autodiff(adjit.Reverse, f, *annotations(u0, g, steps), device=device)
    return g


def recomputed() -> int:
    return adjit.memory_stats()["checkpoint_steps_recomputed"]


def derivative(f):
    from adjit.compiler.derivative import Derivative
    u0 = initial()
    return Derivative(f, adjit.Reverse, annotations(u0, np.zeros_like(u0)), TYPES, None, None)


def test_the_schedule_is_hooked():
    from adjit.passes.lower_cuda_host import HOOKS
    from adjit.runtime.extension import runtime_symbols
    assert set(CHECKPOINT_SYMBOLS) <= set(HOOKS) and set(CHECKPOINT_SYMBOLS) <= set(runtime_symbols())
    assert HOOKS["adj_ckpt_new"] == ("i64", ["i64"] * 4)
    assert HOOKS["adj_ckpt_free"] == (None, ["i64"])


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_host_program_kernels_assemble_and_the_schedule_goes_through_hooks(schedule, tmp_path):
    """The host code (no shared object is built: no C compiler needed) calls the schedule
    through hook globals, declaring none of adj_ckpt_*; its kernels (the step's primal,
    augmented and reverse kernels) assemble for sm_90."""
    from adjit.passes.lower_cuda_host import compile_host
    d = derivative(SCHEDULES[schedule])
    with d.unit.ctx:
        d.unit.finish()
        llvm_ir, kernels, _, hooks = compile_host(d.unit.module, "sm_90")
    assert {HOOK_PREFIX + s for s in CHECKPOINT_SYMBOLS} <= set(hooks)
    assert not re.search(r"^declare .*@adj_ckpt_", llvm_ir, re.M)
    assert len(kernels) >= 3, [k.entry for k in kernels]
    for k in kernels:
        assert ".entry" in k.ptx and ".extern" not in k.ptx, k.entry
        assemble(k.ptx, tmp_path)


@pytest.fixture(scope="module")
def store_all_gradient():
    return gradient(store_all, initial())


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_gradient_through_the_fake_driver(schedule, store_all_gradient, monkeypatch, tmp_path):
    """device="cuda" behind the fake driver: the CPU's gradient and the store-all one; the
    native schedule ran (as many steps run again as on the CPU); all managed memory (the
    state's slots, the tape) is freed."""
    if shutil.which("cc") is None:
        pytest.skip("building host programs needs a C compiler (cc)")
    from cpu_device import kernels_on_cpu
    from fake_driver import install
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    f, u0 = SCHEDULES[schedule], initial()
    fake = install(monkeypatch, kernels_on_cpu(derivative(f).adj_text))
    before = recomputed()
    on_gpu = gradient(f, u0, device="cuda")
    again_gpu = recomputed() - before
    before = recomputed()
    on_cpu = gradient(f, u0)
    again_cpu = recomputed() - before
    np.testing.assert_allclose(on_gpu, on_cpu, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(on_gpu, store_all_gradient, rtol=1e-12, atol=1e-14)
    assert np.any(on_gpu != 0)
    assert again_gpu == again_cpu > 0
    primal = [e for e, _, _ in fake.launches if e.startswith("reaction_diffusion")]
    assert len(primal) == STEPS + again_gpu      # the forward sweep, then the advances
    assert fake.managed > 0 and not fake.buffers


def test_the_shared_object_refers_to_no_runtime_symbol(monkeypatch, tmp_path):
    """The host program loads where only libc and libm resolve: adj_ckpt_* are not
    undefined symbols of its shared object (the native extension's, global in this process,
    would otherwise hide a missing hook)."""
    if shutil.which("cc") is None or shutil.which("nm") is None:
        pytest.skip("building and reading a shared object needs cc and nm")
    _, program = derivative(two_snapshots).host_program("two_snapshots", "sm_90")
    so = tmp_path / "program.so"
    so.write_bytes(program.library)
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(so)], capture_output=True,
                               text=True, check=True).stdout
    assert "adj_ckpt" not in undefined, undefined
    defined = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True,
                             text=True, check=True).stdout
    assert all(HOOK_PREFIX + s in defined for s in CHECKPOINT_SYMBOLS), defined


def test_gradient_on_a_gpu(monkeypatch, tmp_path):
    from adjit.runtime import cuda
    if not cuda.is_available():
        pytest.skip("no CUDA GPU or driver here (the fake-driver checks above ran without one)")
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    u0 = initial(64)
    expected = gradient(store_all, u0, 20)
    for f in SCHEDULES.values():
        before = recomputed()
        on_gpu = gradient(f, u0, 20, device="cuda")
        again_gpu = recomputed() - before
        before = recomputed()
        on_cpu = gradient(f, u0, 20)
        assert again_gpu == recomputed() - before > 0
        # (the GPU's kernels contract to FMAs: equal to rounding, not bit for bit)
        np.testing.assert_allclose(on_gpu, on_cpu, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(on_gpu, expected, rtol=1e-10, atol=1e-12)


def _host_code(f) -> tuple[str, str]:
    """(the adj-level module after adj-lower-cuda-host, the host program's LLVM IR) of f's
    derivative."""
    from adjit.passes.lower_cuda_host import compile_host, lower_cuda_host
    from mlir import ir
    d = derivative(f)
    with d.unit.ctx:
        d.unit.finish()
        text = str(d.unit.module)
        lowered = ir.Module.parse(text)
        with ir.Location.unknown():
            lower_cuda_host(lowered.operation)
        llvm_ir = compile_host(d.unit.module, "sm_90")[0]
    return str(lowered), llvm_ir


@pytest.mark.parametrize("spill", [False, True])
@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_host_copies_are_copy_hook_calls(schedule, spill):
    """adj-lower-cuda-host leaves no memref.copy in the host code (the snapshots, restores
    and the tape's copies of the state: contiguous, identity or 1-D unit-stride views):
    each is a call of the copy hook; the spilled slots are allocated by the host allocator
    function, the others' as before."""
    from adjit.core.symbols import COPY_SYMBOL, HOST_ALLOC_SYMBOL, HOST_MEMORY_ATTR
    f = (SPILLED if spill else SCHEDULES)[schedule]
    lowered, llvm_ir = _host_code(f)
    assert ("spill = true" in str(derivative(f).adj_text)) == spill
    host = [fn for fn in re.split(r"\n  func\.func ", lowered) if "adj.kernel" not in
            fn.split("\n")[0]]
    assert not any("memref.copy" in fn for fn in host)
    assert lowered.count(f"call @{COPY_SYMBOL}(") >= 4
    assert len(re.findall(rf"call void @{COPY_SYMBOL}\(", llvm_ir)) >= 4
    assert (HOOK_PREFIX + HOST_ALLOC_SYMBOL in llvm_ir) == spill
    assert (f"{HOST_MEMORY_ATTR}" in lowered) is False      # every mark was lowered
    assert ("call @__adjit_host_memref_f64(" in lowered) == spill


def _fake_gradient(f, u0, monkeypatch):
    """(gradient, steps run again, the fake driver, the device memory's peak above what was
    in use before) of f's device="cuda" gradient behind a fresh fake driver."""
    from cpu_device import kernels_on_cpu
    from fake_driver import install
    fake = install(monkeypatch, kernels_on_cpu(derivative(f).adj_text))
    adjit.reset_peak_memory()
    base = adjit.memory_stats()["device_bytes_in_use"]
    before = recomputed()
    g = gradient(f, u0, device="cuda")
    return g, recomputed() - before, fake, adjit.memory_stats()["device_peak_bytes"] - base


def _kinds(fake, hosts: list[tuple[int, int]]) -> list[str]:
    """Each recorded copy as "DtoD", "DtoH", "HtoD" or "HtoH" (host: in one of the `hosts`
    ranges, (address, bytes), that cuMemAllocHost gave)."""
    def where(address):
        return "H" if any(a <= address < a + n for a, n in hosts) else "D"
    return [f"{where(src)}to{where(dst)}" for dst, src, _ in fake.copies]


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_spilled_gradient_through_the_fake_driver(schedule, store_all_gradient, monkeypatch,
                                                   tmp_path):
    """device="cuda" behind the fake driver, with and without spill: both the store-all
    gradient (and the CPU's), the same steps run again as on the CPU, the same copies (the
    copy hook: cuMemcpy, in the same order and sizes), device to device without spill and
    device<->host to and from the host allocator's slots with it; the spilled slots are
    pinned host memory (cuMemAllocHost), not device memory (a lower device peak by the
    slots' bytes at least); all of it is freed."""
    if shutil.which("cc") is None:
        pytest.skip("building host programs needs a C compiler (cc)")
    from adjit.runtime import cuda_driver
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    u0 = initial()
    plain, again_plain, fake_plain, peak_plain = _fake_gradient(SCHEDULES[schedule], u0,
                                                                monkeypatch)
    hosts: list[tuple[int, int]] = []
    original = cuda_driver.alloc_host

    def recorded(nbytes):
        ptr = original(nbytes)
        hosts.append((ptr, nbytes))
        return ptr

    monkeypatch.setattr(cuda_driver, "alloc_host", recorded)
    spilled, again_spilled, fake_spilled, peak_spilled = _fake_gradient(
        SPILLED[schedule], u0, monkeypatch)
    before = recomputed()
    on_cpu = gradient(SPILLED[schedule], u0)
    again_cpu = recomputed() - before
    np.testing.assert_allclose(spilled, store_all_gradient, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(spilled, on_cpu, rtol=1e-13, atol=1e-15)
    np.testing.assert_array_equal(spilled, plain)
    assert again_spilled == again_plain == again_cpu > 0
    # the same copies, through the hook
    sizes = [n for _, _, n in fake_plain.copies]
    assert sizes == [n for _, _, n in fake_spilled.copies]
    state = N * N * 8
    assert sizes.count(state) >= 4
    assert set(_kinds(fake_plain, [])) == {"DtoD"}
    kinds = _kinds(fake_spilled, hosts)
    assert {"DtoH", "HtoD"} <= set(kinds)
    # the snapshots' copies are the ones that change sides: a state into a slot, and back
    assert all(k == "DtoD" for k, n in zip(kinds, sizes) if n != state)
    # the spilled slots: pinned host memory (the state's arrays' slots, the ids' slots)
    assert getattr(fake_plain, "host_allocs", 0) == 0
    assert fake_spilled.host_allocs == len(hosts) >= 2
    slot_bytes = sum(n for _, n in hosts if n >= state)
    assert slot_bytes >= state
    assert peak_spilled <= peak_plain - slot_bytes
    for fake in (fake_plain, fake_spilled):
        assert fake.managed > 0 and not fake.buffers and not fake.host
    assert cuda_driver.host_accounting.in_use == 0


def test_spilled_gradient_on_a_gpu(monkeypatch, tmp_path):
    """On a GPU: spill=True gives the gradient without spill (the same kernels, the same
    schedule; the copies move bytes as they are), the CPU's and the store-all one, runs
    again the steps the CPU does, and frees its host memory."""
    from adjit.runtime import cuda, cuda_driver
    if not cuda.is_available():
        pytest.skip("no CUDA GPU or driver here (the fake-driver checks above ran without one)")
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    u0 = initial(64)
    expected = gradient(store_all, u0, 20)
    for name, f in SPILLED.items():
        plain = gradient(SCHEDULES[name], u0, 20, device="cuda")
        host_before = cuda_driver.host_accounting.in_use
        before = recomputed()
        on_gpu = gradient(f, u0, 20, device="cuda")
        again_gpu = recomputed() - before
        assert cuda_driver.host_accounting.in_use == host_before
        assert cuda_driver.host_accounting.peak > 0
        before = recomputed()
        on_cpu = gradient(f, u0, 20)
        assert again_gpu == recomputed() - before > 0
        np.testing.assert_allclose(on_gpu, plain, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(on_gpu, on_cpu, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(on_gpu, expected, rtol=1e-10, atol=1e-12)


def test_host_memory_without_pinned_allocation(monkeypatch):
    """Where the driver API has no cuMemAllocHost, host memory is malloc'd: counted apart
    from the device's, freed by cuda_driver.free (which frees device, managed and host
    memory alike)."""
    from adjit.runtime import cuda_driver

    class NoPinned:
        class CUresult:
            CUDA_SUCCESS = 0

        def cuMemFree(self, ptr):
            raise AssertionError("host memory freed as device memory")

    monkeypatch.setattr(cuda_driver, "_driver", cuda_driver._Driver(NoPinned(), 0, None))
    monkeypatch.setattr(cuda_driver._current, "done", True, raising=False)
    monkeypatch.setattr(cuda_driver, "host_accounting", cuda_driver._Accounting())
    device = cuda_driver.accounting.in_use
    ptr = cuda_driver.alloc_host(4096)
    view = np.ctypeslib.as_array((ctypes.c_double * 512).from_address(ptr))
    view[:] = 1.5
    assert cuda_driver.host_accounting.in_use == 4096 and view.sum() == 768.0
    assert cuda_driver.accounting.in_use == device
    cuda_driver.free(ptr)
    assert cuda_driver.host_accounting.in_use == 0
