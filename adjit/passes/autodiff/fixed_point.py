"""Reverse mode of a fixed-point iteration (`adj.fixed_point` functions: adjit.fixed_point,
frontend/fixed_point.py), by implicit differentiation instead of through its iterations.

F(x0, [out,] p...) iterates x <- W(x, p) to x* = step(x*, p) (for an array x, W stores the
step into its `out` and F writes x* into its own `out`; for a float both return it). With
xbar the adjoint of x*, the adjoint fixed point lambda = xbar + (d step/d x)^T lambda at x*
is found by the same iteration (each step one reverse pass of W, Const in p, to the same
tolerance and step limit), then the parameters get (d step/d p)^T lambda: one more reverse
pass of W, Active/Duplicated in p as F's call asks, with lambda as the adjoint of W's result.
x0 gets nothing (a converged x* does not depend on it). The tape is x* alone: memory does
not grow with the iterations, where the loop's own reverse mode would keep every iterate.

  F_aug(<F's parameters>) -> ([x* if with_primal,] x* copy)     (the primal F, then its result)
  F_rev(<F's parameters>, [xbar,] x*) -> (adjoints of the Active parameters)
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import arith, func, math, memref, scf

from ...core.activity import Activity
from ...core.derivative_abi import Mode
from ...dialects import adj
from ...dialects.adj import AdjError, FIXED_POINT_ATTR
from .ir_util import (alloc_like, dims, fill_zero, flat_view, for_each_index, func_type, index,
                      is_float, is_memref, memref_type, symbol_name, symbol_ref, walk, zero,
                      zeroed_like)
from .signature import Derivative, Signature, abi, adjoint_types

if TYPE_CHECKING:
    from .protocols import Host


def generate_fixed_point(diff: "Host", fn: ir.Operation, sig: Signature, name: str,
                         extra: dict[str, ir.Attribute]) -> Derivative:
    attr = ir.DictAttr(fn.attributes[FIXED_POINT_ATTR])
    step = symbol_ref(attr["step"])
    tol = ir.FloatAttr(attr["tol"]).value
    max_iter = ir.IntegerAttr(attr["max_iter"]).value
    # Non-convergence of the adjoint solve is an error like the primal's (unless the call
    # passed must_converge=False), reported at the user's call: the frontend located F's
    # own checks there.
    must_converge = "must_converge" not in attr or ir.BoolAttr(attr["must_converge"]).value
    where = _call_location(fn)
    ftype = func_type(fn)
    inputs, results = list(ftype.inputs), list(ftype.results)
    array = not results
    layout = abi(sig)
    params = layout.inputs(inputs)
    primal_pos, shadow_pos = layout.primal_positions(), layout.shadow_positions()
    n_fixed = 2 if array else 1             # (x0, out) or (x0,) before the parameters
    if sig.activity[0] != Activity.CONST and not array and sig.activity[0] != Activity.ACTIVE:
        raise AdjError(fn, "adjit.fixed_point: the start of a float iteration is Active or "
                           "Const")
    with_primal = sig.with_primal and not array
    tape_t = [inputs[1]] if array else [results[0]]
    private = name == sig.mangled()

    # -- augmented: the primal, and x* on the tape -------------------------------------------
    aug = diff.new_function(f"{name}_aug", params, (results if with_primal else []) + tape_t,
                            fn, extra, private=private)
    entry = aug.regions[0].blocks[0]
    args = list(entry.arguments)
    with ir.InsertionPoint(entry), fn.location:
        primal = [args[p] for p in primal_pos]
        call = func.CallOp(results, ir.FlatSymbolRefAttr.get(symbol_name(fn)), primal)
        if array:
            kept = alloc_like(primal[1])
            memref.copy(primal[1], kept)
            func.ReturnOp([kept])
        else:
            func.ReturnOp(([call.results[0]] if with_primal else []) + [call.results[0]])

    # -- reverse ------------------------------------------------------------------------------
    dret = layout.dret(results, is_float)
    rev = diff.new_function(f"{name}_rev", params + dret + tape_t,
                            adjoint_types(ftype, sig), fn, extra, private=private)
    entry = rev.regions[0].blocks[0]
    args = list(entry.arguments)
    with ir.InsertionPoint(entry), fn.location:
        primal = [args[p] for p in primal_pos]
        shadows = [args[p] if p is not None else None for p in shadow_pos]
        xstar = args[-1]
        ps, p_shadows = primal[n_fixed:], shadows[n_fixed:]
        p_acts = sig.activity[n_fixed:]
        w_inputs = list(func_type(diff.symbols[step]).inputs)
        const = (Activity.CONST,) * len(ps)

        def w_derivative(activity, ret):
            s = Signature(fn=step, mode=Mode.REVERSE, activity=tuple(activity),
                          ret_activity=ret, with_primal=False,
                          overwritten=(False,) * len(w_inputs))
            return s, diff.derivative(s, fn)

        def back(s, d, values, shadows_, dret_):
            """W's reverse pass (its augmented one first) for these values, shadows and
            result adjoints: the adjoints of W's Active parameters."""
            flat = abi(s).flatten(values, shadows_)
            aug_results = list(func_type(diff.symbols[d.aug]).results)
            tape = func.CallOp(aug_results, ir.FlatSymbolRefAttr.get(d.aug), flat).results
            return list(func.CallOp(adjoint_types(func_type(diff.symbols[step]), s),
                                    ir.FlatSymbolRefAttr.get(d.rev),
                                    flat + dret_ + list(tape)).results)

        if array:
            out_shadow = shadows[1]
            if out_shadow is None:
                raise AdjError(fn, "adjit.fixed_point: its result has no shadow")
            xbar = alloc_like(out_shadow)
            memref.copy(out_shadow, xbar)
            fill_zero(out_shadow)     # x*'s place held xbar; the old contents reach nothing
            s_it, d_it = w_derivative((Activity.DUP, Activity.DUP) + const, Activity.CONST)
            t = xbar.type

            def iteration(lam):
                sx = zeroed_like(xstar)
                scratch = alloc_like(xstar)
                s_out = alloc_like(lam)
                memref.copy(lam, s_out)
                back(s_it, d_it, [xstar, scratch] + ps, [sx, s_out] + [None] * len(ps), [])
                new = alloc_like(lam)
                _add_into(new, xbar, sx)
                return new, None

            lam = _iterate(t, xbar, iteration, tol, max_iter, must_converge, where)
            s_p, d_p = w_derivative((Activity.CONST, Activity.DUP) + tuple(p_acts),
                                    Activity.CONST)
            grads = back(s_p, d_p, [xstar, alloc_like(xstar)] + ps,
                         [None, lam] + list(p_shadows), [])
        else:
            xbar = args[len(params)] if dret else zero(results[0])
            s_it, d_it = w_derivative((Activity.ACTIVE,) + const, Activity.ACTIVE)

            def iteration(lam):
                g, = back(s_it, d_it, [xstar] + ps, [None] * (1 + len(ps)), [lam])
                new = arith.addf(xbar, g)
                d = arith.subf(new, lam)
                return new, _abs(d)

            lam = _iterate(results[0], xbar, iteration, tol, max_iter, must_converge, where)
            s_p, d_p = w_derivative((Activity.CONST,) + tuple(p_acts), Activity.ACTIVE)
            grads = back(s_p, d_p, [xstar] + ps, [None] + list(p_shadows), [lam])
        out = []
        it = iter(grads)
        for k, a in enumerate(sig.activity):
            if a != Activity.ACTIVE:
                continue
            if k < n_fixed:        # the start: a converged x* does not depend on it
                out.append(zero(inputs[k]))
            else:
                out.append(next(it))
        func.ReturnOp(out)
    return Derivative(aug=f"{name}_aug", rev=f"{name}_rev", tape=tape_t)


