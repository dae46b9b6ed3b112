"""Every GPU test kernel compiles to PTX that ptxas accepts for sm_90 (no GPU needed)."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

pytest.importorskip("mlir")
from mlir import ir                                               # noqa: E402

from adjit.dialects import make_context                           # noqa: E402
from adjit.dialects.adj import AdjError                           # noqa: E402
from adjit.passes.lower_gpu import compile_text, emit_ptx, kernel_to_ptx, lower_gpu  # noqa: E402
from adjit.core.kernel import Param                             # noqa: E402
from gpu_kernels import CASES, CHECK_MESSAGE, derivative_text     # noqa: E402

PTXAS = shutil.which("ptxas")


def compile_case(name: str):
    return compile_text(CASES[name].text, name)


def assemble(ptx: str, tmp_path) -> None:
    if PTXAS is None:
        pytest.skip("ptxas is not on PATH: PTX was produced but not assembled")
    path = tmp_path / "kernel.ptx"
    path.write_text(ptx)
    result = subprocess.run([PTXAS, "-arch=sm_90", str(path), "-o", "/dev/null"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", list(CASES))
def test_kernel_assembles(name, tmp_path):
    kernel = compile_case(name)
    assert kernel.entry == name
    assert ".target sm_90" in kernel.ptx
    # libdevice is not linked: any call out of the module would be unresolved
    assert ".extern" not in kernel.ptx and "__nv_" not in kernel.ptx
    assemble(kernel.ptx, tmp_path)


# Derivative kernels the autodiff pass generates go through the same pipeline.
DIFFERENTIATED = {
    "saxpy_f32": ["active", "dup", "dup"], "heat_f32": ["dup", "dup", "active"],
    "grid2d_f32": ["dup", "dup"], "device_call_f64": ["dup", "dup", "dup"],
    "math_sin_f64": ["dup", "dup"], "math_tanh_f32": ["dup", "dup"], "row_sum_f64": ["dup", "dup"],
    "math_binary_f64": ["dup", "dup", "const", "dup"], "histogram_f32": ["const", "dup", "dup"],
    "gather_checked_f32": ["const", "dup", "dup"],
}


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("name", list(DIFFERENTIATED))
def test_derivative_kernels_assemble(name, mode, tmp_path):
    pytest.importorskip("adjit.passes.autodiff")
    text = derivative_text(CASES[name], "d", mode, DIFFERENTIATED[name])
    for kernel in (["d"] if mode == "forward" else ["d_aug", "d_rev"]):
        ptx = compile_text(text, kernel).ptx
        assert ".extern" not in ptx and "__nv_" not in ptx
        assemble(ptx, tmp_path)


def test_launch_signature():
    kernel = compile_case("select_bool")
    assert kernel.params == (Param("scalar", "i1"), Param("memref", "i1", 1),
                             Param("memref", "f64", 1), Param("memref", "f64", 1))
    assert kernel.ndim == 1 and kernel.checks == ()
    # i1 travels as a byte; each memref as (ptr, ptr, offset, size, stride); then the extent
    params = re.findall(r"\.param \.(\w+)", kernel.ptx)
    assert params == ["u8"] + ["u64"] * (3 * 5 + 1)


def test_grid_guard_and_ids():
    ptx = compile_case("grid3d_i64").ptx
    assert "%ctaid.x" in ptx and "%ntid.x" in ptx and "%tid.x" in ptx
    assert "setp.ge.u64" in ptx or "setp.lt.u64" in ptx      # linear < prod(ndrange)
    assert "rem.u" in ptx or "div.u" in ptx                    # ids by div/mod


def test_atomics_are_relaxed():
    for name in ("histogram_f32", "histogram_f64", "histogram_i32", "histogram_i64"):
        ptx = compile_case(name).ptx
        assert re.search(r"(atom|red)\.global\.add\.(f32|f64|u32|u64|s32|s64)", ptx), name
        assert "fence" not in ptx and "acq_rel" not in ptx and "membar" not in ptx, name


def test_a_check_writes_the_launch_error_cell_parameter():
    """No module global: the entry takes 3 memrefs (5 words each), the extent, then the
    error cell's 5 words (runtime/cuda.py passes each thread's cell there)."""
    kernel = compile_case("gather_checked_f32")
    assert kernel.checks == (("IndexError", CHECK_MESSAGE),)
    assert ".global" not in kernel.ptx.split(".entry")[0]
    params = re.search(r"\.entry\s+\w+\(([^)]*)\)", kernel.ptx).group(1)
    assert params.count(".param") == 3 * 5 + 1 + 5
    # check number 1 stored into the cell (as one 64-bit store or two 32-bit halves)
    assert re.search(r"st\.global\.[ub](64|32)\s+\[%rd\d+\], 1;", kernel.ptx)
    no_checks = compile_case("saxpy_f32")
    params = re.search(r"\.entry\s+\w+\(([^)]*)\)", no_checks.ptx).group(1)
    assert params.count(".param") == 1 + 2 * 5 + 1           # no cell without checks


def test_float_math_contracts_to_fma():
    assert "fma.rn.f32" in compile_case("saxpy_f32").ptx


def test_gpu_kernel_json_round_trip():
    from adjit.core.kernel import GpuKernel
    kernel = compile_case("gather_checked_f32")
    assert GpuKernel.from_dict(kernel.to_dict()) == kernel


HOST = """
module {
  func.func @scale(%s: f32, %x: memref<?x?xf32>) attributes {adj.kernel, adj.ndim = 2 : i64} {
    %i = "adj.global_id"() {dim = 0 : i64} : () -> index
    %j = "adj.global_id"() {dim = 1 : i64} : () -> index
    %v = memref.load %x[%i, %j] : memref<?x?xf32>
    %r = arith.mulf %v, %s : f32
    memref.store %r, %x[%i, %j] : memref<?x?xf32>
    return
  }
  func.func @run(%s: f32, %x: memref<?x?xf32>, %n0: index, %n1: index) attributes {adj.entry} {
    "adj.launch"(%n0, %n1) ({
      func.call @scale(%s, %x) : (f32, memref<?x?xf32>) -> ()
      gpu.yield
    }) {kernel = @scale, workgroupsize = array<i64: 16, 8>} : (index, index) -> ()
    "adj.sync"() : () -> ()
    return
  }
}
"""


def test_lower_gpu_module(tmp_path):
    with make_context(), ir.Location.unknown():
        module = ir.Module.parse(HOST)
        lower_gpu(module.operation)
        module.operation.verify()
        text = str(module)
        assert "gpu.container_module" in text
        assert '#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">' in text
        assert "gpu.launch_func  @scale__gpu::@scale" in text
        assert "threads in (%c128" in text                      # 16*8 threads, 1-D
        assert '"adj.' not in text and "adj.kernel" not in text
        ptx = emit_ptx(module.operation)
    assert list(ptx) == ["scale__gpu"]
    assemble(ptx["scale__gpu"], tmp_path)


def test_chip_is_configurable(tmp_path):
    with make_context(), ir.Location.unknown():
        kernel = kernel_to_ptx(ir.Module.parse(CASES["saxpy_f32"].text), "saxpy_f32", chip="sm_80")
    assert ".target sm_80" in kernel.ptx and kernel.chip == "sm_80"


def test_errors():
    with make_context(), ir.Location.unknown():
        module = ir.Module.parse(CASES["saxpy_f32"].text)
        with pytest.raises(ValueError, match="not a func.func marked adj.kernel"):
            kernel_to_ptx(module, "nope")
        bad = ir.Module.parse(_kernel_with("%r = math.erfc %v : f32"))
        with pytest.raises(AdjError, match="math.erfc"):
            kernel_to_ptx(bad, "k")


def _kernel_with(line: str) -> str:
    return f"""module {{
      func.func @k(%x: memref<?xf32>) attributes {{adj.kernel, adj.ndim = 1 : i64}} {{
        %i = "adj.index"() : () -> index
        %v = memref.load %x[%i] : memref<?xf32>
        {line}
        memref.store %r, %x[%i] : memref<?xf32>
        return
      }}
    }}"""
