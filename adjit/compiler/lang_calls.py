"""What calls of the language's own callables compile to (lang/ declares them, MLIR-free and
knowing no compiler; this module registers them with the registry of compile-time callables,
callables.py): `adjit.checkpointed(...)` (a compile-time schedule that control_flow.py puts
on the loop), `adjit.stop_gradient(x)` (a call of lang/stop_gradient.py's identity function
with zero-derivative rules), a rule's `AugmentedReturn(primal, shadow, tape)`, and the
activity annotations (`adjit.Active(x)`...), evaluated while compiling. `fixed_point` is
fixed_point_calls.py's.
"""
from __future__ import annotations

from ..core.errors import UserError
from ..lang.checkpointing import (SCHEDULES, Checkpointed, checked_schedule, checked_spill,
                                  checkpointed)
from ..lang.modes import (Active, Annotation, BatchDuplicated, Const, Duplicated,
                          DuplicatedNoNeed)
from ..lang.rules import AugmentedReturn
from ..lang.stop_gradient import no_derivative, stop_gradient
from . import callables
from . import scalar_ops as S
from .builtin_calls import lift
from .values import Literal, PyObj, RangeValue, Scalar


def _checkpointed(gen, args: list, kwargs: dict) -> Checkpointed:
    if len(args) != 1 or not isinstance(args[0], (RangeValue, Scalar, Literal)):
        raise UserError("adjit.checkpointed takes a range(...), or a while loop's condition "
                        "(and snapshots=, every= or max_bytes=, and spill=)")
    unknown = set(kwargs) - set(SCHEDULES) - {"spill"}
    if unknown:
        raise UserError(f"adjit.checkpointed has no argument {sorted(unknown)[0]!r}")
    values = {}
    for k, v in kwargs.items():
        if isinstance(v, PyObj) and v.obj is None:   # (None: not given, as from Python)
            continue
        if not isinstance(v, Literal):
            raise UserError(f"adjit.checkpointed: {k}= must be a constant (known while "
                            "compiling)")
        values[k] = v.value
    name, value = checked_schedule(**{k: values.get(k) for k in SCHEDULES})
    return Checkpointed(args[0], name, value, checked_spill(values.get("spill", False)))


def _stop_gradient(gen, args: list, kwargs: dict):
    if kwargs or len(args) != 1:
        raise UserError("stop_gradient(x) takes one argument")
    identity = no_derivative()
    return lift(lambda a: callables.call(gen, identity, [S.as_scalar(a)], {}), list(args))


def _augmented_return(gen, args: list, kwargs: dict) -> AugmentedReturn:
    if kwargs or len(args) != 3:
        raise UserError("AugmentedReturn(primal, shadow, tape) takes three arguments")
    return AugmentedReturn(*args)


callables.register(checkpointed, _checkpointed)
callables.register(stop_gradient, _stop_gradient)
callables.register(AugmentedReturn, _augmented_return)
# Made while compiling too (`adjit.Active(x)` inside an @adjit.jit function), holding the
# code's values.
for _annotation in (Annotation, Const, Active, Duplicated, DuplicatedNoNeed, BatchDuplicated):
    callables.register_evaluated(_annotation)
