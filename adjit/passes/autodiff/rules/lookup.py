"""The derivative rules of the ops that are not scalar math, by op name: each family's module
gives an op's forward, augmented and reverse rules side by side (protocols.OpRules), and the
generators look them up here. Scalar arith and math ops are rules/scalar.py's table; what an op
reads, writes and aliases is op_facts.py's.

A generator class may put its own rule for an op before this table (its `OWN_RULES`, e.g.
kernel_tape.KernelRevGen's for the loads of elements every work item reads).
"""
from __future__ import annotations

# (`from .x import`, not `from . import x`: that would import the package's __init__.)
from ..protocols import OpRules, Rule
from .call_ops import RULES as CALLS
from .control_flow_ops import RULES as CONTROL_FLOW
from .launch_ops import RULES as LAUNCHES
from .memory_ops import RULES as MEMORY

RULES: dict[str, OpRules] = {**MEMORY, **CALLS, **CONTROL_FLOW, **LAUNCHES}

_NONE = OpRules()


def rule(name: str, mode: str, own: dict[str, Rule] | None = None) -> Rule | None:
    """The rule of op `name` in `mode` ("forward", "augmented" or "reverse"): the
    generator's own (`own`) first, else this table's; None where there is none."""
    if own and name in own:
        return own[name]
    return getattr(RULES.get(name, _NONE), mode)
