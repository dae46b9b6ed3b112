"""The Python side of the native dispatcher (runtime/native/dispatch.cpp): a `Dispatcher`
per decorated function, and the spec of a compiled specialisation it takes calls for.

The Python path is the reference: the native path only ever takes calls that path would run
the same way, and returns MISS for any other."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..core.environment import read
from ..core.types import SCALARS, ArrayType, ScalarType

from .extension import _native as _dispatch

MISS = object()     # what a Dispatcher returns for a call the Python path must take
# The dispatcher's kind of each scalar type (dispatch.cpp names them as the types: F32...BOOL).
_KIND = {t.name: getattr(_dispatch, t.name.upper()) for t in SCALARS}

kernel_call, function_call = _dispatch.kernel_call, _dispatch.function_call


def _debug_enabled_python() -> bool:
    return read("ADJIT_DEBUG")


# Whether ADJIT_DEBUG is set to other than "" or "0", read natively from the C environment,
# which os.environ's changes write through (putenv), as the dispatcher reads it (~0.05 us;
# os.environ.get ~0.6 us a call); an extension built before has no such function.
_debug_set = getattr(_dispatch, "debug_enabled", _debug_enabled_python)


def debug_enabled() -> bool:
    """Whether ADJIT_DEBUG is on, read at every call of the Python path so that a change at
    run time holds from the next call. Unset (the usual case) costs the native read alone;
    a value that is set is read and checked (core/environment.py: "maybe" is refused by name
    here, before anything is compiled or keyed with it). The native fast path never comes
    here: it compares the text with the one its specialisation was compiled under, and a
    different text is a miss, which comes here."""
    return _debug_set() and read("ADJIT_DEBUG")


def _interpret_enabled_python() -> bool:
    return read("ADJIT_INTERPRET")


# Whether ADJIT_INTERPRET is set to other than "" or "0", read natively as _debug_set is.
_interpret_set = getattr(_dispatch, "interpret_enabled", _interpret_enabled_python)


def interpret_enabled() -> bool:
    """Whether ADJIT_INTERPRET is on (lang/interpreter.py's switch), read at every call of
    the Python path as debug_enabled reads ADJIT_DEBUG: unset costs the native read alone; a
    value that is set is read and checked (core/environment.py)."""
    return _interpret_set() and read("ADJIT_INTERPRET")


def _result_kind(t: ScalarType) -> int | None:
    """How the dispatcher returns a scalar result of type `t`: a NumPy scalar of its dtype,
    or for a weak one (a Python float or int in compiled code: core/types.py) a Python float
    or int, as abi.py's _python_scalar does (None: an extension built before it could)."""
    if t.weak:
        return getattr(_dispatch, "PY_FLOAT" if t.is_float else "PY_INT", None)
    return _KIND[t.name]


def dispatcher():
    """A new Dispatcher."""
    return _dispatch.Dispatcher(MISS)


def add(d, values: Sequence, extents: int, arg_types: Sequence, result_types: Sequence,
        tuple_result: bool, written, packed: int, has_cell: bool,
        after_call: Callable[[int], None], keep: object) -> bool:
    """Registers with Dispatcher `d` the specialisation a call with argument `values` took
    (`arg_types` its entry's parameters: the values' types, then `extents` i64 extents of a
    kernel's ndrange; `result_types` its results, a tuple if `tuple_result`); False where the
    native path cannot take such calls (a strided array parameter, a type it has no kind
    for, no packed entry), which then stay on the Python path."""
    if d is None or not packed:
        return False
    params = []
    for i, t in enumerate(arg_types):
        if isinstance(t, ArrayType):
            if t.strided:        # (the native path takes C-contiguous arrays only)
                return False
            params.append((_dispatch.ARRAY, np.ndarray, t.dtype.np_dtype.num, t.ndim,
                           i in written, sum(1 << d for d in t.units)))
        elif t.name in _KIND:
            pytype = type(values[i]) if i < len(values) else int
            params.append((_KIND[t.name], pytype, 0, 0, False, 0))
        else:
            return False
    results = []
    for t in result_types:
        if isinstance(t, ArrayType):
            # (results are fresh C-contiguous arrays: abi.py's _result_reader makes the
            # same assumption)
            if t.strided or t.dtype.name not in _KIND:
                return False
            results.append((_dispatch.ARRAY, t.dtype.np_dtype.num, t.ndim))
        elif isinstance(t, ScalarType) and (t.weak or t.name in _KIND) and (
                _result_kind(t) is not None):
            results.append((_result_kind(t), 0, 0))
        else:
            return False
    if not getattr(_dispatch, "ARRAY_RESULTS", False):
        return False    # an extension built before dispatch.cpp took results this way
    if tuple_result and not results:
        return False
    d.add(params, len(values), extents, packed, results, bool(tuple_result), has_cell,
          after_call, keep)
    return True
