"""Helpers for runtime tests: adj-level modules written by hand, compiled for the CPU."""
from __future__ import annotations

import gc

from adjit.runtime.memory import memory_stats

MLIR_TYPES = {"f32": "f32", "f64": "f64", "i32": "i32", "i64": "i64", "bool": "i1"}


def memref(elem: str, ndim: int) -> str:
    return f"memref<{'?x' * ndim}{MLIR_TYPES.get(elem, elem)}>"


def bytes_in_use() -> int:
    gc.collect()
    return memory_stats()["bytes_in_use"]
