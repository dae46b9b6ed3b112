"""A refusal names the user's struct, never the compiler's class for its value."""
from __future__ import annotations

import pytest

import adjit


@adjit.struct
class Particle:
    x: adjit.f64
    v: adjit.f64


@adjit.jit
def adds_to_the_struct(p: Particle):
    return p + 1.0


def test_arithmetic_on_a_struct_is_refused_by_its_name():
    with pytest.raises(adjit.CompilationError) as e:
        adds_to_the_struct(Particle(x=1.0, v=2.0))
    message = str(e.value)
    assert "Particle struct" in message and "return p + 1.0" in message
    assert "StructValue" not in message
