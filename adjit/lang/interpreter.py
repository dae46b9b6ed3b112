"""The interpreter mode: ``@adjit.kernel``, ``@adjit.func`` and ``@adjit.jit`` run as plain
Python over NumPy (``with adjit.interpret():``, or ``ADJIT_INTERPRET=1`` in the
environment), so that ``breakpoint()``, ``pdb`` and ``print`` work in them and an exception
carries the Python traceback of the user's line.

What it takes, all here: the switch (`interpreting`, asked at each call on the
declarations' Python path, never on the native dispatcher's: while the mode is on, the
declarations send every call to that path, `on_toggle`, as a profile does), the work item a
kernel launch runs (`launch`: one item after another, in row-major order of the ndrange),
and the kernel builtins' meanings over it (`index`, `index_nd`, `ndrange`, `atomic_add`,
`atomic_sub`, `synchronize`, which lang/builtins.py names). The values that behave as
compiled code's (vectors: `*` is Warp's `mul`, `v.x`) are lang/vector_values.py's; how a
declaration's call is interpreted (its arguments converted as a compiled call converts
them) is lang/functions.py's. Derivatives are not interpreted: api/service.py refuses them
(`refuse_derivative`).
"""
from __future__ import annotations

import contextlib
from typing import Callable

import numpy as np

from ..runtime.native_dispatch import interpret_enabled

# How many `with adjit.interpret():` blocks are open (process-wide: a block on one thread
# interprets every thread's calls, as ADJIT_INTERPRET does).
_depth = 0
# Whether the declarations' calls are routed to their Python path now (block open, or
# ADJIT_INTERPRET found on at the last look), and who routes them (lang/functions.py)
_routed = False
_toggles: list[Callable[[bool], None]] = []


def on_toggle(callback: Callable[[bool], None]) -> None:
    """Registers `callback(on)`, called when the mode turns on (True) and off (False): how
    the declarations send every call to their Python path while it is on, which asks
    `interpreting()`, and to the native dispatcher otherwise (lang/functions.py)."""
    _toggles.append(callback)


def _route(on: bool) -> None:
    global _routed
    if on != _routed:
        _routed = on
        for toggle in _toggles:
            toggle(on)


def routed() -> bool:
    """Whether the mode is on, as the last toggle said (lang/functions.py routes by it)."""
    return _routed


def interpreting() -> bool:
    """Whether calls are interpreted now: inside ``with adjit.interpret():``, or with
    ADJIT_INTERPRET=1 (read here, at each call that reaches the declarations' Python path,
    through core/environment.py's checked reader; the first that finds it on sends every
    call there, until one finds it off)."""
    if _depth:
        return True
    on = interpret_enabled()
    _route(on)
    return on


class interpret(contextlib.ContextDecorator):
    """Runs ``@adjit.kernel``, ``@adjit.func`` and ``@adjit.jit`` code as plain Python over
    NumPy while the block (or the decorated function) runs: a kernel launch runs its work
    items one after another, each seeing its own ``adjit.index()``, so ``print``,
    ``breakpoint()`` and ``pdb`` work inside and an exception carries a Python traceback of
    the line that raised it. ``ADJIT_INTERPRET=1`` in the environment does the same for a
    whole program.

    Results equal the compiled ones, dtypes included (NumPy's rules: a Python float is
    weak, so ``0.5 * x[i]`` of a float32 array stays float32). Where plain Python differs
    it says so: an index outside an array is an IndexError at the line; an integer
    division by zero gives NumPy's warning, not compiled code's ZeroDivisionError; a
    negative index counts from the end everywhere (compiled kernels read one known only at
    run time as out of bounds); ``adjit.synchronize()`` cannot run item by item and is
    refused. Derivatives (``adjit.grad``, ``autodiff``, ``jvp``, ...) are not interpreted:
    inside the block they raise RuntimeError; call them outside it. Code compiled before the
    block keeps its compiled specialisations, which calls after the block run again.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import Array, f64

            @adjit.kernel
            def scale(x: Array[f64, 1], a: f64):
                i = adjit.index()
                x[i] = a * x[i]
                if i == 0:
                    print("item", i, "wrote", x[i])    # plain Python: print works

            x = np.arange(3.0)
            with adjit.interpret():
                scale(x, 2.0, ndrange=3)                # prints: item 0 wrote 0.0
            print(x)                                    # [0. 2. 4.]

            @adjit.interpret()                          # also a decorator
            def halve(x):
                scale(x, 0.5, ndrange=len(x))

            halve(x)
            assert np.array_equal(x, [0.0, 1.0, 2.0])
    """

    def __enter__(self):
        global _depth
        _depth += 1
        _route(True)
        return self

    def __exit__(self, *exc) -> bool:
        global _depth
        _depth -= 1
        if _depth == 0:
            _route(interpret_enabled())
        return False


