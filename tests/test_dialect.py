"""The adj dialect: loading it, its Python builders, and stock MLIR reading it from IRDL."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import mlir
import pytest
from mlir import ir
from mlir.dialects import arith, func

from adjit.dialects import IRDL_PATH, make_context
from adjit.dialects import adj

MLIR_OPT = Path(list(mlir.__path__)[0]) / "bin" / "mlir-opt"
ROUNDTRIP = Path(__file__).parent / "ir" / "roundtrip.mlir"


def test_loading_twice_does_not_abort() -> None:
    # Loading an IRDL dialect twice into one context aborts the process (assertions build):
    # run it in a child so that a regression fails this test instead of killing pytest.
    code = textwrap.dedent("""
        from mlir import ir
        from adjit.dialects import load_adj, make_context
        ctx = make_context()
        load_adj(ctx)
        load_adj(ctx)
        for c in (ctx, make_context()):   # each context has its own registration
            ir.Module.parse('%i = "adj.index"() : () -> index', c)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr


def test_builders_make_verified_ops() -> None:
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        memref = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], ir.F32Type.get())
        index = ir.IndexType.get()
        ktype = ir.FunctionType.get([memref], [])
        with ir.InsertionPoint(module.body):
            kernel = func.FuncOp("k", ktype)
            kernel.attributes[adj.KERNEL_ATTR] = ir.UnitAttr.get()
            i64 = ir.IntegerType.get_signless(64)
            kernel.attributes[adj.NDIM_ATTR] = ir.IntegerAttr.get(i64, 1)
            with ir.InsertionPoint(kernel.add_entry_block()):
                adj.index()
                ok = arith.cmpi(arith.CmpIPredicate.ult, adj.global_id(0), adj.global_size(0))
                adj.check(ok, "IndexError", "out of range")
                func.ReturnOp([])
            main = func.FuncOp("main", ir.FunctionType.get([memref, index], []))
            with ir.InsertionPoint(main.add_entry_block()):
                x, size = main.arguments
                launch = adj.launch("k", ktype, [x], [size], workgroupsize=[64])
                adj.sync()
                func.ReturnOp([])
        assert module.operation.verify()
        assert adj.launch_call(launch).name == "func.call"
    # What the builders make prints as text that a fresh context parses back.
    text = str(module)
    assert str(ir.Module.parse(text, make_context())) == text
    for name in ("adj.index", "adj.global_id", "adj.global_size", "adj.check", "adj.launch",
                 "adj.sync", "workgroupsize = array<i64: 64>"):
        assert name in text


def test_stock_mlir_opt_reads_the_irdl_dialect() -> None:
    done = subprocess.run([MLIR_OPT, f"--irdl-file={IRDL_PATH}", ROUNDTRIP],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert '"adj.launch"' in done.stdout and '"adj.autodiff"' in done.stdout


def test_stock_mlir_opt_verifies_the_irdl_dialect() -> None:
    bad = 'func.func @f(%x: i32) {\n  "adj.check"(%x) {error = \"E\", message = \"m\"} : (i32) -> ()\n  return\n}\n'
    done = subprocess.run([MLIR_OPT, f"--irdl-file={IRDL_PATH}", "-"], input=bad,
                          capture_output=True, text=True)
    assert done.returncode != 0
    assert "<stdin>:2:3: error: expected 'i1' but got 'i32'" in done.stderr


def test_autodiff_request_reads_back_what_the_builder_wrote() -> None:
    from adjit.core.derivative_abi import DerivativeABI, DerivativeMode
    ctx = make_context()
    abi = DerivativeABI(DerivativeMode.FORWARD, ("dup", "const"), "dup", with_primal=True, width=3)
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            op = adj.autodiff("d", "f", abi, overwritten=[True, False])
            op.attributes["adj.entry"] = ir.UnitAttr.get()
            plain = adj.autodiff("r", "g", DerivativeABI(DerivativeMode.REVERSE, ("active",)),
                                 combined=True)
        assert module.operation.verify()
        request = adj.read_autodiff(op)
        assert (request.name, request.fn, request.mode, request.activity,
                request.ret_activity, request.with_primal, request.width,
                request.overwritten, request.combined) == \
            ("d", "f", "forward", ("dup", "const"), "dup", True, 3, (True, False), False)
        assert list(request.extra) == ["adj.entry"]
        # (what the op leaves out reads as the pass's defaults)
        lean = adj.read_autodiff(plain)
        assert (lean.mode, lean.with_primal, lean.width, lean.overwritten, lean.combined,
                lean.extra) == ("reverse", False, 1, None, True, {})
        assert "width" not in str(plain) and "overwritten" not in str(plain)
        del plain.attributes["mode"]
        with pytest.raises(adj.AdjError, match="lacks attribute `mode`"):
            adj.read_autodiff(plain)
