"""Differentiation from Python, in Enzyme's terms: `autodiff`, `autodiff_thunk`, and JAX-style
conveniences on top, for the modes and activity annotations of modes.py.

Each specialisation (mode, activities, argument types) is compiled once, through the compile
service (service.py; derivative.py compiles, imported, and MLIR with it, only then).
"""
from __future__ import annotations

import copy
import numbers
import types
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from ..core.errors import CompilationError
from ..runtime.device_array import DeviceArray
from ..runtime import profiling
from ..runtime.foreign import host_value, host_values
from ..core.kernel import check_ndrange_bounds
from ..core.threads import default_num_threads
from . import autodiff_checks
from . import pytree_calls, service, transform_calls
from .batched_reverse import batched_reverse
from ..compiler import callables
from ..compiler.compiled import float_leaves, regrouping
from ..lang.functions import (Function, Kernel, ndrange_tuple, workgroup_tuple, debug_enabled, jit,
                        specialise)
from ..lang.modes import (Active, Annotation, BatchDuplicated, Const, Duplicated, Forward,
                    ForwardWithPrimal, Mode, Reverse, ReverseSplitWithPrimal, ReverseWithPrimal,
                    batch_width, derivative_abi)
from ..core.types import ArrayType, ScalarType, VecArrayType, VecType
from ..lang import pytrees
from ..lang.pytrees import has_tree
from ..lang.structs import (field_at, flatten_annotations, is_float_field, leaves, map_fields,
                      struct_leaf_values, struct_type, zeros_like as structs_zeros_like)

if TYPE_CHECKING:
    from ..compiler.compiled import LoadedDerivative
    from ..compiler.derivative import Derivative


def _declared(f, what: str):
    """`f` as the entry point `what` differentiates it. A plain Python function (JAX's
    entry points take any) is compiled as if decorated with @adjit.jit, the same Function
    each time (kept on it, so its compiled specialisations are reused); adjit compiles from
    source (a lambda's too), so one whose source cannot be had (exec, eval, the prompt) is
    refused there at its line (source.parse_source). Anything else that is not an adjit
    declaration or transform is refused by name here, not met as a missing attribute deep
    inside."""
    if isinstance(f, (Function, Kernel, Transform)):
        return f
    if isinstance(f, types.FunctionType):
        made = f.__dict__.get("_adjit_jit")
        if made is None:
            made = f.__dict__["_adjit_jit"] = jit(f)
        return made
    if hasattr(f, "annotations") and hasattr(f, "params"):    # (a declaration's stand-in)
        return f
    raise TypeError(f"{what}: {getattr(f, '__name__', None) or type(f).__name__} "
                    f"({type(f).__name__}) is not a function adjit can differentiate: adjit "
                    "compiles Python functions from their source; write it as a def "
                    "(decorated with @adjit.jit, or left plain) in a .py file")


def _annotate(args: Sequence) -> list[Annotation]:
    return [a if isinstance(a, Annotation) else Const(a) for a in args]


def _check(name: str, params: list[str], anns: list[Annotation], types: list,
           reverse: bool, device: str) -> None:
    """Refuses activities that make no sense, with the argument named."""
    for p, a, t in zip(params, anns, types):
        where = f"{name}(): argument {p!r}"
        if isinstance(a, Active):
            if isinstance(t, ArrayType):
                raise TypeError(f"{where} is an array marked Active: arrays are "
                                "Duplicated(x, dx) (the shadow dx receives the derivative)")
            if not t.is_float:
                raise TypeError(f"{where} is an integer or bool ({t!r}) marked Active: only "
                                "floating-point values have derivatives")
            if not reverse:
                raise TypeError(f"{where}: forward mode takes Duplicated(x, dx) (the tangent"
                                " dx), not Active")
        if isinstance(a, BatchDuplicated):
            if reverse:
                raise TypeError(f"{where} is BatchDuplicated: in reverse mode, batched "
                                "cotangents are taken by autodiff of an @adjit.jit, "
                                "@adjit.func or kernel without struct arguments (one call per "
                                "cotangent otherwise)")
            if not isinstance(a.dval, tuple):
                raise TypeError(f"{where}: BatchDuplicated(x, (dx1, ..., dxN)) takes a tuple "
                                f"of tangents, got {type(a.dval).__name__}")
            for k, d in enumerate(a.dval):
                _check_shadow(f"{where} (tangent {k})", a, d, t, reverse, device)
        elif isinstance(a, Duplicated):
            if a.dval is None:
                raise TypeError(f"{where} is Duplicated without a shadow: "
                                "Duplicated(x, dx)")
            _check_shadow(where, a, a.dval, t, reverse, device)
    if not reverse:
        batch_width(anns, f"{name}()")


def _check_shadow(where: str, a: Duplicated, d, t, reverse: bool, device: str) -> None:
    """One shadow or tangent `d` of the argument `a` of type `t`."""
    if isinstance(t, ArrayType):
        if not t.dtype.is_float:
            raise TypeError(f"{where} is an array of {t.dtype.np_dtype} marked "
                            f"{type(a).__name__}: integer and bool arrays are not "
                            "differentiable; pass it as Const(...) (a bare argument "
                            "is Const)")
        shadow_types = (np.ndarray, DeviceArray) if device == "cuda" else (np.ndarray,)
        if not isinstance(d, shadow_types):
            raise TypeError(f"{where}: the shadow must be a NumPy array"
                            f"{' or a GPU array' if device == 'cuda' else ''}, got "
                            f"{type(d).__name__}")
        if d.shape != a.val.shape or d.dtype != a.val.dtype:
            raise ValueError(f"{where}: the shadow has shape {d.shape} and dtype "
                             f"{d.dtype}; it must match the array: {a.val.shape} "
                             f"{a.val.dtype}")
    else:
        if not t.is_float:
            raise TypeError(f"{where} is an integer or bool ({t!r}) marked "
                            f"{type(a).__name__}: only floating-point values have derivatives")
        if reverse:
            raise TypeError(f"{where}: in reverse mode a scalar is Active(x) (its "
                            "derivative is returned), not Duplicated")
        if isinstance(d, np.ndarray) or not np.isscalar(d):
            raise TypeError(f"{where}: the tangent of a scalar must be a scalar")


class Tape:
    """The tape of a split reverse call: what the augmented forward pass recorded for the
    reverse pass (arrays and scalars, laid out by the autodiff pass).

    The forward half of :func:`autodiff_thunk` returns it; its reverse half takes it. It is
    usable by several reverse calls with the forward call's shapes and scalars (the reverse
    half checks that, and raises ValueError otherwise), and freed when dropped. ``nbytes``
    is its size.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import Active, Duplicated, Array, f64

            @adjit.jit
            def loss(a: f64, x: Array[f64, 1]) -> f64:
                return adjit.sum(adjit.sin(a * x))

            fwd, rev = adjit.autodiff_thunk(adjit.ReverseSplitWithPrimal, loss, Active,
                                            Duplicated)
            x, dx = np.linspace(0.0, 1.0, 5), np.zeros(5)
            tape, primal, shadow = fwd(Active(2.0), Duplicated(x, dx))
            assert isinstance(tape, adjit.Tape)
            print(tape, tape.nbytes)
    """

    def __init__(self, values: list, recording: autodiff_checks.Recording | None = None):
        self.values = values
        self.recording = recording

    @property
    def nbytes(self) -> int:
        return sum(v.nbytes if isinstance(v, np.ndarray) else np.asarray(v).nbytes
                   for v in self.values)

    def __repr__(self) -> str:
        return f"<adjit.Tape {len(self.values)} values, {self.nbytes} bytes>"


def _flatten_args(mode: Mode, anns: list[Annotation], types: list, values: list) -> list:
    """Argument values as the generated functions take them (core/derivative_abi.py): each
    primal, followed by its shadow (reverse) or tangent (forward) where it has one."""
    def scalar(d, t):
        return d if isinstance(t, ArrayType) or d is None else t.np_dtype.type(d)
    # (BatchDuplicated of width 1: its one tangent, as the layout has it)
    shadows = [(tuple(scalar(d, t) for d in a.dval) if a.width > 1 else scalar(a.dval[0], t))
               if isinstance(a, BatchDuplicated) else scalar(a.dval, t)
               for a, t in zip(anns, types)]
    return derivative_abi(mode, anns).flatten(values, shadows)


# ---- entry points ------------------------------------------------------------------------
def _prepare(f, args: Sequence, ndrange, workgroupsize, reverse: bool, device: str = "cpu",
             flat: bool = False):
    """`flat`: `args` give a struct argument as its fields (autodiff's)."""
    if not isinstance(f, (Function, Kernel)):
        raise TypeError(f"autodiff differentiates @adjit.jit, @adjit.func or @adjit.kernel "
                        f"functions, got {f!r}")
    if f.struct_layout is not None and not flat:
        raise TypeError(f"{f.__name__} takes a struct: its struct arguments are given as "
                        "their fields here (structs.flatten_annotations)")
    anns = _annotate(args)
    if device == "cuda":
        if isinstance(f, Function) and f.kind != "jit":
            raise TypeError(f"autodiff(..., device='cuda') differentiates kernel launches and "
                            f"@adjit.jit functions; {f.__name__} is an @adjit.func, which runs "
                            "where its caller runs")
        from .cuda_launch import device_value, specialise_cuda
        anns = [_with_values(a, device_value) for a in anns]
        types, values = specialise_cuda(f, [a.val for a in anns])
    elif device == "cpu":
        # Other libraries' CPU arrays (and shadows) as NumPy views of them (runtime/foreign.py)
        anns = [_with_values(a, host_value) for a in anns]
        types, values = specialise(f.__name__, f.params, f.annotations, [a.val for a in anns])
    else:
        raise ValueError(f"autodiff: device must be 'cpu' or 'cuda', got {device!r}")
    _check(f.__name__, f.params, anns, types, reverse, device)
    # A shadow takes its array's type in the derivative's ABI: a strided shadow of a
    # contiguous array makes both strided (a contiguous array is a strided one too).
    types = [t.strided_too() if isinstance(t, ArrayType) and not t.strided and any(
                 isinstance(d, np.ndarray) and not d.flags.c_contiguous
                 for d in _shadows(a)) else t for t, a in zip(types, anns)]
    nd = wgs = None
    if isinstance(f, Kernel):
        nd = ndrange_tuple(ndrange, f.__name__)
        wgs = workgroup_tuple(workgroupsize, len(nd), f.__name__)
    elif ndrange is not None:
        raise TypeError(f"{f.__name__} is not a kernel: ndrange= is for kernels")
    return anns, types, values, nd, wgs


def _shadows(a: Annotation) -> tuple:
    return (a.dval if isinstance(a, BatchDuplicated) else (a.dval,)
            if isinstance(a, Duplicated) else ())


