"""The GPU kernel cache: written where MLIR is, read back where it is not; an entry that does
not verify is compiled again where MLIR is and refused, naming the file that is wrong, where
it is not; a folder that cannot be written costs one warning, not a failure; the ADJIT_*
settings are read by one rule (runtime/files.py, kernel_cache.find_or_compile)."""
from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from adjit.runtime import files, kernel_cache
from adjit.core.kernel import FORMAT_VERSION, GpuKernel, KernelCacheError, Param
from gpu_kernels import CASES

try:
    from adjit.passes.lower_gpu import compile_text     # the compiler (MLIR)
except ImportError:
    compile_text = None

RUNTIME = Path(kernel_cache.__file__).parent
NAME = "gather_checked_f32"          # has params of several kinds and a check


def runtime_only_package(dest: Path) -> Path:
    """adjit's contracts (core/) and runtime's GPU modules under an empty `adjit` package, as
    on a GPU machine without MLIR, where the full package (whose frontend imports MLIR)
    cannot be imported: what the GPU modules import must be there, and MLIR-free."""
    pkg = dest / "adjit" / "runtime"
    if pkg.exists():                 # made by an earlier run of this test
        return dest
    pkg.mkdir(parents=True)
    (dest / "adjit" / "__init__.py").write_text("")
    shutil.copytree(RUNTIME.parent / "core", dest / "adjit" / "core",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "__init__.py").write_text("")
    for name in ("cuda.py", "cuda_driver.py", "device_array.py", "kernel_cache.py", "files.py",
                 "abi.py", "trust.py"):
        shutil.copy(RUNTIME / name, pkg / name)
    return dest


def run_without_mlir(tmp_path: Path, code: str, **env: str) -> subprocess.CompletedProcess:
    prelude = (f"import sys; sys.modules['mlir'] = None; "
               f"sys.path.insert(0, {str(runtime_only_package(tmp_path / 'pkg'))!r})\n")
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("ADJIT_CACHE_DIR", "ADJIT_DISK_CACHE")}
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, cwd=tmp_path, env={**environment, **env})


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    pytest.importorskip("mlir")
    directory = tmp_path_factory.mktemp("kernels")
    case = CASES[NAME]
    kernel = kernel_cache.get_or_compile(case.text, NAME, "sm_90", directory, compile_text)
    return directory, kernel_cache.cache_key(case.text, NAME, "sm_90"), kernel


def test_store_and_load(compiled):
    directory, key, kernel = compiled
    assert sorted(p.name for p in directory.iterdir()) == [f"{key}.json", f"{key}.ptx"]
    assert kernel_cache.load(directory, key) == kernel
    assert kernel_cache.load(directory, "0" * 32) is None
    meta = json.loads((directory / f"{key}.json").read_text())
    assert meta["format"] == FORMAT_VERSION and "ptx" not in meta
    assert meta["params"][0] == {"kind": "memref", "dtype": "i64", "rank": 1}
    ptx = (directory / f"{key}.ptx").read_bytes()     # the seal (runtime/files.py)
    assert meta["key"] == key and meta["files"] == {
        "ptx": {"size": len(ptx), "sha256": hashlib.sha256(ptx).hexdigest()}}
    assert len(meta["checksum"]) == 64


def test_read_back_without_mlir(compiled, tmp_path):
    directory, key, kernel = compiled
    result = run_without_mlir(tmp_path, f"""
        import json
        from adjit.runtime import cuda, device_array, kernel_cache
        k = kernel_cache.load({str(directory)!r}, {key!r})
        again = kernel_cache.get_or_compile({CASES[NAME].text!r}, {NAME!r}, "sm_90", {str(directory)!r})
        assert again == k
        try:
            kernel_cache.get_or_compile("module {{}}", "other", "sm_90", {str(directory)!r})
        except kernel_cache.KernelCacheError as e:
            assert "MLIR" in str(e), e
        else:
            raise AssertionError("a cache miss without MLIR must fail clearly")
        print(json.dumps(k.to_dict()))
        """)
    assert result.returncode == 0, result.stderr
    assert GpuKernel.from_dict(json.loads(result.stdout)) == kernel


