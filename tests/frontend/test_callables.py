"""The registry of compile-time callables (adjit/compiler/callables.py): every callable that
compiled code may call has its entry there, by the object or by its type, and nothing is set
on the objects themselves."""
from __future__ import annotations

import numpy as np
import pytest

import adjit

pytest.importorskip("mlir")

# (the code generator's modules and the unit, which registers declarations, as compiling has
# them imported)
from adjit.compiler import callables, codegen, unit  # noqa: E402,F401
from adjit.compiler.callables import How  # noqa: E402


@adjit.func
def _twice(x):
    return 2.0 * x


@adjit.kernel
def _fill(x):
    x[adjit.index()] = 1.0


def test_every_kind_of_callable_has_an_entry():
    evaluated = [adjit.grad, adjit.value_and_grad, adjit.jacfwd, adjit.jacrev, adjit.hessian,
                 adjit.Active, adjit.Const, adjit.Duplicated, adjit.DuplicatedNoNeed,
                 adjit.BatchDuplicated]
    compiled = [adjit.autodiff, adjit.jvp, adjit.vjp, adjit.hvp, adjit.fixed_point,
                adjit.checkpointed, adjit.stop_gradient, adjit.rules.AugmentedReturn,
                _twice, _fill, adjit.grad(_twice), adjit.jacfwd(_twice)]
    builtins = [adjit.sin, adjit.sum, np.sum, np.concat, max, range]
    assert [o for o in evaluated if callables.lookup(o).how is not How.EVALUATED] == []
    assert [o for o in compiled if callables.lookup(o).how is not How.WRITES] == []
    assert [o for o in builtins if callables.lookup(o).how is not How.VALUES] == []
    # a declaration and a gradient are functions a derivative can differentiate
    assert callables.lookup(_twice).define is not None
    assert callables.lookup(adjit.grad(_twice)).define is not None
    assert callables.lookup(_fill).define is None


def test_nothing_is_set_on_the_objects():
    for obj in (adjit.autodiff, adjit.grad, adjit.fixed_point, adjit.checkpointed,
                adjit.stop_gradient, _twice, adjit.grad(_twice)):
        assert not [k for k in vars(obj) if k.startswith("_adjit")], obj
    assert not [k for k in vars(adjit.Active) if k.startswith("_adjit")]


def test_entries_are_by_identity_and_by_type():
    def plain(x):
        return x

    assert callables.lookup(plain) is None                   # not compiled: refused by name
    assert callables.lookup(adjit.jit(plain)) is not None    # a Function, by its type
    entry = callables.lookup(_twice)
    assert entry is not None and entry.how is How.WRITES
