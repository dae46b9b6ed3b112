"""Custom derivative rules (``adjit.rules``), in Enzyme's form.

A rule replaces the automatic derivative of an ``@adjit.func`` function wherever it is
called (in kernels, ``@adjit.jit`` functions, on CPU and GPU), in every mode, with any mix
of activities, including calls where every argument and the result are Const (the rule
still runs, so its side effects happen). Rules come per mode: :func:`forward`; and
:func:`augmented_primal` with its :func:`reverse` (reverse mode refuses one of the two
alone). A mode without its rules differentiates the function's body automatically, and
warns once.

A rule is Python code compiled like any ``@adjit.func``, once per activity configuration.
Its first argument is a :class:`Config`; each of the function's arguments reaches it as a
:class:`RuleArg` (``x.val``, ``x.dval``). ``config`` and the activities are compile-time
facts, so ``if config.needs_primal:`` and ``x.dval is None`` are decided while compiling.

The signatures, and what each rule returns (checked when it compiles; anything else is a
CompilationError at the rule's ``return`` line):

- ``forward(config, *args)`` returns ``(primal, tangent)``: the primal may be None where
  ``config.needs_primal`` is false, the tangent where the result is Const. With
  ``config.width`` N > 1 (BatchDuplicated), each ``x.dval`` is an N-tuple of tangents and
  the rule returns ``(primal, (t0, ..., tN-1))``. A function with no result: None.
- ``augmented_primal(config, *args)`` returns ``AugmentedReturn(primal, shadow, tape)``:
  the primal may be None where ``config.needs_primal`` is false (and is None for a function
  with no result); the shadow is None (functions return scalars, whose adjoint reaches the
  reverse rule as ``dret``); the tape is None, a scalar or array, or a tuple of them: what
  the reverse rule needs.
- ``reverse(config, dret, tape, *args)`` returns one entry per argument: the adjoint of
  each Active argument, None for each other one (Const, or an array, whose adjoint the rule
  adds into ``x.dval``). ``dret`` is the adjoint of the result (None when the result is
  Const or the function has none); ``tape`` is what the augmented rule returned.

``config.needs_primal`` is false exactly where no one reads the primal: forward mode where
the caller uses only the tangent, augmented where the call's result is unused.

Example:
    ::

        import adjit
        from adjit import rules, f64

        @adjit.func
        def softplus(x: f64) -> f64:
            return adjit.log(1.0 + adjit.exp(x))

        @rules.forward(softplus)
        def _(config, x):        # x.val, and x.dval (the tangent) when x is not Const
            s = 1.0 / (1.0 + adjit.exp(-x.val))
            return softplus(x.val), s * x.dval      # (primal, tangent)

        @rules.augmented_primal(softplus)
        def _(config, x):
            return rules.AugmentedReturn(softplus(x.val), None, x.val)   # tape: x

        @rules.reverse(softplus)
        def _(config, dret, tape, x):
            return (dret / (1.0 + adjit.exp(-tape)),)   # one entry per argument

        @adjit.jit
        def f(x: f64) -> f64:
            return 2.0 * softplus(x)

        print(adjit.grad(f)(0.0))                                          # 1.0
        print(adjit.autodiff(adjit.Forward, f, adjit.Duplicated(0.0, 1.0)))  # 1.0
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..core.activity import Activity
from .functions import Function
from .source import parse_source

__all__ = ["forward", "augmented_primal", "reverse", "Config", "AugmentedReturn", "RuleArg"]


@dataclass(frozen=True)
class Config:
    """What a rule is asked for (Enzyme's RevConfig/FwdConfig): every rule's first argument.

    Its fields, compile-time constants in the rule:

    - ``needs_primal``: whether the caller reads the primal result (else the rule may
      return None for it).
    - ``needs_shadow``: whether a shadow of the result is wanted.
    - ``overwritten``: one bool per argument, whether the caller overwrites it after the
      call (then an augmented rule must put what the reverse rule needs of it on the tape).
    - ``width``: forward rules' tangents per argument (BatchDuplicated's N; 1 otherwise).

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import rules, f64

            @adjit.func
            def cube(x: f64) -> f64:
                return x * x * x

            @rules.forward(cube)
            def _(config, x):
                if config.width == 1:
                    return cube(x.val), 3.0 * x.val * x.val * x.dval
                d0, d1 = x.dval          # BatchDuplicated with two tangents
                return cube(x.val), (3.0 * x.val * x.val * d0, 3.0 * x.val * x.val * d1)

            @adjit.jit
            def f(x: f64) -> f64:
                return cube(x)

            print(adjit.autodiff(adjit.Forward, f, adjit.Duplicated(2.0, 1.0)))   # 12.0
            print(adjit.autodiff(adjit.Forward, f, adjit.BatchDuplicated(2.0, (1.0, 2.0))))
    """
    needs_primal: bool
    needs_shadow: bool
    overwritten: tuple
    width: int = 1        # forward: tangents per argument (BatchDuplicated's N)


class AugmentedReturn:
    """What an augmented-primal rule returns: ``AugmentedReturn(primal, shadow, tape)``.

    Args:
        primal: the result (None where ``config.needs_primal`` is false, or the function
            has no result).
        shadow: None (results are scalars, whose adjoint reaches the reverse rule as
            ``dret``).
        tape: what the reverse rule receives as ``tape``: None, a scalar or an array, or a
            tuple of them.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import rules, f64

            @adjit.func
            def scaled_exp(a: f64, x: f64) -> f64:
                return a * adjit.exp(x)

            @rules.augmented_primal(scaled_exp)
            def _(config, a, x):
                e = adjit.exp(x.val)
                return rules.AugmentedReturn(a.val * e, None, (e, a.val))   # a tuple tape

            @rules.reverse(scaled_exp)
            def _(config, dret, tape, a, x):
                e, av = tape
                da = None if a.is_const else dret * e
                dx = None if x.is_const else dret * av * e
                return da, dx

            @adjit.jit
            def f(a: f64, x: f64) -> f64:
                return scaled_exp(a, x)

            da, dx = adjit.grad(f, argnums=(0, 1))(2.0, 0.0)
            print(da, dx)   # 1.0 2.0
    """

    def __init__(self, primal, shadow, tape):
        self.primal, self.shadow, self.tape = primal, shadow, tape


class RuleArg:
    """An argument as a rule sees it.

    - ``val``: its value.
    - ``dval``: its tangent (forward rules; an N-tuple with ``config.width`` N), or its
      shadow array (augmented and reverse rules), into which a reverse rule adds the array's
      adjoint; None where it has none (Const; an Active scalar, whose adjoint a reverse rule
      returns).
    - ``is_const``: whether it is Const.
    - ``activity``: ``"const"``, ``"active"``, ``"dup"`` or ``"dupnoneed"``.

    All but ``val`` are known at compile time, so branches on them cost nothing.

    Example:
        An array argument: its reverse rule adds into ``x.dval``::

            import numpy as np
            import adjit
            from adjit import rules, Array, f64

            @adjit.func
            def total(x: Array[f64, 1]) -> f64:
                s = 0.0
                for i in range(x.shape[0]):
                    s += x[i]
                return s

            @rules.augmented_primal(total)
            def _(config, x):
                return rules.AugmentedReturn(total(x.val), None, None)

            @rules.reverse(total)
            def _(config, dret, tape, x):
                if x.dval is not None:
                    for i in range(x.val.shape[0]):
                        x.dval[i] += dret
                return (None,)

            @adjit.jit
            def f(x: Array[f64, 1]) -> f64:
                return 3.0 * total(x)

            print(adjit.grad(f)(np.ones(3)))   # [3. 3. 3.]
    """

    def __init__(self, val, dval, activity: str = "const"):
        self.val = val
        self.dval = dval
        self.activity = activity
        self.is_const = activity == Activity.CONST


def _register(kind: str, name: str, doc: str):
    def decorator_for(fn: Function):
        if not isinstance(fn, Function):
            raise TypeError(f"adjit.rules.{name} takes an @adjit.func function, got {fn!r}")

        def decorator(rule: Callable) -> Callable:
            fn.rules[kind] = (rule, parse_source(rule))
            return rule
        return decorator
    decorator_for.__name__ = decorator_for.__qualname__ = name
    decorator_for.__doc__ = doc
    return decorator_for


_RAISES = """
    Raises:
        TypeError: ``fn`` is not an ``@adjit.func`` function ("adjit.rules.{name} takes an
            @adjit.func function, got ...").
        CompilationError: when a derivative compiles the rule: a rule returning the wrong
            number or kind of values, at its ``return`` line.

    Example:
        The module's example (above) defines all three rules of one function.
        A forward rule alone::

            import adjit
            from adjit import rules, f64

            @adjit.func
            def clipped(x: f64) -> f64:
                return adjit.clip(x, -1.0, 1.0)

            @rules.forward(clipped)
            def _(config, x):             # a straight-through derivative: tangent 1
                return clipped(x.val), x.dval

            @adjit.jit
            def f(x: f64) -> f64:
                return clipped(x)

            print(adjit.autodiff(adjit.Forward, f, adjit.Duplicated(5.0, 1.0)))   # 1.0
"""
forward = _register("forward", "forward", """``@adjit.rules.forward(fn)``: decorates the
    forward-mode rule of the ``@adjit.func`` function ``fn``.

    The rule is ``rule(config, *args) -> (primal, tangent)``: ``config`` a :class:`Config`,
    each argument a :class:`RuleArg` whose ``dval`` is its tangent (None where Const; an
    N-tuple with ``config.width`` N). It returns the primal (or None where
    ``config.needs_primal`` is false) and the tangent of the result (an N-tuple with width
    N).

    Args:
        fn: the ``@adjit.func`` function.

    Returns:
        A decorator taking the rule (which it returns unchanged).
""" + _RAISES.replace("{name}", "forward"))
augmented_primal = _register("augmented", "augmented_primal", """
    ``@adjit.rules.augmented_primal(fn)``: decorates the augmented-primal rule of the
    ``@adjit.func`` function ``fn``, the forward half of its reverse mode.

    The rule is ``rule(config, *args) -> AugmentedReturn(primal, shadow, tape)``: it computes
    the primal (None where ``config.needs_primal`` is false) and records on the tape what
    the :func:`reverse` rule needs. It comes with a reverse rule.

    Args:
        fn: the ``@adjit.func`` function.

    Returns:
        A decorator taking the rule (which it returns unchanged).
""" + _RAISES.replace("{name}", "augmented_primal"))
reverse = _register("reverse", "reverse", """``@adjit.rules.reverse(fn)``: decorates the
    reverse rule of the ``@adjit.func`` function ``fn``.

    The rule is ``rule(config, dret, tape, *args) -> tuple``: ``dret`` the adjoint of the
    result (None where the result is Const), ``tape`` what the :func:`augmented_primal` rule
    returned as its tape, then the arguments as :class:`RuleArg`. It returns one entry per
    argument: the adjoint of each Active scalar, None for the others (an array's adjoint is
    added into its ``x.dval`` by the rule). It comes with an augmented_primal rule.

    Args:
        fn: the ``@adjit.func`` function.

    Returns:
        A decorator taking the rule (which it returns unchanged).
""" + _RAISES.replace("{name}", "reverse"))