# ---- kernel launches, item by item -------------------------------------------------------
# The work items being run, innermost last: (flat index, indices, ndrange). (A kernel launched
# from @jit code interpreted inside another kernel's item would be a new launch: a stack.)
_items: list[tuple[int, tuple[int, ...], tuple[int, ...]]] = []


def launch(name: str, pyfn, values: tuple, ndrange: tuple[int, ...]) -> None:
    """Runs kernel `name`'s Python function `pyfn` on `values` once per point of
    `ndrange`, in row-major order, each run seeing its work item; an exception gets a note
    naming the kernel and the item."""
    flat = 0
    for index in np.ndindex(*ndrange):
        _items.append((flat, tuple(int(i) for i in index), ndrange))
        try:
            result = pyfn(*values)
        except Exception as e:
            if not getattr(e, "_adjit_item_noted", False):
                e.add_note(f"(in work item {flat} {tuple(index)} of kernel {name}, "
                           "interpreted)")
                e._adjit_item_noted = True
            raise
        finally:
            _items.pop()
        if result is not None:
            raise TypeError(f"kernel {name} returned {type(result).__name__}: a kernel "
                            "writes its results into array arguments and returns nothing")
        flat += 1


def returned(value):
    """An interpreted function's result as a compiled one returns it: a bool as NumPy's
    (compiled code's bools are typed; Python's comparisons of Python numbers give Python's),
    through tuples, lists and dicts."""
    if isinstance(value, bool):
        return np.bool_(value)
    if isinstance(value, (tuple, list)) and type(value) in (tuple, list):
        return type(value)(returned(v) for v in value)
    if type(value) is dict:
        return {k: returned(v) for k, v in value.items()}
    return value


def _outside(name: str) -> RuntimeError:
    return RuntimeError(f"adjit.{name}() can only be called inside @adjit.kernel, "
                        "@adjit.func or @adjit.jit code")


def _item(name: str) -> tuple:
    if not _items:
        if interpreting():
            raise RuntimeError(f"adjit.{name}() outside a kernel launch: the work item's "
                               "indices exist in @adjit.kernel code (and @adjit.func code it "
                               "calls)")
        raise _outside(name)
    return _items[-1]


def index() -> int:
    return _item("index")[0]


def index_nd() -> tuple[int, ...]:
    return _item("index_nd")[1]


def ndrange() -> tuple[int, ...]:
    return _item("ndrange")[2]


def _atomic(name: str, sign: int, arr, args: tuple):
    if not interpreting():
        raise _outside(name)
    if len(args) < 2:
        raise TypeError(f"adjit.{name}(arr, i, v) takes the array, one index per dimension "
                        "(or a tuple of them) and the value")
    *sub, v = args
    sub = tuple(sub[0]) if len(sub) == 1 and isinstance(sub[0], tuple) else tuple(sub)
    old = arr[sub]
    if isinstance(old, np.ndarray):     # (an element of an array of vectors: a view)
        old = old.copy()
    # The value in the element's type first, then added in it, as compiled code's atomic
    # read-modify-write does
    value = np.asarray(v, dtype=arr.dtype)
    arr[sub] = old + value if sign > 0 else old - value
    return old


def atomic_add(arr, *args):
    return _atomic("atomic_add", 1, arr, args)


def atomic_sub(arr, *args):
    return _atomic("atomic_sub", -1, arr, args)


def synchronize() -> None:
    if not interpreting():
        raise _outside("synchronize")
    raise RuntimeError("adjit.synchronize() cannot be interpreted: the interpreter mode runs a "
                    "kernel's work items one after another, so no item waits for the others "
                    "at a barrier; run this kernel compiled")


# The kernel builtins' meanings, which lang/builtins.py gives its `index`... objects
WORK_ITEM_BUILTINS = {"index": index, "index_nd": index_nd, "ndrange": ndrange,
                      "atomic_add": atomic_add, "atomic_sub": atomic_sub,
                      "synchronize": synchronize}


def refuse_derivative(what: str) -> None:
    """Raises where a derivative is asked for while interpreting (api/service.py asks)."""
    if interpreting():
        raise RuntimeError(f"{what} is not interpreted: derivatives run compiled only. Take "
                           "it outside `with adjit.interpret():` (or without "
                           "ADJIT_INTERPRET=1); the interpreter mode runs the primal code")
