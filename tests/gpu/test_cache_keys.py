"""Disk-cache keys follow every global value a kernel compiles in as a constant (issue 8.6).

The GPU kernel cache is keyed without MLIR, on source.fingerprint: the source of the kernel
and of what it calls, and the globals it reads. Tuples, nested tuples, dicts, bools, NumPy
scalars and attributes of modules and objects compile in as constants as plain numbers do,
so editing one must change the key (else a GPU machine keeps running the old constants).
The CPU cache is keyed on the module text, which holds the constants: checked here too."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import adjit
from adjit.api import cuda_launch
from adjit.lang.source import fingerprint

COEFFS = (1.0, 2.0)
NESTED = ((1.0, 2.0), (3.0, (4.0, 5.0)))
TABLE = {"scale": 2.0, "shift": (1.0, -1.0)}
FLAG = True
HALF = np.float32(0.5)
params = types.ModuleType("params")          # a module whose attribute the kernel reads
params.SCALE = 3.0
cfg = types.SimpleNamespace(n=2, weights=(0.25, 0.75))


@adjit.func
def poly(v):
    return COEFFS[0] + COEFFS[1] * v


@adjit.kernel
def uses_globals(x, y):
    i = adjit.index()
    v = x[i]
    if FLAG:
        v = v + NESTED[1][1][0]
    y[i] = poly(v) * params.SCALE * HALF + TABLE["shift"][1] + cfg.weights[cfg.n - 1]


@adjit.jit
def host(x, y):
    uses_globals(x, y, ndrange=x.shape[0])


F32_1D = adjit.Array[adjit.f32, 1]


def gpu_key() -> str:
    return cuda_launch.cache_key(uses_globals, [F32_1D, F32_1D], 1, False, "sm_90")


@pytest.mark.parametrize("name, edit", [
    ("COEFFS", lambda g: g.__setitem__("COEFFS", (1.0, 2.5))),
    ("NESTED", lambda g: g.__setitem__("NESTED", ((1.0, 2.0), (3.0, (4.5, 5.0))))),
    ("TABLE", lambda g: g.__setitem__("TABLE", {"scale": 2.0, "shift": (1.0, -2.0)})),
    ("FLAG", lambda g: g.__setitem__("FLAG", False)),
    ("HALF", lambda g: g.__setitem__("HALF", np.float32(0.25))),
    ("HALF-dtype", lambda g: g.__setitem__("HALF", np.float64(0.5))),
    ("params.SCALE", lambda g: setattr(g["params"], "SCALE", 4.0)),
    ("cfg.weights", lambda g: setattr(g["cfg"], "weights", (0.25, 0.5))),
    ("cfg.n", lambda g: setattr(g["cfg"], "n", 1)),
])
def test_gpu_key_changes_with_each_compiled_in_global(monkeypatch, name, edit):
    before, host_before = gpu_key(), fingerprint(host)
    assert gpu_key() == before                       # a key is a function of the program
    globals_ = uses_globals.pyfn.__globals__
    for var in ("COEFFS", "NESTED", "TABLE", "FLAG", "HALF"):
        monkeypatch.setitem(globals_, var, globals_[var])       # restored after the test
    monkeypatch.setattr(params, "SCALE", params.SCALE)
    monkeypatch.setattr(cfg, "weights", cfg.weights)
    monkeypatch.setattr(cfg, "n", cfg.n)
    edit(globals_)
    assert gpu_key() != before, name
    # A host program (@jit with device="cuda") launching the kernel is keyed on it too.
    assert fingerprint(host) != host_before, name


def test_gpu_key_ignores_values_that_are_equal(monkeypatch):
    before = gpu_key()
    monkeypatch.setitem(uses_globals.pyfn.__globals__, "COEFFS", tuple([1.0, 2.0]))
    monkeypatch.setattr(cfg, "weights", (0.25, 0.75))
    assert gpu_key() == before


def test_globals_compile_in_as_constants_on_the_cpu(monkeypatch):
    """The constants the keys follow are those the code computes with (against NumPy)."""
    x = np.linspace(-1.0, 1.0, 8).astype(np.float32)
    y = np.zeros_like(x)
    monkeypatch.setattr(uses_globals, "_cache", {})
    uses_globals(x, y, ndrange=8)
    expected = (1.0 + 2.0 * (x + 4.0)) * 3.0 * 0.5 - 1.0 + 0.75
    np.testing.assert_allclose(y, expected.astype(np.float32), rtol=1e-6)


def test_cpu_key_changes_with_a_global_tuple(monkeypatch):
    """The CPU disk cache finds a specialisation by its source key (runtime/source_index.py),
    which holds the constants (source.fingerprint), as the module text does."""
    from adjit.runtime import source_index
    keys = []
    real_key = source_index.key
    monkeypatch.setattr(source_index, "key", lambda *a: keys.append(real_key(*a)) or keys[-1])
    x = np.ones(4, np.float32)
    y = np.zeros_like(x)
    results = []
    for coeffs in [(1.0, 2.0), (1.0, 3.0), (1.0, 2.0)]:
        monkeypatch.setitem(uses_globals.pyfn.__globals__, "COEFFS", coeffs)
        monkeypatch.setattr(uses_globals, "_cache", {})      # as a new process would
        uses_globals(x, y, ndrange=4)
        results.append(y.copy())
    assert len(keys) == 3 and keys[0] != keys[1] and keys[0] == keys[2]
    np.testing.assert_allclose(results[0], (1.0 + 2.0 * 5.0) * 1.5 - 1.0 + 0.75)
    np.testing.assert_allclose(results[1], (1.0 + 3.0 * 5.0) * 1.5 - 1.0 + 0.75)


def test_gpu_key_is_the_same_in_every_process(tmp_path):
    """No address or hash-seed-dependent order goes into the key (dicts, sets, objects):
    another process, with another string hash seed, computes the same one."""
    (tmp_path / "keyed.py").write_text(textwrap.dedent("""
        import types
        import adjit
        from adjit.api import cuda_launch
        TAGS = frozenset({"alpha", "beta", "gamma", "delta"})
        cfg = types.SimpleNamespace(table={"a": (1.0, 2.0), "b": 3}, tags=TAGS, me=None)
        cfg.me = cfg                                   # a cycle

        @adjit.kernel
        def k(x):
            i = adjit.index()
            x[i] = x[i] * cfg.table["a"][1]

        def key():
            return cuda_launch.cache_key(k, [adjit.Array[adjit.f32, 1]], 1, False, "sm_90")
        """))
    code = "import keyed; print(keyed.key())"
    keys = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONPATH=str(tmp_path), PYTHONHASHSEED=seed)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        keys.add(done.stdout.strip())
    assert len(keys) == 1


class Layer:
    __slots__ = ("w",)

    def __init__(self, w):
        self.w = w


LAYERS = (Layer(2.0), Layer(3.0))


class Awkward:
    """An object whose own attribute code fails: the key is still computed."""

    def __getattr__(self, name):
        raise RuntimeError("no attributes here")


ODD = Awkward()


@adjit.kernel
def uses_objects(x):
    i = adjit.index()
    x[i] = x[i] * LAYERS[1].w


def test_gpu_key_follows_attributes_of_objects_in_containers(monkeypatch):
    def key():
        return cuda_launch.cache_key(uses_objects, [F32_1D], 1, False, "sm_90")

    before = key()
    monkeypatch.setattr(LAYERS[1], "w", 4.0)      # a __slots__ attribute, reached by index
    assert key() != before
    x = np.ones(4, np.float32)
    monkeypatch.setattr(uses_objects, "_cache", {})
    uses_objects(x, ndrange=4)
    np.testing.assert_array_equal(x, 4.0)         # what the key follows is what runs
    monkeypatch.setitem(uses_objects.pyfn.__globals__, "LAYERS", (Layer(2.0), ODD))
    assert isinstance(key(), str)