def test_wrong_format_version_is_refused(compiled, tmp_path):
    directory, key, _ = compiled
    other = tmp_path / "old"
    shutil.copytree(directory, other)
    meta_path = other / f"{key}.json"
    meta = json.loads(meta_path.read_text())
    meta["format"] = FORMAT_VERSION + 1
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(KernelCacheError, match="format"):
        kernel_cache.load(other, key)
    result = run_without_mlir(tmp_path, f"""
        from adjit.runtime import kernel_cache
        try:
            kernel_cache.load({str(other)!r}, {key!r})
        except kernel_cache.KernelCacheError as e:
            print("refused:", e)
        """)
    assert result.returncode == 0 and "refused" in result.stdout, result.stderr


def test_damaged_entry_is_refused(tmp_path):
    (tmp_path / "k.json").write_text("{not json")
    (tmp_path / "k.ptx").write_text("")
    with pytest.raises(KernelCacheError, match="damaged"):
        kernel_cache.load(tmp_path, "k")


def copy_of(compiled, tmp_path: Path) -> tuple[Path, str, GpuKernel]:
    directory, key, kernel = compiled
    shutil.copytree(directory, tmp_path / "gpu")
    return tmp_path / "gpu", key, kernel


def test_a_garbage_ptx_is_named_and_compiled_again(compiled, tmp_path):
    directory, key, kernel = copy_of(compiled, tmp_path)
    ptx = directory / f"{key}.ptx"
    ptx.write_bytes(b"\xff\xfe garbage")
    with pytest.raises(KernelCacheError, match=f"{ptx}.* not the file") as refused:
        kernel_cache.load(directory, key)
    assert ".json" not in str(refused.value).split(" not the file")[0]   # names the .ptx
    result = run_without_mlir(tmp_path, f"""
        from adjit.runtime import kernel_cache
        try:
            kernel_cache.get_or_compile({CASES[NAME].text!r}, {NAME!r}, "sm_90", {str(directory)!r})
        except kernel_cache.KernelCacheError as e:
            print("refused:", e)
        """)
    assert result.returncode == 0, result.stderr
    assert f"{ptx} is not the file" in result.stdout and "MLIR" in result.stdout
    # Where MLIR is, the entry is compiled again and replaced: the next load verifies.
    assert kernel_cache.get_or_compile(CASES[NAME].text, NAME, "sm_90", directory,
                                       compile_text) == kernel
    assert ptx.read_text() == kernel.ptx and kernel_cache.load(directory, key) == kernel


def test_an_edited_ptx_is_not_run(compiled, tmp_path):
    """PTX that still parses (an edited constant) is caught by its hash, not by the driver."""
    directory, key, kernel = copy_of(compiled, tmp_path)
    ptx = directory / f"{key}.ptx"
    ptx.write_text(kernel.ptx.replace(".entry", ".entry ", 1))
    with pytest.raises(KernelCacheError, match="SHA-256"):
        kernel_cache.load(directory, key)


def test_a_misfiled_entry_is_refused(compiled, tmp_path):
    directory, key, kernel = copy_of(compiled, tmp_path)
    other = "1" * 32
    for ext in ("json", "ptx"):
        shutil.copy(directory / f"{key}.{ext}", directory / f"{other}.{ext}")
    with pytest.raises(KernelCacheError, match=f"misfiled .*entry of key '{key}'"):
        kernel_cache.load(directory, other)


def make_read_only(folder: Path, monkeypatch) -> None:
    """`folder` cannot be written: by its mode, or, for root (whom modes do not stop), by
    what the file system says to a read-only mount."""
    folder.chmod(0o555)
    if os.geteuid() == 0:
        def refuse(path, data, shared=None):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        monkeypatch.setattr(files, "write_atomic", refuse)