def _abs(v: ir.Value) -> ir.Value:
    return math.absf(v)


def _add_into(new: ir.Value, a: ir.Value, b: ir.Value) -> None:
    """new = a + b, element by element (the change is _iterate's to measure)."""
    def body(i):
        memref.store(arith.addf(memref.load(a, i), memref.load(b, i)), new, i)
    for_each_index(dims(new), body)


def _iterate(t: ir.Type, start: ir.Value, step, tol: float, max_iter: int,
             must_converge: bool, where: ir.Location) -> ir.Value:
    """lambda <- step(lambda) from `start` until the largest change is at most `tol` or
    `max_iter` steps ran (the primal iteration's test); in the second case, with
    `must_converge`, a RuntimeError at `where`."""
    idx = ir.IndexType.get()
    change_t = memref_type(t).element_type if is_memref(t) else t
    inf = arith.constant(change_t, float("inf"))
    loop = scf.WhileOp([t, idx, change_t], [start, index(0), inf])
    before = loop.before.blocks.append(t, idx, change_t)
    after = loop.after.blocks.append(t, idx, change_t)
    with ir.InsertionPoint(before):
        lam, k, change = before.arguments
        scf.ConditionOp(not_converged(change, tol, k, max_iter), [lam, k, change])
    with ir.InsertionPoint(after):
        lam, k, _ = after.arguments
        new, change = step(lam)
        if change is None:        # arrays: the largest |new - lam|
            change = _max_abs_difference(new, lam)
        scf.YieldOp([new, arith.addi(k, index(1)), change])
    if must_converge:
        with where:
            check_converged(loop.results[2], tol, max_iter,
                            "adjit.fixed_point: the adjoint (reverse-mode) solve")
    return loop.results[0]


