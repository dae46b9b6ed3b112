"""The contracts every layer shares, MLIR-free, at the bottom of the imports: adjit's types
and their dtype table (types.py), activities (activity.py), the calling convention of
generated derivatives (derivative_abi.py), its errors (errors.py), the kernel descriptor
(kernel.py), the tape-size expressions that generated code records (tape_size.py). Nothing
here imports another part of adjit."""
