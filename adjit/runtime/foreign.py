"""Arrays of other libraries (PyTorch, JAX, CuPy, anything with `__dlpack__` or
`__array_interface__`) as adjit arguments, without copies.

An array in CPU memory becomes a NumPy array viewing its memory, so that everything past
this point (types, the converters of runtime/abi.py, the native dispatcher, derivatives)
sees the NumPy array it already takes, and a kernel's writes land in the caller's tensor.
An array in GPU memory is left as it is: launches with `device="cuda"` take it through
device_array.as_device_array (`__cuda_array_interface__` or DLPack), and elsewhere it is
refused, naming the device. Results are NumPy arrays (and DeviceArrays on the GPU), which
speak DLPack themselves: `torch.from_dlpack(result)` views them without a copy.
No MLIR, no PyTorch or JAX import: this runs wherever the runtime does.
"""
from __future__ import annotations

from typing import Any

import numpy as np

_HOST_DEVICES = (1, 3)          # kDLCPU, kDLCUDAHost (pinned host memory, readable here)
_DEVICE_NAMES = {2: "cuda", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi", 10: "rocm",
                 13: "cuda managed", 14: "oneapi"}
_PLAIN = (np.ndarray, np.generic, int, float, bool, complex, str, type(None))


def is_foreign(value: Any) -> bool:
    """Whether `value` is another library's array (not NumPy's, not a DeviceArray)."""
    t = type(value)
    if t in _PLAIN or isinstance(value, _PLAIN) or getattr(t, "is_adjit_device_array", False):
        return False
    return hasattr(t, "__dlpack__") or hasattr(value, "__array_interface__")


def host_value(value: Any, device: str = "cpu") -> Any:
    """`value` as adjit takes it: another library's CPU array as a NumPy array viewing its
    memory (strides kept: whether a strided view is taken is adjit's rule, not this
    module's), a GPU array unchanged where `device` is "cuda", anything else unchanged.
    TypeError for a GPU array on the CPU and for what cannot be viewed (a tensor that
    requires grad, a dtype NumPy has not)."""
    if not is_foreign(value):
        return value
    where = getattr(value, "__dlpack_device__", None)
    if where is not None:
        kind = int(where()[0])
        if kind in _HOST_DEVICES:
            return _from_dlpack(value)
        if device == "cuda":
            return value
        raise TypeError(f"a {_name(value)} in {_DEVICE_NAMES.get(kind, f'DLPack device {kind}')}"
                        " memory cannot be an argument of CPU code: launch with device='cuda'"
                        " (GPU arrays), or copy it to the CPU first")
    if hasattr(value, "__cuda_array_interface__"):
        return value        # (core/types.py names the device for a CPU call)
    return np.asarray(value)    # __array_interface__: NumPy views the memory it describes


def host_values(values) -> list:
    """host_value of each of `values`."""
    return [host_value(v) for v in values]


def _from_dlpack(value: Any) -> np.ndarray:
    is_neg = getattr(value, "is_neg", None)
    if callable(is_neg) and is_neg():
        # Its memory holds -value (a lazy negation), and DLPack exports the memory: adjit
        # would read every element with the wrong sign, and write -x for x.
        raise TypeError("a torch.Tensor with the negative bit set (a lazily negated view: "
                        "c.conj().imag, torch._neg_view) cannot be an adjit argument "
                        "directly (its memory holds the negated values): pass "
                        "tensor.resolve_neg(), which copies, or wrap the function with "
                        "adjit.torch.function(f), which does that")
    try:
        view = np.from_dlpack(value)
    except BufferError as e:
        if getattr(value, "requires_grad", False):
            # PyTorch refuses to export a tensor autograd tracks: adjit would compute on it
            # without autograd seeing the computation.
            raise TypeError("a torch.Tensor that requires grad cannot be an adjit argument "
                            "directly (autograd would not see what adjit computes): wrap the "
                            "function with adjit.torch.function(f) for gradients to flow, or "
                            "pass tensor.detach()") from None
        raise TypeError(f"adjit cannot view this {_name(value)} through DLPack: {e}") from None
    except (TypeError, RuntimeError) as e:     # a dtype NumPy has not (bfloat16), conj bits
        raise TypeError(f"adjit cannot view this {_name(value)} through DLPack: {e}") from None
    if type(value).__module__.split(".")[0] in ("jax", "jaxlib"):
        # JAX arrays are immutable: a view of one is read-only, so that adjit refuses (naming
        # the parameter) to pass it where compiled code writes. (NumPy marks it so already
        # where JAX exports DLPack 1.0's read-only flag.)
        view.flags.writeable = False
    return view


def _name(value: Any) -> str:
    t = type(value)
    return f"{t.__module__.split('.')[0]}.{t.__name__}"
