"""Compile tiers (compiler/engine.py): with the disk cache on, a module whose O3 build gives
the same numbers is compiled by the ExecutionEngine at a low LLVM level (the first tier) for
a fast first call, while the cache writer builds the O3 shared object in the background;
once built, it is swapped in (runtime/compiled_module.py: Python callables re-pointed,
native dispatchers registered again) and stored in the disk cache.

Each test holds the writer's builds (the `gate` fixture) until it has seen the first tier
run, then lets them go and waits (adjit.wait_for_builds), so which code runs is certain.
Every result is compared between the tiers bit for bit and with NumPy, dtype included."""
from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import adjit
from adjit.compiler import engine
from adjit.runtime import cpu_cache


@pytest.fixture
def gate(monkeypatch, tmp_path):
    """The disk cache on in a fresh folder, tiers on (ADJIT_COMPILE_TIER=0, opt-in), and the writer's builds
    held until the returned Event is set. Yields (event, the opt levels the writer built)."""
    monkeypatch.setenv("ADJIT_DISK_CACHE", "1")
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ADJIT_COMPILE_TIER", "0")   # tiers on (opt-in)
    monkeypatch.delenv("ADJIT_DEBUG", raising=False)
    release = threading.Event()
    built: list[int] = []
    build = cpu_cache._build

    def held(llvm_ir, opt_level, *args, **kwargs):
        assert release.wait(120), "the test never released the cache writer"
        built.append(opt_level)
        return build(llvm_ir, opt_level, *args, **kwargs)
    monkeypatch.setattr(cpu_cache, "_build", held)
    yield release, built
    release.set()
    adjit.wait_for_builds()


def _module(declaration):
    (compiled,) = declaration._cache.values()
    return compiled.module


def _swap(release) -> None:
    release.set()
    assert adjit.wait_for_builds(120)


def _same(a, b) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


# -- a kernel -----------------------------------------------------------------------------------

