"""Empty: ops of this dialect stay generic OpViews until mlir.dialects.gpu is imported
(which registers its classes). See the package docstring."""
