"""Gather form of a reverse kernel: the adjoint of an array read at the item's id plus constant
offsets, computed by the element's own work item with plain stores instead of atomics.

A stencil `v[i, j] = u[i-1, j] + u[i+1, j] + ...` reverses, item by item, into atomic adds of
its partials into du[i-1, j], du[i+1, j], ...: five items add into each element, and on the CPU
each add is a locked compare-and-swap loop that does not vectorise (1.7 ms against 0.057 ms
for the primal at 256^2). Transposed, the work item of element e visits the items that read
it, t = e - c for each offset c of a load site, evaluates their partials there (the whole
reverse body of item t, under the same guards, with every side effect but site c's add
dropped) and adds the sum into du[e] with one load/add/store: no two items write an element.

Two launches. The gather kernel of du runs over du's shape; the reverse kernel, without the
gathered atomics, then runs as before: it zeroes the output shadows it read (dv[t] = 0 after
reading it), stores the Active scalars' per-item adjoints and makes the atomic adds that stay.
The zeroing cannot happen in the gather launch, since other items read dv[t] there too.

When it applies (checked on the generated reverse kernel, `gathers`):
- the primal array is only read by the kernel (loads, dims), and its shadow only takes atomic
  addf in the reverse kernel, each at indices id[p(d)] + c_d per dimension d for one
  permutation p of the dimensions (through index casts, adds and subtractions of constants);
  distinct array arguments of a derivative do not alias (api/autodiff_checks.py);
- the partial of a site at item t reads only state that no other item's reverse changes: no
  array argument of the reverse kernel that it loads is a target of its atomics, each array
  it both loads and stores (an output's shadow, read then zeroed) is loaded before it is
  stored and not inside a loop (so dropping the item's own stores changes no load), atomic
  results are unused, and no call takes an array (it could write one);
- otherwise the shadow keeps its atomic adds (monotonic: lower_cpu.relax_atomics).
Simpler, and first (`own_elements`): an array parameter of the reverse kernel that every
access (load, store, atomic) reaches at the item's own element, id[d] in dimension d, takes
plain load/add/stores instead of atomics in the reverse kernel itself, as no other item
touches that element (the dx[i] of an elementwise kernel, an in-place update's dy[i]).

Every kernel derivative gets own-element adds (its ABI is unchanged). Only those generated
for a launch rule get gather kernels (their launch runs them); a kernel derivative requested
by name (the GPU launcher's) keeps its ABI and the atomics of other reads.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from ....core.activity import SHADOWED
from ....dialects import adj
from ...ir_util import ATOMIC_ADDF, clone_op, constant_int, func_type, index, is_memref, walk
from ...op_facts import facts

_SITE_ATTR = "adj.gather_site"


@dataclass
class Gather:
    """One array whose adjoint is gathered: its shadow's position among the reverse kernel's
    parameters (`param`) and the primal kernel's (`arg`); per site, its atomic and the
    offset of each of the array's dimensions; `perm[d]`: the work-item dimension of array
    dimension d; `kernel`: the gather kernel's symbol, once made."""
    arg: int
    param: int
    perm: tuple[int, ...]
    sites: list[tuple[ir.Operation, tuple[int, ...]]]
    kernel: str = ""


def affine(v: ir.Value, ndim: int) -> tuple[int, int] | None:
    """(work-item dimension, constant) when `v` is that id plus the constant, else None."""
    if not isinstance(v, ir.OpResult):
        return None
    op = v.owner.operation
    if op.name == "adj.global_id":
        return ir.IntegerAttr(op.attributes["dim"]).value, 0
    if op.name == "adj.index":   # the linear index: the id itself in 1-D only
        return (0, 0) if ndim == 1 else None
    if op.name == "arith.index_cast":
        return affine(op.operands[0], ndim)
    if op.name in ("arith.addi", "arith.subi"):
        a, b = op.operands
        cb = constant_int(b)
        if cb is not None:
            base = affine(a, ndim)
            sign = 1 if op.name == "arith.addi" else -1
            return None if base is None else (base[0], base[1] + sign * cb)
        ca = constant_int(a)
        if ca is not None and op.name == "arith.addi":
            base = affine(b, ndim)
            return None if base is None else (base[0], base[1] + ca)
    return None


