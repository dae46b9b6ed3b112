"""`DeviceArray`: a C-contiguous array in GPU memory, so data can stay there between launches.

It speaks both interchange protocols, as producer and consumer: `__cuda_array_interface__`
(Numba, CuPy, PyTorch) and DLPack (`__dlpack__`, `__dlpack_device__`; PyTorch, CuPy, JAX).
Arrays borrowed from another library keep their owner alive and are never freed here.
No MLIR is imported: this runs on GPU machines without a compiler.
"""
from __future__ import annotations

import ctypes
import math
import weakref
from typing import Any, Sequence

import numpy as np

from . import cuda_driver

KDL_CPU, KDL_CUDA, KDL_CUDA_MANAGED = 1, 2, 13      # DLPack device types


class DeviceArray:
    """An array in the memory of the current CUDA device (C-contiguous), so that data stays
    there between launches.

    ``DeviceArray(shape, dtype)`` allocates an uninitialised one; ``DeviceArray.zeros``,
    ``DeviceArray.from_numpy`` (or :func:`adjit.to_device`) make filled ones;
    ``copy_to_host()`` returns a NumPy copy and ``copy_from_host(a)`` fills it. It has
    ``shape``, ``dtype``, ``ndim``, ``size``, ``nbytes`` and ``strides`` as NumPy's, and
    ``__cuda_array_interface__`` and ``__dlpack__``, so PyTorch, CuPy and JAX can view it.
    Kernels launched with ``device="cuda"`` take it as an array argument without copies.

    Raises:
        RuntimeError: no CUDA driver or device ("CUDA is not available: ...").

    Example:
        Runs on a machine with a CUDA GPU; elsewhere it prints why not::

            import numpy as np
            import adjit

            @adjit.kernel
            def double(x: adjit.Array[adjit.f64, 1]):
                i = adjit.index()
                x[i] = 2.0 * x[i]

            try:
                d = adjit.to_device(np.arange(4.0))
            except RuntimeError as e:      # CUDA is not available: ...
                print(e)
            else:
                double(d, ndrange=4, device="cuda")
                print(d, d.copy_to_host())  # [0. 2. 4. 6.]
    """
    is_adjit_device_array = True     # core/types.py's fast path to its type

    def __init__(self, shape: int | Sequence[int], dtype: Any = np.float64, *,
                 ptr: int | None = None, owner: Any = None):
        """Allocates an uninitialised array, or, given `ptr`, views memory that `owner`
        (kept alive) owns."""
        self.shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)
        self._owner = owner
        if ptr is not None:
            self.ptr = int(ptr)
        elif self.nbytes == 0:
            self.ptr = 0
        else:
            self.ptr = cuda_driver.alloc(self.nbytes)
            weakref.finalize(self, _free, self.ptr)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    @property
    def strides(self) -> tuple[int, ...]:
        """In bytes, as NumPy's; always C-contiguous."""
        return _c_strides(self.shape, self.itemsize)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d DeviceArray")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype.name})"

    @classmethod
    def empty(cls, shape: int | Sequence[int], dtype: Any = np.float64) -> "DeviceArray":
        return cls(shape, dtype)

    @classmethod
    def zeros(cls, shape: int | Sequence[int], dtype: Any = np.float64) -> "DeviceArray":
        array = cls(shape, dtype)
        if array.nbytes:
            (err,) = cuda_driver.driver().api.cuMemsetD8(array.ptr, 0, array.nbytes)
            cuda_driver.check(err, "cuMemsetD8")
        return array

    @classmethod
    def from_numpy(cls, array: Any) -> "DeviceArray":
        host = np.require(array, requirements=["C", "E"])   # (ascontiguousarray: 0-d to 1-D)
        device = cls(host.shape, host.dtype)
        device.copy_from_host(host)
        return device

    def copy_from_host(self, array: Any) -> None:
        host = np.require(array, dtype=self.dtype, requirements=["C", "E"])
        if host.shape != self.shape:
            raise ValueError(f"cannot copy a {host.shape} array into a {self.shape} DeviceArray")
        if self.nbytes:
            (err,) = cuda_driver.driver().api.cuMemcpyHtoD(self.ptr, host.ctypes.data, self.nbytes)
            cuda_driver.check(err, "copying to the GPU")

    def copy_to_host(self, out: np.ndarray | None = None) -> np.ndarray:
        """A NumPy copy (into `out` when given: any layout of the same shape and dtype)."""
        host = out if out is not None and out.flags.c_contiguous else np.empty(self.shape, self.dtype)
        if host.shape != self.shape or host.dtype != self.dtype:
            raise ValueError(f"cannot copy a {self.shape} {self.dtype} DeviceArray into a "
                             f"{host.shape} {host.dtype} array")
        if self.nbytes:
            (err,) = cuda_driver.driver().api.cuMemcpyDtoH(host.ctypes.data, self.ptr, self.nbytes)
            cuda_driver.check(err, "copying from the GPU")
        if out is not None and out is not host:
            out[...] = host
            return out
        return host

    numpy = copy_to_host
    to_host = copy_to_host

    @property
    def __cuda_array_interface__(self) -> dict:
        # stream None: launches and copies have finished when they return
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "strides": None, "version": 3, "stream": None}

    def __dlpack_device__(self) -> tuple[int, int]:
        return KDL_CUDA, _device_ordinal()

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        # Legacy (unversioned) capsule, which every consumer accepts; no stream to wait on.
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"a DeviceArray lives on {self.__dlpack_device__()}, not {dl_device}")
        if copy:
            raise BufferError("DeviceArray.__dlpack__ does not copy")
        return dlpack_capsule(self.ptr, self.shape, self.dtype, self.__dlpack_device__(), self)