def _with_values(a: Annotation, convert: Callable) -> Annotation:
    """A copy of `a` whose value and shadow are converted (the user's annotation is kept)."""
    out = copy.copy(a)
    out.val = convert(a.val)
    # (a BatchDuplicated's tangents that are not a tuple are left for _check to name)
    out.dval = (tuple(map(convert, a.dval)) if isinstance(a, BatchDuplicated)
                and isinstance(a.dval, tuple) else convert(a.dval))
    return out


def _derivative(f, mode: Mode, anns, types, nd, wgs,
                pullback: bool = False) -> Derivative | LoadedDerivative:
    return service.derivative(f, mode, anns, types, nd, wgs, pullback)


def autodiff(mode: Mode, f, *args, ndrange=None, workgroupsize=None, device: str = "cpu"):
    """Differentiates ``f`` at ``args``, Enzyme's way: each argument says its activity.

    Activities: ``Const(x)`` (no derivative; a bare value is Const), ``Active(x)`` (a scalar
    whose derivative reverse mode returns), ``Duplicated(x, dx)`` (an array with its shadow
    ``dx`` of the same shape: reverse mode *adds* the gradient into ``dx``, forward mode
    reads the tangent from it; for a scalar ``x`` in forward mode, ``dx`` is its tangent, a
    float), ``DuplicatedNoNeed(x, dx)`` (as Duplicated, but the primal values written into
    ``x`` are not needed) and ``BatchDuplicated(x, (dx1, ..., dxN))`` (N tangents at once
    in forward mode; in reverse mode, N cotangents: the primal runs once and the reverse
    sweep once per lane, lane k seeded by and adding into each ``dxk``). An argument may
    be a pytree (a tuple, list, dict or NamedTuple of arrays, scalars and structs):
    ``Const(tree)``; ``Duplicated(tree, shadow)``, ``shadow`` a tree of the same structure
    whose leaves are the leaves' shadows (a float scalar leaf's derivative is added to the
    shadow's entry, in a dict or list); ``Active(tree)`` of float scalars, whose
    derivatives come back as a tree of its structure.

    What it returns, by mode: ``Reverse``, a tuple with one entry per argument (the
    derivative of each Active argument, an N-tuple with BatchDuplicated, None for the
    others); ``ReverseWithPrimal``,
    ``(derivatives, primal result)``; ``Forward``, the tangent of the result (an N-tuple
    with BatchDuplicated); ``ForwardWithPrimal``, ``(tangent, primal result)``. A kernel
    launch (give ``ndrange=``) has no result: reverse mode returns the tuple of
    derivatives (an Active scalar argument's summed over the work items), forward mode
    None, the tangents landing in the shadow arrays. Reverse mode also performs the
    primal's effects: the arrays it writes hold the primal results afterwards.

    Args:
        mode: ``adjit.Forward``, ``adjit.ForwardWithPrimal``, ``adjit.Reverse`` or
            ``adjit.ReverseWithPrimal`` (split mode is :func:`autodiff_thunk`).
        f: an ``@adjit.jit``, ``@adjit.func`` or ``@adjit.kernel`` function (or a derivative
            of one, such as ``adjit.grad(g)``, for higher orders).
        *args: its arguments, annotated.
        ndrange: a kernel's launch range (kernels only).
        workgroupsize: a kernel's workgroup size (optional).
        device: ``"cpu"``, or ``"cuda"`` to run the derivative kernels on the GPU.

    Returns:
        The derivatives, as the mode says above.

    Raises:
        TypeError: for a mode other than those four ("autodiff takes Forward,
            ForwardWithPrimal, Reverse or ReverseWithPrimal (split mode is
            autodiff_thunk)"), for an ``f`` adjit did not compile, for ``Active`` on an
            array or a shadow of the wrong shape or dtype, or a shadow tree of another
            structure (named by its path: "the shadow has keys ['W'], the argument ['W',
            'b'] (missing ['b'])").
        CompilationError: when ``f`` cannot be compiled or differentiated.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import Active, Const, Duplicated, Array, f64

            @adjit.jit
            def loss(a: f64, x: Array[f64, 1]) -> f64:
                return adjit.sum(a * x * x)

            x, dx = np.array([1.0, 2.0]), np.zeros(2)
            da, _ = adjit.autodiff(adjit.Reverse, loss, Active(3.0), Duplicated(x, dx))
            print(da, dx)          # 5.0 [ 6. 12.]  (dx += d loss / dx)
            # forward mode: the tangent of the result along (da=1, dx=0)
            print(adjit.autodiff(adjit.Forward, loss, Duplicated(3.0, 1.0), Const(x)))   # 5.0

            @adjit.kernel
            def scale(a: f64, x: Array[f64, 1], y: Array[f64, 1]):
                i = adjit.index()
                y[i] = a * x[i]

            y, dy = np.zeros(2), np.ones(2)        # dy: the adjoint of y's values
            print(adjit.autodiff(adjit.Reverse, scale, Active(3.0), Const(x),
                                 Duplicated(y, dy), ndrange=2))   # (3.0, None, None)

            @adjit.jit
            def fit(params, x):                    # params: a dict (a pytree)
                return adjit.sum((params["w"] * x + params["b"]) ** 2)

            params = {"w": np.array([1.0, 1.0]), "b": np.array([0.5, 0.5])}
            shadow = {"w": np.zeros(2), "b": np.zeros(2)}   # the same structure
            adjit.autodiff(adjit.Reverse, fit, Duplicated(params, shadow), x)
            print(shadow)          # {'w': array([ 3., 10.]), 'b': array([3., 5.])}
    """
    if not isinstance(mode, Mode) or mode.split:
        raise TypeError("autodiff takes Forward, ForwardWithPrimal, Reverse or "
                        "ReverseWithPrimal (split mode is autodiff_thunk)")
    f = _declared(f, "autodiff")
    # (The checks of the rarer forms below run on every call, a gradient from Python
    # included: each costs no Python call where it does not apply.)
    if isinstance(f, Function) and f.defaults:
        given = len(args)
        args = _with_defaults(f, args, Const)
        if len(args) > given and mode.reverse:
            # (parameters left to their defaults are Const: no derivative to return)
            out = autodiff(mode, f, *args, ndrange=ndrange, workgroupsize=workgroupsize,
                           device=device)
            return (out[0][:given], out[1]) if mode.with_primal else out[:given]
    trees = pytree_calls.annotations(f, args, mode) if has_tree(args, True) else None
    if trees is not None:     # trees among the arguments: their leaves' variant
        variant, flat, finish = trees
        return finish(autodiff(mode, variant, *flat, ndrange=ndrange,
                               workgroupsize=workgroupsize, device=device))
    return _autodiff_no_trees(mode, f, args, ndrange, workgroupsize, device)


def _autodiff_no_trees(mode: Mode, f, args: Sequence, ndrange, workgroupsize, device: str):
    """autodiff of a declaration or transform `f` at arguments none of which is a tree, the
    defaults filled in."""
    if (mode.reverse and BatchDuplicated in map(type, args)
            and isinstance(f, (Function, Kernel)) and f.struct_layout is None):
        # N cotangents at one point: one primal and tape, N reverse sweeps
        return batched_reverse(mode, f, args, autodiff_thunk, ndrange, workgroupsize, device)
    if isinstance(f, Transform):        # a derivative of a derivative: compiled
        _refuse_structs(f"autodiff of {f.__name__}",
                        [a.val if isinstance(a, Annotation) else a for a in args])
        args = [_with_values(a, host_value) if isinstance(a, Annotation) else host_value(a)
                for a in args]
        return transform_calls.autodiff(mode, f, args)
    if isinstance(f, (Function, Kernel)) and f.struct_layout is not None:
        # Struct arguments: their fields' annotations (structs.flatten_annotations); the
        # derivatives of a Duplicated struct's float scalars are added to its shadow.
        flat, finish = flatten_annotations(f, args, mode.reverse)
        out = _autodiff(mode, f, flat, ndrange, workgroupsize, device)
        if not mode.reverse:
            return out
        if mode.with_primal:
            return finish(out[0]), out[1]
        return finish(out)
    return _autodiff(mode, f, args, ndrange, workgroupsize, device)


def _autodiff(mode: Mode, f, args: Sequence, ndrange, workgroupsize, device: str):
    """autodiff of a declaration, a struct argument given as its fields. An Active argument
    of a parameter annotated with a vector type (`Active(adjit.vec3(1, 2, 3))`) is, from
    Python, a small array: reverse mode differentiates it as Duplicated with a zero shadow,
    which it returns as its derivative (an array of the vector's shape)."""
    vectors = {}
    args = list(args)
    for k, (a, ann) in enumerate(zip(args, f.annotations)):
        if isinstance(a, Active) and isinstance(ann, VecType):
            if not mode.reverse:
                raise TypeError(f"{f.__name__}(): argument {f.params[k]!r} ({ann!r}): forward "
                                "mode takes Duplicated(v, dv) (dv the tangent vector), not "
                                "Active")
            val = np.array(a.val, dtype=ann.dtype.np_dtype)   # (a copy: the user's stays)
            if val.shape != ann.shape:
                raise ValueError(f"{f.__name__}(): argument {f.params[k]!r} ({ann!r}): got "
                                 f"shape {val.shape}, not {ann.shape}")
            vectors[k] = np.zeros_like(val)
            args[k] = Duplicated(val, vectors[k])
    out = _autodiff_flat(mode, f, args, ndrange, workgroupsize, device)
    if not vectors or not mode.reverse:
        return out
    grads = out[0] if mode.with_primal else out
    grads = tuple(vectors.get(k, g) for k, g in enumerate(grads))
    return (grads, out[1]) if mode.with_primal else grads


