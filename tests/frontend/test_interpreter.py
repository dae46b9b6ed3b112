"""The interpreter mode (lang/interpreter.py, lang/vector_values.py): a corpus of the
suite's kernels and functions (from the docs, tests/frontend and tests/api) run compiled and
interpreted, whose results must be equal, dtypes and Python types included; a kernel
stepped with pdb; an exception's traceback at the user's line; ADJIT_INTERPRET=1 from the
environment; derivatives refused while interpreting and compiled again outside.

Each function is defined once, at module level, so each compiles once."""
import io
import pdb
import sys
import traceback

import numpy as np
import pytest

import adjit
from adjit import Array, f32, f64, i64
from adjit.runtime import native_dispatch


# ---- the corpus -------------------------------------------------------------------------
@adjit.kernel
def saxpy(a: f32, x: Array[f32, 1], y: Array[f32, 1]):        # the kernel docstring's
    i = adjit.index()
    y[i] = a * x[i] + y[i]


@adjit.kernel
def outer(a: Array[f64, 1], b: Array[f64, 1], out: Array[f64, 2]):
    i, j = adjit.index_nd()
    out[i, j] = a[i] * b[j] + adjit.ndrange()[1]


@adjit.kernel
def histogram(x: Array[f64, 1], bins: Array[f64, 1]):      # builtins.py's
    i = adjit.index()
    b = adjit.floor(x[i] * 4.0)
    adjit.atomic_add(bins, int(b), 1.0)


@adjit.jit
def stats(x: Array[f64, 1]) -> tuple:                     # a kernel launched from @jit
    bins = adjit.zeros(4)
    histogram(x, bins, ndrange=x.shape[0])
    return bins, adjit.mean(adjit.sin(x)), adjit.max(x)


@adjit.kernel
def splat(grid: Array[f64, 2], xs: Array[f64, 1], olds: Array[f64, 1]):
    i = adjit.index()
    adjit.atomic_add(grid, (0, i % 2), xs[i])
    olds[i] = adjit.atomic_sub(grid, 1, i % 2, xs[i])


@adjit.kernel
def vector_atomics(out: Array[adjit.vec3, 1], f: Array[f32, 1]):
    i = adjit.index()
    adjit.atomic_add(out, i % 2, adjit.vec3(1.0, 2.0, f[i]))


@adjit.func
def smoothstep(t: f64) -> f64:                            # @adjit.func's docstring
    t = adjit.clip(t, 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


@adjit.kernel
def apply(x: Array[f64, 1]):
    i = adjit.index()
    x[i] = smoothstep(x[i])


@adjit.jit
def rms(x: Array[f64, 1]) -> f64:
    total = adjit.debug.print_adjoint(adjit.sum(x * x), label="total")   # (the primal: x)
    return adjit.sqrt(total / x.shape[0])


@adjit.jit
def numpy_calls(x: Array[f64, 1]):
    c = np.cumsum(x)
    s = np.sort(x)
    d = np.diff(x)
    return c, s, d, np.argmax(x), np.linspace(0.0, 1.0, 5), np.prod(x[:3]), x.std()


@adjit.jit
def float32_rules(x: Array[f32, 1], k: int):
    y = 0.5 * x + k                       # a Python float and int stay weak: f32
    z = x * np.float64(2.0)               # a typed f64 promotes
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i]                         # an f32 accumulated from a Python float
    return y, z, s, x[0] * k, k * 2, k / 2, k // 3, -k % 3


@adjit.jit
def control(n: i64) -> tuple:
    total, count, i = 0, 0, 0
    while True:
        i += 1
        if i > n:
            break
        if i % 3 == 0:
            continue
        total += i * i
        count += 1
    odd = 1 if n % 2 else 0
    return total, count, odd, total / max(count, 1), n > 4 and count < 100


