"""Derivatives called from compiled code (Enzyme's `autodiff_deferred`): `adjit.autodiff`,
`adjit.grad`, `adjit.value_and_grad` and `adjit.jvp` inside `@adjit.jit`, `@adjit.func` and
kernels, with the same annotations and return conventions as from Python.

A call compiles the differentiated function into the same module, adds an `adj.autodiff`
request for it (one per signature: a loop calling a gradient makes one request) and calls the
function the request defines: the forward derivative, or, in reverse mode, the `combined` one
(the augmented function, then the reverse one on its tape: passes/autodiff/driver.py). The
autodiff pass runs before the module is lowered (`CompileUnit.before_lowering`), so a
gradient-descent loop compiles to one native function with no Python in it.

A derivative is itself a function the pass can differentiate (a request may name a function
another request defines): `adjit.grad(adjit.grad(f))`, `adjit.jvp(adjit.grad(f), ...)` (a
Hessian-vector product, forward over reverse) compile to nested requests. `Grad` objects (what
`adjit.grad` returns) become functions of the module (`define_grad`), so they can be called,
differentiated, and called from Python (`compile_transform`, through a compiled entry).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from ..core.activity import Activity
from ..core.derivative_abi import DerivativeABI, DerivativeMode
from ..core.errors import UserError
from ..core.types import ArrayType, ScalarType
from ..dialects import adj
from ..dialects.mlir_types import mlir_type
from . import arrays as A
from . import scalar_ops as S
from . import vectors as V
from . import callables
from . import trees as T
from . import derivative_args as DA
from . import struct_values as SV
from .new_functions import new_function, operand, typed
from .unit import CompileUnit, bound_arguments, compiled
from ..lang import pytrees
from ..lang.functions import Function, Kernel
from ..lang.modes import (Active, Annotation, BatchDuplicated, Const, Duplicated, Forward,
                    ForwardWithPrimal, Reverse, ReverseWithPrimal, batch_width)
from ..lang.modes import Mode
from .values import Array, Literal, PyObj, Scalar, StructValue, Vec, VecArray

if TYPE_CHECKING:
    from .codegen import CodeGenerator
    from .compiled import Compiled


class GradOf(Protocol):
    """What the compiler reads of `adjit.grad(f, argnums)` and `value_and_grad` (the API's
    Grad, api/autodiff.py, which registers its handlers with the registry of callables)."""
    f: Any
    argnums: Any
    with_value: bool
    __name__: str

    def nums(self, n: int) -> tuple[int, ...]:
        """The positions differentiated among `n` arguments."""


class JacobianOf(Protocol):
    """What the compiler reads of `adjit.jacfwd(f, argnums)`, `jacrev`, `hessian` (the
    API's Jacobian)."""
    f: Any
    argnums: int
    reverse: bool
    width: int
    __name__: str


# ---- the request and the call ---------------------------------------------------------------
def _request(unit: CompileUnit, symbol: str, abi: DerivativeABI) -> str:
    """The name of the function differentiating @symbol with layout `abi` (requested once per
    unit; in reverse mode the combined function: augmented, then reverse)."""
    key = (symbol, abi.mode, abi.activity, abi.ret_activity, abi.with_primal, abi.width)
    if key not in unit.requests:
        letters = "".join(a.letter for a in abi.activity)
        name = (f"__adj_call_{symbol}_{'fwd' if abi.mode is DerivativeMode.FORWARD else 'rev'}_"
                f"{letters}_{abi.ret_activity.letter}{'p' if abi.with_primal else ''}"
                f"{f'_w{abi.width}' if abi.width > 1 else ''}")
        with ir.InsertionPoint(unit.module.body), ir.Location.unknown():
            adj.autodiff(name, symbol, abi, combined=abi.mode is DerivativeMode.REVERSE)
        unit.requests[key] = name
        if _run_pass not in unit.before_lowering:
            unit.before_lowering.append(_run_pass)
    return unit.requests[key]


def _run_pass(unit: CompileUnit) -> None:
    from .derivative import run_pass
    run_pass(unit)


def derivative_call(unit: CompileUnit, f, mode: Mode, anns: Sequence[Annotation],
                    name: str, where: str = "jit") -> list:
    """Emits, at the insertion point, the call of `f`'s derivative in `mode` for the
    annotated frontend values `anns`; returns the results as Python's autodiff does.
    Struct and vector arguments are their leaves (derivative_args.py), struct and vector
    results gathered again; `where`: the kind of the calling code (a fresh shadow of a
    struct's array is made in @jit code only)."""
    given = len(anns)
    if isinstance(f, Function) and f.defaults and len(anns) < len(f.struct_params):
        # parameters left to their defaults: Const (unit.bound_arguments' values for them)
        full = bound_arguments(f, [a.val for a in anns], {})
        anns = list(anns) + [Const(v) for v in full[given:]]
    trees = _tree_derivative(unit, f, mode, anns, name)
    if trees is not None:
        return trees
    expanded = None
    if DA.structured(anns):
        if not isinstance(f, (Function, _InUnit)):
            # (a gradient defined as a function of the unit takes its arguments as the
            # Python function does; its struct's or vector's leaves would shift argnums)
            raise UserError(f"{name}() of {getattr(f, '__name__', f)} with a struct or "
                            "vector argument inside compiled code: second derivatives take "
                            "scalars and arrays (pass the struct's fields or the vector's "
                            "components as arguments)")
        expanded = DA.expand(anns, mode.reverse, where, name)
        anns = expanded.anns
    try:
        width = 1 if mode.reverse else batch_width(anns, f"{name}()")
    except (TypeError, ValueError) as e:
        raise UserError(str(e)) from None
    values, shadows, activity = [], [], []
    for k, a in enumerate(anns):
        what = f"{name}(): argument {k}"
        v = operand(a.val, what)
        t = v.type
        act = Activity(a.activity)
        if act == Activity.ACTIVE:
            if not mode.reverse:
                raise UserError(f"{what}: forward mode takes Duplicated(x, dx), not Active")
            if isinstance(t, ArrayType) or not t.is_float:
                raise UserError(f"{what} is marked Active: only float scalars are (an array "
                                "is Duplicated(x, dx))")
        shadow = None
        if isinstance(a, BatchDuplicated):
            if mode.reverse:
                # (From Python, autodiff runs the primal once and one reverse sweep per
                # lane on its tape: split mode, which compiled code has not.)
                raise UserError(f"{what} is BatchDuplicated: inside compiled code, batched "
                                "tangents are of forward mode; in reverse mode make one call "
                                "per cotangent (from Python, autodiff takes a batch)")
            shadow = tuple(_shadow(d, v, mode, f"{what} (tangent {j})")
                           for j, d in enumerate(a.dval))
            shadow = shadow if width > 1 else shadow[0]   # (the layout's one tangent)
        elif act in (Activity.DUP, Activity.DUPNONEED):
            shadow = _shadow(a.dval, v, mode, what)
        if isinstance(v, Array) and shadow is not None:
            v, shadow = _one_layout(v, shadow)
        values.append(v)
        shadows.append(shadow)
        activity.append(act)
    types = [v.type for v in values]
    declared = types if expanded is None else [values[t].type if isinstance(t, int) else t
                                               for t in expanded.types]
    symbol, results, _ = _define(unit, f, declared)
    layout = unit.vector_results.get(symbol)     # (struct and vector results)
    if len(results) > 1 and mode.reverse:
        raise UserError(f"{name}(): reverse mode differentiates functions of one result; "
                        f"{f.__name__} returns {len(results)}")
    float_result = any(_is_float(t) for t in results)
    if mode.reverse and results and isinstance(results[0], ArrayType):
        raise UserError(f"{name}(): reverse mode of {f.__name__}, which returns an array "
                        "(a gradient is of a scalar function)")
    ret = ((Activity.ACTIVE if mode.reverse else Activity.DUP) if float_result
           else Activity.CONST)
    abi = DerivativeABI(mode.kind, tuple(activity), ret, mode.with_primal, width)
    request = _request(unit, symbol, abi)
    args = [x.value for x in abi.flatten(values, shadows)]
    if mode.reverse:
        dret = [S.as_scalar(Literal(1.0), t).value for t in abi.dret(results, _is_float)]
        outs = abi.split_results(results, len(results))[0] + abi.adjoints(types)
        call = func.CallOp([mlir_type(t) for t in outs], ir.FlatSymbolRefAttr.get(request),
                           args + dret)
        primal, adjoints = abi.split_results(
            [typed(r, t) for r, t in zip(call.results, outs)], len(results))
        grads = abi.per_argument(adjoints, PyObj(None))
        if expanded is not None:
            grads = expanded.gather(grads)
        grads = grads[:given]
        if mode.with_primal:
            return [grads, primal[0] if primal else PyObj(None)]
        return [grads]
    outs = abi.forward_results(results, _is_float)
    call = func.CallOp([mlir_type(t) for t in outs], ir.FlatSymbolRefAttr.get(request), args)
    primal, tangents = abi.split_results(
        [typed(r, t) for r, t in zip(call.results, outs)], len(results))
    tree = unit.tree_results.get(symbol)
    if tree is not None:
        # A tree result: the tangent a tree of its structure (N of them, batched), an
        # integer leaf's None, as from Python
        lanes = iter(abi.lanes(tangents))
        per_leaf = [next(lanes) if _is_float(t) else None for t in results]
        trees = tuple(pytrees.unflatten(tree, [PyObj(None) if x is None else x[j]
                                               for x in per_leaf], list_type=T.ListValue)
                      for j in range(width))
        tangent = trees if any(isinstance(a, BatchDuplicated) for a in anns) else trees[0]
        if not mode.with_primal:
            return [tangent]
        return [tangent, pytrees.unflatten(tree, primal, list_type=T.ListValue)]
    if any(isinstance(a, BatchDuplicated) for a in anns):
        # N per result, lane after lane: a result's tangent is an N-tuple
        tangents = abi.lanes(tangents)
    elif layout is not None:
        # (an integer leaf of a struct result has no tangent: zero)
        it = iter(tangents)
        tangents = SV.regroup([next(it) if _is_float(t) else S.as_scalar(Literal(0), t)
                               for t in results], layout)
    if layout is not None and len(primal) == len(results):
        primal = SV.regroup(primal, layout)
    tangent = _one_or_tuple(tangents)
    return [tangent, _one_or_tuple(primal)] if mode.with_primal else [tangent]


def _tree_derivative(unit: CompileUnit, f, mode: Mode, anns: Sequence[Annotation],
                     name: str) -> list | None:
    """derivative_call with trees among the annotated values (compiler/trees.py): that of
    f's variant for their structures, each tree's annotation its leaves' (Const, Active
    float scalars, Duplicated with the leaves of a shadow tree of the same structure); in
    reverse mode an Active tree's derivatives come back as a tree. None: no trees."""
    if not isinstance(f, (Function, Kernel)) or f.tree_layout is not None:
        return None
    variant, flat = T.variant_call(f, [a.val for a in anns], f"{name}()")
    if variant is f:
        return None
    layout = variant.tree_layout
    at = pytrees.spans(layout)
    out, active = [], set()
    for k, (a, tree) in enumerate(zip(anns, layout)):
        leaves = flat[at[k][0]:at[k][0] + at[k][1]]
        if tree is None:
            out.append(a)
            continue
        what = f"{name}(): argument {k}"
        paths = pytrees.paths(tree, f.struct_params[k])
        if isinstance(a, Const):
            out.extend(Const(x) for x in leaves)
        elif isinstance(a, Active):
            for p, x in zip(paths, leaves):
                if not isinstance(x, (Scalar, Literal)):
                    raise UserError(f"{what}: Active(tree) takes a tree of float scalars; {p} "
                                    f"is {S.describe(x)}: pass Duplicated(tree, shadow), "
                                    "shadow a tree of the same structure")
                out.append(Active(x) if _float_leaf(x) else Const(x))
            active.add(k)
        elif isinstance(a, BatchDuplicated):
            if not isinstance(a.dval, tuple):
                raise UserError(f"{what}: BatchDuplicated(tree, (t1, ..., tN)) takes a tuple "
                                "of trees")
            lanes = [_tree_like(tree, d, f"{what}: tangent {j}", f.struct_params[k])
                     for j, d in enumerate(a.dval)]
            out.extend(BatchDuplicated(x, tuple(lane[i] for lane in lanes))
                       if _float_leaf(x) else Const(x) for i, x in enumerate(leaves))
        elif isinstance(a, Duplicated):
            shadow = _tree_like(tree, a.dval, f"{what}: the shadow", f.struct_params[k])
            for p, x, d in zip(paths, leaves, shadow):
                if not _float_leaf(x):
                    out.append(Const(x))
                elif mode.reverse and isinstance(x, (Scalar, Literal)):
                    raise UserError(f"{what}: {p} is a scalar: in compiled code a Duplicated "
                                    "tree's scalars have no shadow to add their derivatives "
                                    "to (mark the tree Active, or make them arrays)")
                else:
                    out.append(type(a)(x, d))
        else:
            raise UserError(f"{what}: {type(a).__name__} of a tree is not taken")
    res = derivative_call(unit, variant, mode, out, name)
    if not mode.reverse:
        return res
    grads = res[0]
    grouped = tuple(pytrees.regroup(layout, grads, k, list_type=T.ListValue) if k in active else
                    PyObj(None) if layout[k] is not None else grads[at[k][0]]
                    for k in range(len(anns)))
    return [grouped, *res[1:]]


def _float_leaf(x) -> bool:
    """Whether a tree's leaf has derivatives: a float scalar or array, a vector, a struct."""
    if isinstance(x, Literal):
        return isinstance(x.value, float)
    t = getattr(x, "type", None)
    if isinstance(t, ArrayType):
        return t.dtype.is_float
    return t.is_float if isinstance(t, ScalarType) else True


def _tree_like(tree: pytrees.TreeDef, x, what: str, name: str = "") -> list:
    """The leaves of code value `x` (a shadow or tangent), which must be of structure
    `tree` (UserError naming the path where it is not, from the argument's `name`)."""
    try:
        pytrees.check_like(tree, x, what, name, lists_are_tuples=True)
    except TypeError as e:
        raise UserError(str(e)) from None
    return T.leaves(tree, x)


def _one_layout(v: Array, shadow):
    """An array and its shadow (or N of them) of one memref type, as the derivative's
    layout has them: all strided where one is (a contiguous array is a strided one too: a
    cast; a fresh shadow of a view, a Fortran-order or reversed array is contiguous).
    autodiff from Python makes the same choice (autodiff._prepare)."""
    lanes = shadow if isinstance(shadow, tuple) else (shadow,)
    if not (v.type.strided or any(d.type.strided for d in lanes)):
        return v, shadow

    def strided(a: Array) -> Array:
        if a.type.strided:
            return a
        t = a.type.strided_too()
        return Array(memref.cast(mlir_type(t), a.value), t, a.root, a.fresh)
    lanes = tuple(map(strided, lanes))
    return strided(v), lanes if isinstance(shadow, tuple) else lanes[0]


def _shadow(d, v, mode: Mode, what: str):
    """The shadow (an array like `v`) or the tangent (a float scalar) `d` of argument `v`."""
    t = v.type
    if isinstance(t, ArrayType):
        # (which dimensions are known to be 1 is a fact about the primal's specialisation, not
        # its memory: a fresh shadow of a (1, n) argument has a type that does not know it;
        # nor is the layout, which _one_layout makes one)
        if not isinstance(d, Array) or d.type.contiguous() != t.contiguous():
            raise UserError(f"{what}: the shadow must be an array of the same type, "
                            f"{t!r}, got {S.describe(d)}")
        if not t.dtype.is_float:
            raise UserError(f"{what} is an integer or bool array: not differentiable")
        return d
    if mode.reverse:
        raise UserError(f"{what}: in reverse mode a scalar is Active(x), not Duplicated")
    if not t.is_float:
        raise UserError(f"{what} is not a float: not differentiable")
    return S.cast(S.as_scalar(operand(d, what + "'s tangent"), t), t)


def _one_or_tuple(values: list):
    """A function's results as its call gives them: none, one, or a tuple."""
    return PyObj(None) if not values else values[0] if len(values) == 1 else tuple(values)


def _is_float(t) -> bool:
    return (t.dtype if isinstance(t, ArrayType) else t).is_float


def _define(unit: CompileUnit, f, types: list) -> tuple[str, list, bool]:
    """(symbol, results, is_tuple) of `f` for `types` in `unit`: a function compiled from its
    source, or one the registry of callables defines (a gradient or a Jacobian in IR:
    define_grad, define_jacobian, for the API's objects)."""
    if isinstance(f, _InUnit):
        return unit.compiled[f.key]
    if isinstance(f, Kernel):
        raise UserError(f"autodiff of kernel {f.__name__} inside compiled code needs "
                        "ndrange= (the launch is what is differentiated)")
    entry = callables.lookup(f)
    if entry is None or entry.define is None:
        raise UserError(f"cannot differentiate {getattr(f, '__name__', f)!r}: autodiff takes "
                        "@adjit.jit or @adjit.func functions, and adjit.grad(...) of them")
    return entry.define(unit, types)


# ---- gradients as functions ------------------------------------------------------------------
def _grad_annotations(g: GradOf, values: list) -> tuple[list[Annotation], dict[int, Array]]:
    """JAX's grad: Active scalars and Duplicated arrays (fresh zero shadows) at argnums."""
    nums = g.nums(len(values))
    anns, shadows = [], {}
    for k, v in enumerate(values):
        if k not in nums:
            anns.append(Const(v))
        elif isinstance(v, Array):
            shadows[k] = A.alloc(v.type.dtype, A.dims(v))
            A.fill(shadows[k], Literal(0.0))
            anns.append(Duplicated(v, shadows[k]))
        else:
            anns.append(Active(v))
    return anns, shadows


def grad_call(unit: CompileUnit, g: GradOf, values: list, where: str):
    """The value of `g(*values)` (adjit.grad/value_and_grad of a function) emitted here."""
    anns, shadows = _grad_annotations(g, values)
    if shadows and where != "jit":
        raise UserError(f"grad of {g.f.__name__} with respect to an array inside a kernel or "
                        "device function: the gradient is a new array, which only "
                        "@adjit.jit functions allocate")
    grads, value = derivative_call(unit, g.f, ReverseWithPrimal, anns, g.__name__, where)
    if isinstance(value, PyObj) or isinstance(value, Array):
        raise UserError(f"grad of {g.f.__name__}: the function must return a float scalar")
    nums = g.nums(len(values))
    out = tuple(shadows[k] if k in shadows else grads[k] for k in nums)
    out = out[0] if isinstance(g.argnums, int) else out
    return (value, out) if g.with_value else out


def define_grad(unit: CompileUnit, g: GradOf, types: list) -> tuple[str, list, bool]:
    """A function of the module computing `g` for argument `types` (so that it can be called
    and differentiated as any function): (symbol, result types, whether a tuple)."""
    key = ("grad", id(g), tuple(types))
    if key not in unit.compiled:
        is_tuple = []

        def body(values):
            out = grad_call(unit, g, values, "jit" if _allocates(types) else "func")
            if isinstance(out, tuple) and any(isinstance(x, tuple) for x in out):
                # value_and_grad with a tuple of argnums returns (value, (grads...)): a
                # defined function's results are flat, so the nesting would be lost.
                raise UserError(f"{g.__name__} returns (value, (gradients"
                                "...)): differentiating it again needs one result; take "
                                f"grad({g.f.__name__}, argnums=...) instead, or one argnum")
            is_tuple.append(isinstance(out, tuple))
            return list(out) if is_tuple[0] else [out]

        fn, symbol, results = new_function(unit, "__adj_grad_", g.f.__name__, types, body)
        if not _allocates(types):
            fn.attributes[adj.FUNC_ATTR] = ir.UnitAttr.get()
        unit.compiled[key] = (symbol, results, is_tuple[0])
    return unit.compiled[key]


def _allocates(types: list) -> bool:
    return any(isinstance(t, ArrayType) for t in types)


def _entry_calling(unit: CompileUnit, symbol: str, types: list, results: list) -> None:
    """The unit's entry (what Python calls): a call of @symbol."""
    unit.entry("entry", types, results, lambda args: list(func.CallOp(
        [mlir_type(t) for t in results], ir.FlatSymbolRefAttr.get(symbol), args).results))


def _inner_product_of(unit: CompileUnit, symbol: str, types: list, result: ArrayType) -> tuple:
    """The key in unit.compiled of `s(args..., ct) = sum(@symbol(args...) * ct)`
    (derivative.inner_product: reverse mode of it gives vector-Jacobian products), made
    once per unit."""
    from .derivative import inner_product
    key = ("inner", symbol)
    if key not in unit.compiled:
        with ir.InsertionPoint(unit.module.body), ir.Location.unknown():
            inner, inner_results = inner_product(unit, symbol, types, result)
        unit.compiled[key] = (inner, inner_results, False)
    return key


# ---- pullbacks ------------------------------------------------------------------------------
class _Pullback:
    """The pullback `vjp(f, *primals)` returns inside compiled code: a call with a cotangent
    (shaped like f's result) compiles to the reverse pass of f (scaled by a scalar cotangent)
    or of its inner product with an array cotangent; one cotangent per primal."""

    def __init__(self, f, values: list, result, written: Sequence[int] = (),
                 layout: tuple | None = None):
        # `values`: the primals as they were before the call (copies of those f writes,
        # `written`, which each pullback call runs on a fresh copy of)
        self.f, self.values, self.result, self.written = f, values, result, set(written)
        # (f a variant for trees among the primals: per primal, its structure or None; the
        # cotangents of a tree primal are a tree of its structure)
        self.layout = layout
        self.__name__ = f"the pullback of {getattr(f, '__name__', f)}"
        # for a function returning structs or vectors: the layout of its results
        # (struct_values.regroup) and its argument types as declared; `result` is then
        # the list of its IR results' types
        self.result_layout, self.declared = None, None


def _pullback_call(unit: CompileUnit, pb: _Pullback, cotangent, where: str) -> tuple:
    if pb.result_layout is not None:
        return _structured_pullback_call(unit, pb, cotangent, where)
    cotangent = operand(cotangent, "the cotangent")
    if (isinstance(pb.result, ArrayType) != isinstance(cotangent, Array) or
            (isinstance(cotangent, Array) and
             cotangent.type.contiguous() != pb.result.contiguous())):
        raise UserError(f"{pb.__name__}: the cotangent must be shaped like the result, "
                        f"{pb.result!r}, got {S.describe(cotangent)}")
    if isinstance(cotangent, Array) and cotangent.type.strided:
        cotangent = A.copy(cotangent)     # (a view: the inner product takes the result's type)
    # (the reverse pass runs f again, writes and all)
    values = [A.copy(v) if k in pb.written else v for k, v in enumerate(pb.values)]
    shadows = {}
    for k, v in enumerate(values):
        if isinstance(v, Array):
            if where != "jit":
                raise UserError(f"{pb.__name__}: an array's cotangent is a new array, which "
                                "only @adjit.jit functions make")
            shadows[k] = A.alloc(v.type.dtype, A.dims(v))
            A.fill(shadows[k], Literal(0.0))
    anns = [Duplicated(v, shadows[k]) if k in shadows else
            Active(v) if isinstance(v, (StructValue, Vec)) or v.type.is_float else Const(v)
            for k, v in enumerate(values)]
    if isinstance(pb.result, ArrayType):
        types = [v.type for v in values]
        key = _inner_product_of(unit, _define(unit, pb.f, types)[0], types, pb.result)
        grads = derivative_call(unit, _InUnit(pb.f.__name__, key), Reverse,
                                anns + [Const(cotangent)], pb.__name__)[0]
        scale = None
    else:
        grads = derivative_call(unit, pb.f, Reverse, anns, pb.__name__)[0]
        scale = S.cast(S.as_scalar(cotangent, pb.result), pb.result)
    out = [_scaled(shadows.get(k, grads[k]), scale) for k in range(len(values))]
    return _per_primal(pb, out)


def _per_primal(pb: "_Pullback", out: list) -> tuple:
    """The pullback's derivatives, one per primal: a tree primal's regrouped."""
    if pb.layout is not None:
        return tuple(pytrees.regroup(pb.layout, out, k, list_type=T.ListValue)
                     for k in range(len(pb.layout)))
    return tuple(out)


def _scaled(g, scale):
    """A derivative `g` times a scalar cotangent (each float leaf of a struct or vector)."""
    if scale is None:
        return g
    if isinstance(g, Array) and g.type.dtype.is_float:
        return A.materialize(A.elementwise(lambda a, b: S.binary("*", a, b), [g, scale]))
    if isinstance(g, Scalar) and g.type.is_float:
        return S.binary("*", g, S.cast(scale, g.type))
    if isinstance(g, Vec):
        return V.of_type(g.type, [_scaled(x, scale) for x in g.items])
    if isinstance(g, StructValue):
        return StructValue(g.type, {n: _scaled(x, scale) for n, x in g.fields.items()})
    return g


def _structured_pullback_call(unit: CompileUnit, pb: _Pullback, cotangent,
                              where: str) -> tuple:
    """The pullback of a function returning structs or vectors (several scalar results in
    the IR): reverse mode of `s(args..., ct...) = sum_k r_k * ct_k` over its float results,
    `ct` the cotangent's leaves (the result's type: a struct of the same class, a vector of
    the same shape, a tuple of them for several results)."""
    from .derivative import results_inner_product
    given = cotangent if isinstance(cotangent, tuple) and len(pb.result_layout) > 1 else (cotangent,)
    if len(given) != len(pb.result_layout):
        raise UserError(f"{pb.__name__}: the cotangent must be shaped like the result, got "
                        f"{S.describe(cotangent)}")
    cts = []
    for t, c in zip(pb.result_layout, given):
        if t is None:
            cts.append(c)
        elif not (isinstance(c, (StructValue, Vec)) and c.type == t):
            raise UserError(f"{pb.__name__}: the cotangent must be a {t!r} like the result, "
                            f"got {S.describe(c)}")
        else:
            leaves = SV.leaf_values(c, "the cotangent") if isinstance(c, StructValue) else [c]
            cts.extend(y for x in leaves for y in (x.items if isinstance(x, Vec) else [x]))
    cts = [S.cast(S.as_scalar(operand(c, "the cotangent"), t), t)
           for c, t in zip(cts, pb.result)]
    symbol = _define(unit, pb.f, pb.declared)[0]
    key = ("inner-results", symbol)
    if key not in unit.compiled:
        with ir.InsertionPoint(unit.module.body), ir.Location.unknown():
            types = V.flat_types(pb.declared)
            inner, inner_results = results_inner_product(unit, symbol, types, pb.result)
        unit.compiled[key] = (inner, inner_results, False)
    floats = [c for c, t in zip(cts, pb.result) if t.is_float]
    anns = [Active(v) if isinstance(v, (StructValue, Vec)) or v.type.is_float
            and not isinstance(v, Array) else Const(v) for v in pb.values]
    shadows = {}
    for k, v in enumerate(pb.values):
        if isinstance(v, Array) and v.type.dtype.is_float:
            if where != "jit":
                raise UserError(f"{pb.__name__}: an array's cotangent is a new array, which "
                                "only @adjit.jit functions make")
            shadows[k] = A.alloc(v.type.dtype, A.dims(v))
            A.fill(shadows[k], Literal(0.0))
            anns[k] = Duplicated(v, shadows[k])
    grads = derivative_call(unit, _InUnit(pb.f.__name__, key), Reverse,
                            anns + [Const(c) for c in floats], pb.__name__, where)[0]
    return _per_primal(pb, [shadows.get(k, grads[k]) for k in range(len(pb.values))])


# ---- launches ---------------------------------------------------------------------------------
def _launch_derivative(gen: "CodeGenerator", k: Kernel, mode: Mode, anns: list,
                       ndrange):
    """`autodiff(mode, kernel, *anns, ndrange=...)` inside @jit code: the derivative of a
    function launching the kernel (the launch rule makes the derivative kernels), its
    extents Const arguments; returns what autodiff of a launch returns from Python (the
    derivatives of Active arguments in reverse mode, None in forward mode)."""
    from .unit import ndrange_values
    from .derivative import Derivative
    gen.require_host(f"autodiff of kernel {k.__name__}")
    if ndrange is None:
        raise UserError(f"autodiff of kernel {k.__name__} needs ndrange=")
    extents = [S.from_index(e) for e in ndrange_values(ndrange)]
    values = [operand(a.val, f"autodiff(): argument {j}") for j, a in enumerate(anns)]
    types = [v.type for v in values]
    key = ("launch", id(k), tuple(types), len(extents))
    if key not in gen.unit.compiled:
        gen.unit.compiled[key] = Derivative.primal_function(gen.unit, k, types, tuple(extents), None)
    anns = [type(a)(v, a.dval) if isinstance(a, Duplicated) else type(a)(v)
            for a, v in zip(anns, values)] + [Const(e) for e in extents]
    out = derivative_call(gen.unit, _InUnit(k.__name__, key), mode, anns, "autodiff")
    if not mode.reverse:
        return PyObj(None)
    return out[0][:len(values)]


class _InUnit:
    """A function the unit already holds (under `key` in unit.compiled), to differentiate: a
    kernel's launching function, an inner product for a reverse Jacobian."""

    def __init__(self, name: str, key: tuple):
        self.key, self.__name__ = key, name


# ---- arguments a multi-pass derivative must restore -------------------------------------------
def _written_values(unit: CompileUnit, symbol: str, values: list) -> list[int]:
    """The positions of the arrays among `values` that @symbol (called with them) may write
    (passes/written.py's analysis), while the module's derivative requests are not yet
    functions: a request writes what its primal writes and its shadows."""
    from ..passes.written import WrittenArguments
    symbols = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
               for op in unit.module.body.operations
               if op.operation.name == "func.func" and "sym_name" in op.attributes}
    requests = {name: key for key, name in unit.requests.items() if name not in symbols}

    class BeforeThePass(WrittenArguments):
        def __call__(self, name: str) -> set[int]:
            if name not in requests:
                return super().__call__(name)
            primal, kind, activity, ret, with_primal, width = requests[name]
            abi = DerivativeABI(kind, activity, ret, with_primal, width)
            at = abi.primal_positions()
            shadows = {p + lane for k, p in enumerate(abi.shadow_positions()) if p is not None
                       for lane in range(width)}
            return {at[k] for k in self(primal) if k < len(at)} | shadows

        def returned(self, name: str) -> list[set[int]]:
            # (a request's results: tangents and adjoints it makes, and the primal's)
            return [] if name in requests else super().returned(name)

    written = BeforeThePass(symbols)(symbol)
    return [k for k in sorted(written) if k < len(values) and isinstance(values[k], Array)]