def _autodiff_flat(mode: Mode, f, args: Sequence, ndrange, workgroupsize, device: str):
    anns, types, values, nd, wgs = _prepare(f, args, ndrange, workgroupsize, mode.reverse,
                                            device, flat=True)
    flat = _flatten_args(mode, anns, types, values)
    if device == "cuda":
        # A host program, whose launches (a kernel's own, or a function's) are the launch
        # rule's, as on the CPU: the derivative kernels, and for reverse mode the kernels
        # counting per-item tapes and summing per-item adjoints, run on the GPU.
        from .cuda_jit import derivative
        d = derivative(f, mode, anns, types, nd, wgs)
        if d is None:        # compile_only(): compiled, nothing run; zeros
            if not mode.reverse:
                return None
            grads = derivative_abi(mode, anns).per_argument(
                [t.np_dtype.type(0) for a, t in zip(anns, types) if isinstance(a, Active)])
            return (grads, None) if mode.with_primal else grads
    else:
        d = _derivative(f, mode, anns, types, nd, wgs)
    # Before the call allocates any tape: the launch would refuse it only after that.
    check_ndrange_bounds(d.ndrange_bounds, values, nd)
    flat += list(nd or ())
    _guard(f, anns, mode.reverse, flat, d.written,
           (d.COMBINED,) if mode.reverse else (d.FORWARD,), len(nd or ()))
    if not mode.reverse:
        primal, tangents = (d.forward(flat) if profiling.ACTIVE is None else _recorded(
            f, "forward mode (primal and tangents, one call)", nd, d.forward, flat))
        if isinstance(f, Kernel):
            return None
        tangent = None
        batched = any(isinstance(a, BatchDuplicated) for a in anns)
        if d.result_tree is not None:
            # a tree result (or several, `return a, b`): its leaves' tangents, a tree of its
            # structure (N of them, batched); an integer leaf's is None, as it has none
            return _tree_tangents(d, primal, tangents, batched, mode.with_primal)
        if d.layout is not None and not batched:
            # struct and vector results: their scalars gathered (an integer's tangent 0)
            it = iter(tangents)
            regroup = regrouping(d.layout, d.tuple_result)
            tangent = regroup(tuple(next(it)[0] if t.is_float else t.np_dtype.type(0)
                                    for t in d.results))
            return (tangent, regroup(tuple(primal)) if primal else None) if (
                mode.with_primal) else tangent
        if tangents:
            # with batched tangents (BatchDuplicated), N of them: a tuple
            tangent = tangents[0] if batched else tangents[0][0]
        return (tangent, primal[0] if primal else None) if mode.with_primal else tangent
    primal, grads = (d.reverse(flat) if profiling.ACTIVE is None else _recorded(
        f, _COMBINED, nd, d.reverse, flat))
    grads = grads[:len(anns)]       # (not a kernel's extents)
    if mode.with_primal:
        return grads, (primal[0] if primal else None)
    return grads


# The phases of a derivative call as the profiler names them (runtime/profiling.py). A
# reverse call of autodiff, grad or value_and_grad runs the augmented forward pass and the
# reverse sweep (with a checkpointed loop's recomputation) in one native call: the host sees
# them as one; split mode (autodiff_thunk, and vjp's pullback of a scalar result) makes them
# two calls, each recorded.
_COMBINED = "reverse mode (augmented forward and reverse sweep, one call)"
_AUGMENTED = "augmented forward"
_REVERSE = "reverse sweep"
_PULLBACK = "pullback (augmented forward and reverse sweep, one call)"


def _recorded(f, what: str, nd, call: Callable, *args):
    """`call(*args)`, recorded (a profile is open) as the derivative phase `what` of `f` (a
    kernel's launch over ndrange `nd`)."""
    extra = {} if not nd else {"ndrange": list(nd), "threads": default_num_threads()}
    with profiling.span(f"{f.__name__}: {what}", "derivative", **extra) as s:
        out = call(*args)
        if what == _AUGMENTED:
            s.args["tape_bytes"] = Tape(out[1]).nbytes
    return out


def _tree_tangents(d, primal: list, tangents: list, batched: bool, with_primal: bool):
    """Forward mode's result for a function returning a tree (`d.result_tree`): the
    tangent a tree of its structure (with batched tangents, an N-tuple of them), then the
    primal, a tree too."""
    lanes = iter(tangents)
    per_leaf = [next(lanes) if _dtype_is_float(t) else None for t in d.results]
    width = len(next((x for x in per_leaf if x is not None), (None,)))
    trees = tuple(pytrees.unflatten(d.result_tree, [None if x is None else x[j]
                                                    for x in per_leaf])
                  for j in range(width))
    tangent = trees if batched else trees[0]
    if not with_primal:
        return tangent
    return tangent, (pytrees.unflatten(d.result_tree, primal) if primal else None)


def _dtype_is_float(t) -> bool:
    return (t.dtype if isinstance(t, ArrayType) else t).is_float


def _guard(f, anns: list[Annotation], reverse: bool, flat: list, written: dict,
           entries: Sequence[str], ndim: int, extra: tuple = ()) -> tuple:
    """Refuses, before the derivative runs, read-only arrays it would write and overlapping
    arrays where it writes one (autodiff_checks.check_arrays). `written`: each generated
    entry's written argument positions (passes/written.py), of which this call runs
    `entries`; `extra`: slots after the flat arguments (a pullback's cotangent). Returns
    the slots' names."""
    writes = frozenset().union(*(written.get(e, ()) for e in entries))
    plan = autodiff_checks.plan(tuple(f.params), tuple(a.activity for a in anns), reverse,
                                ndim, extra, writes, frozenset().union(*written.values()),
                                1 if reverse else batch_width(anns))
    autodiff_checks.check_arrays(f.__name__, plan, flat)
    return plan.names


class _SplitHalf:
    def __init__(self, f, kinds: tuple, forward: bool, ndrange, workgroupsize):
        self.f, self.kinds, self.forward = f, kinds, forward
        self.ndrange, self.workgroupsize = ndrange, workgroupsize

    def _setup(self, args):
        if len(args) != len(self.kinds):
            raise TypeError(f"expected {len(self.kinds)} annotated arguments, got {len(args)}")
        for a, k in zip(args, self.kinds):
            if type(a) is not k:
                raise TypeError(f"argument {a!r} does not match the thunk's activity "
                                f"{k.__name__}")
        if has_tree(args, True):
            raise TypeError(f"autodiff_thunk of {self.f.__name__}: split mode takes scalars, "
                            "arrays and structs, not pytrees (tuples, lists, dicts, "
                            "NamedTuples): autodiff, grad, value_and_grad, jvp and vjp take "
                            "them; or pass the tree's leaves as arguments")
        finish = None
        if self.f.struct_layout is not None:
            # A struct argument is its fields' annotations, both halves alike
            # (structs.flatten_annotations); the reverse half adds its float scalars'
            # derivatives to the shadow struct (`finish`).
            args, finish = flatten_annotations(self.f, args, True)
        anns, types, values, nd, wgs = _prepare(self.f, args, self.ndrange,
                                                self.workgroupsize, True,
                                                flat=finish is not None)
        self._finish = finish
        d = _derivative(self.f, ReverseSplitWithPrimal, anns, types, nd, wgs)
        check_ndrange_bounds(d.ndrange_bounds, values, nd)
        flat = _flatten_args(ReverseSplitWithPrimal, anns, types, values)
        flat += list(nd or ())
        names = _guard(self.f, anns, True, flat, d.written,
                       (d.AUGMENTED,) if self.forward else (d.REVERSE,), len(nd or ()))
        return anns, types, d, flat, names

    def _nd(self) -> tuple[int, ...] | None:
        """A kernel's ndrange, for the profiler."""
        return None if self.ndrange is None else ndrange_tuple(self.ndrange, self.f.__name__)

    def __call__(self, *args):
        if self.forward:
            anns, types, d, flat, names = self._setup(args)
            primal, tape = (d.split_forward(flat) if profiling.ACTIVE is None else _recorded(
                self.f, _AUGMENTED, self._nd(), d.split_forward, flat))
            activity = tuple(a.activity for a in anns)
            recording = autodiff_checks.Recording(d, self.f.__name__, tuple(types), activity,
                                                  debug_enabled(), tuple(names),
                                                  autodiff_checks.facts(flat))
            return Tape(tape, recording), (primal[0] if primal else None), None
        if len(args) != len(self.kinds) + 2:
            raise TypeError(f"the reverse half takes the {len(self.kinds)} annotated "
                            f"arguments, the result's adjoint and the tape, got {len(args)} "
                            "arguments")
        *args, dret, tape = args
        if not isinstance(tape, Tape) or tape.recording is None:
            raise TypeError("the last argument of the reverse half is the Tape from the "
                            f"forward half, got {type(tape).__name__}")
        anns, types, d, flat, _ = self._setup(args)
        autodiff_checks.check_tape(tape.recording, d, self.f.__name__, types,
                                   [a.activity for a in anns], debug_enabled(), flat)
        grads = (d.split_reverse(flat, dret, tape.values) if profiling.ACTIVE is None
                 else _recorded(self.f, _REVERSE, self._nd(), d.split_reverse, flat, dret,
                                tape.values))[:len(anns)]
        return grads if self._finish is None else self._finish(grads)


def autodiff_thunk(mode: Mode, f, *activities, ndrange=None, workgroupsize=None):
    """Split reverse mode: the forward and the reverse half of a derivative as two calls.

    ``forward(*annotated)`` runs the augmented primal (the primal, recording what the
    reverse pass needs) and returns ``(tape, primal, shadow)``; ``reverse(*annotated, dret,
    tape)`` (``dret``: the adjoint of the result, 1.0 for a gradient; a kernel has none)
    returns the derivatives, one per argument (None for non-Active ones), adding arrays'
    into their shadows. Between the two, other code may run (a loss computed elsewhere, a
    PyTorch or JAX step), which is what frameworks' custom operations need.

    Args:
        mode: ``adjit.ReverseSplitWithPrimal``.
        f: an ``@adjit.jit``, ``@adjit.func`` or ``@adjit.kernel`` function.
        *activities: the activity type of each argument: ``adjit.Const``, ``adjit.Active``,
            ``adjit.Duplicated`` or ``adjit.DuplicatedNoNeed``.
        ndrange: a kernel's launch range.
        workgroupsize: a kernel's workgroup size.

    Returns:
        tuple: ``(forward, reverse)``.

    Raises:
        TypeError: for another mode ("autodiff_thunk takes ReverseSplitWithPrimal"), or an
            activity that is not one of those types.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import Active, Const, Duplicated, Array, f64

            @adjit.jit
            def loss(a: f64, x: Array[f64, 1], y: f64) -> f64:
                return adjit.sum(a * x * x) + y

            fwd, rev = adjit.autodiff_thunk(adjit.ReverseSplitWithPrimal, loss,
                                            Active, Duplicated, Const)
            x, dx = np.array([1.0, 2.0]), np.zeros(2)
            tape, primal, shadow = fwd(Active(3.0), Duplicated(x, dx), Const(1.0))
            grads = rev(Active(3.0), Duplicated(x, dx), Const(1.0), 1.0, tape)
            print(primal, grads, dx)   # 16.0 (5.0, None, None) [ 6. 12.]
    """
    if mode is not ReverseSplitWithPrimal:
        raise TypeError("autodiff_thunk takes ReverseSplitWithPrimal")
    f = _declared(f, "autodiff_thunk")
    kinds = tuple(activities)
    for k in kinds:
        if not (isinstance(k, type) and issubclass(k, Annotation)):
            raise TypeError(f"autodiff_thunk takes activity types (Const, Active, "
                            f"Duplicated, DuplicatedNoNeed), got {k!r}")
    if f.struct_layout is not None:
        for p, k, st in zip(f.struct_params, kinds, f.struct_layout):
            if st is not None and k is Active:
                raise TypeError(f"autodiff_thunk: argument {p!r} is a {st.name} struct marked "
                                "Active: a struct is Duplicated(s, ds), ds a struct of the "
                                "same type that receives its fields' derivatives")
    for p, k, ann in ([] if f.struct_layout is not None else
                      zip(f.params, kinds, f.annotations)):
        if k is Active and isinstance(ann, VecType):
            # autodiff takes Active(vec) by giving it a zero shadow it returns; a split
            # tape's halves have no such place, so the user passes the shadow.
            raise TypeError(f"autodiff_thunk: argument {p!r} ({ann!r}) is marked Active: "
                            "split mode takes a vector, matrix or quaternion as "
                            "Duplicated(v, dv), dv receiving its derivative (Active vectors "
                            "are taken by autodiff and grad)")
    return (_SplitHalf(f, kinds, True, ndrange, workgroupsize),
            _SplitHalf(f, kinds, False, ndrange, workgroupsize))