@adjit.kernel
def stencil(u: Array[f64, 2], out: Array[f64, 2]):
    i, j = adjit.index_nd()
    n, m = adjit.ndrange()
    if 0 < i < n - 1 and 0 < j < m - 1:
        out[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1])
    else:
        out[i, j] = u[i, j]
    for _ in range(2):
        out[i, j] = adjit.maximum(out[i, j], 0.1)


@adjit.func
def spring(p: adjit.vec3d, q: adjit.vec3d, k: float):     # tests/frontend/test_vectors.py's
    d = p - q
    return d * k, adjit.length(d)


@adjit.kernel
def vector_ops(x: Array[adjit.vec3d, 1], v: Array[adjit.vec3d, 1],
               out: Array[adjit.vec3d, 1], s: Array[f64, 1]):
    i = adjit.index()
    p = x[i]
    f = adjit.vec3d(0.0, -9.8, 0.0)
    if p.y > 0.5:
        f = f + v[i] * 2.0
    for _ in range(3):
        f += adjit.vec3d(1.0, 0.0, 0.0)
    g, length = spring(p, v[i], 3.0)
    f.z = f.z - 1.0
    out[i] = f + g - (-p) / 2.0
    s[i] = length + f.x + p[2] + v[i][1] + float(p == p) + float(p != p)


@adjit.jit
def matrices(v: adjit.vec3d, angle: f64):
    m = adjit.mat33d(2.0, 0.0, 0.0, 0.0, 3.0, 0.0, 1.0, 0.0, 1.0)
    q = adjit.quat_from_axis_angle(adjit.normalize(v), angle)
    r = q * adjit.quat_inverse(q)                          # Warp's quaternion product
    w = adjit.quat_rotate(q, m * v)                          # a matrix times a vector
    return m * m, w, r, adjit.cross(v, w), adjit.determinant(m), adjit.dot(v, w)


@adjit.jit
def transforms(t: adjit.transformd, x: adjit.vec3d):     # adjit.transform's docstring
    back = adjit.transform_inverse(t) * t
    return adjit.transform_point(t, x), adjit.transform_point(back, x), t.p


@adjit.struct
class Wind:
    strength: float
    direction: adjit.vec3d


@adjit.struct
class Particles:                                         # tests/frontend/test_structs.py's
    x: Array[adjit.vec3d, 1]
    v: Array[adjit.vec3d, 1]
    m: Array[f64, 1]
    k: f64
    gravity: adjit.vec3d
    wind: Wind
    steps: int


@adjit.func
def force(p: Particles, i):
    w = p.wind.direction * p.wind.strength
    return p.gravity * p.m[i] - p.x[i] * p.k + adjit.vec3d(w)


@adjit.kernel
def step(p: Particles, dt: float):
    i = adjit.index()
    for _ in range(p.steps):
        p.v[i] += force(p, i) * (dt / p.m[i])
        p.x[i] = p.x[i] + p.v[i] * dt


@adjit.jit
def simulate(p: Particles, dt: float):
    step(p, dt, ndrange=p.x.shape[0])
    e = 0.0
    for i in range(p.x.shape[0]):
        e += adjit.dot(p.x[i], p.x[i]) * p.k
    return e


@adjit.jit
def checkpointed_loop(u0: Array[f64, 1], steps: int) -> f64:  # the checkpointing docs'
    u = u0.copy()
    v = adjit.empty_like(u)
    for t in adjit.checkpointed(range(steps), snapshots=4):
        for i in range(u.shape[0]):
            v[i] = u[i] + 0.1 * adjit.sin(u[i])
        u, v = v, u
    return adjit.sum(u * u)


@adjit.jit
def newton(x: Array[f64, 1], a: f64) -> Array[f64, 1]:
    return 0.5 * (x + a / x)


@adjit.jit
def root(a: f64):                                        # adjit.fixed_point's docstring
    x = adjit.fixed_point(newton, adjit.ones(1), a, tol=1e-12)
    return x[0], x[0] * adjit.stop_gradient(x[0])


@adjit.jit
def scaled(params, x, scale=2.0):                        # a pytree, a default, a keyword
    return {k: v * x * scale for k, v in params.items()}