class _Restorer:
    """Copies of the arguments a function may write, taken before the first of several
    passes over it, and put back after each (`restore`): every pass then differentiates at
    the arguments as given, and the caller's arrays end as they were (JAX's functions are
    pure; a jacobian of a function writing its input would otherwise run each pass on the
    previous pass's writes)."""

    def __init__(self, unit: CompileUnit, symbol: str, values: list, what: str, where: str):
        written = _written_values(unit, symbol, values)
        if written and where != "jit":
            raise UserError(f"{what} of a function that writes its argument {written[0]} "
                            "inside a kernel or device function: each pass must start from "
                            "the arguments as given, which takes a copy, a new array, which "
                            "only @adjit.jit functions make")
        self.saved = [(values[k], A.copy(values[k])) for k in written]

    def restore(self) -> None:
        for v, saved in self.saved:
            memref.copy(saved.value, v.value)


# ---- Jacobians by forward passes ----------------------------------------------------------------
def jacobian_call(unit: CompileUnit, jac: JacobianOf, values: list, where: str):
    """The value of `jac(*values)` (adjit.jacfwd of a function, or adjit.hessian) emitted
    here: one forward pass per element of the argument, in a loop of the compiled code,
    each along a basis vector, its tangent stored as a column of the result (shape
    `out.shape + x.shape`)."""
    k = jac.argnums
    if not isinstance(k, int) or not 0 <= k < len(values):
        raise UserError(f"{jac.__name__}: argnums must be one argument's position")
    if jac.reverse:
        return _jacobian_by_rows(unit, jac, values, where)
    x = values[k]
    width = jac.width if isinstance(x, Array) else 1

    def along(tangents: list) -> list:
        """The result's tangents along `tangents` (one, or `width` batched)."""
        anns = [(Duplicated(v, tangents[0]) if width == 1 else
                 BatchDuplicated(v, tuple(tangents))) if j == k else Const(v)
                for j, v in enumerate(values)]
        t = derivative_call(unit, jac.f, Forward, anns, jac.__name__)[0]
        ts = list(t) if width > 1 and isinstance(t, tuple) else [t]
        if len(ts) != width or any(isinstance(u, (tuple, PyObj)) for u in ts):
            raise UserError(f"{jac.__name__}: the function must return one float scalar or "
                            "array")
        return ts

    symbol, out_t = _one_float_result(unit, jac, values)
    restorer = _Restorer(unit, symbol, values, jac.__name__, where)
    if not isinstance(x, Array):
        t = along([S.as_scalar(Literal(1.0), x.type)])[0]
        if isinstance(t, Array) and restorer.saved:
            t = A.copy(t)         # (before the restore: the result may be a written argument's)
        restorer.restore()
        return t
    if where != "jit":
        raise UserError(f"{jac.__name__} with respect to an array makes a new array, which "
                        "only @adjit.jit functions do")
    bases = [A.alloc(x.type.dtype, A.dims(x)) for _ in range(width)]
    for basis in bases:
        A.fill(basis, Literal(0.0))
    flat_bases, n = [A.flat(b) for b in bases], A.numel(A.dims(x))
    out_dims = _result_dims(symbol, out_t, values)
    restorer.restore()
    dtype = out_t.dtype if isinstance(out_t, ArrayType) else out_t
    result = A.alloc(dtype, out_dims + A.dims(x))
    flat_result = A.flat(result)
    one, zero = (S.as_scalar(Literal(c), x.type.dtype).value for c in (1.0, 0.0))

    def in_range(j: ir.Value, emit) -> None:
        """emit() where column j exists (the last block of `width` may have fewer)."""
        if width == 1:
            emit()
            return
        branch = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ult, j, n))
        with ir.InsertionPoint(branch.then_block):
            emit()
            scf.YieldOp([])

    # Columns by blocks of `width`: lane l of block b is column b * width + l.
    loop = scf.ForOp(A.idx(0), n, A.idx(width))
    with ir.InsertionPoint(loop.body):
        first = loop.induction_variable
        columns = [arith.addi(first, A.idx(lane)) for lane in range(width)]
        for j, flat_basis in zip(columns, flat_bases):
            in_range(j, lambda j=j, b=flat_basis: memref.store(one, b, [j]))
        ts = along(bases)
        for j, t, flat_basis in zip(columns, ts, flat_bases):
            in_range(j, lambda j=j, t=t, b=flat_basis: _store_column(
                t, j, n, flat_result, lambda: memref.store(zero, b, [j])))
        restorer.restore()
        if any(v is x for v, _ in restorer.saved):
            # the tangents of x's writes were written into the bases: zero them again
            for basis in bases:
                A.fill(basis, Literal(0.0))
        scf.YieldOp([])
    return result