# ---- JAX-style conveniences --------------------------------------------------------------
def _argnums(argnums, n: int) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for k in nums:
        if not -n <= k < n:
            raise ValueError(f"argnums {k} out of range for {n} arguments")
    return tuple(k % n for k in nums)


def _with_defaults(f, args: Sequence, wrap: Callable = lambda v: v) -> tuple:
    """`args` with the default values of the parameters after them (`def f(x, scale=2.0)`),
    each `wrap`ped (an annotation: Const), for a function that has defaults; a derivative
    is taken with respect to the arguments given."""
    if not isinstance(f, Function) or not f.defaults or len(args) >= len(f.struct_params):
        return tuple(args)
    rest = [p for p in f.struct_params[len(args):]]
    if not all(p in f.defaults for p in rest):
        return tuple(args)       # (the call's own check names the missing argument)
    return tuple(args) + tuple(wrap(f.defaults[p]) for p in rest)


def _reverse_annotations(args: Sequence, nums: Sequence[int]) -> tuple[list, dict]:
    """Annotations for reverse mode with respect to the arguments `nums` (the others are
    Const): arrays Duplicated with zeroed shadows (returned by position), scalars Active."""
    anns, shadows = [], {}
    for k, a in enumerate(args):
        if k not in nums:
            anns.append(Const(a))
        elif struct_type(a) is not None:     # a struct of the derivatives of its fields
            shadows[k] = structs_zeros_like(a)
            anns.append(Duplicated(a, shadows[k]))
        elif isinstance(a, np.ndarray):
            shadows[k] = np.zeros_like(a)
            anns.append(Duplicated(a, shadows[k]))
        else:
            anns.append(Active(a))
    return anns, shadows


def _grad_call(f, argnums, args, with_value: bool):
    nums = _argnums(argnums, len(args))
    args = host_values(args)     # (a torch tensor's gradient: a NumPy array, as for NumPy's)
    trees = pytree_calls.route(f, args) if has_tree(args) else None
    if trees is not None:
        # Trees among the arguments: the gradient with respect to their leaves (the
        # variant's parameters), a tree of the same structure per tree argument.
        value, flat = _grad_call(trees.variant, trees.flat_nums(nums), trees.flat, True)
        out, at = [], 0
        for k in nums:
            n = trees.spans[k][1]
            part = [None] * trees.spans[k][0] + list(flat[at:at + n])
            out.append(trees.regroup(part, k))
            at += n
        out = out[0] if isinstance(argnums, int) else tuple(out)
        return (value, out) if with_value else out
    anns, shadows = _reverse_annotations(args, nums)
    if isinstance(f, Function) and f.defaults:
        grads, value = autodiff(ReverseWithPrimal, f, *anns)
    else:    # (no tree among the arguments, no default to fill in: a gradient's hot path)
        grads, value = _autodiff_no_trees(ReverseWithPrimal, f, anns, None, None, "cpu")
    if value is None or not np.isscalar(value):
        raise TypeError(f"grad of {f.__name__}: the function must return a float scalar")
    out = tuple(shadows[k] if k in shadows else grads[k] for k in nums)
    out = out[0] if isinstance(argnums, int) else out
    return (value, out) if with_value else out


def _refuse_structs(what: str, args: Sequence) -> None:
    """Compiled derivatives (a Jacobian, a derivative of a derivative) take scalars and
    arrays: their entry has no struct arguments (a struct is its fields only where a
    declaration is called or differentiated directly, structs.py)."""
    for k, a in enumerate(args):
        st = struct_type(a)
        if st is not None:
            raise TypeError(
                f"{what}: argument {k} is a {st.name} struct; jacfwd, jacrev, hessian and "
                "derivatives of derivatives take scalars and arrays. Structs are taken by "
                "grad, value_and_grad, jvp, vjp, hvp (second derivatives along a struct "
                "tangent) and autodiff; or pass the struct's fields as arguments")


class Transform:
    """A function made of `f` by differentiating it (Grad, Jacobian): callable from Python
    (an entry compiled whole, transform_calls.py) and from compiled code
    (derivative_calls.py: the handlers registered at the end of this module), and
    differentiable in turn."""

    def __init__(self, f, name: str):
        self.f = f
        # Its entries called from Python, by the compile service's key (service.transform)
        self.compiled: dict = {}
        self.__name__ = f"{name}({getattr(f, '__name__', repr(f))})"

    @property
    def source(self):
        """The source of the innermost function (where compilation errors point)."""
        return self.f.source

    @property
    def params(self) -> list[str]:
        return self.f.params

    def __call__(self, *args):
        _refuse_structs(self.__name__, args)
        # (a torch tensor or JAX array: a NumPy view of it, as for any call; the result is
        # NumPy's, as grad's is)
        return transform_calls.call(self, host_values(args))

    def __repr__(self) -> str:
        return f"<adjit {self.__name__}>"


def _one_of(f, key: tuple, make: Callable[[], Transform]) -> Transform:
    """The one transform of `f` for `key`, kept on `f`: what it compiled for calls from
    Python is reused by the next `adjit.grad(f)` (a new object each time recompiled)."""
    if not hasattr(f, "__dict__"):     # (not something adjit differentiates: refused on call)
        return make()
    made = f.__dict__.setdefault("_transforms", {})
    if key not in made:
        made[key] = make()
    return made[key]


class Grad(Transform):
    """`adjit.grad(f, argnums)` (or `value_and_grad`): a function of `f`'s arguments returning
    the gradient with respect to those at `argnums`; itself differentiable:
    `adjit.grad(adjit.grad(f))`, `adjit.jvp(adjit.grad(f), ...)`."""

    def __init__(self, f, argnums, with_value: bool):
        super().__init__(f, "value_and_grad" if with_value else "grad")
        self.argnums, self.with_value = argnums, with_value

    def nums(self, n: int) -> tuple[int, ...]:
        return _argnums(self.argnums, n)

    def __call__(self, *args):
        if isinstance(self.f, Transform):   # a derivative of a derivative: compiled
            if has_tree(args):
                return _tree_grad_of_grad(self, host_values(args))
            return super().__call__(*args)
        return _grad_call(self.f, self.argnums, args, self.with_value)


def _grad_of(f, argnums, with_value: bool) -> Grad:
    f = _declared(f, "value_and_grad" if with_value else "grad")
    argnums = tuple(argnums) if isinstance(argnums, list) else argnums
    return _one_of(f, ("grad", argnums, with_value), lambda: Grad(f, argnums, with_value))


def grad(f, argnums=0) -> Grad:
    """JAX's grad: a function returning the gradient of scalar-valued ``f``.

    Args:
        f: an ``@adjit.jit`` or ``@adjit.func`` function returning a float scalar.
        argnums: the argument to differentiate with respect to (an int), or a tuple of
            them; then the gradient is a tuple, one entry per argument named. A float
            array argument's gradient is an array of its shape; a pytree argument's (a
            tuple, list, dict or NamedTuple of arrays and scalars) a tree of the same
            structure: the gradient of a dict is a dict of the same keys.

    Returns:
        A callable taking ``f``'s arguments and returning the gradient. It may be called
        from Python or from compiled code, and differentiated again.

    Raises:
        ValueError: an argnum out of range ("argnums 2 out of range for 2 arguments").
        TypeError: for an ``f`` adjit did not compile, or (when called) a result that is
            not a float scalar.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import Array, f64

            @adjit.jit
            def energy(k: f64, x: Array[f64, 1]) -> f64:
                return 0.5 * k * adjit.sum(x * x)

            x = np.array([1.0, 2.0])
            print(adjit.grad(energy)(3.0, x))                     # 2.5
            print(adjit.grad(energy, argnums=1)(3.0, x))          # [3. 6.]
            dk, dx = adjit.grad(energy, argnums=(0, 1))(3.0, x)   # a tuple
            print(dk, dx)

            @adjit.jit
            def fit(params, x):                   # params: a dict of parameters
                return adjit.sum((params["a"] * x + params["b"]) ** 2)

            g = adjit.grad(fit)({"a": 1.0, "b": np.zeros(2)}, x)
            print(g)                              # {'a': 10.0, 'b': array([2., 4.])}
            assert list(g) == ["a", "b"]
    """
    return _grad_of(f, argnums, False)


def value_and_grad(f, argnums=0) -> Grad:
    """JAX's value_and_grad: a function returning ``(f(*args), gradient)``, both from one
    reverse pass.

    Args:
        f: an ``@adjit.jit`` or ``@adjit.func`` function returning a float scalar.
        argnums: an int or a tuple of ints, as :func:`grad`'s (a pytree argument's
            gradient is a tree of its structure).

    Returns:
        A callable returning ``(value, gradient)``.

    Raises:
        ValueError: an argnum out of range.

    Example:
        ::

            import adjit

            @adjit.jit
            def f(x: adjit.f64, y: adjit.f64) -> adjit.f64:
                return x * x * y

            value, (dx, dy) = adjit.value_and_grad(f, argnums=(0, 1))(3.0, 2.0)
            print(value, dx, dy)   # 18.0 12.0 9.0

            @adjit.jit
            def g(p):                      # p: a tuple (a pytree)
                a, b = p
                return a * a * b

            value, (da, db) = adjit.value_and_grad(g)((3.0, 2.0))
            print(value, da, db)   # 18.0 12.0 9.0
    """
    return _grad_of(f, argnums, True)


