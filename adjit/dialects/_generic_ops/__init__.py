"""Where the MLIR bindings look first for a dialect's Python module (adj.py puts this package
before `mlir.dialects`): empty modules for the dialects whose op classes adjit does not need
when it walks their ops, so that walking them does not import `mlir.dialects.<name>`."""