@adjit.kernel
def integers(a: Array[adjit.i32, 1], out: Array[adjit.i32, 1], flags: Array[adjit.bool_, 1]):
    i = adjit.index()
    out[i] = a[i] * 3 // 2 - a[i] % 4 + (a[i] << 1)
    flags[i] = a[i] > 2 or adjit.isnan(float(a[i]))


@adjit.jit
def made_in_code(n: int):
    z = adjit.zeros((n, 2), dtype=adjit.f32)
    z[:, 0] = adjit.arange(n)
    w = adjit.full(n, 7, dtype=adjit.i64)
    return z, w, z.astype(adjit.f64).sum(axis=0), adjit.eye(2)


def _particles():
    rng = np.random.default_rng(3)
    return Particles(x=rng.random((5, 3)), v=rng.random((5, 3)), m=1.0 + rng.random(5),
                     k=0.5, gravity=np.array([0.0, -9.8, 0.0]),
                     wind=Wind(strength=2.0, direction=np.array([1.0, 0.0, 0.0])), steps=3)


def _with_written(launch, *arrays):
    """A kernel launch's results: the arrays it wrote."""
    launch(*arrays)
    return arrays


# name -> a function of nothing returning what it computed (fresh inputs each time)
CORPUS = {
    "saxpy": lambda: _with_written(lambda x, y: saxpy(2.0, x, y, ndrange=4),
                                   np.arange(4, dtype=np.float32), np.ones(4, np.float32)),
    "outer_index_nd": lambda: _with_written(
        lambda o: outer(np.array([1.0, 2.0]), np.arange(3.0), o, ndrange=(2, 3)),
        np.zeros((2, 3))),
    "stats_atomic_add": lambda: stats(np.linspace(0.0, 0.99, 8)),
    "splat_atomics": lambda: _with_written(
        lambda g, o: splat(g, np.arange(4.0), o, ndrange=4), np.zeros((2, 2)), np.zeros(4)),
    "vector_atomics": lambda: _with_written(lambda o: vector_atomics(
        o, np.arange(5, dtype=np.float32), ndrange=5), np.zeros((2, 3), np.float32)),
    "func_from_kernel": lambda: _with_written(lambda x: apply(x, ndrange=3),
                                              np.array([-1.0, 0.5, 2.0])),
    "func_from_python": lambda: (smoothstep(0.25), smoothstep(np.float64(2.0))),
    "rms": lambda: rms(np.array([3.0, 4.0])),
    "numpy_calls": lambda: numpy_calls(np.array([3.0, 1.0, 4.0, 1.0, 5.0])),
    "float32_rules": lambda: float32_rules(np.array([1.5, 2.25, 3.0], np.float32), 7),
    "control_flow": lambda: (control(10), control(1)),
    "stencil_2d": lambda: _with_written(
        lambda u, o: stencil(u, o, ndrange=u.shape), np.arange(20.0).reshape(4, 5) - 3.0,
        np.zeros((4, 5))),
    "vectors": lambda: _with_written(
        lambda x, v, o, s: vector_ops(x, v, o, s, ndrange=3),
        np.linspace(0.0, 1.0, 9).reshape(3, 3), np.arange(9.0).reshape(3, 3),
        np.zeros((3, 3)), np.zeros(3)),
    "matrices_quaternions": lambda: matrices(np.array([1.0, 2.0, 2.0]), 0.7),
    "transforms": lambda: transforms(
        adjit.transformd(np.array([1.0, 0.0, 0.0]),
                         adjit.quat_from_axis_angle(np.array([0.0, 0.0, 1.0]), np.pi / 2)),
        np.array([1.0, 0.0, 0.0])),
    "structs": lambda: (lambda p: (simulate(p, 0.01), p.x, p.v))(_particles()),
    "checkpointed": lambda: checkpointed_loop(np.linspace(0.0, 1.0, 8), 20),
    "fixed_point_stop_gradient": lambda: root(2.0),
    "pytree_defaults": lambda: (scaled({"a": np.ones(2), "b": np.arange(2.0)}, 2.0),
                                scaled({"a": np.ones(2)}, 3, scale=0.5)),
    "integers": lambda: _with_written(lambda a, o, f: integers(a, o, f, ndrange=5),
                                      np.array([-3, 0, 2, 5, 9], np.int32),
                                      np.zeros(5, np.int32), np.zeros(5, bool)),
    "made_in_code": lambda: made_in_code(3),
}