def to_device(array: Any) -> DeviceArray:
    """A :class:`DeviceArray` holding a copy of ``array``.

    Args:
        array: anything ``np.asarray`` takes.

    Returns:
        DeviceArray: in the current CUDA device's memory.

    Raises:
        RuntimeError: no CUDA driver or device ("CUDA is not available: ...").

    Example:
        Runs on a machine with a CUDA GPU; elsewhere it prints why not::

            import numpy as np
            import adjit

            try:
                d = adjit.to_device(np.arange(4.0))
            except RuntimeError as e:      # CUDA is not available: ...
                print(e)
            else:
                print(d.shape, d.dtype, d.copy_to_host())   # (4,) float64 [0. 1. 2. 3.]
    """
    return DeviceArray.from_numpy(np.asarray(array))


def as_device_array(obj: Any) -> DeviceArray | None:
    """`obj` as a DeviceArray viewing the same GPU memory (no copy), or None when it is no GPU
    array. Raises ValueError for a GPU array that is not C-contiguous."""
    if isinstance(obj, DeviceArray):
        return obj
    interface = getattr(obj, "__cuda_array_interface__", None)
    if interface is not None:
        return _from_interface(obj, interface)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        if obj.__dlpack_device__()[0] not in (KDL_CUDA, KDL_CUDA_MANAGED):
            return None
        ptr, shape, strides, dtype, owner = dlpack_view(obj.__dlpack__(stream=1))
        _require_contiguous(shape, strides, dtype)
        return DeviceArray(shape, dtype, ptr=ptr, owner=(obj, owner))
    return None


def _from_interface(obj: Any, interface: dict) -> DeviceArray:
    if interface.get("mask") is not None:
        raise ValueError("masked __cuda_array_interface__ arrays are not supported")
    dtype = np.dtype(interface["typestr"])
    shape = tuple(interface["shape"])
    _require_contiguous(shape, interface.get("strides"), dtype)
    stream = interface.get("stream")
    if stream not in (None, 1, 2):      # protocol v3: the consumer waits for the producer's stream
        (err,) = cuda_driver.driver().api.cuStreamSynchronize(stream)
        cuda_driver.check(err, "waiting for the array's stream")
    return DeviceArray(shape, dtype, ptr=interface["data"][0], owner=obj)


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _require_contiguous(shape, strides, dtype) -> None:
    if strides is None or math.prod(shape) <= 1:
        return
    relevant = [(s, st) for s, st in zip(shape, strides) if s != 1]
    expected = [(s, st) for s, st in zip(shape, _c_strides(tuple(shape), dtype.itemsize)) if s != 1]
    if relevant != expected:
        raise ValueError(f"GPU array with strides {tuple(strides)} is not C-contiguous; "
                         "adjit kernels take C-contiguous arrays (make a contiguous copy)")


def array_identity(a: Any) -> tuple:
    """What makes two array arguments the same array (the same memory, seen the same way),
    so that one passed twice is copied once and stays one array."""
    if isinstance(a, DeviceArray):
        return ("device", a.ptr, a.shape, a.dtype.str)
    return ("host", a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str)