def _in_loop(op: ir.Operation, fn: ir.Operation) -> bool:
    parent = op.parent
    while parent is not None and parent.operation != fn:
        if facts(parent.operation.name).loop:
            return True
        parent = parent.operation.parent
    return False


def _memref_uses_ok(rev: ir.Operation, entry: ir.Block) -> bool:
    """Whether the reverse kernel's effects are all loads, stores and atomics on its array
    parameters (or local arrays), in an order that lets the gather kernel drop its stores."""
    params = {a for a in entry.arguments if is_memref(a.type)}
    loads: dict[ir.Value, list[ir.Operation]] = {}
    stores: dict[ir.Value, list[ir.Operation]] = {}
    atomics: set[ir.Value] = set()
    order: dict[ir.Operation, int] = {}
    for k, op in enumerate(walk(rev)):
        order[op] = k
        if op.name == "func.call" and any(is_memref(v.type) for v in op.operands):
            return False
        for pos, v in enumerate(op.operands):
            if v not in params:
                continue
            if op.name == "memref.load" and pos == 0:
                loads.setdefault(v, []).append(op)
            elif op.name == "memref.store" and pos == 1:
                stores.setdefault(v, []).append(op)
            elif op.name == "memref.atomic_rmw" and pos == 1:
                if len(list(op.results[0].uses)) != 0:
                    return False
                atomics.add(v)
            elif op.name != "memref.dim":
                return False   # a view, copy or call of a parameter: not followed here
    for m, ls in loads.items():
        if m in atomics:
            return False
        ss = stores.get(m, [])
        if any(_in_loop(op, rev) for op in ls + ss):
            return False
        # Without loops, a load runs after a store iff it comes later in pre-order, outside
        # the other branch of an scf.if they are both in.
        if any(order[st] < order[ld] and not _exclusive(st, ld, rev) for st in ss for ld in ls):
            return False
    return True


def _path(op: ir.Operation, fn: ir.Operation) -> list[tuple[ir.Operation, int]]:
    """(ancestor op, index of the region holding `op`) from `fn` down to `op`."""
    path = []
    while op.parent is not None and op.parent.operation != fn:
        parent = op.parent.operation
        region = next(k for k, r in enumerate(parent.regions)
                      if any(b == op.block for b in r.blocks))
        path.append((parent, region))
        op = parent
    return path[::-1]


def _exclusive(a: ir.Operation, b: ir.Operation, fn: ir.Operation) -> bool:
    """Whether `a` and `b` are in different branches of one scf.if (never both run)."""
    for (pa, ra), (pb, rb) in zip(_path(a, fn), _path(b, fn)):
        if pa != pb:
            return False
        if ra != rb:
            return pa.name == "scf.if"
    return False


def own_elements(rev: ir.Operation, ndim: int) -> int:
    """Turns the atomic adds into each array parameter of `rev` that every access (load,
    store, atomic) reaches at the item's own element, index id[d] in dimension d, into plain
    load/add/stores: no other item touches that element (an elementwise kernel's dx[i],
    an in-place update's dy[i]). Returns how many it rewrote."""
    entry = rev.regions[0].blocks[0]
    rewritten = 0
    for m in entry.arguments:
        if not is_memref(m.type) or ir.MemRefType(m.type).rank != ndim:
            continue
        uses = [use.owner for use in m.uses]
        atomics = [op for op in uses if op.name == "memref.atomic_rmw"]
        if not atomics or not all(_own(op, m, ndim) for op in uses):
            continue
        for op in atomics:
            if (ir.IntegerAttr(op.attributes["kind"]).value != ATOMIC_ADDF or
                    len(list(op.results[0].uses)) != 0):
                break
        else:
            for op in atomics:
                at = list(op.operands)[2:]
                with ir.InsertionPoint(op), op.location:
                    memref.store(arith.addf(memref.load(m, at), op.operands[0]), m, at)
                op.erase()
                rewritten += 1
    return rewritten


