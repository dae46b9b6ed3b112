"""The O3 shared object the cache writer builds (runtime/cpu_cache.py: `opt`, `llc`, `cc`)
replaces the in-process code (compile tiers) and is what every later process loads, so it
must be code as good as the ExecutionEngine's O3 build: its inner loops vectorised, as wide
(`opt` needs the target CPU and features too: the vectoriser's cost model comes from them,
without them it picks SSE2's 128 bits). Checked on the objects' disassembly, not by timing.

And the first tier (O0) is not chosen for a module whose allocas are outside the entry
block: O0 keeps one stack cell per loop iteration (a fixed point's gradient crashed so)."""
from __future__ import annotations

import ctypes
import re
import subprocess

import numpy as np
import pytest

import adjit
from adjit.compiler import engine
from adjit.runtime import cpu_cache


@adjit.kernel
def axpy64(a: float, x, y, out):
    i = adjit.index()
    out[i] = a * x[i] + y[i]


@adjit.kernel
def jacobi64(x, out, f, h2: float):
    i, j = adjit.index_nd()
    n, m = x.shape[0], x.shape[1]
    if 0 < i < n - 1 and 0 < j < m - 1:
        out[i, j] = 0.25 * (x[i - 1, j] + x[i + 1, j] + x[i, j - 1] + x[i, j + 1]
                            + h2 * f[i, j])
    else:
        out[i, j] = x[i, j]


_PACKED_DOUBLE = re.compile(r"\bv(?:add|mul|sub|fmadd\w*)pd\s+.*%([xyz])mm", re.M)
_WIDTH = {"x": 128, "y": 256, "z": 512}


def _packed_widths(path: str) -> list[int]:
    """The vector widths (bits) of the packed double arithmetic in object `path`."""
    objdump = str(cpu_cache._llvm_dir() / "bin" / "llvm-objdump")
    text = subprocess.run([objdump, "-d", "--no-show-raw-insn", "--x86-asm-syntax=att", path],
                          capture_output=True, text=True, check=True).stdout
    return [_WIDTH[m.group(1)] for m in _PACKED_DOUBLE.finditer(text)]


def _engine_object(compiled, path: str) -> None:
    """The ExecutionEngine's O3 object of `compiled`'s module, written to `path`."""
    from mlir import ir
    from mlir.execution_engine import ExecutionEngine

    from adjit.dialects import shared_context
    from adjit.passes.pipeline import lower_to_llvm
    from adjit.runtime.extension import runtime_symbols
    module = ir.Module.parse(compiled.source, shared_context())
    lower_to_llvm(module, compiled.num_threads)
    ee = ExecutionEngine(module, opt_level=3, enable_object_dump=True)
    for symbol, address in runtime_symbols().items():
        ee.raw_register_runtime(symbol, ctypes.c_void_p(address))
    ee.raw_lookup(_entry_symbol(compiled.source))        # generates the code
    ee.dump_to_object_file(path)


def _entry_symbol(source: str) -> str:
    return "_mlir_ciface_" + re.search(r"func\.func @(\w+)", source).group(1)


@pytest.mark.parametrize("kernel, args", [
    (axpy64, lambda: (2.0, np.ones(4096), np.ones(4096), np.zeros(4096))),
    (jacobi64, lambda: (np.ones((64, 64)), np.zeros((64, 64)), np.ones((64, 64)), 0.01)),
])
def test_shared_object_inner_loop_vectorised_as_wide_as_the_engine(monkeypatch, tmp_path,
                                                                  kernel, args):
    monkeypatch.setenv("ADJIT_DISK_CACHE", "1")
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ADJIT_COMPILE_TIER", "3")
    a = args()
    kernel(*a, ndrange=a[1].shape)
    assert adjit.wait_for_builds(120)
    (compiled,) = kernel._cache.values()
    (so,) = (tmp_path / "cpu").glob(f"{compiled.module.key}.so")
    in_process = str(tmp_path / "engine.o")
    _engine_object(compiled.module, in_process)
    stored, own = _packed_widths(str(so)), _packed_widths(in_process)
    assert own, "the ExecutionEngine's O3 build has no packed double arithmetic"
    # The stored build's inner loop is vectorised, and as wide as the in-process build's.
    assert stored and max(stored) == max(own), (stored, own)


# -- the first tier and allocas -------------------------------------------------------------

_LOOP = """; ModuleID = 'm'
define void @f(i64 %0) {
  %2 = alloca double, i64 1, align 8
  br label %3

3:                                                ; preds = %3, %1
  %4 = phi i64 [ 0, %1 ], [ %6, %3 ]
{body}
  %6 = add i64 %4, 1
  %7 = icmp slt i64 %6, %0
  br i1 %7, label %3, label %8

8:
  ret void
}}
"""


def test_no_first_tier_for_an_alloca_in_a_loop(monkeypatch):
    monkeypatch.setenv("ADJIT_COMPILE_TIER", "0")   # tiers on (opt-in)
    in_loop = _LOOP.replace("{body}", "  %5 = alloca double, i64 1, align 8").replace("}}", "}")
    assert engine.first_tier(in_loop) == 3


def test_first_tier_for_allocas_in_the_entry_block_only(monkeypatch):
    monkeypatch.setenv("ADJIT_COMPILE_TIER", "0")   # tiers on (opt-in)
    entry_only = _LOOP.replace("{body}", "  store double 0.0, ptr %2").replace("}}", "}")
    assert engine.first_tier(entry_only) == engine.FIRST_TIER