def _like(what: str, v, like, of: str, convert: bool):
    """`v`, a tangent or cotangent, checked to be shaped like `like` (the primal or output
    `of` names), an array or a float scalar. Arrays must match in shape and dtype, as JAX
    asks; a non-array `v` is converted to `like`'s dtype first when `convert`. A struct's is
    a struct of its class."""
    st = struct_type(like)
    if st is not None:
        if struct_type(v) is not st:
            raise TypeError(f"{what} must be a {st.name} struct (its fields the tangents of "
                            f"those of {of}; adjit.zeros_like_struct makes one), got "
                            f"{_describe(v)}")
        return v
    if not isinstance(like, np.ndarray):
        if isinstance(v, np.ndarray) and v.ndim == 0:
            v = v[()]
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
            raise TypeError(f"{what} must be a real scalar, as {of} is, got {_describe(v)}")
        return v
    expected = f"shape {like.shape} and dtype {like.dtype}, those of {of}"
    if convert and not isinstance(v, np.ndarray):
        try:
            v = np.asarray(v, dtype=like.dtype)
        except (TypeError, ValueError):
            raise TypeError(f"{what} must be an array of {expected}, got "
                            f"{_describe(v)}") from None
    if not isinstance(v, np.ndarray):
        raise TypeError(f"{what} must be an array of {expected}, got {_describe(v)}")
    if v.shape != like.shape:
        raise ValueError(f"{what} has shape {v.shape}; expected {expected}")
    if v.dtype != like.dtype:
        raise TypeError(f"{what} has dtype {v.dtype}; expected {expected}")
    return np.require(v, requirements=["C", "E"])   # (ascontiguousarray: 0-d to 1-D)


def _describe(v) -> str:
    if isinstance(v, np.ndarray):
        return f"an array of shape {v.shape} and dtype {v.dtype}"
    return f"{type(v).__name__} {v!r}"


def jvp(f, primals: Sequence, tangents: Sequence, width: int | None = None):
    """JAX's jvp: ``(f(*primals), the tangent of the result along tangents)``, by forward mode.

    The result may be a float scalar or a float array (then so is its tangent), or a pytree
    of them (then the tangent is a tree of its structure; an integer leaf's is None).

    Args:
        f: an ``@adjit.jit`` or ``@adjit.func`` function.
        primals: the arguments (a sequence); pytrees among them (tuples, lists, dicts,
            NamedTuples of arrays and scalars) too.
        tangents: one tangent per primal, of its shape and dtype (a float for a scalar; a
            tree of its structure for a tree).
        width: N directions at once, in one batched forward pass (BatchDuplicated): each
            tangent is N of them (a tuple, or an array with a leading axis of N), and the
            result's tangent is an N-tuple.

    Returns:
        tuple: ``(primal result, tangent)``.

    Raises:
        ValueError: primals and tangents of different lengths ("jvp: primals and tangents
            must have the same length"), a width that does not match the tangents.
        TypeError: a tangent whose shape or dtype is not its primal's.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import Array, f64

            @adjit.jit
            def square(x: Array[f64, 1]) -> Array[f64, 1]:
                return x * x

            x = np.array([1.0, 2.0, 3.0])
            y, dy = adjit.jvp(square, (x,), (np.ones(3),))
            print(y, dy)   # [1. 4. 9.] [2. 4. 6.]
            _, (d0, d1) = adjit.jvp(square, (x,), ((np.eye(3)[0], np.eye(3)[1]),), width=2)
            print(d0, d1)  # [2. 0. 0.] [0. 4. 0.]
    """
    f = _declared(f, "jvp")
    if len(primals) != len(tangents):
        raise ValueError("jvp: primals and tangents must have the same length")
    primals = host_values(primals)
    trees = pytree_calls.route(f, primals)
    if trees is not None:     # trees among the primals: tangents of the same structures
        return jvp(trees.variant, trees.flat,
                   _flat_tangents(trees, f"jvp of {f.__name__}", tangents, width), width)
    # (a struct's tangent is a struct of its class, as its shadow in Duplicated(s, ds))
    if width is None:
        anns = [Duplicated(p, _like(f"jvp of {f.__name__}: tangent {k}", t, p, f"primal {k}",
                                    convert=True))
                for k, (p, t) in enumerate(zip(primals, tangents))]
    else:
        _check_width(width, f"jvp of {f.__name__}")
        anns = [BatchDuplicated(p, tuple(
                    _like(f"jvp of {f.__name__}: tangent {k}[{j}]", t, p, f"primal {k}",
                          convert=True)
                    for j, t in enumerate(_lanes(f"jvp of {f.__name__}: tangent {k}", ts,
                                                 width))))
                for k, (p, ts) in enumerate(zip(primals, tangents))]
    tangent, primal = autodiff(ForwardWithPrimal, f, *anns)
    return primal, tangent


def _flat_tangents(trees: pytree_calls.Route, what: str, tangents: Sequence,
                   width: int | None) -> list:
    """The tangents of a call with trees (one per primal, a tree of its structure; with
    `width`, N of them), as the variant's flat tangents."""
    out = []
    for k, (tree, t) in enumerate(zip(trees.layout, tangents)):
        if tree is None:
            out.append(t)
        elif width is None:
            out.extend(pytree_calls.like(tree, t, f"{what}: tangent {k}"))
        else:
            _check_width(width, what)
            lanes = [pytree_calls.like(tree, lane, f"{what}: tangent {k}[{j}]")
                     for j, lane in enumerate(_lanes(f"{what}: tangent {k}", t, width))]
            out.extend(tuple(lane[i] for lane in lanes) for i in range(tree.num_leaves))
    return out


def _check_width(width, what: str) -> None:
    if isinstance(width, bool) or not isinstance(width, numbers.Integral) or width < 1:
        raise ValueError(f"{what}: width must be a positive integer, got {width!r}")


def _lanes(what: str, ts, width: int) -> list:
    """The N tangents of one argument: a tuple or list of N, or an array's N rows."""
    if isinstance(ts, (tuple, list)):
        lanes = list(ts)
    elif isinstance(ts, np.ndarray) and ts.ndim >= 1:
        lanes = [ts[j] for j in range(ts.shape[0])]
    else:
        raise TypeError(f"{what}: with width={width}, a tuple of {width} tangents or an array "
                        f"with a leading axis of {width}, got {_describe(ts)}")
    if len(lanes) != width:
        raise ValueError(f"{what}: {len(lanes)} tangents for width={width}")
    return lanes


def vjp(f, *primals):
    """JAX's vjp: ``(f(*primals), pullback)``, by reverse mode.

    ``pullback(cotangent)``, the cotangent shaped like the result (a float scalar or array;
    for a result that is a pytree, a tuple, dict or NamedTuple, a tree of its structure),
    returns a tuple of one cotangent per primal: arrays for array primals, floats for
    scalar primals, a tree of the same structure for a pytree primal (a dict's cotangent
    is a dict, a NamedTuple's one of its class). ``f`` may write its array arguments: the
    pullback differentiates at the primals as they were given.

    Args:
        f: an ``@adjit.jit`` or ``@adjit.func`` function returning a float scalar or array,
            or a pytree of them.
        *primals: its arguments.

    Returns:
        tuple: ``(result, pullback)``.

    Raises:
        TypeError: a result that is not a float scalar or array; a cotangent whose shape or
            dtype is not the result's.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import Array, f64

            @adjit.jit
            def scaled(a: f64, x: Array[f64, 1]) -> Array[f64, 1]:
                return a * x

            y, pullback = adjit.vjp(scaled, 2.0, np.array([1.0, 2.0]))
            da, dx = pullback(np.array([1.0, 1.0]))
            print(y, da, dx)   # [2. 4.] 3.0 [2. 2.]

            @adjit.jit
            def moments(x: Array[f64, 1]):
                return {"sum": adjit.sum(x), "squares": x * x}   # a dict result

            out, pullback = adjit.vjp(moments, np.array([1.0, 2.0]))
            (dx,) = pullback({"sum": 1.0, "squares": np.array([1.0, 0.0])})
            print(dx)          # [3. 1.]
    """
    f = _declared(f, "vjp")
    given = len(primals)
    primals = host_values(_with_defaults(f, primals))
    trees = pytree_calls.route(f, primals)
    if trees is not None:
        # Trees among the primals: the pullback gives each a tree of its structure.
        value, flat_pullback = vjp(trees.variant, *trees.flat)

        def tree_pullback(cotangent):
            flat = flat_pullback(cotangent)
            return tuple(trees.regroup(flat, k) for k in range(given))
        return value, tree_pullback
    # The pullback differentiates at the primals as given: f may write its arrays (as this
    # call of it does), so it runs on fresh copies of those as they were.
    written = _written_arguments(f, primals)
    copied = {k for k, p in enumerate(primals)
              if isinstance(p, np.ndarray) and (written is None or k in written)}
    before = [p.copy() if k in copied else p for k, p in enumerate(primals)]
    value = f(*primals)
    # A struct result (or several results with one: `return p, e`): its float leaves are
    # the function's results, the cotangent of the same shape (compiler/derivative.py)
    structured = any(struct_type(v) is not None for v in
                     (value if isinstance(value, tuple) else (value,)))
    one_value = isinstance(value, np.ndarray) or np.isscalar(value)
    # A tree result (a tuple, dict or NamedTuple of arrays and scalars): the cotangent a
    # tree of its structure, through the inner product of all its float leaves
    tree_out = not structured and pytrees.is_tree(value)
    if not (structured or tree_out) and not (one_value and np.issubdtype(
            np.asarray(value).dtype, np.floating)):
        raise TypeError(f"vjp of {f.__name__}: the function must return one float scalar, "
                        f"float array or struct, got {_describe(value)}")

    split: list = []     # (the reverse half, the tape) of a float result, once made

    def pullback(cotangent):
        if structured:
            ct = _structured_cotangent(f, cotangent, value)
        elif tree_out:
            ct = _tree_cotangent(f, cotangent, value)
        else:
            ct = _like(f"vjp of {f.__name__}: the cotangent", cotangent, value, "the output",
                       convert=False)
        anns, shadows = _reverse_annotations(
            [p.copy() if k in copied else p for k, p in enumerate(before)], range(given))
        if getattr(f, "struct_layout", None) is not None:
            # A struct's cotangent is a struct of its class (Duplicated(s, ds)'s shadow),
            # made of the struct's leaf fields' (structs.flatten_annotations)
            flat, finish = flatten_annotations(f, anns, True)
            if isinstance(value, np.ndarray) or structured or tree_out:
                grads = finish(inner_product_grads(f, flat, ct, flat=True))
            else:
                grads = finish(_autodiff(Reverse, f, flat, None, None, "cpu"))
                grads = tuple(None if g is None else g * ct for g in grads)
                for k, a in enumerate(anns):
                    if k in shadows:
                        _scale_in_place(shadows[k], ct)
        elif isinstance(value, np.ndarray) or structured or tree_out:
            grads = inner_product_grads(f, anns, ct)
        else:
            # The augmented primal runs at the first call only: its tape serves every
            # cotangent (a tape serves several reverse calls), as JAX's residuals do.
            if not split:
                fwd, rev = autodiff_thunk(ReverseSplitWithPrimal, f, *[type(a) for a in anns])
                split.extend((rev, fwd(*anns)[0]))
            rev, tape = split
            grads = rev(*anns, ct, tape)
        return tuple(shadows[k] if k in shadows else grads[k] for k in range(given))

    return value, pullback


