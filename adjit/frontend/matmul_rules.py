"""matmul_into, the device function whose custom rules are the derivatives of matrix
products (matmul.py calls it): forward dC = dA @ B + A @ dB, reverse dA += dC @ B^T and
dB += A^T @ dC. A module of its own, imported by the API, because making the function needs
functions.py and rules.py, which import the code generator that imports matmul.py."""
from __future__ import annotations

import functools

from .late import MAKERS


@functools.cache
def _functions():
    """matmul_into and its rules, made on first use (parsing their source at `import adjit`
    would cost every program that never multiplies matrices; importing matmul.py would
    import MLIR, which `import adjit` must not)."""
    from . import rules
    from .functions import device_function
    from .matmul import adjoints, gemm, taped, tangents

    @device_function
    def matmul_into(a, b, c):
        gemm(0, a, b, c)

    @rules.forward(matmul_into)
    def _forward(config, a, b, c):
        gemm(0, a.val, b.val, c.val)
        tangents(a, b, c)

    @rules.augmented_primal(matmul_into)
    def _augmented(config, a, b, c):
        gemm(0, a.val, b.val, c.val)
        return rules.AugmentedReturn(None, None, taped(config, a, b))

    @rules.reverse(matmul_into)
    def _reverse(config, dret, tape, a, b, c):
        adjoints(config, tape, a, b, c)
        return None, None, None

    return matmul_into


MAKERS["matmul_into"] = _functions
