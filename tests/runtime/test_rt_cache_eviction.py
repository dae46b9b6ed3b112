"""The disk caches stay under ADJIT_CACHE_MAX_MB: whole entries go, least recently used
first, never the one just stored; loading an entry marks it used."""
from __future__ import annotations

import os

import pytest

from adjit.runtime.files import cache_settings, evict, mark_used, max_cache_bytes


def make_entry(folder, key: str, sizes: dict[str, int], age: float) -> None:
    for ext, n in sizes.items():
        path = folder / f"{key}.{ext}"
        path.write_bytes(b"x" * n)
        os.utime(path, (age, age))


def keys(folder) -> set[str]:
    return {p.name.split(".", 1)[0] for p in folder.iterdir()}


def test_least_recently_used_entries_go_first(tmp_path):
    for k, age in [("old", 1000.0), ("mid", 2000.0), ("new", 3000.0)]:
        make_entry(tmp_path, k, {"so": 400, "json": 100}, age)
    (tmp_path / "partial.so.abc.tmp").write_bytes(b"x" * 10_000)   # being written: not counted
    assert evict(tmp_path, max_bytes=2000) == []                    # 1500 bytes: under the cap
    mark_used(tmp_path / "old.json")                                # loaded just now
    assert evict(tmp_path, max_bytes=1300) == ["mid"]               # down to 80%: 1000 <= 1040
    assert keys(tmp_path) == {"old", "new", "partial"}


def test_the_entry_just_stored_is_kept(tmp_path):
    make_entry(tmp_path, "older", {"so": 500, "json": 10}, 1000.0)
    make_entry(tmp_path, "stored", {"so": 5000, "json": 10}, 500.0)
    assert evict(tmp_path, max_bytes=1000, keep="stored") == ["older"]
    assert keys(tmp_path) == {"stored"}


def test_the_cap_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("ADJIT_CACHE_MAX_MB", "1.5")
    assert max_cache_bytes() == int(1.5 * 2**20)
    monkeypatch.setenv("ADJIT_CACHE_MAX_MB", "0")
    assert max_cache_bytes() == 0
    monkeypatch.setenv("ADJIT_CACHE_MAX_MB", "lots")
    with pytest.raises(ValueError, match="ADJIT_CACHE_MAX_MB"):
        max_cache_bytes()


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "lots"])
def test_a_cap_that_is_not_a_size_names_the_setting(monkeypatch, value):
    """Not "cannot convert float NaN to integer": the setting and its value, when the
    settings are read (the first compile), not at some later store."""
    monkeypatch.setenv("ADJIT_CACHE_MAX_MB", value)
    message = f"ADJIT_CACHE_MAX_MB must be a finite number of megabytes >= 0 .*got '{value}'"
    with pytest.raises(ValueError, match=message):
        max_cache_bytes()
    with pytest.raises(ValueError, match=message):
        cache_settings()


def test_stores_evict(tmp_path, monkeypatch):
    """A GPU kernel cache store past the cap removes the oldest entry."""
    from adjit.core.kernel import GpuKernel, Param
    from adjit.runtime.kernel_cache import load, store
    monkeypatch.setenv("ADJIT_CACHE_MAX_MB", str(3000 / 2**20))
    kernel = GpuKernel(name="k", entry="k", ptx="x" * 1000, chip="sm_90",
                       params=(Param("scalar", "f32"),), ndim=1)
    store(tmp_path, "first", kernel)
    os.utime(tmp_path / "first.json", (1.0, 1.0))
    os.utime(tmp_path / "first.ptx", (1.0, 1.0))
    store(tmp_path, "second", kernel)
    store(tmp_path, "third", kernel)
    assert load(tmp_path, "first") is None and load(tmp_path, "third") == kernel