def test_a_read_only_cache_compiles_without_storing_and_warns_once(compiled, tmp_path,
                                                                   monkeypatch):
    monkeypatch.setattr(files, "_warned", set())
    folder = tmp_path / "cache" / "gpu"
    folder.mkdir(parents=True)
    make_read_only(folder, monkeypatch)
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ADJIT_DISK_CACHE", "1")
    text = CASES[NAME].text
    try:
        with pytest.warns(RuntimeWarning, match=f"{folder} cannot be written") as warned:
            assert kernel_cache.get_or_compile(text, NAME, compile=compile_text) == compiled[2]
            assert kernel_cache.get_or_compile(text, NAME, compile=compile_text) == compiled[2]
    finally:
        folder.chmod(0o755)
    assert len(warned) == 1 and not any(folder.iterdir())


@pytest.mark.parametrize("where", ["ADJIT_CACHE_DIR is a file", "gpu/ is a file"])
def test_a_misplaced_cache_compiles_without_storing(compiled, tmp_path, monkeypatch, where):
    monkeypatch.setattr(files, "_warned", set())
    root = tmp_path / "cache"
    if where == "gpu/ is a file":
        root.mkdir()
        (root / "gpu").write_text("not a folder")
    else:
        root.write_text("not a folder")
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(root))
    monkeypatch.setenv("ADJIT_DISK_CACHE", "1")
    with pytest.warns(RuntimeWarning, match="cannot be written"):
        assert kernel_cache.get_or_compile(CASES[NAME].text, NAME, compile=compile_text) == compiled[2]
    assert (root / "gpu" if where == "gpu/ is a file" else root).read_text() == "not a folder"


def planted(compiled, folder: Path) -> GpuKernel:
    """An entry under the real kernel's key whose kernel is another (a valid entry): whoever
    returns it read the folder."""
    _, key, kernel = compiled
    other = GpuKernel(**{**kernel.to_dict(), "params": kernel.params, "checks": kernel.checks,
                         "ndrange_bounds": kernel.ndrange_bounds, "name": "planted"})
    kernel_cache.store(folder, key, other)
    return other


def test_caches_off_reads_and_writes_nothing(compiled, tmp_path, monkeypatch):
    """ADJIT_DISK_CACHE=0 and an empty ADJIT_CACHE_DIR are the CPU cache's "off" for the
    GPU one too: no gpu/ folder in the working directory, nothing read from the folder."""
    root = tmp_path / "cache"
    planted(compiled, root / "gpu")
    before = sorted(p.name for p in (root / "gpu").iterdir())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(root))
    monkeypatch.setenv("ADJIT_DISK_CACHE", "0")
    assert kernel_cache.default_cache_dir() is None
    assert kernel_cache.get_or_compile(CASES[NAME].text, NAME, compile=compile_text) == compiled[2]   # not planted
    monkeypatch.setenv("ADJIT_CACHE_DIR", "")
    monkeypatch.delenv("ADJIT_DISK_CACHE")
    assert kernel_cache.default_cache_dir() is None
    assert kernel_cache.get_or_compile(CASES[NAME].text, NAME, compile=compile_text) == compiled[2]
    assert sorted(p.name for p in (root / "gpu").iterdir()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]       # no relative gpu/


def test_with_caches_off_kernels_still_travel(compiled, tmp_path, monkeypatch):
    """The GPU folder is also how kernels reach a machine without MLIR: compile_only()
    (for_another_machine) stores into it and a process that cannot compile loads from it,
    even with ADJIT_DISK_CACHE=0; with an empty ADJIT_CACHE_DIR there is no folder, and the
    errors say so."""
    _, key, kernel = compiled
    root = tmp_path / "cache"
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(root))
    monkeypatch.setenv("ADJIT_DISK_CACHE", "0")
    stored = []

    def store(folder, value):
        kernel_cache.store(folder, key, value)
        stored.append(folder)

    found, folder = kernel_cache.find_or_compile("k", lambda f: kernel_cache.load(f, key),
                                                 lambda: kernel, store, for_another_machine=True)
    assert found == kernel and folder == stored[0] == root / "gpu"
    result = run_without_mlir(tmp_path, f"""
        from adjit.runtime import kernel_cache
        k = kernel_cache.get_or_compile({CASES[NAME].text!r}, {NAME!r})
        print(k.name)
        """, ADJIT_CACHE_DIR=str(root), ADJIT_DISK_CACHE="0")
    assert result.returncode == 0 and result.stdout.split() == [kernel.name], result.stderr
    monkeypatch.setenv("ADJIT_CACHE_DIR", "")
    with pytest.raises(KernelCacheError, match="ADJIT_CACHE_DIR is empty"):
        kernel_cache.find_or_compile("k", lambda f: None, lambda: kernel, store,
                                     for_another_machine=True)
    result = run_without_mlir(tmp_path, f"""
        from adjit.runtime import kernel_cache
        kernel_cache.get_or_compile({CASES[NAME].text!r}, {NAME!r})
        """, ADJIT_CACHE_DIR="")
    assert result.returncode != 0 and "ADJIT_CACHE_DIR is empty" in result.stderr


