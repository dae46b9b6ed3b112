"""A compiled check that reports a number past its module's error table (the code and its
table do not match: a bug, or a cache entry altered past its seal) raises an internal error
naming the function, host program or kernel, instead of returning as if nothing failed
(runtime/abi.py: check_error). The table is corrupted in memory after compiling."""
from __future__ import annotations

import numpy as np
import pytest

import adjit
from adjit.runtime import abi, cuda
from adjit.core.kernel import GpuKernel, Param


@adjit.jit
def divide(a: int, b: int):
    return a // b


@adjit.jit
def divide_array(x, b: int):
    return x // b


def _module(fn, *args):
    """The CompiledModule of `fn`'s specialisation for `args` (compiled by calling it)."""
    fn(*args)
    (compiled,) = [c for c in fn._cache.values() if hasattr(c, "module")]
    return compiled.module


def test_a_check_number_past_the_table_is_an_internal_error(monkeypatch):
    with pytest.raises(ZeroDivisionError):
        divide(1, 0)
    module = _module(divide, 4, 2)
    monkeypatch.setattr(module, "_errors", [])       # the table, emptied in memory
    with pytest.raises(adjit.InternalCompilerError,
                       match=r"internal error in adjit: divide \(entry function entry\) "
                             r"reported failed check number 1, but its module's error table "
                             r"has no entries") as info:
        divide(1, 0)
    assert isinstance(info.value, abi.UnknownCheckError) and info.value.number == 1
    assert divide(7, 2) == 3                         # a call whose checks pass is unaffected


def test_a_shorter_table_with_array_results(monkeypatch):
    x = np.arange(6, dtype=np.int64)
    np.testing.assert_array_equal(divide_array(x, 2), x // 2)
    module = _module(divide_array, x, 2)
    n = len(module._errors)
    assert n >= 1
    # the failing division's number is now past the (shortened) table
    monkeypatch.setattr(module, "_errors", [e for e in module._errors
                                            if e[0] is not ZeroDivisionError])
    with pytest.raises(adjit.InternalCompilerError, match=r"divide_array .*reported failed "
                                                          r"check number \d+"):
        divide_array(x, 0)


def test_check_error_maps_numbers_to_the_table():
    table = [(IndexError, "index out of range (k.py:3)"), ("ZeroDivisionError", "by zero")]
    assert isinstance(abi.check_error(table, 1, "f()"), IndexError)
    e = abi.check_error(table, 2, "f()")
    assert type(e) is ZeroDivisionError and str(e) == "by zero"
    for number in (3, -1, 2**40):
        e = abi.check_error(table, number, "kernel k")
        assert isinstance(e, adjit.InternalCompilerError)
        assert f"kernel k reported failed check number {number}" in str(e)
        assert "has 2 entries (1 to 2)" in str(e)


def test_a_gpu_kernel_reporting_a_number_past_its_checks(monkeypatch):
    """Behind the fake driver: the kernel stores 2 into its error cell; it has one check."""
    from fake_driver import error_cell, install

    def reports_two(api, params, grid, block):
        error_cell(params, 5 + 1)[0] = 2            # a 1-D memref and the extent

    kernel = GpuKernel(name="k", entry="reports_two", ptx="// fake", chip="sm_90",
                       params=(Param("memref", "f64", 1),), ndim=1,
                       checks=(("IndexError", "index out of range"),))
    install(monkeypatch, {"reports_two": reports_two})
    with pytest.raises(adjit.InternalCompilerError, match="kernel k reported failed check "
                                                          "number 2, but its module's error "
                                                          "table has 1 entry"):
        cuda.launch(kernel, [np.zeros(4)], 4)


@adjit.jit
def host_divide(a: int, b: int):
    return a // b


def test_a_host_program_reporting_a_number_past_its_table(monkeypatch, tmp_path):
    """device="cuda": the division runs in the host program's own code (no kernel)."""
    import dataclasses
    from fake_driver import install
    from adjit.runtime.host_program import LoadedProgram
    pytest.importorskip("mlir")
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    install(monkeypatch, {})
    assert host_divide(7, 2, device="cuda") == 3
    with pytest.raises(ZeroDivisionError):
        host_divide(1, 0, device="cuda")
    (loaded,) = [v for v in host_divide._cache.values() if isinstance(v, LoadedProgram)]
    # The loaded program's table, emptied in memory (its calls read it after each call).
    monkeypatch.setattr(loaded, "program", dataclasses.replace(loaded.program, errors=()))
    with pytest.raises(adjit.InternalCompilerError,
                       match="host program host_divide reported failed check number 1, but "
                             "its module's error table has no entries"):
        host_divide(1, 0, device="cuda")
