"""Symbol addresses in an MLIR ExecutionEngine, which the bindings' `raw_lookup` does not
give for plain C symbols (it finds only the packed `_mlir_<name>` wrappers)."""
from __future__ import annotations

import ctypes
from pathlib import Path

import mlir
from mlir.execution_engine import ExecutionEngine

_capi = ctypes.CDLL(str(Path(list(mlir.__path__)[0]) / "_mlir_libs" / "libMLIRPythonCAPI.so"))


class _StringRef(ctypes.Structure):
    _fields_ = [("data", ctypes.c_char_p), ("length", ctypes.c_size_t)]


_capi.mlirExecutionEngineLookup.argtypes = [ctypes.c_void_p, _StringRef]
_capi.mlirExecutionEngineLookup.restype = ctypes.c_void_p
# Own prototypes: setting argtypes on ctypes.pythonapi's shared objects would affect others.
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_capsule_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))


def lookup(engine: ExecutionEngine, symbol: str) -> int:
    """Address of `symbol` in an ExecutionEngine, or 0."""
    capsule = engine._CAPIPtr
    name = symbol.encode()
    return _capi.mlirExecutionEngineLookup(
        _capsule_pointer(capsule, _capsule_name(capsule)), _StringRef(name, len(name))) or 0
