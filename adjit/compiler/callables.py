"""The one registry of compile-time callables: what a call of a Python object compiles to,
which the code generator asks for every callee it meets (CodeGenerator.visit_Call).

Every kind registers here, by the object itself or, for instances (an @adjit.func, a
kernel, `adjit.grad(f)`), by their type: the builtins, the `math` module's and NumPy's
functions (builtin_calls.py, numpy_calls.py, vectors.py for arrays of vectors),
declarations (unit.py: calls and launches), the language's callables (lang_calls.py:
`checkpointed`, `stop_gradient`, `AugmentedReturn`, activity annotations;
fixed_point_calls.py), matrix products' primitives (matmul.py), the derivative entry points
(api/autodiff.py registers its own objects: `autodiff`, `jvp`, `grad`, ...;
derivative_calls.py a vjp's pullbacks) and MPI's operations (adjit/mpi/). Nothing is set on
the objects themselves: they are the user's (or the language's, which knows no compiler).
Two kinds of callee stay with the code generator, being no object anyone registers: any
type value called as a constructor (a VecType or ScalarType: `adjit.vec3(...)`,
`adjit.f32(x)`) and an array value's bound methods (`x.sum()`).

This module imports nothing of MLIR or of the code generator, so that registering costs
nothing where it happens (`import adjit` registers the API's objects); the handlers are
called only while compiling. An entry says how its call compiles (`How`):
- VALUES: the handler gets the code's values as they are (a builtin: lazy expressions
  included, which it reads without writing);
- WRITES: the callee may write any array it is given (or an alias of one), so lazy names
  are computed first and one passed is its array (declarations, derivatives, ...);
- EVALUATED: called while compiling, on Python objects, its result a compile-time object
  (`adjit.grad(f)`, `adjit.Active(x)`: the code's values are held as they are).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable

# (gen, args, kwargs) -> the call's value; by type: (gen, callee, args, kwargs) -> ...
Handler = Callable[..., Any]
# (unit, callee, argument types) -> (symbol, result types, whether a tuple): the callee as a
# function of the unit, which a derivative can differentiate (derivative_calls._define)
Definer = Callable[..., tuple]


class How(enum.Enum):
    VALUES = "values"
    WRITES = "writes"
    EVALUATED = "evaluated"


@dataclass(frozen=True)
class Entry:
    """How a call of one callee compiles: `handler(gen, args, kwargs)` (None for EVALUATED),
    and `define(unit, types)` where the callee is a function a derivative differentiates."""
    how: How
    handler: Handler | None = None
    define: Callable[..., tuple] | None = None


# id -> (the object, its entry): by identity, as the code generator meets the very object
# (keeping it alive keeps its id from being reused; NumPy's ufuncs compare by identity too)
_BY_OBJECT: dict[int, tuple[object, Entry]] = {}
_BY_TYPE: dict[type, tuple[How, Handler, Definer | None]] = {}
# (id of the owner, name) -> (the owner, its entry): a method of an object, `np.add.at`,
# which is a new bound-method object at every attribute access
_BY_METHOD: dict[tuple[int, str], tuple[object, Entry]] = {}


def register(obj, handler: Handler, how: How = How.WRITES):
    """A call of `obj` compiles to `handler(gen, args, kwargs)`. Returns `obj`."""
    _BY_OBJECT[id(obj)] = (obj, Entry(how, handler))
    return obj


def register_method(owner, name: str, handler: Handler, how: How = How.WRITES) -> None:
    """A call of the method `owner.<name>` (np.add.at) compiles to `handler(gen, args,
    kwargs)`."""
    _BY_METHOD[id(owner), name] = (owner, Entry(how, handler))


def register_evaluated(obj):
    """`obj` is called while compiling, on Python objects (How.EVALUATED). Returns `obj`."""
    _BY_OBJECT[id(obj)] = (obj, Entry(How.EVALUATED))
    return obj


def register_type(cls: type, handler: Handler, how: How = How.WRITES,
                  define: Definer | None = None) -> None:
    """A call of an instance `c` of `cls` (or of a subclass) compiles to `handler(gen, c,
    args, kwargs)`; `define(unit, c, types)` makes it a function of the unit."""
    _BY_TYPE[cls] = (how, handler, define)


def lookup(obj) -> Entry | None:
    """The entry of `obj` (by identity, else by its type); None: adjit cannot compile a
    call of it."""
    found = _BY_OBJECT.get(id(obj))
    if found is not None and found[0] is obj:
        return found[1]
    owner = getattr(obj, "__self__", None)
    if owner is not None:
        found = _BY_METHOD.get((id(owner), getattr(obj, "__name__", "")))
        if found is not None and found[0] is owner:
            return found[1]
    for cls in type(obj).__mro__:
        by_type = _BY_TYPE.get(cls)
        if by_type is not None:
            how, handler, define = by_type
            return Entry(how, lambda gen, args, kwargs: handler(gen, obj, args, kwargs),
                         None if define is None else
                         lambda unit, types: define(unit, obj, types))
    return None


def call(gen, obj, args: list, kwargs: dict):
    """A call of `obj` compiled in the code `gen` generates, from a handler that calls
    another callable (stop_gradient's identity function, matmul_into, MPI's operations);
    the arguments are the code's values, lazy names already computed."""
    entry = lookup(obj)
    if entry is None or entry.handler is None:
        raise RuntimeError(f"{obj!r} has no compile handler")   # (a bug in adjit)
    return entry.handler(gen, args, kwargs)


class Primitive:
    """A function that exists only in compiled code: the bodies and rules adjit writes (of
    matmul, of np.linalg) call it, and the registry holds what its call compiles to."""

    def __init__(self, kind: str, name: str, compile_call: Handler):
        self.kind = kind
        self.__name__ = name
        register(self, compile_call)

    def __call__(self, *args):
        raise RuntimeError(f"adjit's {self.kind} primitive {self.__name__} runs in compiled "
                           "code only")