def not_converged(change: ir.Value, tol: float, k: ir.Value, max_iter: int) -> ir.Value:
    """Whether the iteration goes on: fewer than `max_iter` steps ran and the last change
    (+inf before the first step) is above `tol` or NaN (a NaN never counts as converged)."""
    limit = arith.constant(change.type, tol)
    above = arith.cmpf(arith.CmpFPredicate.UGT, change, limit)
    return arith.andi(above, arith.cmpi(arith.CmpIPredicate.slt, k, index(max_iter)))


# The residual goes into the message by its decade: a failed check carries only its number
# (lower_cpu.py's error cell), so each decade is a check of its own, at most one of which
# fails. Decades from 1e-20 to 1e+20 cover every useful tol and residual.
_DECADES = range(-20, 21)


def check_converged(change: ir.Value, tol: float, max_iter: int, what: str) -> None:
    """adj.check ops (at the current location) that fail when `change`, the largest change
    of the last of `max_iter` steps, is still above `tol` (or NaN): a RuntimeError naming
    the iteration count, tol and the residual's decade."""
    f64 = ir.F64Type.get()
    r = change if change.type == f64 else arith.extf(f64, change)
    failed = arith.cmpf(arith.CmpFPredicate.UGT, r, arith.constant(f64, tol))
    true = arith.constant(ir.IntegerType.get_signless(1), 1)
    head = (f"{what} did not converge: after max_iter={max_iter} iterations the largest "
            f"change between successive iterates (max |x_new - x|, absolute) ")
    tail = (f", above tol={tol:g}; raise max_iter, loosen tol, or pass must_converge=False "
            "to take the last iterate as it is")

    def bucket(lo: float | None, hi: float | None, text: str) -> None:
        inside = failed
        if lo is not None:
            inside = arith.andi(inside, arith.cmpf(arith.CmpFPredicate.OGT, r,
                                                   arith.constant(f64, lo)))
        if hi is not None:
            inside = arith.andi(inside, arith.cmpf(arith.CmpFPredicate.OLE, r,
                                                   arith.constant(f64, hi)))
        adj.check(arith.xori(inside, true), "RuntimeError", head + text + tail)

    first, last = _DECADES[0], _DECADES[-1]
    bucket(None, 10.0 ** first, f"was at most 1e{first:+03d}")
    for e in _DECADES[:-1]:
        bucket(10.0 ** e, 10.0 ** (e + 1), f"was between 1e{e:+03d} and 1e{e + 1:+03d}")
    bucket(10.0 ** last, float("inf"), f"was above 1e{last:+03d}")
    nan = arith.andi(failed, arith.cmpf(arith.CmpFPredicate.UNO, r, r))
    adj.check(arith.xori(nan, true), "RuntimeError", head + "was NaN" + tail)


def _call_location(fn: ir.Operation) -> ir.Location:
    """Where the user called adjit.fixed_point: the location of F's own convergence checks
    (frontend/fixed_point.py puts them at the call), else F's."""
    for op in walk(fn):
        if op.name == "adj.check":
            return op.location
    return fn.location


def _max_abs_difference(a: ir.Value, b: ir.Value) -> ir.Value:
    elem = memref_type(a.type).element_type
    n = index(1)
    sizes = dims(a)
    for s in sizes:
        n = arith.muli(n, s)
    flat_a, flat_b = flat_view(a), flat_view(b)
    loop = scf.ForOp(index(0), n, index(1), [zero(elem)])
    with ir.InsertionPoint(loop.body):
        i = loop.induction_variable
        d = math.absf(arith.subf(memref.load(flat_a, [i]), memref.load(flat_b, [i])))
        # NaN-propagating: a NaN change never counts as converged
        scf.YieldOp([arith.maximumf(loop.inner_iter_args[0], d)])
    return loop.results[0]
