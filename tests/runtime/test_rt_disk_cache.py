"""The CPU disk cache (runtime/cpu_cache.py): a new process loads the shared object a
previous one wrote instead of lowering the module, with the same results, memory accounting
and errors; damaged entries are compiled again; a disabled cache reads and writes nothing;
without a working `cc` there are no entries and no noise.

Each case runs fresh Python processes (a process decides once where its allocator comes
from), with a cache folder of its own."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mlir import ir

from adjit.dialects import make_context
from adjit.runtime import cpu_cache

MODULE = """
func.func @sines_k(%x: memref<?xf64>) attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.global_id"() {dim = 0 : i64} : () -> index
  %ii = arith.index_cast %i : index to i64
  %v = arith.sitofp %ii : i64 to f64
  %s = math.sin %v : f64
  memref.store %s, %x[%i] : memref<?xf64>
  return
}
func.func @sines(%n: i64) -> memref<?xf64> attributes {adj.entry, llvm.emit_c_interface} {
  %zero = arith.constant 0 : i64
  %ok = arith.cmpi sge, %n, %zero : i64
  "adj.check"(%ok) {error = "ValueError", message = "negative length"} : (i1) -> ()
  %c0 = arith.constant 0 : index
  %ni = arith.index_cast %n : i64 to index
  %size = arith.maxsi %ni, %c0 : index
  %x = memref.alloc(%size) : memref<?xf64>
  "adj.launch"(%size) ({
    func.call @sines_k(%x) : (memref<?xf64>) -> ()
    gpu.yield
  }) {kernel = @sines_k} : (index) -> ()
  return %x : memref<?xf64>
}
"""

# Compiles MODULE, calls it, prints what it saw as JSON. With the argument `cached-only`,
# lowering and ExecutionEngines (the module's and the allocator's) raise: the run succeeds
# only if everything comes from the disk cache. The process waits at exit until the builds
# it queued are done (a loaded machine may take more than the usual wait), or, with
# `no-wait`, not at all.
SCRIPT = f"""
import gc, json, sys
from mlir import ir
from adjit.dialects import make_context
from adjit.frontend.types import ArrayType, f64, i64
from adjit.runtime import cpu_cache, engine, memory

if sys.argv[1] == "cached-only":
    def refuse(*args, **kwargs):
        raise AssertionError("compiled what the disk cache holds")
    engine.lower_to_llvm = engine.ExecutionEngine = memory.ExecutionEngine = refuse
cpu_cache.EXIT_WAIT_S = 0 if sys.argv[1] == "no-wait" else 100

sines = engine.compile_module(ir.Module.parse({MODULE!r}, make_context())).function(
    "sines", [i64], [ArrayType(f64, 1)])
gc.collect()
before = memory.memory_stats()["bytes_in_use"]
x = sines(1000)
held = memory.memory_stats()["bytes_in_use"] - before
values = x.tolist()
del x
gc.collect()
freed = memory.memory_stats()["bytes_in_use"] == before
try:
    sines(-1)
    error = None
except ValueError as e:
    error = str(e)
print(json.dumps({{"values": values, "held": held, "freed": freed, "error": error}}))
"""


def environment(cache: Path | None, **env: str) -> dict[str, str]:
    """This process's environment with ADJIT_CACHE_DIR=cache (None: unset) and `env`."""
    full = {k: v for k, v in os.environ.items() if k not in ("ADJIT_CACHE_DIR", "ADJIT_DISK_CACHE")}
    full.update({"ADJIT_NUM_THREADS": "2", **env})   # a parallel launch: the async runtime
    if cache is not None:
        full["ADJIT_CACHE_DIR"] = str(cache)
    return full


def run(cache: Path | None, mode: str = "any", **env: str) -> subprocess.CompletedProcess:
    """SCRIPT in a new process (see `environment`)."""
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True,
                          env=environment(cache, **env), timeout=120)


