"""MLIR dialects of adjit: the `adj` dialect (IRDL) and helpers to build its ops."""
from .adj import load_adj, make_context, shared_context, IRDL_PATH

__all__ = ["load_adj", "make_context", "shared_context", "IRDL_PATH"]
