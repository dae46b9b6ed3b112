"""matmul_into, the device functions whose custom rules are the derivatives of matrix
products (matmul.py calls them): `C (+)= op(A) @ op(B)`, one function per gemm.cpp flags
value (a transposed operand, accumulating into C). Their rules' products are calls of these
functions again (forward dC = dA @ B + A @ dB, reverse dA += dC @ B^T and dB += A^T @ dC,
with the flags that spell them), never of the BLAS itself: so the derivative of a
derivative finds rules where it meets a product, in every mode and at every order. A module
of its own, imported by the API, because making the functions needs functions.py and
rules.py, which import the code generator that imports matmul.py."""
from __future__ import annotations

import functools

from .late import MAKERS


@functools.cache
def _functions(flags: int = 0):
    """matmul_into for gemm.cpp's `flags` and its rules, made on first use (parsing their
    source at `import adjit` would cost every program that never multiplies matrices;
    importing matmul.py would import MLIR, which `import adjit` must not)."""
    from ..lang import rules
    from ..lang.functions import device_function
    from .matmul import adjoints, gemm, taped, tangents

    FLAGS = flags      # a closure constant of the code below (and of its cache key)

    def matmul_into(a, b, c):
        gemm(FLAGS, a, b, c)

    # One symbol per flags value (the symbol is the function's name, mangled).
    matmul_into.__name__ = matmul_into.__qualname__ = f"matmul_into_{flags}"
    matmul_into = device_function(matmul_into)

    @rules.forward(matmul_into)
    def _forward(config, a, b, c):
        matmul_into(a.val, b.val, c.val)
        tangents(FLAGS, a, b, c)

    @rules.augmented_primal(matmul_into)
    def _augmented(config, a, b, c):
        matmul_into(a.val, b.val, c.val)
        return rules.AugmentedReturn(None, None, taped(config, a, b))

    @rules.reverse(matmul_into)
    def _reverse(config, dret, tape, a, b, c):
        adjoints(FLAGS, config, tape, a, b, c)
        return None, None, None

    return matmul_into


MAKERS["matmul_into"] = _functions
