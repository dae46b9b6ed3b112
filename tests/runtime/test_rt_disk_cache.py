"""The CPU disk cache (runtime/cpu_cache.py): a new process loads the shared object a
previous one wrote instead of lowering the module, with the same results, memory accounting
and errors; damaged entries are compiled again; a disabled cache reads and writes nothing;
without a working `cc` there are no entries and no noise.

Each case runs fresh Python processes, with a cache folder of its own."""
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
from adjit.runtime import cpu_cache, files

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
# lowering and ExecutionEngines raise: the run succeeds
# only if everything comes from the disk cache. The process waits at exit until the builds
# it queued are done (a loaded machine may take more than the usual wait), or, with
# `no-wait`, not at all. A second argument `cosines` compiles another module (cos for sin).
SCRIPT = f"""
import gc, json, sys
from mlir import ir
from adjit.dialects import make_context
from adjit.core.types import ArrayType, f64, i64
from adjit.compiler import engine
from adjit.runtime import cpu_cache, memory

if sys.argv[1] == "cached-only":
    def refuse(*args, **kwargs):
        raise AssertionError("compiled what the disk cache holds")
    engine.lower_to_llvm = engine.ExecutionEngine = refuse
cpu_cache.EXIT_WAIT_S = 0 if sys.argv[1] == "no-wait" else 100

text = {MODULE!r}
if sys.argv[2:] == ["cosines"]:     # another module, with the same signature
    text = text.replace("math.sin", "math.cos")
sines = engine.compile_module(ir.Module.parse(text, make_context())).function(
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


def run(cache: Path | None, mode: str = "any", *extra: str, **env: str) -> subprocess.CompletedProcess:
    """SCRIPT in a new process (see `environment`)."""
    return subprocess.run([sys.executable, "-c", SCRIPT, mode, *extra], capture_output=True,
                          text=True, env=environment(cache, **env), timeout=120)


def results(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return json.loads(done.stdout)


def entries(cache: Path) -> list[str]:
    """The module entries' files (not the source records, src-*: test_rt_source_index.py)."""
    folder = cache / "cpu"
    return sorted(p.name for p in folder.iterdir()
                  if not p.name.startswith("src-")) if folder.exists() else []


@pytest.fixture(scope="module")
def warm(tmp_path_factory) -> tuple[Path, dict]:
    """A cache one process filled (the module's entry), and what that process computed."""
    cache = tmp_path_factory.mktemp("warm")
    return cache, results(run(cache))


def test_a_process_writes_an_entry_per_module(warm):
    cache, first = warm
    names = entries(cache)
    assert len(names) == 2 and all(n.endswith((".so", ".json")) for n in names), names
    for meta in (cache / "cpu").glob("[!s]*.json"):
        so = meta.with_suffix(".so")
        record = json.loads(meta.read_text())["files"]["so"]
        assert record["size"] == so.stat().st_size
        assert record["sha256"] == hashlib.sha256(so.read_bytes()).hexdigest()
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
    assert len(entries(cache)) == 2                    # no temporary files left behind
    results(run(cache, "cached-only"))


def test_a_process_exiting_mid_build_leaves_no_temporary_files(tmp_path):
    cache, temp = tmp_path / "cache", tmp_path / "tmp"
    temp.mkdir()
    results(run(cache, "no-wait", TMPDIR=str(temp)))
    assert not any(temp.iterdir())
    for meta in cache.glob("cpu/[!s]*.json"):   # whatever was written is whole
        data = meta.with_suffix(".so").read_bytes()
        assert hashlib.sha256(data).hexdigest() == json.loads(meta.read_text())["files"]["so"]["sha256"]
    assert not list(cache.glob("cpu/*.tmp"))


def copy_of(warm, tmp_path) -> Path:
    cache = tmp_path / "cache"
    shutil.copytree(warm[0], cache)
    return cache


def module_entry(cache: Path) -> Path:
    """The .so of MODULE."""
    [meta] = [p for p in (cache / "cpu").glob("[!s]*.json")
              if json.loads(p.read_text())["errors"]]
    return meta.with_suffix(".so")


def verifies(so: Path) -> bool:
    """Whether the entry of `so` is whole and filed under its own key (not loaded here)."""
    try:
        return files.read_entry(so.parent, so.stem, cpu_cache.FORMAT_VERSION, "entry") is not None
    except files.DamagedEntry:
        return False


@pytest.mark.parametrize("damage", ["flip", "truncate", "bad json", "metadata bit",
                                    "edited error table"])
