"""What `device="cuda"` code is compiled for (`chip`), and whether it only compiles
(`compile_only`): read by the compile service (GPU products are keyed on the chip and stored
under compile_only) and by the launchers, which run nothing under it. MLIR-free.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

from ..core.environment import default, read

# A compiling machine has no GPU to ask for its architecture: PTX for sm_90 runs on Hopper
# and, JIT-compiled by the driver, on later GPUs.
DEFAULT_CHIP = default("ADJIT_CUDA_CHIP")

_compile_only = contextvars.ContextVar("adjit_cuda_compile_only", default=False)


@contextlib.contextmanager
def compile_only() -> Iterator[None]:
    """Within it, `device="cuda"` launches (and autodiff of them) find or compile their
    kernels, storing them in the disk cache, and return without running anything (autodiff
    returns zeros): no GPU or driver is needed."""
    token = _compile_only.set(True)
    try:
        yield
    finally:
        _compile_only.reset(token)


def is_compile_only() -> bool:
    """Whether this call is inside compile_only()."""
    return _compile_only.get()


def chip() -> str:
    """The GPU architecture kernels compile for: ADJIT_CUDA_CHIP, or sm_90."""
    return read("ADJIT_CUDA_CHIP")
