"""Fault injection into disk cache entries (runtime/files.py seals them): every single-bit
flip of every byte of an entry's metadata, and a flipped bit in every byte of its code files
(.so, .ptx), one at a time, is either detected (the entry reads as damaged, so the cache
compiles it again: test_rt_disk_cache.py and tests/gpu/test_kernel_cache.py show the
rebuild) or harmless: the flipped metadata is the same JSON content (asserted) and loads
the same thing. For CPU entries, GPU kernel entries and host program entries, each checked
in-process against its loader, so that thousands of flips take seconds."""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Callable

import pytest
from mlir import ir

from adjit.dialects import make_context
from adjit.passes.lower_cpu import error_table
from adjit.passes.lower_gpu import compile_text
from adjit.passes.pipeline import llvm_ir_text
from adjit.runtime import cpu_cache, files, host_program, kernel_cache
from adjit.core.kernel import GpuKernel, KernelCacheError

# A module with a check (an error table).
MODULE = """
func.func @safe_div(%a: i64, %b: i64) -> i64 attributes {adj.entry, llvm.emit_c_interface} {
  %zero = arith.constant 0 : i64
  %ok = arith.cmpi ne, %b, %zero : i64
  "adj.check"(%ok) {error = "ZeroDivisionError", message = "integer division by zero"} : (i1) -> ()
  %q = arith.divsi %a, %b : i64
  return %q : i64
}
"""
KEY = "c" * 32


def canonical(raw: bytes) -> str | None:
    """The JSON content of `raw`, in one spelling (None when it is not JSON): two metadata
    files with the same canonical form say the same thing, whatever their whitespace."""
    try:
        return json.dumps(json.loads(raw.decode("utf-8")), sort_keys=True)
    except ValueError:
        return None


def flip_all(path: Path, load: Callable[[], object], same: Callable[[object], bool], *,
             every_bit: bool, stride: int = 1) -> tuple[int, int]:
    """Flips each byte of `path` (every `stride`-th with a stride; all 8 bits one at a time
    with `every_bit`, else bit i % 8 of byte i), calling `load()` after each: it must return
    None or raise KernelCacheError (detected), or return what `same` accepts while the file's
    JSON content is unchanged (harmless). Returns (detected, harmless); restores the file."""
    original = path.read_bytes()
    content = canonical(original)
    # Each version replaces the file by a rename, as the caches write: a shared object this
    # process loaded is never written in place (that would change the code mapped from it).
    write = files.write_atomic
    detected = harmless = 0
    try:
        for i in range(0, len(original), stride):
            for bit in range(8) if every_bit else (i % 8,):
                flipped = bytearray(original)
                flipped[i] ^= 1 << bit
                write(path, bytes(flipped))
                try:
                    got = load()
                except KernelCacheError:
                    got = None
                if got is None:
                    detected += 1
                    continue
                where = f"bit {bit} of byte {i} of {path.name}: {bytes(flipped[i - 20:i + 20])!r}"
                assert content is not None, f"a flipped code file was accepted: {where}"
                assert canonical(bytes(flipped)) == content, f"accepted other metadata: {where}"
                assert same(got), f"loaded something else: {where}"
                harmless += 1
    finally:
        write(path, original)
    assert load() is not None and same(load())      # the restored entry loads again
    return detected, harmless


@pytest.fixture(scope="module")
def cpu_entry(tmp_path_factory) -> tuple[Path, cpu_cache.Entry]:
    if not cpu_cache.can_store():
        pytest.skip("building CPU cache entries needs cc and the LLVM tools")
    module = ir.Module.parse(MODULE, make_context())
    lowered = ir.Module.parse(str(module), module.context)
    from adjit.passes.pipeline import lower_to_llvm
    lower_to_llvm(lowered, 1)
    errors = error_table(lowered.operation)
    assert errors, "the module's check is in its error table"
    data = cpu_cache.build_shared_object(llvm_ir_text(module, 1), 2, cpu_cache.host_target())
    folder = tmp_path_factory.mktemp("cpu")
    cpu_cache.load_built(data, errors, folder, KEY)
    entry = cpu_cache.load(folder, KEY)
    assert entry is not None and entry.address("_mlir_ciface_safe_div")
    return folder, entry


def same_cpu_entry(original: cpu_cache.Entry) -> Callable[[object], bool]:
    return lambda got: (got.errors == original.errors
                        and got.address("_mlir_ciface_safe_div") != 0)


def test_every_bit_of_a_cpu_entrys_metadata(cpu_entry):
    folder, entry = cpu_entry
    meta = folder / f"{KEY}.json"
    detected, harmless = flip_all(meta, lambda: cpu_cache.load(folder, KEY),
                                  same_cpu_entry(entry), every_bit=True)
    assert detected + harmless == 8 * len(meta.read_bytes()) and detected > 0