def _store_column(t, j: ir.Value, n: ir.Value, flat_result: ir.Value, then) -> None:
    """Stores the tangent `t` (a scalar or an array of m elements) as column j of the
    (m, n) result, then runs `then()`."""
    if isinstance(t, Array):
        column = A.flat(t)
        inner = scf.ForOp(A.idx(0), A.numel(A.dims(t)), A.idx(1))
        with ir.InsertionPoint(inner.body):
            i = inner.induction_variable
            memref.store(memref.load(column, [i]), flat_result,
                         [arith.addi(arith.muli(i, n), j)])
            scf.YieldOp([])
    else:
        memref.store(t.value, flat_result, [j])
    then()


def _one_float_result(unit: CompileUnit, jac: JacobianOf, values: list) -> tuple[str, object]:
    """(symbol, result type) of the function a Jacobian differentiates, which must return
    one float scalar or array."""
    symbol, results, _ = _define(unit, jac.f, [v.type for v in values])
    if len(results) != 1 or not _is_float(results[0]):
        raise UserError(f"{jac.__name__}: the function must return one float scalar or array")
    return symbol, results[0]


def _result_dims(symbol: str, out_t, values: list) -> list[ir.Value]:
    """The extents of @symbol's array result (from one primal call: a Jacobian's shape is
    the result's, then the argument's); none for a scalar result."""
    if not isinstance(out_t, ArrayType):
        return []
    out = func.CallOp([mlir_type(out_t)], ir.FlatSymbolRefAttr.get(symbol),
                      [v.value for v in values]).results[0]
    return A.dims(Array(out, out_t))


