"""core/types.py's one table of how the machine holds each scalar type agrees with what it
describes: NumPy, ctypes, the struct module and MLIR (dialects/mlir_types.py)."""
from __future__ import annotations

import ctypes
import struct

import numpy as np
from mlir import ir

from adjit.core.types import BY_MLIR_NAME, SCALARS, index
from adjit.dialects import make_context
from adjit.dialects.mlir_types import mlir_type


def test_sizes_and_dtypes_agree():
    for t in (*SCALARS, index):
        size = t.memory_dtype.itemsize
        assert ctypes.sizeof(t.ctype) == size, t
        assert struct.calcsize("<" + t.struct_code) == size, t
        assert t.bits == (1 if t.is_bool else 8 * size), t
        if t.np_dtype is not None:
            assert t.memory_dtype == t.np_dtype, t
        assert np.dtype(t.ctype) == t.memory_dtype, t


def test_mlir_names_are_mlir_types():
    with make_context():
        for t in (*SCALARS, index):
            assert ir.Type.parse(t.mlir_name) == mlir_type(t), t
            assert BY_MLIR_NAME[t.mlir_name] is t
