"""Gather-form reverse kernels (passes/autodiff/generate/gather.py, issue 9.1): the adjoint of an array
read at the work item's id plus constant offsets is computed by each element's own item,
without atomics; other read patterns keep their (monotonic) atomic adds. Every case is checked
against finite differences and a float64 reference (the transposed stencil in NumPy), and
against which form the pass chose."""
import numpy as np
import pytest

import adjit
from adjit import Active, Const, Duplicated, Reverse
from adjit.passes.autodiff.generate import gather, kernel_tape
from ad_helpers import differentiate, request, vectorised_launch_loops


_MADE: list[tuple[str, int]] = []   # (reverse kernel, gathered argument), as the pass makes them


@pytest.fixture(scope="module", autouse=True)
def _spy():
    real = gather.make_gather_kernel

    def spy(diff, rev, g, name, ndim):
        _MADE.append((ir_name(rev), g.arg))
        return real(diff, rev, g, name, ndim)

    with pytest.MonkeyPatch.context() as mp:
        # Where the kernel reverse mode calls it (kernel_tape.generate_kernel_reverse).
        mp.setattr(kernel_tape, "make_gather_kernel", spy)
        yield


def ir_name(op) -> str:
    from mlir import ir
    return ir.StringAttr(op.attributes["sym_name"]).value


def gathered(kernel) -> list[int]:
    """The arguments of `kernel` whose adjoints the pass gathered (in its compiles so far)."""
    return sorted({arg for name, arg in _MADE if name.startswith(f"__adj_{kernel.__name__}__")})


