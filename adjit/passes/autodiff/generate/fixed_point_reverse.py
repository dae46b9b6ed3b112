"""Reverse mode of a fixed-point iteration (`adj.fixed_point` functions: adjit.fixed_point,
lang/fixed_point.py), by implicit differentiation instead of through its iterations.

F(x0, [out,] p...) iterates x <- W(x, p) to x* = step(x*, p) (for an array x, W stores the
step into its `out` and F writes x* into its own `out`; for a float both return it). With
xbar the adjoint of x*, the adjoint fixed point lambda = xbar + (d step/d x)^T lambda at x*
is found by the same iteration (each step one reverse pass of W, Const in p, on one tape
made before the loop, to the same tolerance and step limit), then the parameters get
(d step/d p)^T lambda: one more reverse pass of W, Active/Duplicated in p as F's call asks,
with lambda as the adjoint of W's result. The tape is x* alone: memory does not grow with
the iterations, where the loop's own reverse mode would keep every iterate.

Held components. A step that copies some components from x (a Dirichlet boundary,
`out[0] = x[0]`) has identity rows in d step/d x, so I - (d step/d x)^T is singular there:
lambda grows on them at every step and never meets tol. Two tangent passes of W find them
(_held_components); they are left out of the iteration (lambda = 0 there: an identity row
reads no parameter), and since x* there is x0's, their u = xbar + (d step/d x)^T lambda is
x0's adjoint (the limit of the unrolled iteration's; 0 elsewhere: a converged x* does not
depend on the rest of x0). A singular system the mask does not cover (the step conserves a
sum) shows as a change that stops changing: reported at the user's call, not iterated to
max_iter (_iterate_in_place).

  F_aug(<F's parameters>) -> ([x* if with_primal,] x* copy)     (the primal F, then its result)
  F_rev(<F's parameters>, [xbar,] x*) -> (adjoints of the Active parameters)
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import arith, func, math, memref, scf

from ....core.activity import Activity
from ....core.derivative_abi import DerivativeMode
from ....dialects import adj
from ....dialects.adj import AdjError, FIXED_POINT_ATTR
from ...ir_util import (alloc_like, const, dims, fill_zero, flat_view, for_each_index, func_type,
                        index, is_float, is_memref, linear_index, memref_type, numel, symbol_name,
                        symbol_ref, walk, zero)
from ..signature import Derivative, Signature, abi, adjoint_types

if TYPE_CHECKING:
    from ..protocols import Host


def generate_fixed_point(diff: "Host", fn: ir.Operation, sig: Signature, name: str,
                         extra: dict[str, ir.Attribute]) -> Derivative:
    attr = ir.DictAttr(fn.attributes[FIXED_POINT_ATTR])
    step = symbol_ref(attr["step"])
    # A constant tolerance, or F's parameter `tol_arg` (one given at run time, f64: the
    # adjoint solve reads it there; never differentiated)
    tol_arg = ir.IntegerAttr(attr["tol_arg"]).value if "tol_arg" in attr else None
    tol = ir.FloatAttr(attr["tol"]).value if tol_arg is None else None
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
        n_params = len(primal) if tol_arg is None else tol_arg
        if tol_arg is not None:
            tol = primal[tol_arg]
        ps, p_shadows = primal[n_fixed:n_params], shadows[n_fixed:n_params]
        p_acts = sig.activity[n_fixed:n_params]
        w_inputs = list(func_type(diff.symbols[step]).inputs)
        consts = (Activity.CONST,) * len(ps)

        def w_derivative(activity, ret, mode=DerivativeMode.REVERSE):
            s = Signature(fn=step, mode=mode, activity=tuple(activity),
                          ret_activity=ret, with_primal=False,
                          overwritten=(False,) * len(w_inputs))
            return s, diff.derivative(s, fn)

        def augment(s, d, values, shadows_):
            """W's augmented pass for these values and shadows: its tape. The reverse pass
            only reads a tape, so one serves every iteration (x* and p do not change)."""
            flat = abi(s).flatten(values, shadows_)
            aug_results = list(func_type(diff.symbols[d.aug]).results)
            return flat, list(func.CallOp(aug_results, ir.FlatSymbolRefAttr.get(d.aug),
                                          flat).results)

        def reverse(s, d, flat, tape, dret_):
            """W's reverse pass: the adjoints of its Active parameters."""
            return list(func.CallOp(adjoint_types(func_type(diff.symbols[step]), s),
                                    ir.FlatSymbolRefAttr.get(d.rev),
                                    flat + dret_ + tape).results)

        def back(s, d, values, shadows_, dret_):
            flat, tape = augment(s, d, values, shadows_)
            return reverse(s, d, flat, tape, dret_)

        if array:
            out_shadow = shadows[1]
            if out_shadow is None:
                raise AdjError(fn, "adjit.fixed_point: its result has no shadow")
            xbar = alloc_like(out_shadow)
            memref.copy(out_shadow, xbar)
            fill_zero(out_shadow)     # x*'s place held xbar; the old contents reach nothing
            s_fw, d_fw = w_derivative((Activity.DUP, Activity.DUP) + consts, Activity.CONST,
                                      DerivativeMode.FORWARD)
            held = _held_components(xstar, lambda v, tv, o, to: func.CallOp(
                [], ir.FlatSymbolRefAttr.get(d_fw.forward),
                abi(s_fw).flatten([v, o] + ps, [tv, to] + [None] * len(ps))))
            s_it, d_it = w_derivative((Activity.DUP, Activity.DUP) + consts, Activity.CONST)
            sx, s_out, scratch = alloc_like(xstar), alloc_like(xbar), alloc_like(xstar)
            flat, tape = augment(s_it, d_it, [xstar, scratch] + ps,
                                 [sx, s_out] + [None] * len(ps))
            lam, last = alloc_like(xbar), alloc_like(xbar)
            # x0's adjoint, where x0 has a shadow (a Const start needs none)
            x0bar = alloc_like(xbar) if shadows[0] is not None else None
            _split_held(xbar, None, held, lam, x0bar)
            fill_zero(last)
            fill_zero(sx)
            memref.copy(lam, s_out)

            def iteration():        # sx is 0 and s_out lambda: _split_held leaves them so
                reverse(s_it, d_it, flat, tape, [])
                return _split_held(xbar, sx, held, lam, x0bar, last, s_out)

            _iterate_in_place(iteration, memref_type(xbar.type).element_type, tol, max_iter,
                              must_converge, where)
            s_p, d_p = w_derivative((Activity.CONST, Activity.DUP) + tuple(p_acts),
                                    Activity.CONST)
            grads = back(s_p, d_p, [xstar, alloc_like(xstar)] + ps,
                         [None, lam] + list(p_shadows), [])
            if x0bar is not None:            # x0's held components are x*'s
                _add_into(shadows[0], shadows[0], x0bar)
            x0_adjoint = None
        else:
            xbar = args[len(params)] if dret else zero(results[0])
            s_it, d_it = w_derivative((Activity.ACTIVE,) + consts, Activity.ACTIVE)
            flat, tape = augment(s_it, d_it, [xstar] + ps, [None] * (1 + len(ps)))
            t = results[0]
            # step'(x*) == 1 exactly: the step keeps x as it is, so x* is x0 (below)
            slope, = reverse(s_it, d_it, flat, tape, [const(t, 1.0)])
            held = arith.cmpf(arith.CmpFPredicate.OEQ, slope, const(t, 1.0))
            zero_t = zero(t)

            def iteration(lam):
                g, = reverse(s_it, d_it, flat, tape, [lam])
                new = arith.select(held, zero_t, arith.addf(xbar, g))
                d = arith.subf(new, lam)
                return new, _abs(d)

            lam = _iterate(t, arith.select(held, zero_t, xbar), iteration, tol, max_iter,
                           must_converge, where)
            s_p, d_p = w_derivative((Activity.CONST,) + tuple(p_acts), Activity.ACTIVE)
            grads = back(s_p, d_p, [xstar] + ps, [None] + list(p_shadows), [lam])
            x0_adjoint = arith.select(held, xbar, zero_t)
        out = []
        it = iter(grads)
        for k, a in enumerate(sig.activity):
            if a != Activity.ACTIVE:
                continue
            if k < n_fixed:        # the start: x* depends on it where the step holds x
                out.append(x0_adjoint if x0_adjoint is not None else zero(inputs[k]))
            elif k == tol_arg:     # the tolerance only says when to stop
                out.append(zero(inputs[k]))
            else:
                out.append(next(it))
        func.ReturnOp(out)
    return Derivative(aug=f"{name}_aug", rev=f"{name}_rev", tape=tape_t)


