"""Inspection: `f.lower(...)` gives each stage's IR as text without running anything,
ADJIT_DUMP_IR=1 prints the stages, and every op carries the user's file:line:col."""
from __future__ import annotations

import numpy as np
import pytest

import adjit
from fe_helpers import marker_line
from adjit.compiler.unit import CompileUnit
from adjit.core.types import ArrayType, f64


def line_of(marker: str) -> int:
    return marker_line(__file__, marker)


@adjit.kernel
def scale(x, a):
    i = adjit.index()
    x[i] = x[i] * a


@adjit.jit
def scale_twice(x):
    scale(x, 2.0, ndrange=len(x))
    scale(x, 3.0, ndrange=x.shape)
    return adjit.sum(x)


def test_lower_a_jit_function_gives_adj_ir_without_running():
    x = np.ones(4)
    text = scale_twice.lower(x).adj()
    assert "func.func" in text
    assert "adj.launch" in text and "adj.kernel" in text and "adj.entry" in text
    assert text.count("adj.launch") == 2
    np.testing.assert_array_equal(x, 1.0)     # lowering ran nothing


def test_lower_a_kernel_needs_its_ndrange():
    x = np.ones(4)
    lowered = scale.lower(x, 2.0, ndrange=4)
    text = lowered.adj()
    assert "adj.kernel" in text and "adj.index" in text
    assert "adj.ndim = 1" in text
    assert "adj.ndim = 2" in scale.lower(np.ones((2, 2)).ravel(), 2.0, ndrange=(2, 2)).adj()
    with pytest.raises(TypeError, match="ndrange"):
        scale.lower(x, 2.0)


def test_lower_gives_llvm_ir():
    x = np.ones(4)
    text = scale_twice.lower(x).llvm()
    assert "define" in text and "entry" in text
    assert "define" in scale.lower(x, 2.0, ndrange=4).llvm()


def test_ptx_needs_device_cuda():
    with pytest.raises(ValueError, match="cuda"):
        scale_twice.lower(np.ones(4)).ptx()


def test_lower_is_specialised_like_a_call():
    f32 = scale_twice.lower(np.ones(3, dtype=np.float32)).adj()
    f64_ = scale_twice.lower(np.ones(3)).adj()
    assert "memref<?xf32>" in f32 and "memref<?xf32>" not in f64_


def test_dump_ir_prints_each_stage(monkeypatch, capfd):
    monkeypatch.setenv("ADJIT_DUMP_IR", "1")

    @adjit.jit
    def dumped_function(x):
        return x * 7.0 + 1.0

    np.testing.assert_array_equal(dumped_function(np.ones(2)), 8.0)
    out, err = capfd.readouterr()
    text = out + err
    assert "dumped_function" in text
    assert "func.func" in text        # the adj stage
    assert "llvm.func" in text        # the LLVM dialect stage


def test_no_dump_without_the_setting(capfd):
    @adjit.jit
    def quiet_function(x):
        return x * 5.0

    quiet_function(np.ones(2))
    out, err = capfd.readouterr()
    assert "func.func" not in out + err


def located(x):
    y = x * 2.0  # loc-mul
    return adjit.sum(y)  # loc-sum


def test_ops_carry_the_python_location():
    fn = adjit.jit(located)
    unit = CompileUnit(debug=False)
    with unit.ctx:
        unit.function(fn, [ArrayType(f64, 1)])
        text = unit.module.operation.get_asm(enable_debug_info=True)
    for marker in ("loc-mul", "loc-sum"):
        assert f'"{__file__}":{line_of(marker)}:' in text, marker