def _jacobian_by_rows(unit: CompileUnit, jac: JacobianOf, values: list, where: str):
    """jacrev: one reverse pass per element of the result (of the inner product of the
    result with a basis cotangent, derivative.inner_product), each gradient a row."""
    k, x = jac.argnums, values[jac.argnums]
    types = [v.type for v in values]
    symbol, out_t = _one_float_result(unit, jac, values)
    if isinstance(x, Array) and where != "jit":
        raise UserError(f"{jac.__name__} with respect to an array makes a new array, which "
                        "only @adjit.jit functions do")

    def gradient(f, args: list):
        """The derivative of scalar `f(*args)` with respect to argument k (a new array for
        an array argument)."""
        shadow = None
        if isinstance(x, Array):
            shadow = A.alloc(x.type.dtype, A.dims(x))
            A.fill(shadow, Literal(0.0))
        anns = [(Duplicated(v, shadow) if shadow is not None else Active(v)) if j == k
                else Const(v) for j, v in enumerate(args)]
        grads = derivative_call(unit, f, Reverse, anns, jac.__name__)[0]
        return shadow if shadow is not None else grads[k]

    restorer = _Restorer(unit, symbol, values, jac.__name__, where)
    if not isinstance(out_t, ArrayType):
        row = gradient(jac.f, values)
        restorer.restore()
        return row
    key = _inner_product_of(unit, symbol, types, out_t)
    out_dims = _result_dims(symbol, out_t, values)
    restorer.restore()
    cotangent = A.alloc(out_t.dtype, out_dims)
    A.fill(cotangent, Literal(0.0))
    dtype = x.type.dtype if isinstance(x, Array) else x.type
    result = A.alloc(dtype, out_dims + (A.dims(x) if isinstance(x, Array) else []))
    flat_result, flat_cotangent = A.flat(result), A.flat(cotangent)
    n = A.numel(A.dims(x)) if isinstance(x, Array) else A.idx(1)
    one, zero = (S.as_scalar(Literal(c), out_t.dtype).value for c in (1.0, 0.0))
    loop = scf.ForOp(A.idx(0), A.numel(out_dims), A.idx(1))
    with ir.InsertionPoint(loop.body):
        i = loop.induction_variable
        memref.store(one, flat_cotangent, [i])
        row = gradient(_InUnit(jac.f.__name__, key), values + [cotangent])
        memref.store(zero, flat_cotangent, [i])
        if isinstance(row, Array):
            flat_row = A.flat(row)
            inner_loop = scf.ForOp(A.idx(0), n, A.idx(1))
            with ir.InsertionPoint(inner_loop.body):
                j = inner_loop.induction_variable
                memref.store(memref.load(flat_row, [j]), flat_result,
                             [arith.addi(arith.muli(i, n), j)])
                scf.YieldOp([])
        else:
            memref.store(row.value, flat_result, [i])
        restorer.restore()
        scf.YieldOp([])
    return result


