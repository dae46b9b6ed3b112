"""What compiling a CPU kernel imports: not mlir.dialects.llvm (12-25 ms: its op classes;
translate_module_to_llvmir comes from the extension, AtomicOrdering's two numbers are
constants) nor mlir.dialects.gpu (6-14 ms: adj.launch's gpu.yield is made generically, and
the bindings' search for a dialect's module finds adjit's empty ones first). Each case in
a fresh process, with the disk cache on (the translation to LLVM IR runs)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np

import adjit

PROGRAM = """
import sys
import numpy as np
import adjit

@adjit.kernel
def saxpy(a: float, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]

@adjit.jit
def total(x):
    return adjit.sum(x * x)

x = np.linspace(0.0, 1.0, 64)
y = np.ones(64)
saxpy(2.0, x, y, ndrange=64)
g = adjit.grad(total)(x)
print({"y": y.tolist(), "g": g.tolist(), "mlir": "mlir.ir" in sys.modules,
       "llvm": "mlir.dialects.llvm" in sys.modules, "gpu": "mlir.dialects.gpu" in sys.modules})
"""


def test_a_cpu_compile_imports_neither_the_llvm_nor_the_gpu_dialect_module(tmp_path):
    script = tmp_path / "user_code.py"
    script.write_text(textwrap.dedent(PROGRAM))
    env = {**os.environ, "ADJIT_CACHE_DIR": str(tmp_path / "cache"), "ADJIT_DISK_CACHE": "1"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    got = eval(done.stdout.strip().splitlines()[-1])
    assert got["mlir"]                     # it compiled
    assert not got["llvm"] and not got["gpu"]
    x = np.linspace(0.0, 1.0, 64)
    np.testing.assert_array_equal(got["y"], 2.0 * x + 1.0)
    np.testing.assert_allclose(got["g"], 2.0 * x, rtol=1e-15, atol=0)


def test_atomic_orderings_are_llvm_s():
    from mlir.dialects import llvm

    from adjit.passes import lower_cpu
    assert lower_cpu._MONOTONIC == int(llvm.AtomicOrdering.monotonic)
    assert lower_cpu._ACQ_REL == int(llvm.AtomicOrdering.acq_rel)


# -- the compiler's fingerprint, kept per install ------------------------------------------------

def _fresh_fingerprint(monkeypatch, cache) -> str:
    from adjit.lang import source
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(cache))
    monkeypatch.setenv("ADJIT_DISK_CACHE", "1")
    source.compiler_fingerprint.cache_clear()
    try:
        return source.compiler_fingerprint()
    finally:
        source.compiler_fingerprint.cache_clear()


def _from_the_bytes(files) -> str:
    import hashlib
    digest = hashlib.sha256()
    for _, (relative, path) in files:
        digest.update(f"\0{relative}\0".encode())
        digest.update(open(path, "rb").read())
    return digest.hexdigest()


def test_compiler_fingerprint_is_kept_and_read_back(monkeypatch, tmp_path):
    from adjit.lang import source
    files = [(p, f) for p in ("adjit.lang", "adjit.compiler", "adjit.api",
                                          "adjit.dialects", "adjit.passes")
             for f in source._compiler_files(p)]
    first = _fresh_fingerprint(monkeypatch, tmp_path)
    assert first == _from_the_bytes(files)
    (kept,) = (tmp_path / "compiler").iterdir()
    # Read back: the kept file, not the sources, answers (a marked value shows it).
    signature = kept.read_text().split(" ")[0]
    kept.write_text(f"{signature} {'e' * 64}")
    assert _fresh_fingerprint(monkeypatch, tmp_path) == "e" * 64
    # A damaged file reads as absent: made again from the bytes.
    kept.write_text(f"{signature} {'e' * 63}z")
    assert _fresh_fingerprint(monkeypatch, tmp_path) == first


def test_an_edited_compiler_file_changes_the_fingerprint(monkeypatch, tmp_path):
    from adjit.lang import source
    extra = tmp_path / "pass.py"
    extra.write_text("x = 1\n")
    original = source._compiler_files

    def with_extra(package):
        files = original(package)
        return files + [("pass.py", str(extra))] if package == "adjit.passes" else files
    monkeypatch.setattr(source, "_compiler_files", with_extra)
    before = _fresh_fingerprint(monkeypatch, tmp_path / "cache")
    st = extra.stat()
    extra.write_text("x = 2\n")          # same size; its times (and so the signature) change
    # (a coarse clock may give a write within one tick the same time: a second on)
    os.utime(extra, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    after = _fresh_fingerprint(monkeypatch, tmp_path / "cache")
    assert after != before
    files = [(p, f) for p in ("adjit.lang", "adjit.compiler", "adjit.api",
                                          "adjit.dialects", "adjit.passes")
             for f in with_extra(p)]
    assert after == _from_the_bytes(files)


# -- one conversion to the LLVM dialect ----------------------------------------------------------

_SEPARATE = ("convert-math-to-llvm,convert-math-to-libm,convert-arith-to-llvm,"
             "convert-index-to-llvm,convert-func-to-llvm,convert-cf-to-llvm,convert-ub-to-llvm,"
             "reconcile-unrealized-casts")


@adjit.jit
def mixed(x, n: int, k: adjit.i32):
    s = 0.0
    for i in range(n):
        if i % 3 == 0:
            s += adjit.sin(x[i]) * adjit.tanh(x[i]) + float(k // 2)
        else:
            s += adjit.sqrt(abs(x[i])) + x[i] ** 3
    return s + adjit.sum(adjit.exp(x) * x)


def test_one_convert_to_llvm_gives_the_llvm_ir_of_the_separate_conversions(monkeypatch):
    """The pipeline's single convert-to-llvm (one walk) makes the same LLVM IR as the
    separate conversions it replaced, on modules with integer and float arithmetic, index
    math, calls, branches, math intrinsics and libm calls, a reduction, and its gradient."""
    from mlir import ir

    from adjit.dialects import make_context
    from adjit.compiler import engine
    from adjit.passes import pipeline

    monkeypatch.setenv("ADJIT_DISK_CACHE", "0")
    before = set(engine._cache)
    x = np.linspace(-1.0, 1.0, 37)
    mixed(x, 37, np.int32(5))
    adjit.grad(mixed)(x, 37, np.int32(5))
    texts = [m.source for k, m in engine._cache.items() if k not in before]
    assert len(texts) == 2
    combined = pipeline._TO_LLVM
    separate = combined.replace("convert-math-to-llvm,convert-math-to-libm,convert-to-llvm,"
                                "reconcile-unrealized-casts", _SEPARATE)
    assert separate != combined
    for text in texts:
        got = []
        for to_llvm in (combined, separate):
            monkeypatch.setattr(pipeline, "_TO_LLVM", to_llvm)
            with make_context():
                got.append(pipeline.llvm_ir_text(ir.Module.parse(text), num_threads=2))
        assert got[0] == got[1]
