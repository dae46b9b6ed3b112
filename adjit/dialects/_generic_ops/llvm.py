"""Empty: ops of this dialect stay generic OpViews until mlir.dialects.llvm is imported
(which registers its classes). See the package docstring."""