def _structured_cotangent(f, cotangent, value) -> list:
    """The cotangent of a struct result (a struct of its class; a tuple of the results'
    cotangents for several) as the float scalars the pullback's entries take."""
    values = value if isinstance(value, tuple) else (value,)
    given = cotangent if isinstance(value, tuple) else (cotangent,)
    if not isinstance(given, tuple) or len(given) != len(values):
        raise TypeError(f"vjp of {f.__name__}: the cotangent must be shaped like the result, "
                        f"{_describe(value)}, got {_describe(cotangent)}")
    out = []
    for k, (v, c) in enumerate(zip(values, given)):
        st = struct_type(v)
        if st is not None and struct_type(c) is not st:
            raise TypeError(f"vjp of {f.__name__}: the cotangent of a {st.name} result is a "
                            f"{st.name} struct, got {_describe(c)}")
        if st is None:
            c = _like(f"vjp of {f.__name__}: the cotangent {k}", c, v, "the output",
                      convert=True)
        out.extend(float_leaves(c))
    return out


def _tree_cotangent(f, cotangent, value) -> list:
    """The cotangent of a tree result (a tree of its structure; an integer leaf's is not
    read) as the float leaves' cotangents the pullback's entries take."""
    tree = pytrees.python_structure(value)
    pytrees.check_like(tree, cotangent, f"vjp of {f.__name__}: the cotangent", "result")
    out = []
    for (path, v), (_, c) in zip(pytrees.leaves(tree, value, "result"),
                                 pytrees.leaves(tree, cotangent, "result")):
        if np.issubdtype(np.asarray(v).dtype, np.floating):
            out.append(_like(f"vjp of {f.__name__}: the cotangent at {path}", c, v,
                             path, convert=True))
    return out


def _scale_in_place(d, c) -> None:
    """Multiplies a shadow (an array, or a struct of them and of scalars) by `c`."""
    st = struct_type(d)
    if st is None:
        d *= c
        return
    for _, t, path in leaves(st, ""):
        owner, name = field_at(d, path[:-1]), path[-1]
        v = getattr(owner, name)
        if isinstance(v, np.ndarray) and isinstance(t, (ArrayType, VecArrayType)):
            if v.dtype.kind == "f":
                v *= c
        elif isinstance(t, VecType) or (isinstance(t, ScalarType) and t.is_float):
            setattr(owner, name, v * c)


def _written_arguments(f, args: Sequence) -> set[int] | None:
    """The positions of the arrays among `args` that CPU function `f` may write (its
    specialisation's written-argument analysis, compiled as the call would), or None where
    that is not known (a struct's fields, a transform, the GPU)."""
    if not isinstance(f, Function) or f.struct_layout is not None or f.device != "cpu":
        return None
    types, _ = specialise(f.__name__, f.params, f.annotations, list(args))
    return set(service.cpu(f, types)[1].meta["written"])


def inner_product_grads(f, anns: list[Annotation], cotangent: np.ndarray,
                         flat: bool = False) -> tuple:
    """Reverse mode of `sum(f(*anns) * cotangent)` (derivative.py builds that function): the
    vjp of array-valued `f`. Returns one derivative per argument (None for non-Active).
    `flat`: `anns` give a struct argument as its fields."""
    anns, types, values, _, _ = _prepare(f, anns, None, None, True, flat=flat)
    d = _derivative(f, Reverse, anns, types, None, None, pullback=True)
    flat = _flatten_args(Reverse, anns, types, values)
    # (a struct's or vector's cotangent: its float scalars, one argument each)
    cts = list(cotangent) if isinstance(cotangent, list) else (
        float_leaves(cotangent) if d.cotangents > 1 or d.layout else [cotangent])
    _guard(f, anns, True, flat + cts, d.written, (d.COMBINED,), 0,
           tuple(autodiff_checks.Slot("", "cotangent") for _ in cts))
    out = (d.reverse(flat + cts) if profiling.ACTIVE is None
           else _recorded(f, _PULLBACK, None, d.reverse, flat + cts))
    return out[1][:len(anns)]     # (not the cotangents')


def check_grad(f, *args, eps: float | None = None, seed: int = 0) -> float:
    """Checks the derivatives of scalar-valued ``f``: compares its reverse- and forward-mode
    derivatives with central finite differences along a random direction.

    The direction spans every float argument (scalars, arrays, a struct's float fields);
    integer and bool arguments (an index, say) are constants passed as they are.

    Args:
        f: an ``@adjit.jit`` or ``@adjit.func`` function returning a float scalar.
        *args: its arguments.
        eps: the finite-difference step: 1e-6 by default, or 1e-3 where an argument is
            float32 (whose rounding would swamp a smaller step's difference).
        seed: the seed of the random direction.

    Returns:
        float: the worst relative error of the two modes against finite differences (near
        1e-9 for smooth float64 code; a wrong derivative gives about 1).

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import Array, f64

            @adjit.jit
            def rosen(x: Array[f64, 1]) -> f64:
                return adjit.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

            err = adjit.check_grad(rosen, np.array([0.5, 1.5, -0.3]))
            assert err < 1e-6, err
            print(err)
    """
    f = _declared(f, "check_grad")
    rng = np.random.default_rng(seed)
    args = host_values(args)       # (a torch tensor or JAX array: a NumPy array of it)

    def is_f32(a) -> bool:
        st = struct_type(a)
        if st is None:
            return np.asarray(a).dtype == np.float32
        return any(is_float_field(t) and np.asarray(field_at(a, path)).dtype == np.float32
                   for _, t, path in leaves(st, ""))
    if eps is None:
        eps = 1e-3 if any(is_f32(a) for a in args) else 1e-6

    def like(v, x):             # x with the dtype (and for a scalar the kind) of field v
        dtype = np.asarray(v).dtype
        return np.asarray(x, dtype=dtype) if np.ndim(v) else dtype.type(x)

    def random_field(t, v):     # a struct's direction: random in its float fields
        return like(v, rng.standard_normal(np.shape(v))) if is_float_field(t) else v

    # Integer and bool arguments (an index, a count; int arrays) are constants, as in
    # JAX's check_grads: no direction, and passed as they are (None marks them).
    direction = [map_fields(random_field, a) if struct_type(a) is not None
                 else rng.standard_normal(a.shape) if isinstance(a, np.ndarray)
                 and np.issubdtype(a.dtype, np.floating)
                 else rng.standard_normal() if isinstance(a, (float, np.floating)) else None
                 for a in args]

    def cast(v, like):
        if struct_type(like) is not None:
            return v
        return (np.asarray(v, dtype=like.dtype) if isinstance(like, np.ndarray) else
                like.dtype.type(v) if isinstance(like, np.floating) else float(v))

    def along(a, d, h):
        if struct_type(a) is None:
            return a + h * d
        return map_fields(lambda t, v, dv: like(v, v + h * dv) if is_float_field(t) else v,
                          a, d)

    def shifted(h):
        return [along(a, d, h) if d is not None else a for a, d in zip(args, direction)]

    def dot(g, d):
        st = struct_type(g)
        if st is None:
            return float(np.sum(g * d))
        return sum(float(np.sum(np.asarray(field_at(g, path), dtype=np.float64) *
                                field_at(d, path)))
                   for _, t, path in leaves(st, "") if is_float_field(t))

    def at(h):                  # the arguments moved by h along the direction
        return [cast(v, a) if d is not None else a
                for v, a, d in zip(shifted(h), args, direction)]

    fd = (f(*at(eps)) - f(*at(-eps))) / (2 * eps)
    rev_anns, shadows = [], {}
    for k, (a, d) in enumerate(zip(args, direction)):
        if d is None:
            rev_anns.append(Const(a))
        elif struct_type(a) is not None:
            shadows[k] = structs_zeros_like(a)
            rev_anns.append(Duplicated(along(a, d, 0.0), shadows[k]))   # (a copy)
        elif isinstance(a, np.ndarray):
            shadows[k] = np.zeros_like(a)
            rev_anns.append(Duplicated(a.copy(), shadows[k]))
        else:
            rev_anns.append(Active(a))
    grads = autodiff(Reverse, f, *rev_anns)
    rev = sum(dot(shadows[k], d) if k in shadows else
              float(grads[k]) * d for k, d in enumerate(direction) if d is not None)
    fwd_anns = [Const(a) if d is None else Duplicated(
                    along(a, d, 0.0) if struct_type(a) is not None else
                    a.copy() if isinstance(a, np.ndarray) else a, cast(d, a))
                for a, d in zip(args, direction)]
    fwd = float(autodiff(Forward, f, *fwd_anns))
    scale = max(abs(float(fd)), 1e-12)
    return max(abs(rev - float(fd)) / scale, abs(fwd - float(fd)) / scale)


# ---- higher order, with JAX's meanings ---------------------------------------------------------
def hvp(f, primals: Sequence, tangents: Sequence, width: int | None = None):
    """The Hessian of scalar ``f`` at ``primals`` times ``tangents``, forward over reverse
    (the jvp of ``grad(f)``: one pass of each, never the Hessian itself).

    Args:
        f: an ``@adjit.jit`` or ``@adjit.func`` function returning a float scalar.
        primals: its arguments (a sequence).
        tangents: one direction per primal, of its shape.
        width: N products in one batched pass (each tangent N of them, as :func:`jvp`
            takes them); the result is then an N-tuple of products.

    Returns:
        The product, shaped like the primal (a tuple of them when there are several; a
        struct argument's is a struct of its class).

    Raises:
        ValueError: primals and tangents of different lengths.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import Array, f64

            @adjit.jit
            def quartic(x: Array[f64, 1]) -> f64:
                return adjit.sum(x ** 4)

            x = np.array([1.0, 2.0])
            print(adjit.hvp(quartic, (x,), (np.array([1.0, 0.0]),)))   # [12.  0.]
    """
    f = _declared(f, "hvp")
    trees = pytree_calls.route(f, host_values(primals))
    if trees is not None:     # trees: the products as trees of their structures
        if len(primals) != len(tangents):
            raise ValueError(f"hvp of {f.__name__}: primals and tangents must have the same "
                             "length")
        out = hvp(trees.variant, trees.flat,
                  _flat_tangents(trees, f"hvp of {f.__name__}", tangents, width), width)

        def grouped(flat):
            flat = flat if len(trees.flat) > 1 else (flat,)
            parts = tuple(trees.regroup(flat, k) for k in range(len(primals)))
            return parts if len(parts) > 1 else parts[0]
        return grouped(out) if width is None else tuple(grouped(o) for o in out)
    if any(struct_type(p) is not None for p in primals):
        return _struct_hvp(f, host_values(primals), tangents, width)
    nums = 0 if len(primals) == 1 else tuple(range(len(primals)))
    return jvp(grad(f, nums), primals, tangents, width)[1]


