import pytest
from mlir import ir

from adjit.dialects import make_context
from adjit.compiler.engine import CompiledModule, compile_module


@pytest.fixture(scope="session")
def ctx() -> ir.Context:
    return make_context()


@pytest.fixture(scope="session")
def compile_text(ctx):
    """Compiles adj-level MLIR text (no context need be active)."""
    def compile_(text: str, opt_level: int = 3) -> CompiledModule:
        return compile_module(ir.Module.parse(text, ctx), opt_level=opt_level)
    return compile_
