"""The GPU corpus run on the CPU (lower_cpu and the CPU runtime) matches its NumPy references.

GPU time is scarce: this checks, where there is none, that each case's reference and
tolerance are right, so a failure on the GPU points at the GPU pipeline.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir")
from mlir import ir                                          # noqa: E402

from adjit.dialects import make_context                      # noqa: E402
from adjit.core import types                             # noqa: E402
from adjit.compiler.engine import compile_module              # noqa: E402
from gpu_kernels import CASES                                # noqa: E402

SCALARS = {"f32": types.f32, "f64": types.f64, "i32": types.i32, "i64": types.i64,
           "i1": types.bool_}


def _adjit_type(t: ir.Type) -> types.ScalarType | types.ArrayType:
    if isinstance(t, ir.MemRefType):
        return types.ArrayType(SCALARS[str(t.element_type)], t.rank)
    return SCALARS[str(t)]


def run_on_cpu(name: str, args: list, ndrange: tuple[int, ...]) -> None:
    with make_context(), ir.Location.unknown():
        module = ir.Module.parse(CASES[name].text)
        if "adj.autodiff" in CASES[name].text:
            from adjit.passes.autodiff import run_autodiff
            run_autodiff(module)
        kernel = next(op for op in module.body.operations
                      if ir.StringAttr(op.attributes["sym_name"]).value == name)
        inputs = list(ir.FunctionType(ir.TypeAttr(kernel.attributes["function_type"]).value).inputs)
        params = ", ".join(f"%a{i}: {t}" for i, t in enumerate(inputs))
        extents = ", ".join(f"%n{d}: i64" for d in range(len(ndrange)))
        casts = "\n".join(f"%e{d} = arith.index_cast %n{d} : i64 to index" for d in range(len(ndrange)))
        operands = ", ".join(f"%a{i}" for i in range(len(inputs)))
        signature = ", ".join(str(t) for t in inputs)
        entry = f"""
        func.func @entry({params}, {extents}) attributes {{adj.entry, llvm.emit_c_interface}} {{
          {casts}
          "adj.launch"({", ".join(f"%e{d}" for d in range(len(ndrange)))}) ({{
            func.call @{name}({operands}) : ({signature}) -> ()
            gpu.yield
          }}) {{kernel = @{name}}} : ({", ".join(["index"] * len(ndrange))}) -> ()
          return
        }}"""
        text = str(module).rstrip().removesuffix("}") + entry + "\n}"
        compiled = compile_module(ir.Module.parse(text))
        call = compiled.function("entry", [_adjit_type(t) for t in inputs] + [types.i64] * len(ndrange))
    call(*args, *ndrange)


@pytest.mark.parametrize("name", list(CASES))
def test_reference_matches_cpu(name):
    case = CASES[name]
    args, ndrange = case.inputs(np.random.default_rng(0))
    expected = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    case.reference(expected)
    run_on_cpu(name, args, ndrange)
    for got, want in zip(args, expected):
        if isinstance(got, np.ndarray):
            np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol)