def results(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return json.loads(done.stdout)


def entries(cache: Path) -> list[str]:
    folder = cache / "cpu"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.fixture(scope="module")
def warm(tmp_path_factory) -> tuple[Path, dict]:
    """A cache one process filled (the allocator's entry and the module's), and what that
    process computed."""
    cache = tmp_path_factory.mktemp("warm")
    return cache, results(run(cache))


def test_a_process_writes_an_entry_per_module(warm):
    cache, first = warm
    names = entries(cache)
    assert len(names) == 4 and all(n.endswith((".so", ".json")) for n in names), names
    for meta in (cache / "cpu").glob("*.json"):
        so = meta.with_suffix(".so")
        assert json.loads(meta.read_text())["size"] == so.stat().st_size
    assert first["error"] == "negative length"


def test_the_next_process_loads_instead_of_compiling(warm):
    cache, first = warm
    second = results(run(cache, "cached-only"))
    assert second["values"] == first["values"]
    assert second["held"] >= 8000 and second["freed"]   # the cached code allocates through adjit
    assert second["error"] == "negative length"          # the error cell is found


def test_processes_filling_one_cache_at_once_leave_whole_entries(tmp_path):
    cache = tmp_path / "cache"
    racing = [subprocess.Popen([sys.executable, "-c", SCRIPT, "any"], env=environment(cache),
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
              for _ in range(3)]
    for process in racing:
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
    assert len(entries(cache)) == 4                    # no temporary files left behind
    results(run(cache, "cached-only"))


def test_a_process_exiting_mid_build_leaves_no_temporary_files(tmp_path):
    cache, temp = tmp_path / "cache", tmp_path / "tmp"
    temp.mkdir()
    results(run(cache, "no-wait", TMPDIR=str(temp)))
    assert not any(temp.iterdir())
    for meta in cache.glob("cpu/*.json"):   # whatever was written is whole
        data = meta.with_suffix(".so").read_bytes()
        assert hashlib.sha256(data).hexdigest() == json.loads(meta.read_text())["sha256"]
    assert not list(cache.glob("cpu/*.tmp"))


def copy_of(warm, tmp_path) -> Path:
    cache = tmp_path / "cache"
    shutil.copytree(warm[0], cache)
    return cache


def module_entry(cache: Path) -> Path:
    """The .so of MODULE (the allocator's entry, the other one, has no error table)."""
    [meta] = [p for p in (cache / "cpu").glob("*.json") if json.loads(p.read_text())["errors"]]
    return meta.with_suffix(".so")


@pytest.mark.parametrize("damage", ["flip", "truncate", "bad json"])
def test_a_damaged_entry_is_compiled_and_written_again(warm, tmp_path, damage):
    cache = copy_of(warm, tmp_path)
    so = module_entry(cache)
    if damage == "flip":
        data = bytearray(so.read_bytes())
        data[len(data) // 2] ^= 0xFF
        so.write_bytes(bytes(data))
    elif damage == "truncate":
        so.write_bytes(so.read_bytes()[:100])
    else:
        so.with_suffix(".json").write_text("{not json")
    assert results(run(cache))["values"] == warm[1]["values"]
    meta = json.loads(so.with_suffix(".json").read_text())
    assert hashlib.sha256(so.read_bytes()).hexdigest() == meta["sha256"]
    assert results(run(cache, "cached-only"))["values"] == warm[1]["values"]


def test_a_disabled_cache_reads_nothing(warm):
    done = run(warm[0], "cached-only", ADJIT_DISK_CACHE="0")
    assert done.returncode != 0 and "compiled what the disk cache holds" in done.stderr


@pytest.mark.parametrize("how", ["ADJIT_DISK_CACHE=0", "ADJIT_CACHE_DIR="])
def test_a_disabled_cache_writes_nothing(tmp_path, how):
    home = tmp_path / "home"
    home.mkdir()
    name, _, value = how.partition("=")
    cache = tmp_path / "cache"
    env = {"HOME": str(home), name: value}
    results(run(cache if name == "ADJIT_DISK_CACHE" else None, **env))
    assert not cache.exists() and not any(home.iterdir())


@pytest.mark.parametrize("cc", ["failing", "missing"])
def test_without_a_working_cc_there_is_no_entry_and_no_noise(tmp_path, cc):
    tools = tmp_path / "bin"
    tools.mkdir()
    if cc == "failing":
        (tools / "cc").write_text("#!/bin/sh\necho 'cc: cannot link' >&2\nexit 1\n")
        (tools / "cc").chmod(0o755)
    cache = tmp_path / "cache"
    first = results(run(cache, PATH=str(tools)))   # results() also checks stderr is empty
    assert first["error"] == "negative length"
    assert not list(cache.glob("cpu/*.so"))


def test_the_key_covers_options_and_locations():
    ctx = make_context()
    plain = ir.Module.parse(MODULE, ctx).operation.get_asm(enable_debug_info=True)
    located = ir.Module.parse(MODULE.replace("%c0 = arith.constant 0 : index",
                                             '%c0 = arith.constant 0 : index loc("user.py":7:1)'),
                              ctx).operation.get_asm(enable_debug_info=True)
    keys = {cpu_cache.key(plain, 3, 2), cpu_cache.key(plain, 2, 2), cpu_cache.key(plain, 3, 1),
            cpu_cache.key(located, 3, 2)}
    assert len(keys) == 4
    assert cpu_cache.key(plain, 3, 2) == cpu_cache.key(plain, 3, 2)