# Probe directions for _held_components: element k is 0.5 + (24 bits of a hash of k, two
# seeds) / 2**24, exact in f32. A hash and not a smooth sequence: a consistent stencil
# reproduces linear data (the Laplacian of a line is 0), so a locally linear probe would come
# back unchanged from interior rows too.
_SEEDS = (0x9E3779B97F4A7C15, 0xD1B54A32D192ED03)


def _probe_value(k: ir.Value, seed: int, elem: ir.Type) -> ir.Value:
    """0.5 + hash(k) / 2**24 (splitmix64's mixer) for the i64 `k`, as `elem`."""
    i64 = ir.IntegerType.get_signless(64)

    def c(v: int) -> ir.Value:
        return arith.constant(i64, v - (1 << 64) if v >= 1 << 63 else v)

    h = arith.muli(arith.addi(k, c(seed)), c(0xBF58476D1CE4E5B9))
    h = arith.xori(h, arith.shrui(h, c(31)))
    h = arith.muli(h, c(0x94D049BB133111EB))
    h = arith.xori(h, arith.shrui(h, c(29)))
    bits = arith.shrui(h, c(40))                  # 24 bits: exact in f32 and f64
    f64 = ir.F64Type.get()
    v = arith.addf(arith.mulf(arith.uitofp(f64, bits), const(f64, 2.0 ** -24)),
                   const(f64, 0.5))
    return v if elem == f64 else arith.truncf(elem, v)