def define_jacobian(unit: CompileUnit, jac: JacobianOf, types: list) -> tuple[str, list, bool]:
    """A function of the module computing `jac` for argument `types` (jacobian_call)."""
    key = ("jacobian", id(jac), tuple(types))
    if key not in unit.compiled:
        _, symbol, results = new_function(
            unit, "__adj_jac_", jac.f.__name__, types,
            lambda values: [jacobian_call(unit, jac, values, "jit")])
        unit.compiled[key] = (symbol, results, False)
    return unit.compiled[key]


# ---- from Python and from code generation -----------------------------------------------------
def compile_transform(g: GradOf | JacobianOf, types: tuple) -> "Compiled":
    """`g` compiled whole for calls from Python with argument `types` (a derivative of a
    derivative, adjit.grad(adjit.grad(f)), or a Jacobian): an entry holding the function
    `_define` makes of it. (service.transform memoises it and keeps it on disk.)"""
    from ..lang.functions import debug_enabled
    unit = CompileUnit(debug_enabled())
    with unit.ctx, ir.Location.unknown():
        symbol, results, is_tuple = _define(unit, g, list(types))
        _entry_calling(unit, symbol, list(types), results)
    return compiled(unit, "entry", list(types), results, is_tuple, g)


# ---- calls in compiled code (the registry's handlers: api/autodiff.py registers its objects)
def call_pullback(gen: "CodeGenerator", pb: _Pullback, args: list, kwargs: dict):
    """A call of the pullback a `vjp` in compiled code returned."""
    if kwargs or len(args) != 1:
        raise UserError("a vjp's pullback takes one cotangent")
    return _pullback_call(gen.unit, pb, args[0], gen.kind)


