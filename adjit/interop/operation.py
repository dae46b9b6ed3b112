"""An `@adjit.jit` function or a kernel launch as a pure function of arrays, with its reverse
and forward derivatives: what a PyTorch or JAX operation needs of adjit (torch.py, jax.py).

Frameworks' operations are functional (inputs are never changed, results are new arrays),
adjit's kernels write into their arguments. So a kernel is given with `outputs`, the
parameters it writes: the framework layer passes each of them as a fresh copy of the
caller's array (the kernel may read it, as `y[i] += ...` does), and that copy is the
operation's result. A function must write none of its arguments; a kernel none but its
outputs (both checked on the first call of each argument signature, from what the compiled
code writes).

Everything here speaks NumPy arrays (and DeviceArrays on the GPU) and scalars, as adjit
takes them; the framework layer makes the buffers (`zeros`, `copy`), so that they are its
own tensors, and maps the results back.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..core.types import ArrayType
from ..api.autodiff import inner_product_grads, autodiff
from ..lang.functions import Function, Kernel, routes, specialise
from ..lang.modes import Active, Const, Duplicated, Forward, Reverse

Buffer = Callable[[int], Any]     # argument position -> a new array (zeros, or a copy)


def _is_array(v: Any) -> bool:
    return isinstance(v, np.ndarray) or getattr(type(v), "is_adjit_device_array", False)


def _is_float(v: Any) -> bool:
    return np.issubdtype(np.asarray(v).dtype if not _is_array(v) else v.dtype, np.floating)


class Operation:
    """`f` (an @adjit.jit or @adjit.func function, or an @adjit.kernel whose written
    parameters are `outputs`, names or positions) as a pure function; `who` names the API
    in messages."""

    def __init__(self, f: Any, outputs: Sequence[str | int] | str | int | None, who: str):
        self.f, self.who = f, who
        self.name = getattr(f, "__name__", repr(f))
        self.params = list(getattr(f, "params", ()))
        if isinstance(f, Kernel):
            if outputs is None or (not isinstance(outputs, (str, int)) and not outputs):
                raise TypeError(f"{who}: kernel {self.name} writes its results into arguments:"
                                " name them, outputs=('y',) (each is passed as a copy of the "
                                "caller's array and returned)")
            items = [outputs] if isinstance(outputs, (str, int)) else list(outputs)
            self.outputs = tuple(self._position(o) for o in items)
            if len(set(self.outputs)) != len(self.outputs):
                raise ValueError(f"{who}: outputs= names a parameter twice: {outputs!r}")
        elif isinstance(f, Function):
            if outputs is not None:
                raise TypeError(f"{who}: outputs= is for kernels; {self.name} returns its "
                                "results")
            self.outputs = ()
        else:
            raise TypeError(f"{who} takes an @adjit.jit function or an @adjit.kernel, got {f!r}")
        self.is_kernel = isinstance(f, Kernel)
        # A 0-d array is a scalar unless the parameter is annotated as an array.
        self.array_params = {i for i, a in enumerate(f.annotations) if isinstance(a, ArrayType)}
        self._checked: set = set()

    def _position(self, o: str | int) -> int:
        if isinstance(o, str):
            if o not in self.params:
                raise ValueError(f"{self.who}: outputs= names {o!r}, which is not a parameter "
                                 f"of kernel {self.name} ({', '.join(self.params)})")
            return self.params.index(o)
        if isinstance(o, bool) or not isinstance(o, int) or not -len(self.params) <= o < len(
                self.params):
            raise ValueError(f"{self.who}: outputs= entry {o!r} is not a parameter of kernel "
                             f"{self.name} (a name or a position below {len(self.params)})")
        return o % len(self.params)

    # ---- the primal --------------------------------------------------------------------
    def check_writes(self, values: Sequence, ndim: int | None) -> None:
        """Refuses a function that writes an argument, a kernel that writes one not among its
        outputs (a framework would not see the change), from the compiled specialisation's
        written parameters: compiled on the first call of each signature (the call compiles
        it anyway), a set look-up after."""
        key = (tuple((v.dtype, v.ndim) if type(v) is np.ndarray or _is_array(v) else type(v)
                     for v in values), ndim)
        if key in self._checked:
            return
        types, _ = specialise(self.name, self.params, self.f.annotations, values)
        _, compiled = routes().specialisation(self.f, types, ndim, None)
        for i in compiled.meta["written"]:
            if i in self.outputs:
                continue
            p = self.params[i]
            if self.is_kernel:
                raise ValueError(f"{self.who}: kernel {self.name} writes its argument {p!r}, "
                                 f"which outputs= does not name: name it (it is then a "
                                 "result), or write into an output instead")
            raise ValueError(f"{self.who}: {self.name} writes its argument {p!r}: a function "
                             "given to a framework must not change its inputs (the framework "
                             f"would not see it); copy it first ({p} = {p}.copy())")
        self._checked.add(key)

    def call(self, values: Sequence, ndrange: tuple | None, device: str) -> Any:
        """The primal: `f(*values)` (its result), or the launch over `ndrange`, whose outputs
        `values` holds as fresh copies (None)."""
        if device == "cpu":
            self.check_writes(values, len(ndrange) if self.is_kernel else None)
        if self.is_kernel:
            self.f(*values, ndrange=ndrange, device=device)
            return None
        return self.f(*values) if device == "cpu" else self.f(*values, device=device)

    # ---- reverse mode ------------------------------------------------------------------
    def reverse(self, values: Sequence, wanted: Sequence[bool], cotangents: Sequence,
                ndrange: tuple | None, device: str, zeros: Buffer, copy: Buffer) -> list:
        """The cotangent of each argument (None where not `wanted`, or not differentiable).

        Kernel: `cotangents` holds, per output, a writable array (the result's cotangent),
        which becomes the cotangent of the array the caller passed for that output (the
        adjoint of its contents before the launch). Function: `cotangents` is the result's
        one cotangent; for a scalar result the derivatives are of the result itself (unit
        seed): the caller scales them by its cotangent, with its own arithmetic."""
        anns, shadows = [], {}
        for i, v in enumerate(values):
            if i in self.outputs:
                out = self.outputs.index(i)
                if _is_float(v):
                    shadows[i] = cotangents[out]
                    anns.append(Duplicated(copy(i), shadows[i]))
                else:
                    anns.append(Const(copy(i)))
            elif not wanted[i] or not _is_float(v):
                anns.append(Const(v))
            elif _is_array(v):
                shadows[i] = zeros(i)
                anns.append(Duplicated(v, shadows[i]))
            else:
                anns.append(Active(v))
        if self.is_kernel:
            grads = autodiff(Reverse, self.f, *anns, ndrange=ndrange, device=device)
        elif _is_array(cotangents[0]):
            if device != "cpu":
                raise NotImplementedError(
                    f"{self.who}: the reverse derivative of {self.name}, whose result is an "
                    "array, runs on the CPU only (a scalar result, or a kernel, runs on the GPU)")
            grads = inner_product_grads(self.f, anns, np.ascontiguousarray(cotangents[0]))
        else:
            grads = autodiff(Reverse, self.f, *anns, device=device)
        return [None if not wanted[i] else shadows[i] if i in shadows else grads[i]
                for i in range(len(values))]

    # ---- forward mode ------------------------------------------------------------------
    def tangent(self, values: Sequence, tangents: Sequence, ndrange: tuple | None,
                device: str, copy: Buffer, output_tangent: Buffer) -> Any:
        """The result's tangent along `tangents` (one per argument, None for none; a
        writable array for a kernel's output, from `output_tangent`): a function's result
        tangent, or a kernel's output tangents (a list, one per output)."""
        anns, outs = [], []
        for i, (v, t) in enumerate(zip(values, tangents)):
            if i in self.outputs:
                if _is_float(v):
                    outs.append(output_tangent(i))
                    anns.append(Duplicated(copy(i), outs[-1]))
                else:
                    outs.append(None)
                    anns.append(Const(copy(i)))
            elif t is None or not _is_float(v):
                anns.append(Const(v))
            else:
                anns.append(Duplicated(v, t))
        if self.is_kernel:
            autodiff(Forward, self.f, *anns, ndrange=ndrange, device=device)
            return outs
        if all(isinstance(a, Const) for a in anns):
            return None
        return autodiff(Forward, self.f, *anns, device=device)


def scalar_or_array(value: Any, position: int, op: Operation) -> Any:
    """A 0-d array of a framework as adjit takes it: a NumPy scalar of its dtype, unless the
    parameter is annotated as an array."""
    if position not in op.array_params and getattr(value, "ndim", None) == 0:
        return value[()] if isinstance(value, np.ndarray) else value
    return value


def float_result(value: Any, who: str, name: str) -> None:
    """Refuses (before a reverse pass) a result that has no cotangent adjit can take."""
    if isinstance(value, tuple):
        raise TypeError(f"{who}: {name} returns a tuple; adjit's derivatives are of functions "
                        "with one result (a float scalar or array): return one, or wrap each")
    dtype = value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype
    if not np.issubdtype(dtype, np.floating):
        raise TypeError(f"{who}: {name} returns {dtype}, which has no derivative")


__all__ = ["Operation", "scalar_or_array", "float_result"]