def _held_components(x: ir.Value, forward) -> ir.Value:
    """A mask (1 where held, else 0, in x's element type) of the components the step keeps
    as they are: those whose row of d step/d x is the identity's (a Dirichlet boundary the
    step copies from x). Found from two tangent passes of the step (`forward(x, dx, out,
    dout)`): a component is held where both probe directions come back exactly (the tangent
    of a copy is a copy; any other row would have to hit the probe value to the last bit
    twice). Such a row makes I - (d step/d x)^T singular: its adjoint never decays, so it is
    left out of the adjoint iteration (x* there is x0's, its adjoint x0's)."""
    elem = memref_type(x.type).element_type
    sizes = dims(x)
    held = alloc_like(x)
    for n, seed in enumerate(_SEEDS):
        dx, out, dout = alloc_like(x), alloc_like(x), alloc_like(x)

        def probe(idx, seed=seed, dx=dx):
            k = arith.index_cast(ir.IntegerType.get_signless(64), linear_index(idx, sizes))
            memref.store(_probe_value(k, seed, elem), dx, idx)
        for_each_index(sizes, probe)
        fill_zero(dout)
        forward(x, dx, out, dout)

        def record(idx, first=n == 0, dx=dx, dout=dout):
            same = arith.cmpf(arith.CmpFPredicate.OEQ, memref.load(dout, idx),
                              memref.load(dx, idx))
            if not first:
                same = arith.andi(same, arith.cmpf(arith.CmpFPredicate.ONE,
                                                   memref.load(held, idx), zero(elem)))
            memref.store(arith.select(same, const(elem, 1.0), zero(elem)), held, idx)
        for_each_index(sizes, record)
    return held