callables.register_type(_Pullback, call_pullback)


def call_vjp(gen: "CodeGenerator", args: list, kwargs: dict):
    """`vjp(f, *primals)` in compiled code: f's value and its pullback (a compile-time
    object, whose call compiles the reverse pass). Primals and results may be structs and
    vectors (their leaves: derivative_args.py); the cotangent then has the result's type."""
    if kwargs or not args or not isinstance(args[0], PyObj):
        raise UserError("vjp(f, *primals) takes a function, then its arguments")
    f, primals = args[0].obj, list(args[1:])
    tree_layout = None
    if isinstance(f, (Function, Kernel)):
        f, primals = T.variant_call(f, primals, "vjp()")
        tree_layout = f.tree_layout
    values = [_argument(a, f"vjp(): primal {k}") for k, a in enumerate(primals)]
    flat = [y for v in values for x in (SV.leaf_values(v, "vjp(): a primal")
                                        if isinstance(v, StructValue) else [v])
            for y in (x.items if isinstance(x, Vec) else
                      [x.array] if isinstance(x, VecArray) else [x])]
    declared = [V.operand_type(x) for v in values
                for x in (SV.leaf_values(v, "") if isinstance(v, StructValue) else [v])]
    symbol, results, _ = _define(gen.unit, f, declared)
    layout = gen.unit.vector_results.get(symbol)
    if layout is not None:
        if any(isinstance(t, ArrayType) for t in results) or not any(map(_is_float, results)):
            raise UserError(f"vjp of {f.__name__}: a struct or vector result has float "
                            "scalar fields (no arrays) for its cotangent to weigh")
    elif len(results) != 1 or not _is_float(results[0]):
        raise UserError(f"vjp of {f.__name__}: the function must return one float scalar, "
                        "float array, vector or struct")
    # The pullback differentiates at the primals as given, before this call's writes
    written = _written_values(gen.unit, symbol, flat)
    if written and len(flat) != len(values):
        raise UserError(f"vjp of {f.__name__}, which writes an array of its struct "
                        "argument: pass the array as an argument of its own")
    if written and gen.kind != "jit":
        raise UserError(f"vjp of {f.__name__}, which writes its argument {written[0]}, "
                        "inside a kernel or device function: the pullback needs a copy "
                        "of it, a new array, which only @adjit.jit functions make")
    before = [A.copy(v) if k in written else v for k, v in enumerate(values)]
    call = func.CallOp([mlir_type(t) for t in results], ir.FlatSymbolRefAttr.get(symbol),
                       [x.value for x in flat])
    outs = [typed(r, t) for r, t in zip(call.results, results)]
    if layout is None:
        return outs[0], PyObj(_Pullback(f, before, results[0], written, tree_layout))
    outs = SV.regroup(outs, layout)
    out = outs[0] if len(outs) == 1 else tuple(outs)
    pb = _Pullback(f, before, results, written, tree_layout)
    pb.result_layout, pb.declared = layout, declared
    return out, PyObj(pb)