def _own(op: ir.Operation, m: ir.Value, ndim: int) -> bool:
    first = {"memref.load": 1, "memref.store": 2, "memref.atomic_rmw": 2}.get(op.name)
    if op.name == "memref.dim":
        return True
    if first is None or op.operands[first - 1] != m:
        return False
    return [affine(i, ndim) for i in list(op.operands)[first:]] == [(d, 0) for d in range(ndim)]


def gathers(primal: ir.Operation, rev: ir.Operation, activity: tuple[str, ...],
            ndim: int) -> list[Gather]:
    """The arrays whose adjoints `rev` (the reverse kernel of `primal`) can gather."""
    entry = rev.regions[0].blocks[0]
    if not _memref_uses_ok(rev, entry):
        return []
    primal_entry = primal.regions[0].blocks[0]
    found: list[Gather] = []
    param = 0
    for k, act in enumerate(activity):
        param += 1
        if act not in SHADOWED:
            continue
        shadow, param = entry.arguments[param], param + 1
        t = ir.MemRefType(shadow.type)
        if t.rank != ndim or not all(use.owner.name in ("memref.load", "memref.dim")
                                     for use in primal_entry.arguments[k].uses):
            continue
        sites, perm, ok = [], None, True
        for use in shadow.uses:
            op = use.owner
            if op.name == "memref.dim":
                continue
            if (op.name != "memref.atomic_rmw" or
                    ir.IntegerAttr(op.attributes["kind"]).value != ATOMIC_ADDF):
                ok = False
                break
            offs = [affine(i, ndim) for i in list(op.operands)[2:]]
            if None in offs:
                ok = False
                break
            p = tuple(d for d, _ in offs)
            if sorted(p) != list(range(ndim)) or (perm is not None and p != perm):
                ok = False
                break
            perm = p
            sites.append((op, tuple(c for _, c in offs)))
        if ok and sites:
            found.append(Gather(arg=k, param=param - 1, perm=perm, sites=sites))
    return found


def make_gather_kernel(diff, rev: ir.Operation, g: Gather, name: str, ndim: int) -> None:
    """Adds kernel @name: rev's parameters, then the reverse launch's ndrange extents; run
    over the shadow's shape, its item e adds into shadow[e] the partials of the items
    e - offset that read it (one clone of rev's body per distinct offset)."""
    entry = rev.regions[0].blocks[0]
    inputs = list(func_type(rev).inputs)
    idx = ir.IndexType.get()
    gk = diff.new_function(name, inputs + [idx] * ndim, [], rev, {}, private=True)
    g.kernel = name
    body = gk.regions[0].blocks[0]
    params = list(body.arguments)
    sizes = params[len(inputs):]
    shadow = params[g.param]
    elem = ir.MemRefType(shadow.type).element_type
    offsets = list(dict.fromkeys(c for _, c in g.sites))
    for op, c in g.sites:
        op.attributes[_SITE_ATTR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                       offsets.index(c))
    with ir.InsertionPoint(body), rev.location:
        e = [adj.global_id(d) for d in range(ndim)]
        acc = memref.alloca(ir.MemRefType.get([], elem), [], [])
        memref.store(arith.constant(elem, 0.0), acc, [])
        for s, c in enumerate(offsets):
            t: list[ir.Value | None] = [None] * ndim
            for d in range(ndim):
                t[g.perm[d]] = arith.subi(e[d], index(c[d])) if c[d] else e[d]
            inside = None
            for d in range(ndim):
                ok = arith.andi(arith.cmpi(arith.CmpIPredicate.sge, t[d], index(0)),
                                arith.cmpi(arith.CmpIPredicate.slt, t[d], sizes[d]))
                inside = ok if inside is None else arith.andi(inside, ok)
            branch = scf.IfOp(inside)
            with ir.InsertionPoint(branch.then_block):
                vmap = dict(zip(entry.arguments, params))
                cloned = [clone_op(op.operation, vmap) for op in list(entry.operations)[:-1]]
                scf.YieldOp([])
            for top in cloned:
                _specialise(top, s, t, sizes, acc, set(params))
        old = memref.load(shadow, e)
        memref.store(arith.addf(old, memref.load(acc, [])), shadow, e)
        func.ReturnOp([])
    for op, _ in g.sites:
        del op.attributes[_SITE_ATTR]


