"""The kernel descriptor: what passes/lower_gpu.py records about a kernel it compiled to PTX,
the GPU kernel cache (runtime/kernel_cache.py) stores, and runtime/cuda.py launches from."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .types import BY_MLIR_NAME, ScalarType

# 6: the metadata records its key, the PTX's hash and its own checksum (files.write_entry).
# 7: a reverse kernel's `uniform_loads` (its extra per-item outputs).
# 8: a kernel with checks takes its launch's error cell as a hidden last parameter (no
#    module global `error_global`).
# 9: no `tape_per_item` nor `uniform_loads`: a launch's derivative is a host program, whose
#    launch rule sizes tapes and sums per-item adjoints on the device.
# 10: `sites`, where the sources the checks' positions are in were (api/service.py
#    moves the positions to the caller's sources on a hit).
FORMAT_VERSION = 10
# The launch contract between passes/lower_gpu.py and runtime/cuda.py: a 1-D grid of blocks
# of prod(workgroupsize) threads, or of this many.
DEFAULT_BLOCK = 256


@dataclass(frozen=True)
class Param:
    """One kernel argument: a scalar, or a memref (passed as allocated, aligned, offset,
    sizes[rank], strides[rank])."""
    kind: str            # "scalar" | "memref"
    dtype: str           # "f32" "f64" "i32" "i64" "i1" "index", as MLIR spells them
    rank: int = 0        # memrefs only

    @property
    def scalar_type(self) -> ScalarType:
        """The scalar type, or the element type of the memref."""
        return BY_MLIR_NAME[self.dtype]


@dataclass(frozen=True)
class GpuKernel:
    """A kernel compiled to PTX, with what a launcher needs to call it.

    The entry's parameters are `params` expanded, then `ndim` index extents of the ndrange,
    then, when it has `checks`, the launch's error cell (a hidden memref<1xi64>: allocated,
    aligned, offset, size, stride), which the launcher provides (runtime/cuda.py).
    `checks[i]` is the (Python error name, message) of `adj.check` number i+1, which the
    kernel stores in the cell when it fails. `written` are the indices of the array
    parameters the kernel may write; `ndrange_bounds` the (parameter, dimension, ndrange
    dimension, message) of each index every work item takes with its id, which the launcher
    checks the ndrange against (dialects/adj.py: BOUNDS_ATTR). `sites`: (file, first line,
    last line) of each source the checks' "(at file:line)" positions are in, in the cache
    key's order (lang/source.code_sites); () where not recorded.
    """
    name: str
    entry: str
    ptx: str
    chip: str
    params: tuple[Param, ...]
    ndim: int
    checks: tuple[tuple[str, str], ...] = ()
    written: tuple[int, ...] = ()
    ndrange_bounds: tuple[tuple, ...] = ()
    sites: tuple[tuple[str, int, int], ...] = ()
    format: int = field(default=FORMAT_VERSION)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "GpuKernel":
        if data.get("format") != FORMAT_VERSION:
            raise KernelCacheError(f"GPU kernel format {data.get('format')!r} is not the "
                                   f"supported version {FORMAT_VERSION}; recompile it")
        fields = dict(data)
        fields["params"] = tuple(Param(**p) for p in data["params"])
        fields["checks"] = tuple(tuple(c) for c in data.get("checks", ()))
        fields["written"] = tuple(data.get("written", ()))
        fields["ndrange_bounds"] = tuple(tuple(b) for b in data.get("ndrange_bounds", ()))
        fields["sites"] = tuple((str(f), int(a), int(b)) for f, a, b in data.get("sites", ()))
        return cls(**fields)


def check_ndrange_bounds(bounds: tuple[tuple, ...], args: list,
                         extents: tuple[int, ...]) -> None:
    """IndexError (the fact's message) when the ndrange is larger than an array that every
    work item indexes with its id: `bounds` are GpuKernel.ndrange_bounds' facts about the
    kernel's arguments `args` (arrays of any kind with a `shape`)."""
    for fact in bounds:
        param, dim, k, message, scale, offset = bound_fact(fact)
        shape = getattr(args[param], "shape", None)
        if shape is None or len(shape) <= dim:
            continue
        n = extent(extents, k)
        if n > 0 and scale * (n - 1) + offset >= shape[dim]:
            raise IndexError(message)


# An ndrange fact's `k` for the linear adjit.index() of an N-D kernel: the index reaches the
# item count, the product of the extents, less one (passes/ndrange_bounds.py).
LINEAR = -1


def extent(extents: tuple[int, ...], k: int) -> int:
    """How many values the work-item id of an ndrange fact takes: ndrange[k], or the item
    count for k == LINEAR."""
    if k == LINEAR:
        n = 1
        for e in extents:
            n *= e
        return n
    return extents[k]


def bound_fact(fact) -> tuple[int, int, int, str, int, int]:
    """An ndrange fact as (parameter, dimension, k, message, scale, offset): the index is
    scale * id + offset (scale >= 1, offset >= 0; 1 and 0 when the fact has 4 fields), so
    the ndrange fits when scale * (extent - 1) + offset < the dimension's size."""
    p, d, k, m, *affine = fact
    scale, offset = affine if affine else (1, 0)
    return int(p), int(d), int(k), str(m), int(scale), int(offset)


class KernelCacheError(RuntimeError):
    """A cache entry that cannot be used: another format version, or damaged."""
