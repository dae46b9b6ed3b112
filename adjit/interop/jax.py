"""`adjit.jax`: adjit functions and kernel launches inside JAX programs, under `jax.jit`,
`jax.grad` (and `vjp`, `value_and_grad`) and `jax.vmap`.

    loss = adjit.jax.function(simulate)            # an @adjit.jit function
    jax.jit(jax.grad(lambda u: loss(u, 50, 0.1)))(u0)
    heat = adjit.jax.function(heat_step, outputs=("v",))    # a kernel: what it writes
    v = heat(u, v0, 0.1, ndrange=u.shape)

How: a `jax.custom_vjp` whose primal and backward are each a `jax.pure_callback` into
adjit's compiled code (the backward is adjit's reverse mode). Not `jax.ffi`: an FFI target
is a C function registered with XLA, taking XLA's call frame (typed buffers, attributes,
stages), compiled against the jaxlib it runs with; adjit compiles its entries at run time
per argument signature, and each would need such a handler generated and registered for
it. pure_callback needs none of that and runs wherever JAX does, at the cost of JAX's
host-callback machinery (~100 us a call, benchmarks/bench_interop.py): worth it for
simulators and kernels of a millisecond or more, a reason to move to jax.ffi for tiny ones.

Buffers: JAX hands the callback its operands as arrays of its own (copies of them: JAX's
host-callback machinery makes them), which adjit views through DLPack without a further
copy (read-only: adjit refuses to write them); a kernel's outputs are copies (JAX's arrays
are immutable), and pure_callback copies each result into XLA's buffer (its contract).
Zero copies in and out would take jax.ffi.
Forward mode (`jax.jvp`, `jax.jacfwd`) is not available: JAX does not differentiate a
custom_vjp function in forward mode, and a pure_callback has no transpose for a custom_jvp
to be reversed through; use adjit's own jvp.

A result's shape must be known while tracing: a kernel's outputs have their arguments'
shapes; a function's is found by running it once on zeros of the arguments' shapes per
signature, unless `result_shape=` gives it (a jax.ShapeDtypeStruct, a tuple of them, or a
callable of the arguments returning that), as for a function that fails on zeros.

This module imports JAX; `import adjit` does not import it.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import numpy as np

from ..runtime.foreign import host_value
from .operation import Operation, float_result, scalar_or_array

WHO = "adjit.jax.function"


def function(f: Any, *, outputs: Sequence[str | int] | str | int | None = None,
             result_shape: Any = None) -> "JaxFunction":
    """``f`` as a JAX-traceable function, under ``jax.jit``, ``jax.grad`` (``vjp``,
    ``value_and_grad``) and ``jax.vmap``.

    Each call is a ``jax.custom_vjp`` whose primal and backward are ``jax.pure_callback``
    calls into adjit's compiled code (the backward is adjit's reverse mode; about 100 us of
    JAX's callback machinery per call). Forward mode (``jax.jvp``, ``jax.jacfwd``) is not
    available: JAX does not differentiate a custom_vjp function in forward mode; use
    :func:`adjit.jvp`. A kernel's outputs are copies (JAX arrays are immutable).

    Args:
        f: an ``@adjit.jit`` function, or an ``@adjit.kernel``.
        outputs: for a kernel, the parameters it writes (names or positions).
        result_shape: a function's result's shape and dtype, a ``jax.ShapeDtypeStruct`` (a
            tuple of them, or a callable of the arguments returning that); by default it is
            found by running ``f`` once on zeros of the arguments' shapes.

    Returns:
        JaxFunction: call it with ``f``'s arguments (JAX or NumPy arrays; Python numbers
        stay constants); a kernel's also takes ``ndrange=``.

    Raises:
        TypeError: ``f`` neither an ``@adjit.jit`` function nor an ``@adjit.kernel``; a
            kernel without ``outputs=`` ("kernel k writes its results into arguments: name
            them, outputs=('y',) ..."); ``outputs=`` for a function.
        ValueError: ``outputs=`` naming a parameter the kernel does not have, or twice.

    Example:
        ::

            import jax
            import jax.numpy as jnp
            import adjit
            from adjit import Array, f64

            jax.config.update("jax_enable_x64", True)

            @adjit.jit
            def energy(x: Array[f64, 1]) -> f64:
                return adjit.sum(x * x * x)

            loss = adjit.jax.function(energy)
            print(jax.jit(jax.grad(loss))(jnp.array([1.0, 2.0])))   # [ 3. 12.]
    """
    return JaxFunction(f, outputs, result_shape)


def _is_dynamic(a: Any) -> bool:
    # (tracers are jax.Array too)
    return isinstance(a, (jax.Array, np.ndarray))


def _struct(shape: Sequence[int], dtype: Any) -> jax.ShapeDtypeStruct:
    # Without jax_enable_x64, JAX has no 64-bit types: the callback's results are cast to
    # what JAX holds (float32, int32).
    return jax.ShapeDtypeStruct(tuple(shape), jax.dtypes.canonicalize_dtype(np.dtype(dtype)))


class JaxFunction:
    """What :func:`adjit.jax.function` returns: call it with the function's arguments (JAX or
    NumPy arrays, Python numbers, which stay constants); a kernel's also takes ``ndrange=``
    (default: its first output's shape).

    Example:
        ::

            import jax
            import jax.numpy as jnp
            import adjit
            from adjit import Array, f64

            jax.config.update("jax_enable_x64", True)

            @adjit.kernel
            def scale(a: f64, x: Array[f64, 1], y: Array[f64, 1]):
                i = adjit.index()
                y[i] = a * x[i]

            op = adjit.jax.function(scale, outputs=("y",))
            x = jnp.array([1.0, 2.0])
            print(op(3.0, x, jnp.zeros(2)))                             # [3. 6.]
            print(jax.grad(lambda x: op(3.0, x, jnp.zeros(2)).sum())(x))   # [3. 3.]
    """

    def __init__(self, f: Any, outputs: Any, result_shape: Any):
        self.op = Operation(f, outputs, WHO)
        self.result_shape = result_shape
        self.__name__ = self.op.name
        self._made: dict = {}      # (constants, dynamic positions, ndrange) -> custom_vjp fn
        self._shapes: dict = {}    # + argument shapes and dtypes -> result structs

    def __repr__(self) -> str:
        return f"<adjit.jax.function of {self.op.name}>"

    def __call__(self, *args, ndrange: Any = None):
        op = self.op
        if len(args) != len(op.params):
            raise TypeError(f"{op.name}() takes {len(op.params)} arguments "
                            f"({', '.join(op.params)}), got {len(args)}")
        nd = None
        if op.is_kernel:
            first = args[op.outputs[0]]
            nd = np.shape(first) if ndrange is None else ndrange
            nd = (int(nd),) if np.ndim(nd) == 0 else tuple(int(n) for n in nd)
            for i in op.outputs:
                if not _is_dynamic(args[i]):
                    raise TypeError(f"{WHO}: kernel {op.name}: output {op.params[i]!r} must "
                                    f"be an array, got {type(args[i]).__name__}")
        elif ndrange is not None:
            raise TypeError(f"{op.name} is not a kernel: ndrange= is for kernels")
        dynamic = tuple(i for i, a in enumerate(args) if _is_dynamic(a))
        constants = tuple((i, type(a), a) for i, a in enumerate(args) if i not in dynamic)
        key = (constants, dynamic, nd)
        try:
            fn = self._made.get(key)
        except TypeError:      # an unhashable constant
            raise TypeError(f"{WHO}: {op.name}: arguments are arrays or numbers") from None
        if fn is None:
            fn = self._made[key] = self._build(dict((i, a) for i, _, a in constants),
                                               dynamic, nd)
        dyn = [jax.numpy.asarray(args[i]) for i in dynamic]
        return fn(*dyn)

    # ---- the operation for one set of constants ----------------------------------------
    def _build(self, constants: dict, dynamic: tuple, nd: tuple | None) -> Callable:
        op, n = self.op, len(self.op.params)

        def assemble(dyn: Sequence) -> list:
            values = [constants.get(i) for i in range(n)]
            for i, v in zip(dynamic, dyn):
                values[i] = scalar_or_array(host_value(v), i, op)
            return values

        def outputs_of(values: list) -> list:
            for i in op.outputs:            # writable copies: JAX's arrays are immutable
                values[i] = np.array(values[i], copy=True)
            return values

        def results(dyn: Sequence) -> Any:
            key = tuple((tuple(v.shape), np.dtype(v.dtype)) for v in dyn)
            if key not in self._shapes:
                self._shapes[key] = self._result_structs(constants, dynamic, dyn, assemble,
                                                         outputs_of, nd)
            return self._shapes[key]

        def primal_host(*dyn):
            values = outputs_of(assemble(dyn))
            result = op.call(values, nd, "cpu")
            structs = results(dyn)
            if op.is_kernel:
                result = tuple(values[i] for i in op.outputs)
                result = result[0] if len(result) == 1 else result
            return _cast(result, structs)

        def primal(*dyn):
            return jax.pure_callback(primal_host, results(dyn), *dyn,
                                     vmap_method="sequential")

        wanted = [i in dynamic for i in range(n)]

        def reverse_host(*dyn_and_ct):
            dyn, ct = dyn_and_ct[:len(dynamic)], dyn_and_ct[len(dynamic):]
            values = assemble(dyn)
            float_args = [k for k, i in enumerate(dynamic) if _floating(values[i])]
            want = [wanted[i] and _floating(values[i]) for i in range(n)]

            def zeros(i: int) -> np.ndarray:
                return np.zeros_like(values[i])

            def copy(i: int) -> np.ndarray:
                return np.array(values[i], copy=True)

            if op.is_kernel:
                seeds = [np.array(np.asarray(host_value(c)), dtype=values[i].dtype, copy=True)
                         for c, i in zip(ct, op.outputs)]
                grads = op.reverse(values, want, seeds, nd, "cpu", zeros, copy)
                scale = None
            else:
                seed = np.asarray(host_value(ct[0]))
                scale = seed[()] if seed.ndim == 0 else None
                grads = op.reverse(values, want, [seed if scale is None else scale], nd,
                                   "cpu", zeros, copy)
            out = []
            for k in float_args:
                g = grads[dynamic[k]]
                g = g * scale if scale is not None else g
                out.append(np.asarray(g, dtype=jax.dtypes.canonicalize_dtype(dyn[k].dtype)))
            return tuple(out)

        @jax.custom_vjp
        def fn(*dyn):
            return primal(*dyn)

        def fwd(*dyn):
            return primal(*dyn), dyn

        def bwd(dyn, ct):
            if not op.is_kernel:
                float_result(_like_result(results(dyn)), WHO, op.name)
            cts = ct if isinstance(ct, tuple) else (ct,)
            floats = [k for k, v in enumerate(dyn) if jax.numpy.issubdtype(v.dtype,
                                                                           jax.numpy.floating)]
            shapes = tuple(_struct(dyn[k].shape, dyn[k].dtype) for k in floats)
            grads = jax.pure_callback(reverse_host, shapes, *dyn, *cts,
                                      vmap_method="sequential") if floats else ()
            by_position = dict(zip(floats, grads))
            return tuple(by_position.get(k) for k in range(len(dyn)))

        fn.defvjp(fwd, bwd)
        return fn

    def _result_structs(self, constants, dynamic, dyn, assemble, outputs_of, nd) -> Any:
        """The result's jax.ShapeDtypeStruct (a tuple of them for several results)."""
        op = self.op
        if op.is_kernel:
            structs = tuple(_struct(dyn[dynamic.index(i)].shape, dyn[dynamic.index(i)].dtype)
                            for i in op.outputs)
            return structs[0] if len(structs) == 1 else structs
        if self.result_shape is not None:
            given = self.result_shape
            if callable(given):
                args = [constants.get(i) for i in range(len(op.params))]
                for i, v in zip(dynamic, dyn):
                    args[i] = v
                given = given(*args)
            return jax.tree_util.tree_map(lambda s: _struct(s.shape, s.dtype), given)
        # Run once on zeros of the arguments' shapes (results' shapes may depend on values
        # in adjit, as np.arange's do: the probe is the general answer; result_shape= is
        # the way around it).
        zeros = [np.zeros(v.shape, v.dtype) for v in dyn]
        probe = op.call(outputs_of(assemble(zeros)), nd, "cpu")
        return jax.tree_util.tree_map(lambda r: _struct(np.shape(r), np.result_type(r)),
                                      probe)


def _floating(v: Any) -> bool:
    return np.issubdtype(np.result_type(v), np.floating)


def _like_result(structs: Any) -> Any:
    """Something shaped and typed like the result, for float_result's check."""
    if isinstance(structs, tuple):
        return structs
    return np.zeros((), structs.dtype)


def _cast(result: Any, structs: Any) -> Any:
    if isinstance(result, tuple):
        return tuple(_cast(r, s) for r, s in zip(result, structs))
    return np.asarray(result, dtype=structs.dtype)


__all__ = ["function", "JaxFunction"]