def call_jacobian(gen: "CodeGenerator", jac, args: list, kwargs: dict):
    """A call of `adjit.jacfwd(f)`, `jacrev(f)` or `hessian(f)` in compiled code."""
    if kwargs:
        raise UserError(f"{jac.__name__}() takes its arguments by position")
    if isinstance(jac.f, (Function, Kernel)):
        variant, flat = T.variant_call(jac.f, args, jac.__name__)
        if variant is not jac.f:
            return _tree_jacobian(gen, jac, variant, flat)
    elif any(T.is_container(a) for a in args):
        raise UserError(f"{jac.__name__}: inside compiled code, hessian and Jacobians of "
                        "derivatives take scalars and arrays, not trees; call it from Python "
                        "(where it takes trees) or pass the tree's leaves as arguments")
    return jacobian_call(gen.unit, jac, [operand(a, f"{jac.__name__}(): an argument")
                                         for a in args], gen.kind)


@dataclass
class _FlatJacobian:
    """The Jacobian of a variant (trees' leaves as parameters) with respect to one leaf."""
    f: Any
    argnums: int
    reverse: bool
    width: int
    __name__: str


def _tree_jacobian(gen: "CodeGenerator", jac, variant, flat: list):
    """`jacfwd(f, k)(params, x)` (or jacrev) with trees among the arguments: one Jacobian of
    f's variant per leaf of argument k, a tree of its structure for a tree argument (JAX's:
    each block out.shape + leaf.shape)."""
    layout = variant.tree_layout
    k = jac.argnums
    if not isinstance(k, int) or not -len(layout) <= k < len(layout):
        raise UserError(f"{jac.__name__}: argnums must be one argument's position")
    k %= len(layout)
    start, n = pytrees.spans(layout)[k]
    values = [operand(a, f"{jac.__name__}(): an argument") for a in flat]
    parts = [jacobian_call(gen.unit, _FlatJacobian(variant, b, jac.reverse, jac.width,
                                                   jac.__name__), values, gen.kind)
             for b in range(start, start + n)]
    return pytrees.regroup(layout, [None] * start + parts, k, list_type=T.ListValue)


def call_grad(gen: "CodeGenerator", g, args: list, kwargs: dict):
    """A call of `adjit.grad(f)` or `value_and_grad(f)` in compiled code."""
    if kwargs:
        raise UserError(f"{g.__name__}() takes its arguments by position")
    if isinstance(g.f, (Function, Kernel)):
        variant, flat = T.variant_call(g.f, args, g.__name__)
        if variant is not g.f:
            return _tree_grad(gen, g, variant, args, flat)
    return grad_call(gen.unit, g, [_argument(a, f"{g.__name__}(): an argument")
                                   for a in args], gen.kind)


@dataclass
class _FlatGrad:
    """The gradient of a variant (trees' leaves as parameters) with respect to the leaves
    of the trees differentiated (GradOf)."""
    f: Any
    argnums: tuple
    with_value: bool
    __name__: str

    def nums(self, n: int) -> tuple[int, ...]:
        return self.argnums


def _tree_grad(gen: "CodeGenerator", g, variant, args: list, flat: list):
    """`grad(f)(params, x)` with trees among the arguments: the gradient of f's variant
    for their structures, a tree of the same structure per tree argument."""
    layout = variant.tree_layout
    nums = g.nums(len(args))
    flat_g = _FlatGrad(variant, pytrees.flat_positions(layout, nums), g.with_value,
                       g.__name__)
    out = grad_call(gen.unit, flat_g, [_argument(a, f"{g.__name__}(): an argument")
                                       for a in flat], gen.kind)
    value, grads = out if g.with_value else (None, out)
    parts, at = [], 0
    for k in nums:
        start, n = pytrees.spans(layout)[k]
        padded = [None] * start + list(grads[at:at + n])
        parts.append(pytrees.regroup(layout, padded, k, list_type=T.ListValue))
        at += n
    result = parts[0] if isinstance(g.argnums, int) else tuple(parts)
    return (value, result) if g.with_value else result


def _argument(v, what: str):
    """A derivative's argument: a struct or vector as it is (derivative_args.py), else a
    scalar or an array (`operand`)."""
    return v if isinstance(v, (StructValue, Vec)) else operand(v, what)


