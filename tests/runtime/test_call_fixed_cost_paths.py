"""A call's fixed cost (issue 30, docs/performance.md "Calls"): `@jit` functions that return
arrays (or several results) are called by the native dispatcher (runtime/native/dispatch.cpp)
as scalar-returning ones are, each returned array an ndarray over its allocator block whose
base gives the block back when the last array over it dies. These tests hold that path to
the Python path's results (values, dtypes, shapes, flags, result types), to exact
`memory_stats()` accounting (a block returned twice freed once, large blocks reused from the
allocator's cache only once nothing refers to them), to failed checks (their error raised,
the results freed), and to ADJIT_DEBUG changed at run time (honoured at the next call).

`native_only(f)` makes a call that the native dispatcher does not take fail, so each test
fails where such calls take the Python path."""
import contextlib
import gc
import os
import threading

import numpy as np
import pytest

import adjit
from adjit.lang import functions
from adjit.runtime import cpu_cache, memory, native_dispatch


@adjit.jit
def sqrt_of(x):
    return np.sqrt(x)


@adjit.jit
def scaled(x, k: adjit.f32):
    return x * k


@adjit.jit
def compare(x):
    return x > 1.0


@adjit.jit
def count(x: adjit.Array[adjit.i32, 1]):
    return x + 1


@adjit.jit
def first(x):
    y = np.zeros(())
    y[()] = x[0]
    return y


@adjit.jit
def same_twice(x):
    y = x * 2.0
    return y, y


@adjit.jit
def mixed(x):
    return adjit.sum(x), x + 1.0, 3, adjit.f32(0.5), x.shape[0] > 2, x.shape[0]


@adjit.jit
def one_tuple(x):
    return (x + 1.0,)


@adjit.jit
def stepped_into(x, s: int):
    y = x * 2.0
    t = 0
    for i in range(0, 6, s):
        t += i
    y[0] = t
    return y


@adjit.jit
def stepped_pair(x, s: int):
    y = x * 2.0
    t = 0
    for i in range(0, 6, s):
        t += i
    return y, x + t, t


@adjit.jit
def corner(x):
    y = x * 1.0
    y[0, 0] = x[0, 5]      # inside the allocation; outside the row: IndexError when debugging
    return y


@adjit.jit
def negated(v: adjit.vec3):
    return -v, v[0]


def python_path(fn):
    """A new decorated object of `fn`'s function that never dispatches natively."""
    fresh = adjit.jit(fn.pyfn)
    fresh._native = None
    return fresh