def test_compile_only_into_a_folder_it_cannot_write_fails(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    root.write_text("not a folder")
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(root))
    kernel = GpuKernel(name="k", entry="k", ptx=".version 8.0", chip="sm_90", params=(), ndim=1)
    with pytest.raises(KernelCacheError, match=f"cannot store k in {root / 'gpu'}"):
        kernel_cache.find_or_compile("k", lambda f: kernel_cache.load(f, "k"), lambda: kernel,
                                     lambda f, v: kernel_cache.store(f, "k", v),
                                     for_another_machine=True)


@pytest.mark.parametrize("name, value", [("ADJIT_DISK_CACHE", "yes"),
                                         ("ADJIT_CACHE_MAX_MB", "nan")])
def test_settings_that_are_not_valid_are_named(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=f"{name} .*got '{value}'"):
        kernel_cache.default_cache_dir()


def test_key_depends_on_text_kernel_and_chip():
    keys = {kernel_cache.cache_key(t, k, c)
            for t in ("a", "b") for k in ("k1", "k2") for c in ("sm_90", "sm_80")}
    assert len(keys) == 8


def test_gpu_kernel_dict_round_trip():
    kernel = GpuKernel(name="k", entry="k", ptx=".version 8.0", chip="sm_90",
                       params=(Param("scalar", "f32"), Param("memref", "f64", 2)), ndim=2,
                       checks=(("IndexError", "out of range"),))
    assert GpuKernel.from_dict(json.loads(json.dumps(kernel.to_dict()))) == kernel


@pytest.mark.parametrize("how", ["caches off", "folder is a file"])
def test_host_programs_run_unstored(tmp_path, monkeypatch, how):
    """A `device="cuda"` function whose host program cannot be stored runs from a temporary
    copy of its shared object (the fake driver standing in for the GPU)."""
    pytest.importorskip("mlir")
    if shutil.which("cc") is None:
        pytest.skip("building host programs needs a C compiler (cc)")
    import numpy as np
    from cuda_jit_cases import KERNELS, simulate
    from fake_driver import install
    install(monkeypatch, KERNELS)
    monkeypatch.setattr(files, "_warned", set())
    monkeypatch.setattr(simulate, "_cache", {})
    root = tmp_path / "cache"
    if how == "caches off":
        monkeypatch.setenv("ADJIT_DISK_CACHE", "0")
    else:
        root.write_text("not a folder")
        monkeypatch.setenv("ADJIT_DISK_CACHE", "1")
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(root))
    u0 = np.random.default_rng(2).random((9, 7), dtype=np.float32)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        total, u = simulate(u0, 3, np.float32(0.2), device="cuda")
    unwritable = [str(w.message) for w in warned if "cannot be written" in str(w.message)]
    if how == "caches off":
        assert unwritable == []
    else:
        [message] = unwritable
        assert message.startswith(f"adjit: the cache folder {root / 'gpu'} cannot be written")
    want_total, want_u = simulate(u0, 3, np.float32(0.2))
    np.testing.assert_allclose(u, want_u, rtol=1e-6)
    np.testing.assert_allclose(total, want_total, rtol=1e-6)
    assert not root.exists() if how == "caches off" else root.read_text() == "not a folder"
