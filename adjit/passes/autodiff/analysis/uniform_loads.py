"""Array elements that a kernel reads at an index every work item computes alike: a
parameter `p[0]`, `w[k]` for a scalar argument k. Their adjoints are summed like those of
Active scalar arguments, not added into the shadow element item by item.

Every item of `out[i] = p[0] * img[i]` adds its partial into dp[0]. With one float32 atomic
add per item, 2^25 items of 1.0 stop at 2^24 (a float32 running sum), and the adds contend on
one address. Instead the reverse kernel accumulates its item's adjoint of the element as a
value (threaded through its loops and ifs like the adjoint of an Active scalar argument:
RevGen.outer), stores it per item, and the launch rule sums those accurately
(summation.py) and adds the sum into the shadow element once, after the kernel.

That is exact when nothing else touches the element's shadow while the reverse kernel runs:
the array is a kernel argument that the kernel only loads from (any store, atomic, call,
view or control-flow join of it falls back to atomics; distinct argument arrays do not alias,
activity_analysis.py) and the index is an expression of the kernel's integer arguments and array
sizes (uniform.py), which the launch computes from its own operands. An index outside the
array there means no item read the element (it would have faulted in the primal): the sum,
zero, is then not added.

Derivatives generated for a launch rule do this (their launch knows the extra per-item
buffers: on the CPU, and on the GPU in a host program); a kernel derivative requested by name
keeps its ABI (atomics).
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from ....core.tape_size import Expr
from ...ir_util import walk
from .activity_analysis import ActivityAnalysis
from .uniform import uniform


@dataclass(frozen=True)
class UniformLoad:
    """One element read by every item: kernel argument `arg` at indices `at` (expressions of
    the kernel's arguments). Stands for the element in the reverse pass's adjoint frames."""
    arg: int
    at: tuple[Expr, ...]
    type: ir.Type

    def __hash__(self) -> int:
        return hash((self.arg, self.at))

    def __eq__(self, other) -> bool:
        return isinstance(other, UniformLoad) and (self.arg, self.at) == (other.arg, other.at)


_READS = ("memref.load", "memref.dim")


def uniform_loads(fn: ir.Operation, act: ActivityAnalysis,
                  shadowed_args: set[int]) -> dict[ir.Operation, UniformLoad]:
    """The loads of `fn` (a kernel) whose adjoints can be summed over items: active results,
    from a shadowed argument array that `fn` only reads, at uniform indices."""
    entry = fn.regions[0].blocks[0]
    read_only = {a.arg_number for a in entry.arguments
                 if a.arg_number in shadowed_args and
                 all(use.owner.name in _READS for use in a.uses)}
    found: dict[ir.Operation, UniformLoad] = {}
    for op in walk(fn):
        if op.name != "memref.load" or not act.active(op.results[0]):
            continue
        m = op.operands[0]
        if not (isinstance(m, ir.BlockArgument) and m.owner == entry and
                m.arg_number in read_only):
            continue
        at = tuple(uniform(i, fn) for i in list(op.operands)[1:])
        if None not in at:
            found[op] = UniformLoad(m.arg_number, at, op.results[0].type)
    return found