@contextlib.contextmanager
def native_only(fn):
    """Calls of `fn` inside fail unless the native dispatcher takes them."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"{fn.__name__} took the Python path")
    fn._call_python = refuse
    try:
        yield
    finally:
        del fn._call_python


def in_use() -> int:
    gc.collect()
    return memory.memory_stats()["bytes_in_use"]


def same_result(got, want):
    assert type(got) is type(want)
    if isinstance(want, tuple):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same_result(g, w)
    elif isinstance(want, np.ndarray):
        assert (got.dtype, got.shape, got.strides) == (want.dtype, want.shape, want.strides)
        assert got.flags.c_contiguous and got.flags.writeable and got.flags.aligned
        np.testing.assert_array_equal(got, want)
    else:
        assert got == want


CASES = [
    (sqrt_of, (np.random.default_rng(0).random((64, 32), np.float32),)),
    (sqrt_of, (np.random.default_rng(1).random(100),)),
    (scaled, (np.arange(12, dtype=np.float32).reshape(3, 4), np.float32(2.5))),
    (compare, (np.linspace(0, 2, 7),)),
    (count, (np.arange(5, dtype=np.int32),)),
    (first, (np.arange(3.0) + 7,)),
    (mixed, (np.arange(4.0),)),
    (one_tuple, (np.arange(3.0),)),
    (sqrt_of, (np.ones((2, 0, 3)),)),
]


@pytest.mark.parametrize("fn, args", CASES)
def test_results_are_the_python_paths_and_the_call_is_native(fn, args):
    want = python_path(fn)(*args)
    fn(*args)                                   # registers the specialisation
    with native_only(fn):
        got = fn(*args)
    same_result(got, want)


def test_fresh_results_are_counted_while_alive_and_freed_once():
    x = np.arange(6.0)
    same_twice(x)
    base = in_use()
    with native_only(same_twice):
        a, b = same_twice(x)
    assert np.shares_memory(a, b) and a is not b
    assert in_use() == base + x.nbytes           # one block for both
    del a
    assert in_use() == base + x.nbytes           # b still holds it
    np.testing.assert_array_equal(b, 2 * x)
    del b
    assert in_use() == base


def test_views_keep_the_block_and_results_never_alias_a_live_one():
    # 1024 x 256 float64: 2 MiB, a block the allocator keeps for reuse once freed.
    x = np.random.default_rng(2).random((1024, 256))
    sqrt_of(x)
    base = in_use()
    with native_only(sqrt_of):
        r1 = sqrt_of(x)
        view = r1[10:20]
        del r1                                   # the view still refers to the block
        r2 = sqrt_of(x + 1.0)
        assert not np.shares_memory(view, r2)
        np.testing.assert_array_equal(view, np.sqrt(x[10:20]))
        np.testing.assert_array_equal(r2, np.sqrt(x + 1.0))
        assert in_use() == base + 2 * x.nbytes
        address = view.__array_interface__["data"][0] - 10 * 256 * 8
        del view
        assert in_use() == base + x.nbytes
        r3 = sqrt_of(x * 2.0)                    # may reuse the block freed just now
        assert not np.shares_memory(r2, r3)
        np.testing.assert_array_equal(r3, np.sqrt(x * 2.0))
        np.testing.assert_array_equal(r2, np.sqrt(x + 1.0))
    assert r3.__array_interface__["data"][0] == address   # the kept block, reused
    del r2, r3
    assert in_use() == base


def test_a_failed_check_raises_its_error_and_frees_the_results():
    x = np.arange(8.0)
    assert stepped_into(x, 2)[0] == 0 + 2 + 4
    base = in_use()
    with native_only(stepped_into):
        with pytest.raises(ValueError, match="range\\(\\) arg 3 must not be zero"):
            stepped_into(x, 0)
        assert in_use() == base
        np.testing.assert_array_equal(stepped_into(x, 3)[1:], 2 * x[1:])   # cell clean
    stepped_pair(x, 2)
    base = in_use()
    with native_only(stepped_pair):
        with pytest.raises(ValueError, match="range\\(\\) arg 3 must not be zero"):
            stepped_pair(x, 0)
        assert in_use() == base                  # both arrays' blocks freed
        y, z, t = stepped_pair(x, 3)
    assert t == 3 and type(t) is int
    np.testing.assert_array_equal(z, x + 3)


def test_adjit_debug_changed_at_run_time_holds_from_the_next_call(monkeypatch):
    monkeypatch.delenv("ADJIT_DEBUG", raising=False)
    x = np.arange(12.0).reshape(2, 6)[:, :4].copy()    # (2, 4): x[0, 5] is x[1, 1]
    assert corner(x)[0, 0] == x[1, 1]
    with native_only(corner):
        assert corner(x)[0, 0] == x[1, 1]
    monkeypatch.setenv("ADJIT_DEBUG", "1")
    assert functions.debug_enabled()
    with pytest.raises(IndexError):
        corner(x)
    monkeypatch.setenv("ADJIT_DEBUG", "0")               # off (the Python path: a setting
    assert not functions.debug_enabled()                 # other than at registration)
    assert corner(x)[0, 0] == x[1, 1]
    monkeypatch.delenv("ADJIT_DEBUG")
    with native_only(corner):                            # the spec registered before
        assert corner(x)[0, 0] == x[1, 1]
    os.environ["ADJIT_DEBUG"] = " 1"                    # on, as another text than "1"
    try:
        assert functions.debug_enabled()
        with pytest.raises(IndexError):
            corner(x)
    finally:
        del os.environ["ADJIT_DEBUG"]
    assert not functions.debug_enabled()
    assert native_dispatch.debug_enabled() == native_dispatch._debug_enabled_python()


def test_vector_results_stay_on_the_python_path_and_keep_their_shape():
    v = adjit.vec3(1.0, 2.0, 3.0)
    for _ in range(3):
        neg, x0 = negated(v)
        assert isinstance(neg, np.ndarray) and neg.shape == (3,) and neg.dtype == np.float32
        np.testing.assert_array_equal(neg, -v)
        assert x0 == np.float32(1.0)
    assert len(negated._native) == 0


def test_threads_calling_at_once_get_their_own_results():
    xs = [np.full((64, 64), i, np.float32) for i in range(8)]
    scaled(xs[0], np.float32(1.0))
    base = in_use()
    wrong = []

    def work(i):
        try:
            for n in range(100):
                r = scaled(xs[i], np.float32(n))
                if not (r == np.float32(i) * np.float32(n)).all():
                    wrong.append((i, n))
        except BaseException as e:      # noqa: BLE001 - reported by the main thread
            wrong.append(e)
    with native_only(scaled):
        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not wrong
    assert in_use() == base


@adjit.jit
def tiered_affine(x):
    return x * x * 0.5 + x


@pytest.fixture
def held_builds(monkeypatch, tmp_path):
    """The disk cache on in a fresh folder (so modules get the first compile tier) and its
    writer's builds held until the returned Event is set (as test_compile_tiers.py does)."""
    monkeypatch.setenv("ADJIT_DISK_CACHE", "1")
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ADJIT_COMPILE_TIER", "0")   # tiers on (opt-in)
    monkeypatch.delenv("ADJIT_DEBUG", raising=False)
    release = threading.Event()
    build = cpu_cache._build

    def held(*args, **kwargs):
        assert release.wait(120), "the test never released the cache writer"
        return build(*args, **kwargs)
    monkeypatch.setattr(cpu_cache, "_build", held)
    yield release
    release.set()
    adjit.wait_for_builds()


def test_after_a_tier_swap_array_results_are_native_again_and_copies_stay_without(held_builds):
    x = np.linspace(-3, 3, 101)
    fresh = adjit.jit(tiered_affine.pyfn)
    first = fresh(x)
    (compiled,) = fresh._cache.values()
    assert compiled.module.tiered
    undispatched = python_path(tiered_affine)
    undispatched(x)
    with native_only(fresh):
        np.testing.assert_array_equal(fresh(x), first)      # the first tier, natively
    held_builds.set()
    assert adjit.wait_for_builds(120)
    assert compiled.module.opt_level == 3
    fresh(x)                                   # registers the O3 build's entry
    with native_only(fresh):
        np.testing.assert_array_equal(fresh(x), first)
    assert undispatched._native is None        # (was given a dispatcher by the swap)
    np.testing.assert_array_equal(undispatched(x), first)