def _struct_hvp(f, primals: Sequence, tangents: Sequence, width: int | None):
    """hvp with struct arguments (each tangent a struct of its primal's class): that of f's
    flat form, whose parameters are the structs' leaf fields (structs.py), with respect to
    their float leaves and the other arguments; each struct's products gathered into a
    struct of its class. With `width=N`, N such products, one pass each."""
    name = f"hvp of {getattr(f, '__name__', f)}"
    if len(primals) != len(tangents):
        raise ValueError(f"{name}: primals and tangents must have the same length")
    if not isinstance(f, (Function, Kernel)) or f.struct_layout is None:
        raise TypeError(f"{name}: a struct argument is for a function with a struct parameter")
    if width is not None:
        _check_width(width, name)
        lanes = [_lanes(f"{name}: tangent {k}", ts, width) if struct_type(p) is None else
                 list(ts) if isinstance(ts, (tuple, list)) and len(ts) == width else
                 _lanes(f"{name}: tangent {k}", ts, width)
                 for k, (p, ts) in enumerate(zip(primals, tangents))]
        return tuple(_struct_hvp(f, primals, [ls[j] for ls in lanes], None)
                     for j in range(width))
    if len(primals) != len(f.struct_layout):
        raise TypeError(f"{name}: {f.__name__} takes {len(f.struct_layout)} arguments, got "
                        f"{len(primals)}")
    anns, places = [], []      # places: (argument, leaf path) per float leaf
    for k, (st, p, t) in enumerate(zip(f.struct_layout, primals, tangents)):
        t = _like(f"{name}: tangent {k}", t, p, f"primal {k}", convert=True)
        if st is None:
            places.append((k, None))
            anns.append(Duplicated(p, t))
            continue
        for leaf, (_, ft, path) in zip(
                struct_leaf_values(st, p, f"{name}: primal {k}"), leaves(st, "")):
            dtype = (ft if isinstance(ft, ScalarType) else ft.vec.dtype
                     if isinstance(ft, VecArrayType) else ft.dtype)
            if not dtype.is_float:
                anns.append(Const(leaf))
                continue
            d = field_at(t, path)
            if d is None:
                raise TypeError(f"{name}: field {'.'.join(path)!r} of tangent {k} is not set")
            places.append((k, path))
            anns.append(Duplicated(leaf, np.asarray(d, dtype=np.asarray(leaf).dtype)
                                   if isinstance(leaf, np.ndarray) else d))
    nums = tuple(j for j, a in enumerate(anns) if isinstance(a, Duplicated))
    products = autodiff(Forward, grad(f, nums), *anns)
    products = products if isinstance(products, tuple) else (products,)
    out = [structs_zeros_like(p) if st is not None else None
           for st, p in zip(f.struct_layout, primals)]
    for (k, path), hv in zip(places, products):
        if path is None:
            out[k] = hv
        else:
            setattr(field_at(out[k], path[:-1]), path[-1], hv)
    return out[0] if len(out) == 1 else tuple(out)


class Jacobian(Transform):
    """`adjit.jacfwd(f, argnums)` / `adjit.jacrev(f, argnums)`: a function returning the
    Jacobian of `f` with respect to argument `argnums` (a float scalar or array), shape
    `out.shape + x.shape`, built in compiled code by columns (one forward pass per element
    of the argument) or by rows (one reverse pass per element of the result), in a loop
    (derivative_calls.jacobian_call). Every pass starts from the arguments as given: those
    `f` writes are copied first and put back after each pass, so they end unchanged."""

    def __init__(self, f, argnums: int, reverse: bool = False, width: int = 1):
        super().__init__(f, "jacrev" if reverse else "jacfwd")
        self.argnums, self.reverse, self.width = argnums, reverse, width

    def __call__(self, *args):
        if has_tree(args):
            return _tree_jacobian(self, host_values(args))
        try:
            return super().__call__(*args)
        except CompilationError:
            # (looked at only where the compiled Jacobian refuses f: the call's cost stays)
            if not _returns_tree(self.f, host_values(args)):
                raise
        return _jacobian_of_tree_result(self, host_values(args))


# ---- transforms of functions taking trees, from Python ----------------------------------------
# A tree argument is its leaves to the compiled transforms: the call goes to f's variant for
# the trees' structures (Function.with_trees), each derivative is taken with respect to one
# leaf (a flat position), and the results are regrouped into trees of the arguments'
# structures, as JAX gives them: the Jacobian with respect to a tree is a tree of the same
# structure of out.shape + leaf.shape arrays; a Hessian, a tree of such trees.
def _routed(t: Transform, args: Sequence) -> pytree_calls.Route:
    """The Route of a call of transform `t`'s innermost function with `args`, whose trees
    must be arguments of that function (TypeError otherwise)."""
    inner = t
    while isinstance(inner, Transform):
        inner = inner.f
    r = pytree_calls.route(inner, args)
    if r is None:
        k = next(k for k, a in enumerate(args) if pytrees.is_tree(a))
        raise TypeError(f"{t.__name__}: argument {k} is a {type(args[k]).__name__} (a tree), "
                        f"which {getattr(inner, '__name__', inner)} does not take as a tree "
                        "(a vector or struct annotation there, or not its number of "
                        "arguments)")
    return r


def _one_leaf(t: Transform, r: pytree_calls.Route, k: int, what: str) -> int:
    """The flat position of argument `k` of `t`, which must not be a tree (`what` it is)."""
    if r.layout[k] is not None:
        raise TypeError(f"{t.__name__}: argument {k} is a tree, and {what}: a derivative of "
                        "a derivative is taken with respect to scalars and arrays, of "
                        "functions whose inner derivative is a scalar or an array")
    return r.spans[k][0]


def _tree_jacobian(jac: Jacobian, args: Sequence):
    """`jacfwd(f, k)(*args)` (or jacrev, or `hessian(f, k)`: jacfwd(grad(f, k), k)) with
    trees among the arguments."""
    r = _routed(jac, args)
    n = len(r.layout)
    (k,) = _argnums(jac.argnums, n)
    if not isinstance(jac.f, Transform) and _returns_tree(r.variant, r.flat):
        return _jacobian_of_tree_result(jac, args)
    if isinstance(jac.f, Grad) and not isinstance(jac.f.f, Transform):
        g = jac.f
        if g.with_value or not isinstance(g.argnums, int):
            raise TypeError(f"{jac.__name__}: the Jacobian of a gradient with respect to one "
                            "argument (argnums an int) is taken of functions taking trees")
        (i,) = _argnums(g.argnums, n)
        cache: dict = {}

        def block(a: int, b: int):
            """d/d leaf b of (d f / d leaf a): leaf a's shape + leaf b's."""
            if i == k and (b, a) in cache:     # (symmetric: a transposed block)
                h = cache[(b, a)]
                nb = np.ndim(r.flat[b])
                return np.transpose(h, tuple(range(nb, np.ndim(h))) + tuple(range(nb)))
            cache[(a, b)] = jacfwd(grad(r.variant, a), b, jac.width)(*r.flat)
            return cache[(a, b)]
        rows = _leaf_positions(r, i)
        cols = _leaf_positions(r, k)
        grouped = {a: r.regroup(_padded(r, k, [block(a, b) for b in cols]), k) for a in rows}
        return r.regroup(_padded(r, i, [grouped[a] for a in rows]), i)
    if isinstance(jac.f, Transform):
        _one_leaf(jac, r, k, "the Jacobian of this derivative is taken with respect to it")
    inner = (r.variant if not isinstance(jac.f, Transform)
             else _leaf_transform(jac.f, r))
    parts = [_jacobian_of(inner, b, jac.reverse, jac.width)(*r.flat)
             for b in _leaf_positions(r, k)]
    return r.regroup(_padded(r, k, parts), k)


def _returns_tree(f, args: Sequence) -> bool:
    """Whether CPU function `f` called with `args` (no trees) returns a tree or several
    results (its compiled specialisation's record says)."""
    if not isinstance(f, Function) or f.struct_layout is not None or f.device != "cpu":
        return False
    types, _ = specialise(f.__name__, f.params, f.annotations, list(args))
    meta = service.cpu(f, types)[1].meta
    return "tree" in meta or (meta["tuple"] and len(meta["results"]) > 1)


def _jacobian_of_tree_result(jac: Jacobian, args: Sequence):
    """`jacfwd(f, k)(*args)` or `jacrev(f, k)(*args)` for `f` returning a tree (or several
    results): JAX's tree of Jacobians, the result's structure outside and argument k's
    inside (for a tree argument), each block out_leaf.shape + in_leaf.shape. By columns,
    one jvp per element of argument k's float leaves; by rows, one pullback of one vjp per
    element of the result's float leaves (each from Python)."""
    f = jac.f
    (k,) = _argnums(jac.argnums, len(args))
    in_tree = pytrees.python_structure(args[k]) if pytrees.is_tree(args[k]) else None
    in_leaves = ([v for _, v in pytrees.leaves(in_tree, args[k])] if in_tree is not None
                 else [args[k]])
    for p, v in zip(pytrees.paths(in_tree, f"argument {k}") if in_tree is not None
                    else [f"argument {k}"], in_leaves):
        if not np.issubdtype(np.asarray(v).dtype, np.floating):
            raise TypeError(f"{jac.__name__}: {p} is not a float scalar or array; a Jacobian "
                            "is taken with respect to floats")
    zeros = [_zero_tangent(a) for a in args]
    blocks: list[list] = []          # per result leaf, per argument leaf
    if not jac.reverse:
        value, columns = None, []    # per argument leaf, per element: the result's tangents
        for j, x in enumerate(in_leaves):
            cols = []
            for e in range(np.size(x)):
                d = [np.zeros_like(np.asarray(v)) for v in in_leaves]
                d[j].flat[e] = 1.0
                d = [t if isinstance(v, np.ndarray) else float(t)
                     for t, v in zip(d, in_leaves)]
                tangents = list(zeros)
                tangents[k] = pytrees.unflatten(in_tree, d) if in_tree is not None else d[0]
                value, t = jvp(f, args, tangents)
                cols.append([np.asarray(c) if c is not None else None
                             for _, c in pytrees.leaves(pytrees.python_structure(t), t)])
            columns.append(cols)
        if value is None:      # (size-0 arguments: the result's structure from a call)
            value = f(*args)
        out_tree = pytrees.python_structure(value)
        out_leaves = [v for _, v in pytrees.leaves(out_tree, value)]
        for i, y in enumerate(out_leaves):
            row = []
            for j, x in enumerate(in_leaves):
                shape = np.shape(y) + np.shape(x)
                row.append(_float_block(y, [c[i] for c in columns[j]], shape, axis=-1))
            blocks.append(row)
    else:
        value, pullback = vjp(f, *args)
        out_tree = pytrees.python_structure(value)
        out_leaves = [v for _, v in pytrees.leaves(out_tree, value)]
        zero_ct = [np.zeros_like(v) if isinstance(v, np.ndarray) else type(v)(0)
                   for v in out_leaves]
        for i, y in enumerate(out_leaves):
            rows = []
            if np.issubdtype(np.asarray(y).dtype, np.floating):
                for e in range(np.size(y)):
                    ct = list(zero_ct)
                    ct[i] = np.zeros_like(y)
                    ct[i].flat[e] = 1.0
                    ct[i] = ct[i] if isinstance(y, np.ndarray) else type(y)(ct[i])
                    g = pullback(pytrees.unflatten(out_tree, ct))[k]
                    rows.append([np.asarray(v) for _, v in pytrees.leaves(in_tree, g)]
                                if in_tree is not None else [np.asarray(g)])
            blocks.append([_float_block(y, [r[j] for r in rows], np.shape(y) + np.shape(x),
                                        axis=0)
                           for j, x in enumerate(in_leaves)])
    inner = [pytrees.unflatten(in_tree, row) if in_tree is not None else row[0]
             for row in blocks]
    return pytrees.unflatten(out_tree, inner)