def _split_held(xbar: ir.Value, sx: ir.Value | None, held: ir.Value, lam: ir.Value,
                x0bar: ir.Value | None, last: ir.Value | None = None,
                s_out: ir.Value | None = None) -> list[ir.Value]:
    """u = xbar + sx (sx = (d step/d x)^T lambda; None: u = xbar) split by the held mask:
    lambda <- u off it and 0 on it (a held component's adjoint reaches nothing through the
    step: its row has no parameter in it), x0bar <- u on it (x0's adjoint there) and 0 off
    it (None: not kept). With sx, readies the next reverse pass too (s_out <- the new
    lambda, sx <- 0: one sweep instead of three) and returns the largest |change| of lambda and the largest
    |change - last change| (`last` holds each element's previous change and gets the new
    one), both NaN-propagating. Contiguous arrays are swept as one flat loop (rows of a
    small grid were short loops, each with its own reduction epilogue)."""
    elem = memref_type(xbar.type).element_type
    arrays = [a for a in (xbar, sx, held, lam, x0bar, last, s_out) if a is not None]
    sizes = dims(xbar)
    if len(sizes) > 1 and not any(isinstance(memref_type(a.type).layout, ir.StridedLayoutAttr)
                                  for a in arrays):
        flat = {a: flat_view(a) for a in arrays}
        xbar, held, lam = flat[xbar], flat[held], flat[lam]
        x0bar = flat.get(x0bar)
        if sx is not None:
            sx, last, s_out = flat[sx], flat[last], flat[s_out]
        sizes = [numel(sizes)]

    def body(idx, acc):
        u = memref.load(xbar, idx)
        if sx is not None:
            u = arith.addf(u, memref.load(sx, idx))
            memref.store(zero(elem), sx, idx)
        on = arith.cmpf(arith.CmpFPredicate.ONE, memref.load(held, idx), zero(elem))
        new = arith.select(on, zero(elem), u)
        if x0bar is not None:
            memref.store(arith.select(on, u, zero(elem)), x0bar, idx)
        if acc:
            d = arith.subf(new, memref.load(lam, idx))
            dd = math.absf(arith.subf(d, memref.load(last, idx)))
            memref.store(d, last, idx)
            memref.store(new, s_out, idx)
            acc = [arith.maximumf(acc[0], math.absf(d)), arith.maximumf(acc[1], dd)]
        memref.store(new, lam, idx)
        return acc

    return _fold_each_index(sizes, [] if sx is None else [zero(elem), zero(elem)], body)


def _fold_each_index(sizes, init: list[ir.Value], body) -> list[ir.Value]:
    """A loop nest over `sizes` carrying the values `init`: acc <- body(indices, acc) at the
    innermost level; their final values."""
    def level(k: int, idx: list[ir.Value], acc: list[ir.Value]) -> list[ir.Value]:
        if k == len(sizes):
            return body(idx, acc)
        loop = scf.ForOp(index(0), sizes[k], index(1), acc)
        with ir.InsertionPoint(loop.body):
            scf.YieldOp(level(k + 1, idx + [loop.induction_variable],
                              list(loop.inner_iter_args)))
        return list(loop.results)
    return level(0, [], list(init))


# The adjoint's change is stationary when it moved by at most this many ulps of its size
# in one step: rounding noise, not a contraction (one with 1 - rho of 1e-14 in f64, 8e-6 in
# f32, would need more steps than any max_iter to converge).
_STATIONARY_ULPS = 64


def _iterate_in_place(iteration, change_t: ir.Type, tol: float | ir.Value, max_iter: int,
                      must_converge: bool, where: ir.Location) -> None:
    """`iteration()` (which updates its arrays in place and returns the largest change and
    how much the change itself changed) until that change is at most `tol` or `max_iter`
    steps ran (_iterate's test and error), or the change stopped changing while above
    `tol`: lambda then grows by the same vector at every step, a left null vector of
    I - (d step/d x), a singular adjoint system (a combination of x's components that the
    step conserves, which the held mask does not cover), reported instead of iterated to
    `max_iter`."""
    idx, i1 = ir.IndexType.get(), ir.IntegerType.get_signless(1)
    eps = 2.0 ** (-23 if change_t == ir.F32Type.get() else -52)     # machine epsilon
    loop = scf.WhileOp([idx, change_t, i1],
                       [index(0), const(change_t, float("inf")), const(i1, 0)])
    before = loop.before.blocks.append(idx, change_t, i1)
    after = loop.after.blocks.append(idx, change_t, i1)
    with ir.InsertionPoint(before):
        k, change, singular = before.arguments
        go = arith.andi(not_converged(change, tol, k, max_iter),
                        arith.xori(singular, const(i1, 1)))
        scf.ConditionOp(go, [k, change, singular])
    with ir.InsertionPoint(after):
        k, _, _ = after.arguments
        change, moved = iteration()
        still = arith.cmpf(arith.CmpFPredicate.OLE, moved,
                           arith.mulf(change, const(change_t, _STATIONARY_ULPS * eps)))
        above = arith.cmpf(arith.CmpFPredicate.OGT, change, tolerance(tol, change_t))
        scf.YieldOp([arith.addi(k, index(1)), change, arith.andi(still, above)])
    if must_converge:
        with where:
            adj.check(arith.xori(loop.results[2], const(i1, 1)), "RuntimeError",
                      "adjit.fixed_point: the adjoint (reverse-mode) solve is singular: the "
                      "adjoint grows by the same amount at every step, so I - (d step/d x)^T "
                      "is singular at x*: the step conserves a combination of x's components "
                      "(a sum, a mean, a boundary the step computes from x as well as copies), "
                      "so x* depends on x0 there and the implicit derivative does not exist; "
                      "hold such components by copying them unchanged (out[i] = x[i]: their "
                      "adjoint goes to x0) or pin the conserved quantity in the step")
            check_converged(loop.results[1], tol, max_iter,
                            "adjit.fixed_point: the adjoint (reverse-mode) solve")