def _specialise(top: ir.Operation, site: int, t: list[ir.Value], sizes: list[ir.Value],
                acc: ir.Value, params: set[ir.Value]) -> None:
    """In a clone of the reverse body: the work item is t; the atomics of offset `site`
    add into acc; every other write to a parameter is dropped."""
    for op in list(walk(top)):
        name = op.name
        if name in ("adj.global_id", "adj.global_size", "adj.index"):
            with ir.InsertionPoint(op), op.location:
                if name == "adj.index":
                    value = t[0]
                    for d in range(1, len(t)):
                        value = arith.addi(arith.muli(value, sizes[d]), t[d])
                else:
                    d = ir.IntegerAttr(op.attributes["dim"]).value
                    value = (t if name == "adj.global_id" else sizes)[d]
            op.result.replace_all_uses_with(value)
            op.erase()
        elif name == "memref.atomic_rmw" and op.operands[1] in params:
            if (_SITE_ATTR in op.attributes and
                    ir.IntegerAttr(op.attributes[_SITE_ATTR]).value == site):
                with ir.InsertionPoint(op), op.location:
                    memref.store(arith.addf(memref.load(acc, []), op.operands[0]), acc, [])
            op.erase()
        elif name == "memref.store" and op.operands[1] in params:
            op.erase()


# == Gather form of a reversed loop nest of @jit code ===========================================
# The frontend's loop nests (arrays.for_each: scf.parallel over rows, scf.for inside) read a
# stencil written with slices, `u[2:, 1:-1] + u[:-2, 1:-1] + ...`, through views of one array
# at the row's own index: iteration i of view k reads base row Δk + i (or row Δk of a view of
# one row that broadcasts: `select(size == 1, 0, i)`). Reversed as written, iteration i adds
# into base rows Δk + i for every k, which other iterations add into too: that loop ran
# serially. In gather form, one loop over the base's rows r (parallel, no atomics) runs, for
# each view k, the reversed body of the iteration i = r - Δk that read row r (all of them for
# a broadcast view's row) with every write dropped but view k's adds; the reversed loop
# itself then runs in parallel without those adds (it zeroes the stored arrays' adjoints,
# which the row loops read first, and makes the other adds).
_ROW_SITE_ATTR = "adj.gather_row_site"


@dataclass
class RowSite:
    """A load of a gathered array inside the loop: its view's chain of subviews down to the
    base (`offsets`: dim-0 offsets, static ints or values of the loop's scope) and the
    conditions under which its row index is 0 instead of the iteration's."""
    load: ir.Operation
    offsets: list
    conds: list[ir.Value]


@dataclass
class RowGather:
    """The sites of each gathered array (`groups`: lists of RowSite indices), and, once
    prepared, per site its row offset Δ and broadcast flag as values of the reverse."""
    sites: list[RowSite]
    groups: list[list[int]]
    deltas: list = None
    broadcast: list = None
    lb: ir.Value = None
    ub: ir.Value = None


def _strip_selects(v: ir.Value, loop: ir.Operation) -> tuple[ir.Value, list[ir.Value]] | None:
    """`v` without the broadcast selects `select(c, 0, x)` around it, with their conditions
    (each defined outside `loop`: the same for every iteration)."""
    conds = []
    while isinstance(v, ir.OpResult) and v.owner.operation.name == "arith.select":
        sel = v.owner.operation
        c, t, f = sel.operands
        if constant_int(t) != 0 or _inside(c, loop):
            return None
        conds.append(c)
        v = f
    return v, conds


def _inside(v: ir.Value, loop: ir.Operation) -> bool:
    """Whether `v` is defined inside `loop` (a result or block argument within it)."""
    loop = loop.operation
    owner = v.owner.operation if isinstance(v, ir.OpResult) else v.owner.owner
    while owner is not None:
        owner = owner.operation
        if owner == loop:
            return True
        owner = owner.parent
    return False


