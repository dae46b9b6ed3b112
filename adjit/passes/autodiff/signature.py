"""What one generated derivative is for (its Signature), and what it is (its Derivative).

A Signature is the key under which generated functions are reused: two requests or call sites
with the same function, mode, activities, primal flag and overwritten flags share one
derivative.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir

from ...core.activity import Activity, SHADOWED
from ...core.derivative_abi import DerivativeABI, DerivativeMode
from ...core.tape_size import Expr, to_text
from ...dialects.adj import AdjError
from ..ir_util import func_type, is_float, is_float_memref, is_memref

ACTIVITIES = tuple(a.value for a in Activity)
MODES = tuple(m.value for m in DerivativeMode)


@dataclass(frozen=True)
class Signature:
    fn: str
    mode: str
    activity: tuple[str, ...]
    ret_activity: str
    with_primal: bool
    # Per argument: may the caller change this array between the augmented and the reverse
    # call? (False for the arrays of a Reverse call, which runs both back to back.)
    overwritten: tuple[bool, ...]
    # Tangents per argument and result (forward mode; derivative_abi.py)
    width: int = 1

    def mangled(self) -> str:
        acts = "".join(Activity(a).letter for a in self.activity) or "0"
        name = (f"__adj_{self.fn}_{'fwd' if self.mode == 'forward' else 'rev'}_{acts}_"
                f"{Activity(self.ret_activity).letter}{'p' if self.with_primal else ''}")
        if any(self.overwritten):
            name += "_o" + "".join("1" if o else "0" for o in self.overwritten)
        if self.width != 1:
            name += f"_w{self.width}"
        return name


@dataclass
class TapeField:
    """One value of a tape: what it holds and its type (and, in a kernel, slots per item: an
    int, or an expression of the kernel's arguments, written as text: uniform.py)."""
    holds: str
    type: ir.Type
    per_item: Expr | None = None
    # kernels: "stack" / "offsets" for the packed stack of values saved in loops whose runs
    # differ between items, and where each item's values start (dynamic_tape.py)
    dynamic: str | None = None

    def attr(self) -> ir.Attribute:
        entries = {"holds": ir.StringAttr.get(self.holds), "type": ir.TypeAttr.get(self.type)}
        if self.dynamic is not None:
            entries["dynamic"] = ir.StringAttr.get(self.dynamic)
        if isinstance(self.per_item, int):
            entries["per_item"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                     self.per_item)
        elif self.per_item is not None:
            entries["per_item"] = ir.StringAttr.get(to_text(self.per_item))
        return ir.DictAttr.get(entries)


@dataclass
class Derivative:
    """Symbols of the functions that implement one Signature."""
    forward: str | None = None
    aug: str | None = None
    rev: str | None = None
    tape: list[ir.Type] = field(default_factory=list)   # aug's tape values, in order
    per_item: list[Expr] = field(default_factory=list)   # kernels: slots per work item
    # kernels: the elements whose per-item adjoints rev outputs (uniform_loads.UniformLoad)
    uniform_loads: list = field(default_factory=list)
    # kernels: (gather kernel, primal argument) per array whose adjoint is gathered (gather.py)
    gathers: list = field(default_factory=list)
    # kernels with values saved in dynamic loops: the counting kernel (dynamic_tape.py), and
    # per tape value, None or "stack" / "offsets"
    count: str | None = None
    dynamic: list = field(default_factory=list)


def check_signature(op: ir.Operation, fn: ir.Operation, sig: Signature) -> None:
    """Raises AdjError (naming `op`) when `sig` does not fit `fn`."""
    ftype = func_type(fn)
    inputs, results = list(ftype.inputs), list(ftype.results)
    if sig.mode not in MODES:
        raise AdjError(op, f"autodiff mode must be \"forward\" or \"reverse\", not {sig.mode!r}")
    if sig.width < 1 or (sig.width > 1 and sig.mode != DerivativeMode.FORWARD):
        raise AdjError(op, f"autodiff width must be 1, or more in forward mode (batched "
                           f"tangents); got {sig.width} in {sig.mode} mode")
    if len(sig.activity) != len(inputs):
        raise AdjError(op, f"autodiff of @{sig.fn} gives {len(sig.activity)} activities for "
                           f"{len(inputs)} arguments")
    for k, (act, t) in enumerate(zip(sig.activity, inputs)):
        if act not in ACTIVITIES:
            raise AdjError(op, f"autodiff activity {act!r} of argument {k} is not one of "
                               f"{', '.join(ACTIVITIES)}")
        if act == Activity.CONST:
            continue
        if not (is_float(t) or is_float_memref(t)):
            raise AdjError(op, f"argument {k} of @{sig.fn} has type {t}, which is not "
                               f"differentiable: it must be \"const\", not {act!r}")
        if sig.mode == DerivativeMode.REVERSE and act == Activity.ACTIVE and is_memref(t):
            raise AdjError(op, f"argument {k} of @{sig.fn} is an array ({t}): in reverse mode "
                               f"it must be \"dup\", \"dupnoneed\" or \"const\", not \"active\"")
        if sig.mode == DerivativeMode.REVERSE and act in SHADOWED and not is_memref(t):
            raise AdjError(op, f"argument {k} of @{sig.fn} is a scalar ({t}): in reverse mode "
                               f"it must be \"active\" or \"const\", not {act!r}")
    if sig.ret_activity not in ACTIVITIES:
        raise AdjError(op, f"autodiff ret_activity {sig.ret_activity!r} is not one of "
                           f"{', '.join(ACTIVITIES)}")
    if sig.ret_activity != Activity.CONST and sig.mode == DerivativeMode.REVERSE:
        if sig.ret_activity != Activity.ACTIVE:
            raise AdjError(op, f"reverse-mode ret_activity of @{sig.fn} must be \"active\" or "
                               f"\"const\", not {sig.ret_activity!r}")
        if not any(is_float(t) for t in results):
            raise AdjError(op, f"@{sig.fn} has no float result to be \"active\"")
        if any(is_memref(t) for t in results):
            raise AdjError(op, f"@{sig.fn} returns an array: its result cannot be \"active\" "
                               f"in reverse mode")


def abi(sig: Signature) -> DerivativeABI:
    """The layout of the functions generated for `sig` (core/derivative_abi.py)."""
    return DerivativeABI(sig.mode, sig.activity, sig.ret_activity, sig.with_primal, sig.width)


def forward_abi(ftype: ir.FunctionType, sig: Signature) -> tuple[list[ir.Type], list[ir.Type]]:
    """(params, results) of a forward derivative."""
    layout = abi(sig)
    return (layout.inputs(list(ftype.inputs)),
            layout.forward_results(list(ftype.results),
                                   lambda t: is_float(t) or is_float_memref(t)))


def aug_inputs(ftype: ir.FunctionType, sig: Signature) -> list[ir.Type]:
    """Params of an augmented forward (and the leading params of its reverse)."""
    return abi(sig).inputs(list(ftype.inputs))


def dret_types(ftype: ir.FunctionType, sig: Signature) -> list[ir.Type]:
    """The adjoints of the results that a reverse function takes."""
    return abi(sig).dret(list(ftype.results), is_float)


def adjoint_types(ftype: ir.FunctionType, sig: Signature) -> list[ir.Type]:
    """Results of a reverse function: one adjoint per active argument."""
    return abi(sig).adjoints(list(ftype.inputs))