def _abs(v: ir.Value) -> ir.Value:
    return math.absf(v)


def _add_into(new: ir.Value, a: ir.Value, b: ir.Value) -> None:
    """new = a + b, element by element (the change is _iterate's to measure)."""
    def body(i):
        memref.store(arith.addf(memref.load(a, i), memref.load(b, i)), new, i)
    for_each_index(dims(new), body)


def _iterate(t: ir.Type, start: ir.Value, step, tol: float | ir.Value, max_iter: int,
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


def tolerance(tol: float | ir.Value, t: ir.Type) -> ir.Value:
    """`tol` (a constant, or an f64 value given at run time) as a value of float type `t`."""
    if isinstance(tol, float):
        return arith.constant(t, tol)
    if tol.type == t:
        return tol
    bits = {ir.F16Type.get(): 16, ir.BF16Type.get(): 16, ir.F32Type.get(): 32}
    return (arith.truncf(t, tol) if bits.get(t, 64) < bits.get(tol.type, 64)
            else arith.extf(t, tol))


def not_converged(change: ir.Value, tol: float | ir.Value, k: ir.Value,
                  max_iter: int) -> ir.Value:
    """Whether the iteration goes on: fewer than `max_iter` steps ran and the last change
    (+inf before the first step) is above `tol` or NaN (a NaN never counts as converged)."""
    limit = tolerance(tol, change.type)
    above = arith.cmpf(arith.CmpFPredicate.UGT, change, limit)
    return arith.andi(above, arith.cmpi(arith.CmpIPredicate.slt, k, index(max_iter)))


# The residual goes into the message by its decade: a failed check carries only its number
# (lower_cpu.py's error cell), so each decade is a check of its own, at most one of which
# fails. Decades from 1e-20 to 1e+20 cover every useful tol and residual.
_DECADES = range(-20, 21)


def check_converged(change: ir.Value, tol: float | ir.Value, max_iter: int,
                    what: str) -> None:
    """adj.check ops (at the current location) that fail when `change`, the largest change
    of the last of `max_iter` steps, is still above `tol` (or NaN): a RuntimeError naming
    the iteration count, tol and the residual's decade."""
    f64 = ir.F64Type.get()
    r = change if change.type == f64 else arith.extf(f64, change)
    failed = arith.cmpf(arith.CmpFPredicate.UGT, r, tolerance(tol, f64))
    true = arith.constant(ir.IntegerType.get_signless(1), 1)
    head = (f"{what} did not converge: after max_iter={max_iter} iterations the largest "
            f"change between successive iterates (max |x_new - x|, absolute) ")
    tail = (f", above tol{'=%g' % tol if isinstance(tol, float) else ''}; raise max_iter, loosen tol, or pass must_converge=False "
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
    (lang/fixed_point.py puts them at the call), else F's."""
    for op in walk(fn):      # its own: a check of the code it runs (a shape check) is not
        if (op.name == "adj.check"
                and ir.StringAttr(op.attributes["message"]).value.startswith("adjit.fixed_point")):
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