def _row_chain(m: ir.Value) -> tuple[ir.Value, list] | None:
    """(base, dim-0 offsets of the subviews from `m` down to it): through memref.cast and
    rank-keeping subviews of row stride 1 (a stepped or rank-reducing view: None)."""
    offsets = []
    dyn = ir.ShapedType.get_dynamic_stride_or_offset()
    while isinstance(m, ir.OpResult):
        op = m.owner.operation
        if op.name == "memref.cast":
            m = op.operands[0]
            continue
        if op.name != "memref.subview":
            break
        view = op.opview
        if ir.MemRefType(view.result.type).rank != ir.MemRefType(view.source.type).rank:
            return None
        strides = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
        if strides[0] != 1:
            return None
        static = list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"]))
        offsets.append(list(view.offsets)[0] if static[0] == dyn else static[0])
        m = view.source
    return m, offsets


def row_sites(gen, op: ir.Operation) -> RowGather | None:
    """The gather form's plan for reversing the parallel loop `op` (one dimension, step 1),
    or None where it does not apply: every relevant load reads at row `iv` (through
    broadcast selects), an array loaded through one memref at `iv` without selects keeps
    its own-row adds; the others (several views of one base) are gathered. No array is both
    loaded and stored in the loop (a partial then reads only adjoints of stored arrays,
    which only the reversed loop's own stores change), each stored array takes one store,
    at the loop's own indices (iv, then the scf.for variables around the store), and
    nothing else may write memory (atomics, copies, calls taking arrays)."""
    block = op.regions[0].blocks[0]
    if len(block.arguments) != 1 or constant_int(op.operands[2]) != 1:
        return None
    iv = block.arguments[0]
    loads: dict = {}          # base -> [(load, memref, conds, offsets)]
    loaded_roots, stored_roots = set(), []
    for inner in walk(op):
        if inner == op:
            continue
        name = inner.name
        if name == "memref.load":
            if not gen.act.relevant(inner):
                continue
            where = _strip_selects(inner.operands[1], op) if len(inner.operands) > 1 else None
            if where is None or where[0] != iv or _inside(inner.operands[0], op):
                return None
            chain = _row_chain(inner.operands[0])
            if chain is None:
                return None
            base, offsets = chain
            loads.setdefault(base, []).append((inner, inner.operands[0], where[1], offsets))
            loaded_roots.add(_root_of(base))
        elif name == "memref.store":
            if not _own_indices(inner, op, iv):
                return None
            stored_roots.append(_root_of(inner.operands[1]))
        elif name == "func.call" and any(is_memref(v.type) for v in inner.operands):
            return None
        elif facts(name).shared_adds and name != "memref.load":
            return None
    if len(set(stored_roots)) != len(stored_roots) or loaded_roots & set(stored_roots):
        return None
    if len({_root_of(b) for b in loads}) != len(loads):
        return None          # one array read through two bases
    sites, groups = [], []
    for base, found in loads.items():
        if len({m for _, m, _, _ in found}) == 1 and not any(c for _, _, c, _ in found):
            continue          # its own rows only: the reversed loop adds them itself
        groups.append([])
        for load, _, conds, offsets in found:
            groups[-1].append(len(sites))
            sites.append(RowSite(load, offsets, conds))
    return RowGather(sites, groups) if groups else None


def _root_of(m: ir.Value) -> ir.Value:
    while isinstance(m, ir.OpResult) and facts(m.owner.operation.name).view:
        m = m.owner.operation.operands[0]
    return m


def _own_indices(store: ir.Operation, loop: ir.Operation, iv: ir.Value) -> bool:
    """Whether `store` writes at (iv, then the variables of the scf.for loops around it
    inside `loop`, outermost first): one element per run of its body."""
    fors = []
    parent = store.parent
    while parent is not None and parent.operation != loop:
        p = parent.operation
        if p.name == "scf.for":
            fors.append(p.regions[0].blocks[0].arguments[0])
        elif p.name != "scf.if":
            return False
        parent = p.parent
    return list(store.operands)[2:] == [iv] + fors[::-1]