def _float_block(y, parts: list, shape: tuple, axis: int):
    """One block of a tree result's Jacobian, from its columns (axis -1) or rows (axis 0):
    None for an integer result leaf (it has no derivatives, as its tangent has none)."""
    if not np.issubdtype(np.asarray(y).dtype, np.floating):
        return None
    if not parts:
        return np.zeros(shape, np.asarray(y).dtype)
    return np.stack(parts, axis=axis).reshape(shape).astype(np.asarray(y).dtype, copy=False)


def _zero_tangent(a):
    """A zero tangent for argument `a` (a tree of zeros for a tree)."""
    if pytrees.is_tree(a):
        tree = pytrees.python_structure(a)
        return pytrees.unflatten(tree, [_zero_tangent(v) for _, v in pytrees.leaves(tree, a)])
    return np.zeros_like(a) if isinstance(a, np.ndarray) else type(a)(0)


def _leaf_positions(r: pytree_calls.Route, k: int) -> range:
    start, count = r.spans[k]
    return range(start, start + count)


def _padded(r: pytree_calls.Route, k: int, parts: list) -> list:
    """Argument `k`'s per-leaf `parts` at their flat positions (what Route.regroup reads)."""
    return [None] * r.spans[k][0] + list(parts)


def _leaf_transform(t, r: pytree_calls.Route):
    """Transform chain `t` over the variant of Route `r`: each Grad's argnums the flat
    positions of its arguments, which must not be trees (a gradient with respect to a tree
    is a tree: what differentiates it again takes scalars and arrays)."""
    if not isinstance(t, Transform):
        return r.variant
    inner = _leaf_transform(t.f, r)
    if isinstance(t, Grad):
        nums = t.nums(len(r.layout))
        flat = tuple(_one_leaf(t, r, k, "the gradient is differentiated again")
                     for k in nums)
        return Grad(inner, flat[0] if isinstance(t.argnums, int) else flat, t.with_value)
    return Jacobian(inner, _one_leaf(t, r, t.argnums, "the Jacobian is differentiated "
                                     "again"), t.reverse, t.width)


def _tree_grad_of_grad(g: Grad, args: Sequence):
    """`grad(h)(*args)`, `h` a derivative (`grad(f, i)` of a scalar argument i), with trees
    among the arguments: the gradient with respect to `g`'s arguments, a tree per tree."""
    r = _routed(g, args)
    inner = _leaf_transform(g.f, r)
    nums = g.nums(len(r.layout))
    flat_g = _one_of(inner, ("grad", r.flat_nums(nums), g.with_value),
                     lambda: Grad(inner, r.flat_nums(nums), g.with_value))
    got = Transform.__call__(flat_g, *r.flat)
    value, flat = got if g.with_value else (None, got)
    out, at = [], 0
    for k in nums:
        n = r.spans[k][1]
        out.append(r.regroup(_padded(r, k, flat[at:at + n]), k))
        at += n
    out = out[0] if isinstance(g.argnums, int) else tuple(out)
    return (value, out) if g.with_value else out


def _jacobian_of(f, argnums: int, reverse: bool, width: int = 1) -> Jacobian:
    f = _declared(f, "jacrev" if reverse else "jacfwd")
    return _one_of(f, ("jacobian", argnums, reverse, width),
                   lambda: Jacobian(f, argnums, reverse, width))


def jacfwd(f, argnums: int = 0, width: int = 1) -> Jacobian:
    """JAX's jacfwd: the Jacobian by columns, one forward pass per element of the argument.

    Args:
        f: an ``@adjit.jit`` or ``@adjit.func`` function returning a float scalar or array.
        argnums: the argument (an int) to differentiate with respect to.
        width: with N, one batched pass (BatchDuplicated) per N elements: the primal is
            computed n/N times instead of n.

    Returns:
        A callable taking ``f``'s arguments and returning the Jacobian, of shape
        ``result.shape + x.shape``. With respect to a pytree argument (a tuple, list, dict
        or NamedTuple), a tree of its structure whose leaves are ``result.shape +
        leaf.shape``; of a function returning a tree, a tree of the result's structure of
        such Jacobians (JAX's).

    Raises:
        ValueError: a width below 1.
        TypeError: a Jacobian with respect to an integer leaf of a tree.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import Array, f64

            @adjit.jit
            def square(x: Array[f64, 1]) -> Array[f64, 1]:
                return x * x

            print(adjit.jacfwd(square, width=2)(np.array([1.0, 2.0, 3.0])))   # diag(2, 4, 6)

            @adjit.jit
            def affine(params, x):                # params: a dict (a pytree)
                return params["W"] @ x + params["b"]

            params = {"W": np.ones((2, 3)), "b": np.zeros(2)}
            J = adjit.jacfwd(affine)(params, np.array([1.0, 2.0, 3.0]))
            print(J["W"].shape, J["b"].shape)    # (2, 2, 3) (2, 2)
    """
    _check_width(width, "jacfwd")
    return _jacobian_of(f, argnums, False, width)


def jacrev(f, argnums: int = 0) -> Jacobian:
    """JAX's jacrev: the Jacobian by rows, one reverse pass per element of the result (a
    gradient for a scalar result).

    Args:
        f: an ``@adjit.jit`` or ``@adjit.func`` function returning a float scalar or array.
        argnums: the argument (an int) to differentiate with respect to.

    Returns:
        A callable returning the Jacobian, of shape ``result.shape + x.shape``; for pytree
        arguments and results, trees of them as :func:`jacfwd` gives.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import Array, f64

            @adjit.jit
            def polar(r: f64, t: f64):
                return {"x": r * np.cos(t), "y": r * np.sin(t)}   # a dict result

            J = adjit.jacrev(polar, argnums=1)(2.0, 0.0)
            print(J)                # {'x': array(0.), 'y': array(2.)}: d/dt of each

            @adjit.jit
            def cumulative(x: Array[f64, 1]) -> Array[f64, 1]:
                out = adjit.zeros(x.shape[0])
                total = 0.0
                for i in range(x.shape[0]):
                    total = total + x[i]
                    out[i] = total
                return out

            print(adjit.jacrev(cumulative)(np.ones(3)))   # lower-triangular ones
    """
    return _jacobian_of(f, argnums, True)


def hessian(f, argnums: int = 0, width: int = 1) -> Callable:
    """JAX's hessian: ``jacfwd(grad(f))``, the second derivatives of scalar ``f``.

    Args:
        f: an ``@adjit.jit`` or ``@adjit.func`` function returning a float scalar.
        argnums: the argument (an int) to differentiate with respect to.
        width: :func:`jacfwd`'s (tangents per forward pass).

    Returns:
        A callable returning the Hessian, of shape ``x.shape + x.shape``; with respect to a
        pytree argument, a tree of trees of its structure (JAX's): ``H["W"]["b"]`` of shape
        ``W.shape + b.shape``.

    Example:
        ::

            import numpy as np
            import adjit
            from adjit import Array, f64

            @adjit.jit
            def f(x: Array[f64, 1]) -> f64:
                return x[0] * x[0] * x[1]

            print(adjit.hessian(f)(np.array([1.0, 2.0])))   # [[4. 2.] [2. 0.]]

            @adjit.jit
            def g(p):                            # p: a dict (a pytree)
                return p["a"] * p["a"] * adjit.sum(p["v"])

            H = adjit.hessian(g)({"a": 3.0, "v": np.ones(2)})
            print(H["a"]["a"], H["a"]["v"])      # 4.0 [6. 6.]
    """
    f = _declared(f, "hessian")
    return jacfwd(grad(f, argnums), argnums, width)


# ---- inside compiled code ------------------------------------------------------------------
# The API's objects in the compiler's registry of callables (compiler/callables.py, MLIR-free:
# registering costs nothing here). `adjit.grad(f)`, `jacfwd(f)`... are evaluated while
# compiling (a Grad or Jacobian, whose call is compiled); calls of `autodiff`, `jvp`, `hvp`,
# `vjp` and of a Grad or Jacobian compile to derivative calls (compiler/derivative_calls.py,
# imported, and MLIR with it, only when code calls one).
def _autodiff_in_code(gen, args: list, kwargs: dict):
    from ..compiler.derivative_calls import call_autodiff_in_code
    return call_autodiff_in_code(gen, args, kwargs)


def _jvp_in_code(gen, args: list, kwargs: dict):
    from ..compiler.derivative_calls import call_jvp
    return call_jvp(gen, args, kwargs)


def _hvp_in_code(gen, args: list, kwargs: dict):
    from ..compiler.derivative_calls import call_jvp
    return call_jvp(gen, args, kwargs, grad=grad)     # (the jvp of grad(f))


def _vjp_in_code(gen, args: list, kwargs: dict):
    from ..compiler.derivative_calls import call_vjp
    return call_vjp(gen, args, kwargs)


def _grad_in_code(gen, g: Grad, args: list, kwargs: dict):
    from ..compiler.derivative_calls import call_grad
    return call_grad(gen, g, args, kwargs)


def _define_grad(unit, g: Grad, types: list) -> tuple:
    from ..compiler.derivative_calls import define_grad
    return define_grad(unit, g, types)


def _jacobian_in_code(gen, jac: Jacobian, args: list, kwargs: dict):
    from ..compiler.derivative_calls import call_jacobian
    return call_jacobian(gen, jac, args, kwargs)


def _define_jacobian(unit, jac: Jacobian, types: list) -> tuple:
    from ..compiler.derivative_calls import define_jacobian
    return define_jacobian(unit, jac, types)


callables.register(autodiff, _autodiff_in_code)
callables.register(jvp, _jvp_in_code)
callables.register(hvp, _hvp_in_code)
callables.register(vjp, _vjp_in_code)
callables.register_type(Grad, _grad_in_code, define=_define_grad)
callables.register_type(Jacobian, _jacobian_in_code, define=_define_jacobian)
for _transform in (grad, value_and_grad, jacfwd, jacrev, hessian):
    callables.register_evaluated(_transform)