def _assert_same(compiled, interpreted, where="result"):
    """Equal values, dtypes and Python types, through tuples, lists and dicts."""
    if isinstance(compiled, (tuple, list)):
        assert type(interpreted) is type(compiled) and len(interpreted) == len(compiled), where
        for k, (c, i) in enumerate(zip(compiled, interpreted)):
            _assert_same(c, i, f"{where}[{k}]")
        return
    if isinstance(compiled, dict):
        assert isinstance(interpreted, dict) and list(interpreted) == list(compiled), where
        for k in compiled:
            _assert_same(compiled[k], interpreted[k], f"{where}[{k!r}]")
        return
    if isinstance(compiled, np.ndarray):
        assert isinstance(interpreted, np.ndarray), (where, interpreted)
        assert interpreted.dtype == compiled.dtype, (where, interpreted.dtype, compiled.dtype)
        assert interpreted.shape == compiled.shape, (where, interpreted.shape, compiled.shape)
    else:
        # a NumPy scalar of its dtype, or a Python float/int/bool (compiled code's weak ones)
        assert type(interpreted) is type(compiled), (where, type(interpreted), type(compiled))
    # (sums and means may round in another order: NumPy's pairwise sum against a loop)
    np.testing.assert_allclose(np.asarray(interpreted, dtype=np.float64),
                               np.asarray(compiled, dtype=np.float64), rtol=1e-14, atol=0,
                               err_msg=where)


@pytest.mark.parametrize("name", CORPUS)
def test_corpus_interpreted_equals_compiled(name):
    compiled = CORPUS[name]()
    with adjit.interpret():
        interpreted = CORPUS[name]()
    _assert_same(compiled, interpreted, name)
    # compiled again after the block (its native calls were forgotten, not its code)
    _assert_same(compiled, CORPUS[name](), name)


# ---- stepping, tracebacks, the environment, derivatives -----------------------------------
@adjit.kernel
def traced(x: Array[f64, 1]):
    i = adjit.index()
    y = 2.0 * x[i]
    breakpoint()
    x[i] = y + i


def test_a_kernel_stepped_with_pdb():
    commands = io.StringIO("p i, y\nn\np x[i]\nc\np i, y\nc\n")
    out = io.StringIO()
    debugger = pdb.Pdb(stdin=commands, stdout=out, nosigint=True)
    debugger.use_rawinput = False
    x = np.array([1.0, 2.0])
    hook = sys.breakpointhook
    sys.breakpointhook = lambda: debugger.set_trace(sys._getframe(1))
    try:
        with adjit.interpret():
            traced(x, ndrange=2)
    finally:
        sys.breakpointhook = hook
        sys.settrace(None)
    text = out.getvalue()
    assert "(0, np.float64(2.0))" in text, text        # item 0 at the breakpoint
    assert "np.float64(2.0)\n" in text, text           # x[0] after stepping its line
    assert "(1, np.float64(4.0))" in text, text        # item 1
    assert "x[i] = y + i" in text and "traced()" in text, text
    np.testing.assert_array_equal(x, [2.0, 5.0])


@adjit.func
def picks(x: Array[f64, 1], i) -> f64:
    # out of bounds for the last item
    return x[i + 1]


@adjit.kernel
def shifted(x: Array[f64, 1], out: Array[f64, 1]):
    i = adjit.index()
    out[i] = picks(x, i)