def call_autodiff_in_code(gen: "CodeGenerator", args: list, kwargs: dict):
    """`adjit.autodiff(mode, f, *args, ndrange=...)` in compiled code."""
    kwargs = dict(kwargs)
    ndrange = kwargs.pop("ndrange", None)
    if kwargs:
        raise UserError(f"autodiff() inside compiled code takes ndrange= (for a kernel) "
                        f"only, not {sorted(kwargs)}")
    if (len(args) < 2 or not isinstance(args[0], PyObj)
            or not isinstance(args[0].obj, Mode) or not isinstance(args[1], PyObj)):
        raise UserError("autodiff(mode, f, *args): a mode such as adjit.Reverse, then a "
                        "function")
    mode, f = args[0].obj, args[1].obj
    if mode.split:
        raise UserError("split mode (autodiff_thunk) is not available inside compiled code")
    anns = [a.obj if isinstance(a, PyObj) and isinstance(a.obj, Annotation) else Const(a)
            for a in args[2:]]
    if isinstance(f, Kernel):
        return _launch_derivative(gen, f, mode, anns, ndrange)
    if ndrange is not None:
        raise UserError(f"autodiff(): ndrange= is for kernels; {f.__name__} is a function")
    out = derivative_call(gen.unit, f, mode, anns, "autodiff", gen.kind)
    return tuple(out) if len(out) > 1 else out[0]


def call_jvp(gen: "CodeGenerator", args: list, kwargs: dict, grad=None):
    """`jvp(f, primals, tangents, width=)` in compiled code; with `grad` (the API's
    adjit.grad), `hvp(f, primals, tangents, width=)`: the jvp of grad(f)'s tangent."""
    name = "jvp" if grad is None else "hvp"
    width = _width_argument(kwargs, name)
    if (len(args) != 3 or not isinstance(args[0], PyObj)
            or not isinstance(args[1], tuple) or not isinstance(args[2], tuple)
            or len(args[1]) != len(args[2])):
        raise UserError(f"{name}(f, primals, tangents) takes a function and two tuples of "
                        "the same length")
    f, primals, tangents = args[0].obj, args[1], args[2]
    if grad is not None and isinstance(f, (Function, Kernel)):
        variant, flat = T.variant_call(f, list(primals), "hvp()")
        if variant is not f:
            return _tree_hvp(gen, variant, flat, tangents, width, grad)
    anns = [_tangent_annotation(p, t, width, f"{name}(): tangent {k}")
            for k, (p, t) in enumerate(zip(primals, tangents))]
    if grad is not None:
        g = grad(f, 0 if len(primals) == 1 else tuple(range(len(primals))))
        return derivative_call(gen.unit, g, Forward, anns, "hvp")[0]
    tangent, primal = derivative_call(gen.unit, f, ForwardWithPrimal, anns, "jvp")
    return primal, tangent


def _tree_hvp(gen: "CodeGenerator", variant, flat: list, tangents: tuple,
              width: int | None, grad):
    """hvp with trees among the primals: that of f's variant for their structures along
    the tangents' leaves (each a tree of its primal's structure), the products regrouped
    as trees of those structures."""
    if width is not None:
        raise UserError("hvp(..., width=) of trees inside compiled code: pass the trees' "
                        "leaves as arguments, or call hvp once per direction")
    layout = variant.tree_layout
    flat_t = []
    for k, (tree, t) in enumerate(zip(layout, tangents)):
        flat_t.extend([t] if tree is None else _tree_like(tree, t, f"hvp(): tangent {k}"))
    out = call_jvp(gen, [PyObj(variant), tuple(flat), tuple(flat_t)], {}, grad)
    out = out if len(flat) > 1 else (out,)
    parts = tuple(pytrees.regroup(layout, out, k, list_type=T.ListValue)
                  for k in range(len(layout)))
    return parts if len(parts) > 1 else parts[0]


def _width_argument(kwargs: dict, name: str) -> int | None:
    """The `width=` of a jvp or hvp in compiled code: a constant positive integer."""
    if set(kwargs) - {"width"}:
        raise UserError(f"{name}() takes width= only as a keyword argument, not "
                        f"{sorted(set(kwargs) - {'width'})}")
    if "width" not in kwargs:
        return None
    w = kwargs["width"]
    if (not isinstance(w, Literal) or isinstance(w.value, bool) or
            not isinstance(w.value, int) or w.value < 1):
        raise UserError(f"{name}(): width must be a constant positive integer, got "
                        f"{S.describe(w)}")
    return w.value


def _tangent_annotation(p, t, width: int | None, what: str) -> Annotation:
    """Duplicated(p, t), or with `width` N BatchDuplicated(p, t) for `t` a tuple of N."""
    if width is None:
        return Duplicated(p, t)
    if not isinstance(t, tuple) or len(t) != width:
        raise UserError(f"{what}: with width={width}, a tuple of {width} tangents, got "
                        f"{S.describe(t)}")
    return BatchDuplicated(p, t)


def compile_transform_autodiff(g: GradOf | JacobianOf, mode: Mode,
                               anns: Sequence[Annotation], types: list) -> "Compiled":
    """The entry of `adjit.autodiff(mode, g, *anns)` from Python, for `g` a derivative
    (adjit.grad(f)) and the arguments' values of `types`: it takes each argument followed by
    its shadow or tangents (N of a BatchDuplicated one), makes the derivative call, and
    returns its values; its meta's `returns` is where they go in what autodiff returns
    (api/transform_calls.py reads it: a nested list, 1 for a value, None for None).
    (service.transform memoises it and keeps it on disk.)"""
    from ..lang.functions import debug_enabled
    lanes = [len(a.dval) if isinstance(a, BatchDuplicated) else 1
             if isinstance(a, Duplicated) else 0 for a in anns]
    unit = CompileUnit(debug_enabled())
    flat_t = [t for t, n in zip(types, lanes) for t in [t] * (1 + n)]
    shape: list = []

    def remade(a: Annotation, it, n: int) -> Annotation:
        val = next(it)
        ds = tuple(next(it) for _ in range(n))
        return (BatchDuplicated(val, ds) if isinstance(a, BatchDuplicated) else
                type(a)(val, ds[0]) if isinstance(a, Duplicated) else type(a)(val))

    def body(params):
        it = iter(params)
        made = [remade(a, it, n) for a, n in zip(anns, lanes)]
        out = derivative_call(unit, g, mode, made, "autodiff")
        shape.append(out)
        return [x for x in _leaves(out) if not isinstance(x, PyObj)]

    with unit.ctx, ir.Location.unknown():
        _, symbol, result_t = new_function(unit, "__adj_autodiff_", g.f.__name__, flat_t,
                                           body)
        _entry_calling(unit, symbol, flat_t, result_t)
    entry = compiled(unit, "entry", flat_t, result_t, len(result_t) > 1, g)
    entry.meta["returns"] = _returns(shape[0])
    return entry


def _leaves(out) -> list:
    return [y for x in out for y in (_leaves(x) if isinstance(x, (tuple, list)) else [x])]


def _returns(out):
    """`out` (a structure of code values and PyObj(None)) as its record keeps it: tuples
    and lists as lists, a value as 1, PyObj(None) as None."""
    if isinstance(out, (tuple, list)):
        return [_returns(x) for x in out]
    return None if isinstance(out, PyObj) else 1