@adjit.kernel
def saxpy(a: adjit.f32, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


def test_kernel_first_tier_then_o3_same_numbers(gate):
    release, built = gate
    rng = np.random.default_rng(0)
    x, y0 = (rng.standard_normal(1001).astype(np.float32) for _ in range(2))
    first = y0.copy()
    saxpy(np.float32(1.7), x, first, ndrange=1001)
    module = _module(saxpy)
    assert module.tiered and module.opt_level == engine.FIRST_TIER
    again = y0.copy()                 # the native dispatcher's call of the first tier
    saxpy(np.float32(1.7), x, again, ndrange=1001)
    _same(first, again)
    assert len(saxpy._native) == 1
    old_native = saxpy._native

    _swap(release)
    assert built == [3]
    assert not module.tiered and module.opt_level == 3
    # The dispatcher holding the first tier's address was replaced: the next call registers
    # the O3 code's packed entry, and the calls after it run that natively.
    assert saxpy._native is not old_native and len(saxpy._native) == 0
    later = [y0.copy() for _ in range(3)]
    for y in later:
        saxpy(np.float32(1.7), x, y, ndrange=1001)
    assert len(saxpy._native) == 1
    entry = cpu_cache.load(cpu_cache.directory(), module.key)
    assert entry is not None          # the disk cache holds the O3 build, under the O3 key
    assert module.packed(_entry_name(saxpy))[0] == entry.address(
        f"_adj_packed_{_entry_name(saxpy)}")
    for y in later:
        _same(first, y)
    _same(first, np.float32(1.7) * x + y0)


def _entry_name(declaration) -> str:
    (compiled,) = declaration._cache.values()
    return compiled.meta["entry"]


# -- a @jit function: arrays and scalars in and out ---------------------------------------------

@adjit.jit
def residual(x, c: float):
    return x * x * 0.5 + c * x


def test_jit_function_same_numbers_and_dtype_in_both_tiers(gate):
    release, _ = gate
    x32 = np.linspace(-3, 3, 257, dtype=np.float32)
    first = residual(x32, 0.3)
    module = _module(residual)
    assert module.tiered
    _swap(release)
    assert module.opt_level == 3
    later = residual(x32, 0.3)
    _same(first, later)
    _same(first, x32 * x32 * np.float32(0.5) + np.float32(0.3) * x32)


# -- gradients ----------------------------------------------------------------------------------

@adjit.jit
def cubic(x: adjit.f64):
    return x * x * x + 2.0 * x


@adjit.jit
def squares(x):
    return x * x * 0.5 + x


def test_gradient_grad_of_grad_and_jacfwd_same_in_both_tiers(gate):
    release, _ = gate
    g, gg, jf = adjit.grad(cubic), adjit.grad(adjit.grad(cubic)), adjit.jacfwd(squares)
    xs = np.linspace(-1, 2, 9)
    first = (g(1.25), gg(1.25), jf(xs))
    assert engine._cache and any(m.tiered for m in engine._cache.values())
    _swap(release)
    assert not any(m.tiered for m in engine._cache.values())
    later = (g(1.25), gg(1.25), jf(xs))
    for a, b in zip(first, later):
        _same(a, b)
    assert first[0] == 3 * 1.25 ** 2 + 2 and first[1] == 6 * 1.25
    _same(first[2], np.diag(xs + 1.0))


@adjit.jit
def sum_of_squares(x):
    return adjit.sum(x * x)


def test_reassociated_sums_compile_at_o3_at_once(gate):
    # adjit.sum's accumulators may be reassociated (arrays.py): the O3 build may add in
    # another order, so such a module is not tiered and its first call runs O3 code.
    x = np.arange(100, dtype=np.float64)
    assert sum_of_squares(x) == np.sum(x * x)
    module = _module(sum_of_squares)
    assert not module.tiered and module.opt_level == 3


# -- errors, ADJIT_DEBUG ------------------------------------------------------------------------

@adjit.jit
def quotient(a: int, b: int):
    return a // b + 1


@adjit.kernel
def shifted(x, y):
    i = adjit.index()
    y[i] = x[i + 1]


def _message(fn, *args, **kwargs) -> tuple[type, str]:
    with pytest.raises(Exception) as info:
        fn(*args, **kwargs)
    return info.type, str(info.value)


def test_errors_and_debug_checks_are_the_same_in_both_tiers(gate, monkeypatch):
    release, _ = gate
    monkeypatch.setenv("ADJIT_DEBUG", "1")
    x, y = np.arange(8.0), np.zeros(8)
    assert quotient(7, 2) == 4
    first = (_message(quotient, 1, 0), _message(shifted, x, y, ndrange=8))
    assert first[0][0] is ZeroDivisionError and first[1][0] is IndexError
    assert _module(quotient).tiered and _module(shifted).tiered
    _swap(release)
    assert _module(quotient).opt_level == 3 and _module(shifted).opt_level == 3
    assert quotient(7, 2) == 4
    assert (_message(quotient, 1, 0), _message(shifted, x, y, ndrange=8)) == first


# -- a forked child -----------------------------------------------------------------------------

@adjit.kernel
def scale(a: adjit.f64, x, y):
    i = adjit.index()
    y[i] = a * x[i]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() only")
def test_forked_child_runs_the_first_tier_and_the_parent_swaps(gate):
    release, _ = gate
    x = np.linspace(0, 1, 33)
    y = np.empty_like(x)
    scale(3.0, x, y, ndrange=33)
    assert _module(scale).tiered
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                      # the child: no writer thread; the first tier runs on
        try:
            z = np.empty_like(x)
            scale(3.0, x, z, ndrange=33)
            ok = z.tobytes() == y.tobytes() and _module(scale).tiered
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    assert answer == b"1"
    _swap(release)
    z = np.empty_like(x)
    scale(3.0, x, z, ndrange=33)
    _same(y, z)
    _same(y, 3.0 * x)


# -- settings -----------------------------------------------------------------------------------

@adjit.kernel
def add_one(x):
    i = adjit.index()
    x[i] = x[i] + 1.0


@adjit.kernel
def add_two(x):
    i = adjit.index()
    x[i] = x[i] + 2.0


def test_compile_tier_3_compiles_at_o3_at_once(gate, monkeypatch):
    monkeypatch.setenv("ADJIT_COMPILE_TIER", "3")
    x = np.zeros(4)
    add_one(x, ndrange=4)
    assert not _module(add_one).tiered and _module(add_one).opt_level == 3
    assert x.tolist() == [1.0] * 4


@adjit.kernel
def add_four(x):
    i = adjit.index()
    x[i] = x[i] + 4.0


def test_without_the_setting_there_are_no_tiers(gate, monkeypatch):
    # Tiers are opt-in: a first call that runs long would run all of it at O0.
    monkeypatch.delenv("ADJIT_COMPILE_TIER", raising=False)
    x = np.zeros(4)
    add_four(x, ndrange=4)
    assert not _module(add_four).tiered and _module(add_four).opt_level == 3
    assert x.tolist() == [4.0] * 4


def test_a_compile_tier_not_valid_is_refused_by_name(gate, monkeypatch):
    monkeypatch.setenv("ADJIT_COMPILE_TIER", "fast")
    with pytest.raises(ValueError, match="ADJIT_COMPILE_TIER must be 0, 1, 2 or 3"):
        add_two(np.zeros(4), ndrange=4)


@adjit.kernel
def add_three(x):
    i = adjit.index()
    x[i] = x[i] + 3.0


def test_without_the_disk_cache_no_tiers(monkeypatch):
    # No O3 build is made in the background then: the module is compiled at O3 at once.
    monkeypatch.setenv("ADJIT_DISK_CACHE", "0")
    x = np.zeros(4)
    add_three(x, ndrange=4)
    assert not _module(add_three).tiered and _module(add_three).opt_level == 3


# -- which modules are tiered -------------------------------------------------------------------

@pytest.mark.parametrize("line, tiered", [
    ("%3 = fadd reassoc float %1, %2", False),
    ("%3 = fmul fast double %1, %2", False),
    ("%3 = fadd contract float %1, %2", False),
    ("%3 = fcmp nnan olt double %1, %2", False),
    ("%3 = call float @llvm.fmuladd.f32(float %0, float %1, float %2)", False),
    ("declare float @sinf(float)", False),
    ("declare double @llvm.exp.f64(double)", False),
    ("declare <4 x float> @llvm.tanh.v4f32(<4 x float>)", False),
    ("define fastcc void @f() {\n  ret void\n}", True),
    ("%fast = fadd float %1, %2\n%x.reassoc = fadd float %1, %2", True),
    ("declare i64 @llvm.smax.i64(i64, i64)\ndeclare float @llvm.sqrt.f32(float)", True),
    ("declare ptr @_mlir_memref_to_llvm_alloc(i64)\ndeclare void @adj_parallel_for(ptr)", True),
])
def test_first_tier_only_where_o3_computes_the_same_numbers(monkeypatch, line, tiered):
    monkeypatch.setenv("ADJIT_COMPILE_TIER", "0")   # tiers on (opt-in)
    assert engine.first_tier(f"; ModuleID = 'm'\n{line}\n") == (engine.FIRST_TIER if tiered else 3)


def test_math_calls_are_found_at_word_starts_only():
    if not cpu_cache.vector_math()[0]:
        pytest.skip("no libmvec here: no module is built at once")
    assert engine._vectorizable_math('%1 = math.sin %0 : f32')
    assert engine._vectorizable_math('math.exp(%0)')
    assert not engine._vectorizable_math('%1 = notmath.sin %0 : f32')
    assert not engine._vectorizable_math('%1 = math.sinx %0')
    assert not engine._vectorizable_math('%1 = math.sqrt %0 : f32')


# -- the swap under calls in flight -------------------------------------------------------------

@adjit.kernel
def axpb(a: adjit.f64, x, y):
    i = adjit.index()
    y[i] = a * x[i] + 1.0


def test_calls_on_other_threads_during_the_swap_all_agree(gate):
    # Native calls on two threads while the writer's thread swaps the module: each call ends
    # in the code it started in (neither is unloaded), and every result is the same.
    release, _ = gate
    x = np.linspace(0, 1, 4099)
    y = np.empty_like(x)
    axpb(2.5, x, y, ndrange=x.size)
    expected = y.copy()
    assert _module(axpb).tiered
    stop, wrong, calls = threading.Event(), [], [0, 0]

    def work(t: int) -> None:
        out = np.empty_like(x)
        while not stop.is_set():
            out.fill(0)
            axpb(2.5, x, out, ndrange=x.size)
            if out.tobytes() != expected.tobytes():
                wrong.append(t)
            calls[t] += 1
    threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    _swap(release)
    stop.set()
    for t in threads:
        t.join()
    assert not wrong and min(calls) > 0
    assert _module(axpb).opt_level == 3
    after = np.empty_like(x)
    axpb(2.5, x, after, ndrange=x.size)
    _same(expected, after)
    _same(expected, 2.5 * x + 1.0)


# -- start-up work is the install's, not each machine's or process's -------------------------

def test_import_builds_nothing_and_writes_no_cache(tmp_path):
    # The allocator, memrefCopy and the thread pool are in the native extension that
    # `pip install` builds (runtime/extension.py): `import adjit` on a new machine (an empty
    # cache folder) runs no compiler or other process and writes nothing.
    import subprocess
    import sys
    import textwrap
    script = textwrap.dedent('''
        import json, os, subprocess, sys
        started = []
        popen = subprocess.Popen.__init__
        def spy(self, *args, **kwargs):
            started.append(str(args[0] if args else kwargs.get("args")))
            return popen(self, *args, **kwargs)
        subprocess.Popen.__init__ = spy
        import adjit
        print(json.dumps([started, os.listdir(sys.argv[1])]))
    ''')
    env = {**os.environ, "ADJIT_CACHE_DIR": str(tmp_path), "ADJIT_DISK_CACHE": "1"}
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    import json
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [[], []]


# -- many kinds of ops: the same bits in both tiers ---------------------------------------------

@adjit.kernel
def mixed(x, k, out, counts):
    i, j = adjit.index_nd()
    v = x[i, j]
    w = adjit.sqrt(abs(v)) / (1.0 + v * v) - adjit.max(v, 0.25) * adjit.min(v, -0.5)
    if v > 0.0:
        w = w * 3.0 - 1.0 / (v + 2.0)
    out[i, j] = w + float(k[i, j] // 3) - float(k[i, j] % 5)
    counts[i, j] = (k[i, j] * 7 + i - j) >> 1


def test_mixed_float_and_integer_ops_same_bits_in_both_tiers(gate):
    release, _ = gate
    rng = np.random.default_rng(3)
    x = rng.standard_normal((37, 29))
    k = rng.integers(-50, 50, (37, 29))
    first = (np.empty_like(x), np.empty_like(k))
    mixed(x, k, *first, ndrange=x.shape)
    assert _module(mixed).tiered
    _swap(release)
    later = (np.empty_like(x), np.empty_like(k))
    mixed(x, k, *later, ndrange=x.shape)
    assert _module(mixed).opt_level == 3
    for a, b in zip(first, later):
        _same(a, b)
    v = x
    w = np.sqrt(np.abs(v)) / (1.0 + v * v) - np.maximum(v, 0.25) * np.minimum(v, -0.5)
    w = np.where(v > 0.0, w * 3.0 - 1.0 / (v + 2.0), w)
    np.testing.assert_allclose(first[0], w + (k // 3) - (k % 5), rtol=1e-15, atol=1e-15)
    i, j = np.indices(x.shape)
    np.testing.assert_array_equal(first[1], (k * 7 + i - j) >> 1)
