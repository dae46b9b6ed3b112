"""Where declarations' calls go (functions.Routes; adjit/__init__.py installs `ROUTES`): a
CPU call's specialisation from the compile service (service.py), a `device="cuda"` call or
launch to its launcher (cuda_jit.py, cuda_launch.py), and `lower` on either device.

The launchers, like the compiler, are imported on first use: `import adjit` stays light.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import service
from ..lang.functions import Kernel, Lowered, debug_enabled
from .guard import compiling

if TYPE_CHECKING:
    from ..compiler.compiled import Compiled
    from ..lang.functions import Function


class _Routes:
    """functions.Routes, over the compile service and the launchers."""

    def specialisation(self, target: Function | Kernel, types: list, ndim: int | None,
                       wgs: tuple[int, ...] | None) -> tuple[service.Key, Compiled]:
        return service.cpu(target, types, ndim, wgs)

    def lower(self, target: Function | Kernel, types: list, ndim: int | None,
              wgs: tuple[int, ...] | None) -> Lowered:
        """The adj text of the specialisation, and its LLVM IR made from that text when
        asked (engine.llvm_text, with MLIR)."""
        _, compiled = service.cpu(target, types, ndim, wgs)

        def llvm_text() -> str:
            from ..compiler.engine import llvm_text as lower
            return lower(compiled.adj_text, compiled.module.num_threads)
        return Lowered(compiled.adj_text, llvm_text)

    def run_on_gpu(self, fn: Function, args: tuple) -> Any:
        from .cuda_jit import call
        return call(fn, args)

    def launch_on_gpu(self, k: Kernel, args: tuple, ndrange: tuple[int, ...],
                      wgs: tuple[int, ...] | None) -> None:
        from .cuda_launch import launch
        launch(k, args, ndrange, wgs)

    def lower_on_gpu(self, target: Function | Kernel, args: tuple,
                     ndim: int | None) -> Lowered:
        if not isinstance(target, Kernel):
            from .cuda_jit import lower
            return lower(target, args)
        from .cuda_launch import specialise_cuda
        types, _ = specialise_cuda(target, args)

        def kernel_text() -> str:
            from ..compiler.unit import kernel_module
            return kernel_module(target, types, ndim, debug_enabled())[0]
        adj_text = compiling(target, kernel_text)
        return Lowered(adj_text, _no_llvm,
                       lambda: service.gpu_kernels(target, types, ndim)["kernel"].ptx)


def _no_llvm() -> str:
    raise ValueError("lower(..., device='cuda') has .adj() and .ptx(); .llvm() is for the CPU")


ROUTES = _Routes()