def prepare_rows(gen, op: ir.Operation, plan: RowGather) -> None:
    """The plan's values in the reverse, before the reversed loop: the loop's bounds, each
    site's base-row offset and whether its row index broadcasts (all iterations row 0)."""
    plan.lb, plan.ub = gen.primal(op.operands[0]), gen.primal(op.operands[1])
    false = arith.constant(ir.IntegerType.get_signless(1), 0)
    plan.deltas, plan.broadcast = [], []
    for s in plan.sites:
        delta = index(0)
        for o in s.offsets:
            delta = arith.addi(delta, index(o) if isinstance(o, int) else gen.primal(o))
        flag = false
        for c in s.conds:
            flag = arith.ori(flag, gen.primal(c))
        plan.deltas.append(delta)
        plan.broadcast.append(flag)
    gen.gather_row_sites = {s.load: k for k, s in enumerate(plan.sites)}


def tag_row_site(gen, load: ir.Operation, store: ir.Operation) -> None:
    """Marks the add into a gathered view's shadow that reversing `load` made."""
    k = getattr(gen, "gather_row_sites", {}).get(load)
    if k is not None:
        store.attributes[_ROW_SITE_ATTR] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(64), k)


def gather_rows(gen, loop: ir.Operation, plan: RowGather) -> None:
    """Before the reversed parallel loop `loop`, per gathered array a parallel loop over its
    base rows adding the tagged adds there; the tagged adds leave `loop`."""
    gen.gather_row_sites = {}
    body = loop.regions[0].blocks[0]
    liv = body.arguments[0]
    with ir.InsertionPoint(loop), loop.location:
        one = index(1)
        for group in plan.groups:
            lo_rows, hi_rows = [], []
            for k in group:
                d, b = plan.deltas[k], plan.broadcast[k]
                lo_rows.append(arith.addi(d, arith.select(b, index(0), plan.lb)))
                hi_rows.append(arith.addi(d, arith.select(b, one, plan.ub)))
            rmin, rmax = lo_rows[0], hi_rows[0]
            for a, z in zip(lo_rows[1:], hi_rows[1:]):
                rmin, rmax = arith.minsi(rmin, a), arith.maxsi(rmax, z)
            rows = scf.ParallelOp([], [rmin], [arith.maxsi(rmax, rmin)], [one], [])
            rblock = rows.regions[0].blocks.append(ir.IndexType.get())
            with ir.InsertionPoint(rblock):
                r = rblock.arguments[0]
                for k in group:
                    d, b = plan.deltas[k], plan.broadcast[k]
                    i = arith.subi(r, d)
                    lo = arith.select(b, plan.lb, arith.maxsi(i, plan.lb))
                    own = arith.cmpi(arith.CmpIPredicate.eq, r, d)
                    hi = arith.select(b, arith.select(own, plan.ub, plan.lb),
                                      arith.minsi(arith.addi(i, one), plan.ub))
                    run = scf.ForOp(lo, hi, one)
                    with ir.InsertionPoint(run.body):
                        vmap = {liv: run.induction_variable}
                        for inner in list(body.operations)[:-1]:
                            clone_op(inner.operation, vmap)
                        scf.YieldOp([])
                    _keep_site(run.operation, k)
                scf.ReduceOp([], 0)
    for inner in list(walk(loop)):
        if _ROW_SITE_ATTR in inner.attributes:
            inner.erase()


def _keep_site(run: ir.Operation, k: int) -> None:
    """In a clone of the reversed body: only site k's adds write (to memory defined outside
    the clone); its other writes are dropped."""
    for inner in list(walk(run)):
        if inner.name not in ("memref.store", "memref.atomic_rmw"):
            continue
        if _ROW_SITE_ATTR in inner.attributes:
            if ir.IntegerAttr(inner.attributes[_ROW_SITE_ATTR]).value == k:
                del inner.attributes[_ROW_SITE_ATTR]
                continue
        elif _inside(inner.operands[1], run):
            continue
        inner.erase()
