"""Activities: what autodiff does with each argument and result (Enzyme's Const, Active,
Duplicated, DuplicatedNoNeed), one copy for the frontend, the pass and its IR attributes.

A `str` enum: its members are the strings the `adj.autodiff` op carries (`activity =
["const", "dup"]`), so values read back from IR compare equal to them."""
from __future__ import annotations

import enum


class Activity(str, enum.Enum):
    CONST = "const"            # no derivative
    ACTIVE = "active"          # a scalar whose adjoint reverse mode returns
    DUP = "dup"                # an array (or forward-mode value) with its shadow or tangent
    DUPNONEED = "dupnoneed"    # the same, the primal result not needed

    def __str__(self) -> str:
        return self.value

    @property
    def letter(self) -> str:
        """One letter per activity, in the names of generated functions."""
        return _LETTERS[self]


_LETTERS = {Activity.CONST: "c", Activity.ACTIVE: "a", Activity.DUP: "d",
            Activity.DUPNONEED: "n"}

# The activities that carry a shadow (or tangent) beside the primal.
SHADOWED = (Activity.DUP, Activity.DUPNONEED)
