"""The GPU kernel cache: written where MLIR is, read back where it is not."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from adjit.runtime import kernel_cache
from adjit.runtime.kernel_cache import FORMAT_VERSION, GpuKernel, KernelCacheError, Param
from gpu_kernels import CASES

RUNTIME = Path(kernel_cache.__file__).parent
NAME = "gather_checked_f32"          # has params of several kinds and a check


def runtime_only_package(dest: Path) -> Path:
    """adjit.runtime's GPU modules under an empty `adjit` package, as on a GPU machine
    without MLIR, where the full package (whose frontend imports MLIR) cannot be imported."""
    pkg = dest / "adjit" / "runtime"
    pkg.mkdir(parents=True)
    (dest / "adjit" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    for name in ("cuda.py", "device_array.py", "kernel_cache.py", "files.py"):
        shutil.copy(RUNTIME / name, pkg / name)
    return dest


def run_without_mlir(tmp_path: Path, code: str) -> subprocess.CompletedProcess:
    prelude = (f"import sys; sys.modules['mlir'] = None; "
               f"sys.path.insert(0, {str(runtime_only_package(tmp_path / 'pkg'))!r})\n")
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, cwd=tmp_path)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    pytest.importorskip("mlir")
    directory = tmp_path_factory.mktemp("kernels")
    case = CASES[NAME]
    kernel = kernel_cache.get_or_compile(case.text, NAME, "sm_90", directory)
    return directory, kernel_cache.cache_key(case.text, NAME, "sm_90"), kernel


def test_store_and_load(compiled):
    directory, key, kernel = compiled
    assert sorted(p.name for p in directory.iterdir()) == [f"{key}.json", f"{key}.ptx"]
    assert kernel_cache.load(directory, key) == kernel
    assert kernel_cache.load(directory, "0" * 32) is None
    meta = json.loads((directory / f"{key}.json").read_text())
    assert meta["format"] == FORMAT_VERSION and "ptx" not in meta
    assert meta["params"][0] == {"kind": "memref", "dtype": "i64", "rank": 1}


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


def test_key_depends_on_text_kernel_and_chip():
    keys = {kernel_cache.cache_key(t, k, c)
            for t in ("a", "b") for k in ("k1", "k2") for c in ("sm_90", "sm_80")}
    assert len(keys) == 8


def test_gpu_kernel_dict_round_trip():
    kernel = GpuKernel(name="k", entry="k", ptx=".version 8.0", chip="sm_90",
                       params=(Param("scalar", "f32"), Param("memref", "f64", 2)), ndim=2,
                       checks=(("IndexError", "out of range"),))
    assert GpuKernel.from_dict(json.loads(json.dumps(kernel.to_dict()))) == kernel