def test_bytes_across_a_cpu_entrys_shared_object(cpu_entry):
    """A sample, ~1000 bytes spread over the whole file (each version is written by a
    rename, ~1 ms): the SHA-256 is what catches them, wherever they are."""
    folder, entry = cpu_entry
    so = folder / f"{KEY}.so"
    stride = max(1, len(so.read_bytes()) // 1000)
    detected, harmless = flip_all(so, lambda: cpu_cache.load(folder, KEY),
                                  same_cpu_entry(entry), every_bit=False, stride=stride)
    assert harmless == 0 and detected == len(range(0, len(so.read_bytes()), stride))


def test_a_cpu_entry_filed_under_another_key_or_with_another_error_table(cpu_entry, tmp_path):
    """The issue's cases: another module's whole entry placed under a key runs nothing;
    an edited error table with the .so's hash still right is refused (it would make a
    failed check report another error, or none)."""
    folder, _ = cpu_entry
    other = "d" * 32
    for ext in ("json", "so"):
        shutil.copy(folder / f"{KEY}.{ext}", tmp_path / f"{other}.{ext}")
    assert cpu_cache.load(tmp_path, other) is None
    for edit in ([], [["ZeroDivisionError", "something else"]], [["ValueError", "x"]] * 2):
        meta = json.loads((folder / f"{KEY}.json").read_text())
        meta["errors"] = edit
        (tmp_path / f"{KEY}.json").write_text(json.dumps(meta))
        shutil.copy(folder / f"{KEY}.so", tmp_path / f"{KEY}.so")
        assert cpu_cache.load(tmp_path, KEY) is None


def test_metadata_that_says_the_same_is_accepted(cpu_entry, tmp_path):
    """The harmless class, by construction: another spelling of the same JSON content
    (no indentation, keys in another order) verifies."""
    folder, entry = cpu_entry
    meta = json.loads((folder / f"{KEY}.json").read_text())
    (tmp_path / f"{KEY}.json").write_text(json.dumps(dict(reversed(list(meta.items())))))
    shutil.copy(folder / f"{KEY}.so", tmp_path / f"{KEY}.so")
    assert same_cpu_entry(entry)(cpu_cache.load(tmp_path, KEY))


@pytest.fixture(scope="module")
def gpu_entry(tmp_path_factory) -> tuple[Path, str, GpuKernel]:
    from gpu_kernels import CASES
    case = CASES["gather_checked_f32"]          # params of several kinds, a check
    folder = tmp_path_factory.mktemp("gpu")
    kernel = kernel_cache.get_or_compile(case.text, case.name, "sm_90", folder, compile_text)
    key = kernel_cache.cache_key(case.text, case.name, "sm_90")
    assert kernel.checks and kernel_cache.load(folder, key) == kernel
    return folder, key, kernel


def test_every_bit_of_a_gpu_kernel_entrys_metadata(gpu_entry):
    folder, key, kernel = gpu_entry
    meta = folder / f"{key}.json"
    detected, harmless = flip_all(meta, lambda: kernel_cache.load(folder, key),
                                  lambda got: got == kernel, every_bit=True)
    assert detected + harmless == 8 * len(meta.read_bytes()) and detected > 0


def test_every_byte_of_a_gpu_kernel_entrys_ptx(gpu_entry):
    folder, key, kernel = gpu_entry
    ptx = folder / f"{key}.ptx"
    detected, harmless = flip_all(ptx, lambda: kernel_cache.load(folder, key),
                                  lambda got: got == kernel, every_bit=False)
    assert harmless == 0 and detected == len(ptx.read_bytes())


def test_a_gpu_kernel_entry_filed_under_another_key(gpu_entry, tmp_path):
    folder, key, _ = gpu_entry
    for ext in ("json", "ptx"):
        shutil.copy(folder / f"{key}.{ext}", tmp_path / f"{'e' * 32}.{ext}")
    with pytest.raises(KernelCacheError, match="misfiled"):
        kernel_cache.load(tmp_path, "e" * 32)


@pytest.fixture(scope="module")
def host_entry(gpu_entry, tmp_path_factory) -> tuple[Path, host_program.HostProgram]:
    """A host program entry (its kernels' PTX is inside its metadata): made by hand, since
    storing and checking one needs no compiled code, only its bytes."""
    program = host_program.HostProgram(
        name="f", entries={"entry": (("a1f64", "f64"), ("f64",))}, written={"entry": (0,)},
        kernels=(gpu_entry[2],), errors=(("ValueError", "bad input"),),
        hooks=("__adjit_hook___adjit_cuda_launch",),
        library=random.Random(0).randbytes(3000), meta={"tuple_result": False})
    folder = tmp_path_factory.mktemp("host")
    host_program.store(folder, KEY, program)
    return folder, program


def test_every_byte_of_a_host_program_entry(host_entry):
    """Every byte of its metadata (one bit each: it holds the PTX, ~10^4 bytes) and of its
    shared object."""
    folder, program = host_entry

    def load():
        found = host_program.load(folder, KEY)
        return None if found is None else found[0]

    for ext in ("json", "so"):
        path = folder / f"{KEY}.{ext}"
        detected, harmless = flip_all(path, load, lambda got: got == program, every_bit=False)
        assert detected + harmless == len(path.read_bytes()) and detected > 0
        if ext == "so":
            assert harmless == 0


def test_the_seal_names_what_is_wrong(gpu_entry, tmp_path):
    folder, key, _ = gpu_entry
    for ext in ("json", "ptx"):
        shutil.copy(folder / f"{key}.{ext}", tmp_path / f"{key}.{ext}")
    meta_path = tmp_path / f"{key}.json"
    meta = json.loads(meta_path.read_text())
    meta["ndim"] = 3                                     # an edited value
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(files.DamagedEntry, match=f"{meta_path}: its checksum does not match"):
        files.read_entry(tmp_path, key, kernel_cache.FORMAT_VERSION, "GPU kernel cache entry")
    (tmp_path / f"{key}.ptx").unlink()
    shutil.copy(folder / f"{key}.json", meta_path)
    with pytest.raises(files.DamagedEntry, match=f"{key}.ptx cannot be read"):
        files.read_entry(tmp_path, key, kernel_cache.FORMAT_VERSION, "GPU kernel cache entry")