def test_a_damaged_entry_is_compiled_and_written_again(warm, tmp_path, damage):
    cache = copy_of(warm, tmp_path)
    so = module_entry(cache)
    meta_path = so.with_suffix(".json")
    if damage == "flip":
        data = bytearray(so.read_bytes())
        data[len(data) // 2] ^= 0xFF
        so.write_bytes(bytes(data))
    elif damage == "truncate":
        so.write_bytes(so.read_bytes()[:100])
    elif damage == "bad json":
        meta_path.write_text("{not json")
    elif damage == "metadata bit":      # in the error message: still JSON, another message
        text = meta_path.read_text()
        meta_path.write_text(text.replace("negative length", "negative lengtl"))
    else:   # the .so's hash still right: the check would raise another error, or none
        meta = json.loads(meta_path.read_text())
        meta["errors"] = []
        meta_path.write_text(json.dumps(meta))
    assert not verifies(so)
    again = results(run(cache))
    assert again["values"] == warm[1]["values"] and again["error"] == "negative length"
    assert verifies(so)
    assert results(run(cache, "cached-only")) == warm[1]


def test_another_modules_entry_under_a_key_is_not_run(warm, tmp_path):
    """A whole entry (its .so and .json, consistent with each other) of another module,
    copied over this module's: its metadata records its own key, so it is a miss."""
    cache = copy_of(warm, tmp_path)
    so = module_entry(cache)
    before = set((cache / "cpu").glob("[!s]*.json"))
    cosines = results(run(cache, "any", "cosines"))
    assert cosines["values"] != warm[1]["values"]
    [other] = set((cache / "cpu").glob("[!s]*.json")) - before
    for ext in ("so", "json"):
        shutil.copy(other.with_suffix(f".{ext}"), so.with_suffix(f".{ext}"))
    assert not verifies(so)
    assert results(run(cache))["values"] == warm[1]["values"]      # compiled again
    assert verifies(so) and results(run(cache, "cached-only")) == warm[1]


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


@pytest.mark.parametrize("name, value", [("ADJIT_CACHE_MAX_MB", "nan"),
                                         ("ADJIT_CACHE_MAX_MB", "inf"),
                                         ("ADJIT_DISK_CACHE", "no")])
def test_a_setting_that_is_not_valid_is_named_at_the_first_compile(tmp_path, name, value):
    """Not "cannot convert float NaN to integer" from a store: the setting and its value,
    for the first function compiled, whether or not the cache would be written."""
    done = run(tmp_path / "cache", **{name: value})
    assert done.returncode != 0
    assert f"{name} must be" in done.stderr and f"got {value!r}" in done.stderr
    assert not (tmp_path / "cache").exists()


# A module with custom rules (issue 8, item 5): a rule's symbol was named with Python's
# per-process `hash`, so each new process compiled such a module again (and stored one more
# entry). The rules scale the true derivative by 2, so the values show that they ran.
RULED = '''
import adjit

@adjit.func
def softplus(x):
    return adjit.log(1.0 + adjit.exp(x))

@adjit.rules.forward(softplus)
def _(config, x):
    s = 1.0 / (1.0 + adjit.exp(-x.val))
    return softplus(x.val), 2.0 * s * x.dval

@adjit.rules.augmented_primal(softplus)
def _(config, x):
    return adjit.rules.AugmentedReturn(softplus(x.val), None, x.val)

@adjit.rules.reverse(softplus)
def _(config, dret, tape, x):
    return (2.0 * dret / (1.0 + adjit.exp(-tape)),)

@adjit.jit
def loss(a: float):
    return softplus(a) * a
'''

RULED_SCRIPT = """
import json, sys
from adjit.compiler import engine
from adjit.runtime import cpu_cache, memory
if sys.argv[1] == "cached-only":
    def refuse(*args, **kwargs):
        raise AssertionError("compiled what the disk cache holds")
    engine.lower_to_llvm = engine.ExecutionEngine = memory.ExecutionEngine = refuse
cpu_cache.EXIT_WAIT_S = 100
import adjit, ruled
reverse = adjit.autodiff(adjit.Reverse, ruled.loss, adjit.Active(0.5))[0]
forward = adjit.autodiff(adjit.Forward, ruled.loss, adjit.Duplicated(0.5, 1.0))
print(json.dumps([float(reverse), float(forward)]))
"""


def test_a_module_with_custom_rules_is_loaded_by_the_next_process(tmp_path):
    import math
    (tmp_path / "ruled.py").write_text(RULED)
    cache = tmp_path / "cache"
    env = environment(cache, PYTHONPATH=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", RULED_SCRIPT, mode], capture_output=True,
                           text=True, env=env, timeout=120) for mode in ("any", "cached-only")]
    for done in runs:
        assert done.returncode == 0, done.stderr
    first, second = (json.loads(done.stdout) for done in runs)
    a = 0.5
    # d/da softplus(a) * a, softplus' = sigmoid doubled by the rules.
    want = 2 / (1 + math.exp(-a)) * a + math.log1p(math.exp(a))
    assert first == pytest.approx([want, want], rel=1e-14)
    assert second == first


def test_a_misplaced_cache_folder_costs_nothing_but_the_cache(tmp_path):
    """ADJIT_CACHE_DIR naming a file: every entry is a miss and none can be stored, quietly
    (the module built now, for its math calls, loads from a temporary file)."""
    root = tmp_path / "not-a-folder"
    root.write_text("x")
    done = results(run(root))                # results() checks stderr is empty
    assert done["error"] == "negative length" and len(done["values"]) == 1000
    assert root.read_text() == "x"