def fd_grad(loss, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central differences of loss at x, element by element."""
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[k] += h
        xm[k] -= h
        g[k] = (loss(xp) - loss(xm)) / (2 * h)
    return g


@adjit.kernel
def heat(u, v, c: float):
    i, j = adjit.index_nd()
    n, m = u.shape
    if i > 0 and i < n - 1 and j > 0 and j < m - 1:
        v[i, j] = u[i, j] + c * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                                 - 4.0 * u[i, j])


def heat_np(u, c):
    v = np.zeros_like(u)
    v[1:-1, 1:-1] = u[1:-1, 1:-1] + c * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2]
                                         + u[1:-1, 2:] - 4 * u[1:-1, 1:-1])
    return v


def heat_adjoint_np(w, c):
    """Transposed 5-point stencil: du for dv = w (float64)."""
    du = np.zeros_like(w)
    inner = w[1:-1, 1:-1]
    du[1:-1, 1:-1] += (1 - 4 * c) * inner
    du[:-2, 1:-1] += c * inner
    du[2:, 1:-1] += c * inner
    du[1:-1, :-2] += c * inner
    du[1:-1, 2:] += c * inner
    return du


@pytest.mark.parametrize("shape", [(9, 7), (1, 5), (2, 2), (33, 65)])
def test_five_point_stencil_with_border_guards(shape):
    rng = np.random.default_rng(0)
    u = rng.random(shape)
    w = rng.random(shape)
    v, du, dv = np.zeros_like(u), np.zeros_like(u), w.copy()
    adjit.autodiff(Reverse, heat, Duplicated(u, du), Duplicated(v, dv), Const(0.1),
                   ndrange=u.shape)
    assert gathered(heat) == [0]
    np.testing.assert_allclose(v, heat_np(u, 0.1), rtol=1e-14)
    np.testing.assert_allclose(du, heat_adjoint_np(w, 0.1), rtol=1e-13, atol=1e-15)
    # The output's shadow is consumed (zeroed) where the kernel wrote, kept elsewhere.
    written = np.zeros(shape, bool)
    written[1:-1, 1:-1] = True
    np.testing.assert_array_equal(dv[written], 0.0)
    np.testing.assert_array_equal(dv[~written], w[~written])
    if u.size <= 63:
        fd = fd_grad(lambda x: np.sum(heat_np(x, 0.1) * w), u)
        np.testing.assert_allclose(du, fd, rtol=1e-6, atol=1e-8)


@adjit.kernel
def skew(x, y, a: float):
    i = adjit.index()
    n = x.shape[0]
    if i >= 1 and i < n - 2:
        y[i] = x[i + 2] * x[i + 2] - a * x[i - 1] * x[i]


def skew_np(x, a):
    y = np.zeros_like(x)
    y[1:-2] = x[3:] ** 2 - a * x[:-3] * x[1:-2]
    return y


def test_1d_offsets_in_both_directions_nonlinear_and_an_active_scalar():
    rng = np.random.default_rng(1)
    x, w = rng.random(40), rng.random(40)
    y, dx, dy = np.zeros_like(x), np.zeros_like(x), w.copy()
    _, _, da = adjit.autodiff(Reverse, skew, Duplicated(x, dx), Duplicated(y, dy),
                              Active(1.5), ndrange=x.size)
    assert gathered(skew) == [0]
    np.testing.assert_allclose(y, skew_np(x, 1.5), rtol=1e-14)
    want = np.zeros_like(x)
    want[3:] += 2 * x[3:] * w[1:-2]
    want[:-3] -= 1.5 * x[1:-2] * w[1:-2]
    want[1:-2] -= 1.5 * x[:-3] * w[1:-2]
    np.testing.assert_allclose(dx, want, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(dx, fd_grad(lambda z: np.sum(skew_np(z, 1.5) * w), x),
                               rtol=1e-6, atol=1e-8)
    assert da == pytest.approx(-np.sum(x[:-3] * x[1:-2] * w[1:-2]), rel=1e-13)


@adjit.kernel
def seven_point(u, v):
    i, j, k = adjit.index_nd()
    c = u[i + 1, j + 1, k + 1]
    v[i, j, k] = c * c - (u[i, j + 1, k + 1] + u[i + 2, j + 1, k + 1] + u[i + 1, j, k + 1]
                          + u[i + 1, j + 2, k + 1] + u[i + 1, j + 1, k] + u[i + 1, j + 1, k + 2])


def seven_point_np(u):
    c = u[1:-1, 1:-1, 1:-1]
    return c * c - (u[:-2, 1:-1, 1:-1] + u[2:, 1:-1, 1:-1] + u[1:-1, :-2, 1:-1]
                    + u[1:-1, 2:, 1:-1] + u[1:-1, 1:-1, :-2] + u[1:-1, 1:-1, 2:])


def test_3d_stencil_over_the_interior_ndrange():
    rng = np.random.default_rng(2)
    u = rng.random((5, 6, 4))
    w = rng.random((3, 4, 2))
    v, du, dv = np.zeros_like(w), np.zeros_like(u), w.copy()
    adjit.autodiff(Reverse, seven_point, Duplicated(u, du), Duplicated(v, dv), ndrange=w.shape)
    assert gathered(seven_point) == [0]
    np.testing.assert_allclose(v, seven_point_np(u), rtol=1e-14)
    np.testing.assert_allclose(du, fd_grad(lambda x: np.sum(seven_point_np(x) * w), u),
                               rtol=1e-6, atol=1e-8)
    want = np.zeros_like(u)
    want[1:-1, 1:-1, 1:-1] += 2 * u[1:-1, 1:-1, 1:-1] * w
    inner = slice(1, -1)
    for d in range(3):
        for side in (slice(None, -2), slice(2, None)):
            sl = [inner] * 3
            sl[d] = side
            want[tuple(sl)] -= w
    np.testing.assert_allclose(du, want, rtol=1e-13, atol=1e-15)


@adjit.kernel
def transposed(u, v):
    i, j = adjit.index_nd()
    v[i, j] = u[j, i] * u[j + 1, i]


def test_transposed_read_is_gathered_along_the_swapped_dimensions():
    rng = np.random.default_rng(3)
    u, w = rng.random((6, 4)), rng.random((4, 5))
    v, du, dv = np.zeros_like(w), np.zeros_like(u), w.copy()
    adjit.autodiff(Reverse, transposed, Duplicated(u, du), Duplicated(v, dv), ndrange=w.shape)
    assert gathered(transposed) == [0]
    f = lambda x: np.sum(x[:5, :].T * x[1:, :].T * w)   # noqa: E731
    np.testing.assert_allclose(v, u[:5, :].T * u[1:, :].T, rtol=1e-14)
    np.testing.assert_allclose(du, fd_grad(f, u), rtol=1e-6, atol=1e-8)
    want = np.zeros_like(u)
    want[:5, :] += (u[1:, :].T * w).T
    want[1:, :] += (u[:5, :].T * w).T
    np.testing.assert_allclose(du, want, rtol=1e-13)


@adjit.kernel
def indirect(x, idx, y):
    i = adjit.index()
    y[i] = x[idx[i]] * x[idx[i]] + x[i]


@adjit.kernel
def strided(x, y):
    i = adjit.index()
    y[i] = x[2 * i] * x[2 * i + 1]


def test_indirect_read_falls_back_to_atomics_and_is_right():
    rng = np.random.default_rng(4)
    x, w = rng.random(16), rng.random(16)
    idx = rng.integers(0, 16, 16).astype(np.int64)   # repeats: items collide
    y, dx, dy = np.zeros_like(x), np.zeros_like(x), w.copy()
    adjit.autodiff(Reverse, indirect, Duplicated(x, dx), Const(idx), Duplicated(y, dy),
                   ndrange=16)
    assert gathered(indirect) == []
    want = w.copy()
    np.add.at(want, idx, 2 * x[idx] * w)
    np.testing.assert_allclose(dx, want, rtol=1e-13)
    np.testing.assert_allclose(dx, fd_grad(lambda z: np.sum((z[idx] ** 2 + z) * w), x),
                               rtol=1e-6, atol=1e-8)


def test_strided_read_falls_back_to_atomics_and_is_right():
    rng = np.random.default_rng(5)
    x, w = rng.random(20), rng.random(10)
    y, dx, dy = np.zeros_like(w), np.zeros_like(x), w.copy()
    adjit.autodiff(Reverse, strided, Duplicated(x, dx), Duplicated(y, dy), ndrange=10)
    assert gathered(strided) == []
    want = np.zeros_like(x)
    want[0::2] = x[1::2] * w
    want[1::2] = x[0::2] * w
    np.testing.assert_allclose(dx, want, rtol=1e-13)
    np.testing.assert_allclose(dx, fd_grad(lambda z: np.sum(z[0::2] * z[1::2] * w), x),
                               rtol=1e-6, atol=1e-8)


@adjit.kernel
def in_place(u, v):
    i = adjit.index()
    n = u.shape[0]
    if i < n - 1:
        v[i] = v[i] * u[i + 1]


def test_an_in_place_update_keeps_atomics():
    # v's shadow is read (then zeroed) and added into by the reverse kernel: an item's
    # partials would depend on what other items' reverse adds, so nothing is gathered.
    rng = np.random.default_rng(6)
    u, v0, w = rng.random(12), rng.random(12), rng.random(12)
    v, du, dv = v0.copy(), np.zeros_like(u), w.copy()
    adjit.autodiff(Reverse, in_place, Duplicated(u, du), Duplicated(v, dv), ndrange=12)
    assert gathered(in_place) == []
    want_du = np.zeros_like(u)
    want_du[1:] = v0[:-1] * w[:-1]
    np.testing.assert_allclose(du, want_du, rtol=1e-13)
    want_dv = w.copy()
    want_dv[:-1] = w[:-1] * u[1:]
    np.testing.assert_allclose(dv, want_dv, rtol=1e-13)


@adjit.kernel
def mixed(x, idx, y):
    i = adjit.index()
    n = x.shape[0]
    if i + 1 < n:
        y[i] = x[i + 1] * x[idx[i]]


def test_one_site_not_affine_keeps_every_site_of_the_array_atomic():
    rng = np.random.default_rng(7)
    x, w = rng.random(10), rng.random(10)
    idx = rng.integers(0, 10, 10).astype(np.int64)
    y, dx, dy = np.zeros_like(x), np.zeros_like(x), w.copy()
    adjit.autodiff(Reverse, mixed, Duplicated(x, dx), Const(idx), Duplicated(y, dy), ndrange=10)
    assert gathered(mixed) == []
    f = lambda z: np.sum((z[1:] * z[idx[:-1]]) * w[:-1])   # noqa: E731
    np.testing.assert_allclose(dx, fd_grad(f, x), rtol=1e-6, atol=1e-8)


@adjit.kernel
def rd_step(u, v, dt: float):
    i, j = adjit.index_nd()
    n, m = u.shape
    if i > 0 and i < n - 1 and j > 0 and j < m - 1:
        c = u[i, j]
        lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * c
        v[i, j] = c + dt * lap + 0.05 * c * (1.0 - c)


@adjit.jit
def rd_loss(u0, steps: int, dt: float):
    u = u0.copy()
    v = u0.copy()
    for _ in range(steps):
        rd_step(u, v, dt, ndrange=u.shape)
        u, v = v, u
    return adjit.sum(u * u)


def rd_np(u0, steps, dt):
    u, v = u0.copy(), u0.copy()
    for _ in range(steps):
        c = u[1:-1, 1:-1]
        lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * c
        v[1:-1, 1:-1] = c + dt * lap + 0.05 * c * (1 - c)
        u, v = v, u
    return np.sum(u * u)


def test_reaction_diffusion_launched_in_a_loop_with_swapped_buffers():
    rng = np.random.default_rng(8)
    u0 = rng.random((7, 6))
    du0 = np.zeros_like(u0)
    adjit.autodiff(Reverse, rd_loss, Duplicated(u0, du0), Const(5), Const(0.1))
    assert gathered(rd_step) == [0]
    assert rd_loss(u0, 5, 0.1) == pytest.approx(rd_np(u0, 5, 0.1), rel=1e-13)
    np.testing.assert_allclose(du0, fd_grad(lambda x: rd_np(x, 5, 0.1), u0), rtol=1e-6,
                               atol=1e-8)


def test_float32_stencil_matches_a_float64_reference():
    rng = np.random.default_rng(9)
    u = rng.random((64, 48), dtype=np.float32)
    w = rng.random((64, 48), dtype=np.float32)
    v, du, dv = np.zeros_like(u), np.zeros_like(u), w.copy()
    adjit.autodiff(Reverse, heat, Duplicated(u, du), Duplicated(v, dv), Const(0.1),
                   ndrange=u.shape)
    assert gathered(heat) == [0]
    np.testing.assert_allclose(du, heat_adjoint_np(w.astype(np.float64), 0.1), rtol=1e-5,
                               atol=1e-6)


@adjit.kernel
def branches(u, v):
    i = adjit.index()
    n = u.shape[0]
    if i > 0 and i < n - 1:
        v[i] = u[i - 1] * u[i + 1]
    else:
        v[i] = 3.0 * u[i]


def test_stores_in_both_branches_of_an_if_are_gathered():
    rng = np.random.default_rng(10)
    u, w = rng.random(11), rng.random(11)
    v, du, dv = np.zeros_like(u), np.zeros_like(u), w.copy()
    adjit.autodiff(Reverse, branches, Duplicated(u, du), Duplicated(v, dv), ndrange=11)
    assert gathered(branches) == [0]

    def f(x):
        y = 3.0 * x
        y[1:-1] = x[:-2] * x[2:]
        return np.sum(y * w)
    want = np.zeros_like(u)
    want[[0, -1]] = 3.0 * w[[0, -1]]
    want[:-2] += u[2:] * w[1:-1]
    want[2:] += u[:-2] * w[1:-1]
    np.testing.assert_allclose(du, want, rtol=1e-13)
    np.testing.assert_allclose(du, fd_grad(f, u), rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(dv, 0.0)


@adjit.kernel
def stored_twice(u, v):
    i = adjit.index()
    n = u.shape[0]
    if i > 0 and i < n - 1:
        v[i] = u[i + 1]
        v[i] = 2.0 * u[i - 1]


def test_an_element_stored_twice_keeps_atomics():
    # The reverse reads dv[i] again after zeroing it: the first store's partial is 0, which
    # a gather that dropped the zeroing would not see.
    rng = np.random.default_rng(11)
    u, w = rng.random(9), rng.random(9)
    v, du, dv = np.zeros_like(u), np.zeros_like(u), w.copy()
    adjit.autodiff(Reverse, stored_twice, Duplicated(u, du), Duplicated(v, dv), ndrange=9)
    assert gathered(stored_twice) == []
    want = np.zeros_like(u)
    want[:-2] = 2.0 * w[1:-1]
    np.testing.assert_allclose(du, want, rtol=1e-13)


# -- vectorisation (issue 9.5) -------------------------------------------------------------

STENCIL_IR = open(__file__.replace("autodiff/test_ad_gather.py",
                                   "ir/autodiff/kernel_gather.mlir")).read() \
    .replace('ret_activity = "const"}', 'ret_activity = "const", adj.entry, llvm.emit_c_interface}')

SAXPY_IR = """
func.func private @k(%a: f32, %x: memref<?xf32>, %y: memref<?xf32>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.index"() : () -> index
  %xi = memref.load %x[%i] : memref<?xf32>
  %yi = memref.load %y[%i] : memref<?xf32>
  %ax = arith.mulf %a, %xi : f32
  %r = arith.addf %ax, %yi : f32
  memref.store %r, %y[%i] : memref<?xf32>
  return
}
func.func @run(%a: f32, %x: memref<?xf32>, %y: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  "adj.launch"(%n) ({
    func.call @k(%a, %x, %y) : (f32, memref<?xf32>, memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @k} : (index) -> ()
  return
}
""" + request("run", "grad", "reverse", ["active", "dup", "dup"], "const")


def vectorised_loops(module_text: str, tmp_path) -> tuple[set[str], set[str]]:
    """(the launch loops of the differentiated module's LLVM IR, those LLVM vectorised)."""
    from adjit.passes.pipeline import llvm_ir_text
    return vectorised_launch_loops(llvm_ir_text(differentiate(module_text), num_threads=2),
                                   tmp_path)


@pytest.mark.parametrize("text, kernels", [(STENCIL_IR, 3), (SAXPY_IR, 2)],
                         ids=["5-point-gather", "own-element"])
def test_derivative_kernels_vectorise(text, kernels, tmp_path):
    # Stencil: the augmented, gather and reverse kernels; saxpy: the augmented kernel, and the
    # reverse kernel summing a's adjoints per chunk of items as it runs (chunked_launch.py
    # lower_summing_launch: the f64 adds are reassociable). With atomics the reverse kernel
    # would not vectorise (a locked compare-and-swap loop per add).
    loops, vectorised = vectorised_loops(text, tmp_path)
    assert len(loops) == kernels
    assert vectorised == loops


# A guarded reaction-diffusion step run twice with the arrays swapped: the second launch
# overwrites u, so the first one's augmented kernel saves u[i] on the guarded branch.
REACTION_IR = """
func.func private @step(%u: memref<?xf32>, %v: memref<?xf32>)
    attributes {adj.kernel, adj.ndim = 1 : i64} {
  %i = "adj.global_id"() {dim = 0 : i64} : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %u, %c0 : memref<?xf32>
  %last = arith.subi %n, %c1 : index
  %lo = arith.cmpi sgt, %i, %c0 : index
  %hi = arith.cmpi slt, %i, %last : index
  %inside = arith.andi %lo, %hi : i1
  scf.if %inside {
    %c = memref.load %u[%i] : memref<?xf32>
    %im = arith.subi %i, %c1 : index
    %ip = arith.addi %i, %c1 : index
    %l = memref.load %u[%im] : memref<?xf32>
    %r = memref.load %u[%ip] : memref<?xf32>
    %two = arith.constant 2.0 : f32
    %tenth = arith.constant 0.1 : f32
    %one = arith.constant 1.0 : f32
    %lr = arith.addf %l, %r : f32
    %c2 = arith.mulf %two, %c : f32
    %lap = arith.subf %lr, %c2 : f32
    %d = arith.mulf %tenth, %lap : f32
    %omc = arith.subf %one, %c : f32
    %cc = arith.mulf %c, %omc : f32
    %s = arith.addf %c, %d : f32
    %t = arith.addf %s, %cc : f32
    memref.store %t, %v[%i] : memref<?xf32>
  } else {
    %c = memref.load %u[%i] : memref<?xf32>
    memref.store %c, %v[%i] : memref<?xf32>
  }
  return
}
func.func @run(%u: memref<?xf32>, %v: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %u, %c0 : memref<?xf32>
  "adj.launch"(%n) ({
    func.call @step(%u, %v) : (memref<?xf32>, memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @step} : (index) -> ()
  "adj.launch"(%n) ({
    func.call @step(%v, %u) : (memref<?xf32>, memref<?xf32>) -> ()
    gpu.yield
  }) {kernel = @step} : (index) -> ()
  return
}
""" + request("run", "grad", "reverse", ["dup", "dup"], "const")


def test_guarded_kernel_saving_its_tape_vectorises(tmp_path):
    # The augmented kernel's tape store is hoisted out of the guard (kernel_tape.py
    # hoist_tape_stores); conditional, LLVM merged it with the else branch's store of the same
    # value through a selected address, and the kernel stayed scalar (G2b: 7x its primal).
    loops, vectorised = vectorised_loops(REACTION_IR, tmp_path)
    assert len(loops) == 6     # per launch: the augmented, gather and reverse kernels
    assert vectorised == loops


RESIDUAL_LOSS_IR = """
func.func @loss(%a: f32, %x: memref<?xf32>, %y: memref<?xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %n = memref.dim %x, %c0 : memref<?xf32>
  %s = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> f32 {
    %xi = memref.load %x[%i] : memref<?xf32>
    %yi = memref.load %y[%i] : memref<?xf32>
    %ax = arith.mulf %a, %xi : f32
    %r = arith.subf %ax, %yi : f32
    %r2 = arith.mulf %r, %r : f32
    %t = arith.addf %acc, %r2 fastmath<reassoc> : f32
    scf.yield %t : f32
  }
  return %s : f32
}
""" + request("loss", "grad", "reverse", ["active", "dup", "const"], "active")


def test_reversed_loop_with_an_active_scalar_vectorises(tmp_path):
    # The reversed loop adds a's adjoint into a loop-carried slot (reverse.py LoopSlots) and
    # dx[i] += ...: the slot's adds are reassociable, so LLVM vectorises the loop (before,
    # "CantReorderFPOps" left it scalar: G1's reverse ran at one float a cycle).
    import re
    import subprocess
    from pathlib import Path
    import llvm
    from adjit.passes.pipeline import llvm_ir_text
    ll = tmp_path / "m.ll"
    ll.write_text(llvm_ir_text(differentiate(RESIDUAL_LOSS_IR), num_threads=1))
    remarks = tmp_path / "remarks.yaml"
    opt = Path(list(llvm.__path__)[0]) / "bin" / "opt"
    subprocess.run([str(opt), "-O3", "-mtriple=x86_64-unknown-linux-gnu", "-mcpu=x86-64-v3",
                    str(ll), "-o", "/dev/null", f"-pass-remarks-output={remarks}",
                    "-pass-remarks-filter=loop-vectorize"], check=True)
    done = re.findall(r"Name:\s+Vectorized\nFunction:\s+(\w+)", remarks.read_text())
    assert "grad_rev" in done


@adjit.kernel
def two_arrays(u, w, y):
    i = adjit.index()
    n = y.shape[0]
    if i > 0 and i < n - 1:
        y[i] = u[i - 1] * w[i + 1] + w[i] * w[i]


def test_two_arrays_each_get_a_gather_kernel():
    rng = np.random.default_rng(12)
    u, w, s = rng.random(10), rng.random(10), rng.random(10)
    y, du, dw, dy = np.zeros(10), np.zeros(10), np.zeros(10), s.copy()
    adjit.autodiff(Reverse, two_arrays, Duplicated(u, du), Duplicated(w, dw),
                   Duplicated(y, dy), ndrange=10)
    assert gathered(two_arrays) == [0, 1]

    def f(x, z):
        return np.sum((x[:-2] * z[2:] + z[1:-1] ** 2) * s[1:-1])
    np.testing.assert_allclose(du, fd_grad(lambda x: f(x, w), u), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dw, fd_grad(lambda z: f(u, z), w), rtol=1e-6, atol=1e-8)
    want_dw = np.zeros(10)
    want_dw[2:] += u[:-2] * s[1:-1]
    want_dw[1:-1] += 2 * w[1:-1] * s[1:-1]
    np.testing.assert_allclose(dw, want_dw, rtol=1e-13)
