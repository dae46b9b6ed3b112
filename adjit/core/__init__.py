"""The contracts every layer shares, MLIR-free, at the bottom of the imports: adjit's types
and their dtype table (types.py), its errors (errors.py), the tape-size expressions that
generated code records and the runtime evaluates (tape_size.py). Nothing here imports
another part of adjit."""