def test_an_exception_carries_the_users_line():
    with adjit.interpret(), pytest.raises(IndexError) as info:
        shifted(np.zeros(3), np.zeros(3), ndrange=3)
    # (the user's frames: this file's; adjit's call path lies between them)
    frames = [f for f in traceback.extract_tb(info.value.__traceback__)
              if f.filename == __file__]
    assert [(f.name, f.line) for f in frames[-2:]] == [
        ("shifted", "out[i] = picks(x, i)"), ("picks", "return x[i + 1]")], frames
    assert "index 3 is out of bounds" in str(info.value)
    assert "(in work item 2 (2,) of kernel shifted, interpreted)" in info.value.__notes__


@adjit.kernel
def from_environment(x: Array[f64, 1]):
    i = adjit.index()
    x[i + 1] = 1.0


def test_adjit_interpret_from_the_environment(monkeypatch):
    # (interpreted: NumPy's IndexError at the item past the end; compiled code refuses the
    # launch before it runs: "ndrange[0] is too large ...")
    monkeypatch.setenv("ADJIT_INTERPRET", "1")
    with pytest.raises(IndexError, match="index 2 is out of bounds for axis 0 with size 2"):
        from_environment(np.zeros(2), ndrange=2)
    x = np.zeros(3)
    from_environment(x, ndrange=2)
    np.testing.assert_array_equal(x, [0.0, 1.0, 1.0])
    assert not from_environment._cache                  # nothing compiled
    monkeypatch.setenv("ADJIT_INTERPRET", "0")
    with pytest.raises(IndexError, match="ndrange.0. is too large"):
        from_environment(np.zeros(2), ndrange=2)        # compiled


def test_the_mode_and_a_profile_together():
    """Both route calls to the Python path (lang/functions.py's _route_calls): either
    closing leaves the other's routing, and with both closed the native calls are back."""
    interpreted = "index 2 is out of bounds for axis 0 with size 2"
    from_environment(np.zeros(3), ndrange=2)            # (compiled: a native call)
    with adjit.profile():
        with adjit.interpret():
            with pytest.raises(IndexError, match=interpreted):
                from_environment(np.zeros(2), ndrange=2)
        with pytest.raises(IndexError, match="ndrange.0. is too large"):
            from_environment(np.zeros(2), ndrange=2)
    with adjit.interpret():
        with adjit.profile():
            pass
        with pytest.raises(IndexError, match=interpreted):
            from_environment(np.zeros(2), ndrange=2)
    assert adjit.Kernel.__call__ is native_dispatch.kernel_call
    assert adjit.Function.__call__ is native_dispatch.function_call


def test_derivatives_are_refused_while_interpreting():
    with adjit.interpret():
        for derivative in (lambda: adjit.grad(rms)(np.array([3.0, 4.0])),
                           lambda: adjit.jvp(smoothstep, (0.3,), (1.0,)),
                           lambda: adjit.grad(adjit.grad(smoothstep))(0.3)):
            with pytest.raises(RuntimeError, match="is not interpreted: derivatives run "
                                                   "compiled only"):
                derivative()
        assert smoothstep(0.5) == 0.5                    # the primal is interpreted
    assert np.isclose(adjit.grad(smoothstep)(0.3), 6 * 0.3 * 0.7)   # compiled outside


def test_kernel_builtins_outside_kernels_and_barriers():
    with pytest.raises(RuntimeError, match=r"adjit.index\(\) can only be called inside"):
        adjit.index()
    with adjit.interpret():
        with pytest.raises(RuntimeError, match="outside a kernel launch"):
            adjit.index_nd()
        with pytest.raises(RuntimeError, match="synchronize.. cannot be interpreted"):
            adjit.synchronize()
        with pytest.raises(TypeError, match="needs ndrange="):
            saxpy(2.0, np.ones(2, np.float32), np.ones(2, np.float32))
        with pytest.raises(TypeError, match=r"argument 'k' is annotated Python int"):
            float32_rules(np.ones(2, np.float32), 2.5)