def _device_ordinal() -> int:
    return int(cuda_driver.driver().device)


def _free(ptr: int) -> None:
    try:
        cuda_driver.free(ptr)
    except Exception:      # interpreter shutdown: the driver may be gone already
        pass


# --- DLPack capsules (dlpack.h, the unversioned DLManagedTensor) -----------------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                             ("deleter", _Deleter)]

_DL_KIND = {"i": 0, "u": 1, "f": 2, "b": 6}          # kDLInt, kDLUInt, kDLFloat, kDLBool
_NAME, _USED_NAME = b"dltensor", b"used_dltensor"    # module constants: capsules keep the pointer


def _python_api(name: str, restype: Any, *argtypes: Any) -> Any:
    # A prototype per use: ctypes.pythonapi.<name> is one shared object with one argtypes.
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_capsule_new = _python_api("PyCapsule_New", ctypes.py_object,
                           ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
_capsule_pointer = _python_api("PyCapsule_GetPointer", ctypes.c_void_p,
                               ctypes.py_object, ctypes.c_char_p)
_capsule_set_name = _python_api("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)
# The destructor gets a capsule whose refcount is 0: it may only be handled as a bare pointer.
_capsule_valid_raw = _python_api("PyCapsule_IsValid", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)
_capsule_pointer_raw = _python_api("PyCapsule_GetPointer", ctypes.c_void_p,
                                   ctypes.c_void_p, ctypes.c_char_p)

_exported: dict[int, tuple] = {}     # DLManagedTensor address -> what it must keep alive


@_Deleter
def _deleter(managed: Any) -> None:
    _exported.pop(ctypes.addressof(managed.contents), None)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule: int) -> None:
    if _capsule_valid_raw(capsule, _NAME):      # never consumed: release what it holds
        _exported.pop(_capsule_pointer_raw(capsule, _NAME), None)


def dlpack_capsule(ptr: int, shape: Sequence[int], dtype: np.dtype, device: tuple[int, int],
                   owner: Any) -> Any:
    """A "dltensor" capsule for C-contiguous memory at `ptr`, keeping `owner` alive until the
    consumer calls the deleter (or the capsule dies unconsumed)."""
    dtype = np.dtype(dtype)
    if dtype.kind not in _DL_KIND:
        raise BufferError(f"DLPack cannot describe dtype {dtype}")
    ndim = len(shape)
    shape_buf = (ctypes.c_int64 * max(ndim, 1))(*shape)
    managed = _DLManagedTensor()
    managed.dl_tensor = _DLTensor(ptr, _DLDevice(*device), ndim,
                                  _DLDataType(_DL_KIND[dtype.kind], dtype.itemsize * 8, 1),
                                  shape_buf, None, 0)     # NULL strides: C-contiguous
    managed.deleter = _deleter
    address = ctypes.addressof(managed)
    _exported[address] = (managed, shape_buf, owner)
    return _capsule_new(address, _NAME, ctypes.cast(_capsule_destructor, ctypes.c_void_p))


class _DLPackOwner:
    """Holds a consumed DLManagedTensor and calls its deleter when no view needs it."""

    def __init__(self, address: int):
        self._managed = _DLManagedTensor.from_address(address)

    def __del__(self) -> None:
        if self._managed.deleter:
            self._managed.deleter(ctypes.pointer(self._managed))


def dlpack_view(capsule: Any) -> tuple[int, tuple[int, ...], tuple[int, ...] | None, np.dtype, Any]:
    """Consumes a "dltensor" capsule: (data address, shape, strides in bytes or None, dtype,
    an owner object to keep alive for as long as the memory is used)."""
    address = _capsule_pointer(capsule, _NAME)
    t = _DLManagedTensor.from_address(address).dl_tensor
    kinds = {v: k for k, v in _DL_KIND.items()}
    if t.dtype.lanes != 1 or t.dtype.code not in kinds:
        raise BufferError(f"unsupported DLPack dtype (code {t.dtype.code}, lanes {t.dtype.lanes})")
    dtype = np.dtype(f"{kinds[t.dtype.code]}{t.dtype.bits // 8}" if t.dtype.code != 6 else "?")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = (tuple(t.strides[i] * dtype.itemsize for i in range(t.ndim))
               if t.strides else None)
    _capsule_set_name(capsule, _USED_NAME)
    return (t.data or 0) + t.byte_offset, shape, strides, dtype, _DLPackOwner(address)
