"""What derivative calls refuse before anything runs (api/autodiff_checks.py): read-only
arrays the derivative would write (issue 19.1), a split-mode tape reused for another call
(19.2), overlapping array arguments where one is written (19.7), integer arrays marked
Duplicated (8.12). What used to crash the process runs in a subprocess with a timeout; every
derivative that is still computed is checked against an analytic form and central finite
differences."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import adjit
from adjit import (Active, Const, Duplicated, DuplicatedNoNeed, Forward, ForwardWithPrimal,
                   Reverse, ReverseSplitWithPrimal, ReverseWithPrimal, autodiff, autodiff_thunk)

ROOT = Path(__file__).resolve().parents[2]


@adjit.jit
def loss(x):
    return adjit.sum(x * x)


@adjit.jit
def sin_loss(x):
    return adjit.sum(adjit.sin(x) * x)


@adjit.jit
def dot(x, y):
    return adjit.sum(x * y)


@adjit.kernel
def square(x, y):
    i = adjit.index()
    y[i] = x[i] * x[i]


@adjit.kernel
def square_inplace(x):
    i = adjit.index()
    x[i] = x[i] * x[i]


@adjit.jit
def squared_norm_after_scaling(x, a: float):
    """Writes its argument, then reads it: x *= a; returns sum(x^2) (= a^2 |x|^2)."""
    for i in range(x.shape[0]):
        x[i] = a * x[i]
    return adjit.sum(x * x)


@adjit.jit
def scaled_copy(x, y):
    """y[:] = 3 x; returns nothing: forward mode writes the tangent of y."""
    for i in range(x.shape[0]):
        y[i] = 3.0 * x[i]


@adjit.jit
def doubled(x):
    return 2.0 * x


def read_only_bytes(n: int) -> tuple[bytes, np.ndarray]:
    """A float64 view of an immutable bytes object (ones): writing it would change `bytes`."""
    raw = np.ones(n).tobytes()
    return raw, np.frombuffer(raw, dtype=np.float64)


def run_python(code: str, folder: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (from a file in `folder`: adjit compiles functions
    from their source): a crash (SIGSEGV) there fails the test instead of killing pytest."""
    script = folder / "case.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


# ---- 19.1: read-only arrays the derivative would write ----------------------------------------
MEMMAP_CASES = """
    import sys, tempfile, os
    import numpy as np
    import adjit
    from adjit import *

    @adjit.jit
    def loss(x):
        return adjit.sum(x * x)

    @adjit.kernel
    def square(x, y):
        i = adjit.index()
        y[i] = x[i] * x[i]

    path = os.path.join(tempfile.mkdtemp(), "ro.bin")
    np.full(4, 7.0).tofile(path)
    ro = np.memmap(path, dtype=np.float64, mode="r", shape=(4,))
    x = np.arange(1.0, 5.0)
    cases = {
        "reverse shadow": lambda: autodiff(Reverse, loss, Duplicated(x, ro)),
        "reverse-with-primal shadow": lambda: autodiff(ReverseWithPrimal, loss, Duplicated(x, ro)),
        "const output": lambda: autodiff(Reverse, square, Duplicated(x, np.zeros(4)),
                                         Const(ro), ndrange=4),
        "forward tangent": lambda: autodiff(Forward, square, Duplicated(x, np.ones(4)),
                                            Duplicated(np.zeros(4), ro), ndrange=4),
        "split shadow": lambda: autodiff_thunk(ReverseSplitWithPrimal, loss, Duplicated)[0](
            Duplicated(x, ro)),
    }
    for name, call in cases.items():
        try:
            call()
            print(name, "NOT REFUSED")
        except ValueError as e:
            print(name, "|", e)
    print("unchanged", bool(np.all(np.fromfile(path) == 7.0)))
"""


def test_read_only_memmaps_are_refused_not_written(tmp_path):
    """The issue's crashes: a read-only np.memmap as a shadow, a Const output, a tangent."""
    out = run_python(MEMMAP_CASES, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" | ", 1) for line in out.stdout.splitlines() if " | " in line)
    assert "NOT REFUSED" not in out.stdout
    assert "the shadow of 'x' receives the derivative" in lines["reverse shadow"]
    assert "read-only" in lines["reverse shadow"] and "loss" in lines["reverse shadow"]
    assert "the shadow of 'x'" in lines["reverse-with-primal shadow"]
    assert "argument 'y' is written by square" in lines["const output"]
    assert "the tangent of 'y' is written by the forward derivative" in lines["forward tangent"]
    assert "the shadow of 'x'" in lines["split shadow"]
    assert "unchanged True" in out.stdout


def _refused(match: str, call, raw: bytes) -> None:
    """`call` raises ValueError matching `match`, and the bytes behind the view are intact."""
    before = bytes(raw)
    with pytest.raises(ValueError, match=match):
        call()
    assert raw == before == np.ones(len(raw) // 8).tobytes()


def test_views_of_bytes_are_refused_at_every_entry_point():
    x = np.arange(1.0, 5.0)
    raw, ro = read_only_bytes(4)
    shadow = "the shadow of 'x' receives the derivative.*read-only"
    _refused(shadow, lambda: autodiff(Reverse, loss, Duplicated(x, ro)), raw)
    _refused(shadow, lambda: autodiff(Reverse, loss, DuplicatedNoNeed(x, ro)), raw)
    _refused(shadow, lambda: autodiff(ReverseWithPrimal, loss, Duplicated(x, ro)), raw)
    _refused("argument 'y' is written by square", lambda: autodiff(
        Reverse, square, Duplicated(x, np.zeros(4)), Const(ro), ndrange=4), raw)
    _refused("argument 'y' is written by square", lambda: autodiff(
        ForwardWithPrimal, square, Duplicated(x, np.ones(4)), Const(ro), ndrange=4), raw)
    _refused("the tangent of 'y'", lambda: autodiff(
        Forward, scaled_copy, Duplicated(x, np.ones(4)), Duplicated(np.zeros(4), ro)), raw)
    _refused("argument 'x' is written by squared_norm_after_scaling", lambda: autodiff(
        Reverse, squared_norm_after_scaling, Duplicated(ro, np.zeros(4)), Active(2.0)), raw)
    # The JAX-style conveniences go through the same checks.
    _refused("argument 'x' is written by squared_norm_after_scaling",
             lambda: adjit.grad(squared_norm_after_scaling)(ro, 2.0), raw)
    _refused("argument 'x' is written", lambda: adjit.value_and_grad(
        squared_norm_after_scaling, argnums=1)(ro, 2.0), raw)
    _refused("the tangent of 'x'", lambda: adjit.jvp(
        squared_norm_after_scaling, (x.copy(), 2.0), (ro, 1.0)), raw)


def test_split_mode_halves_refuse_read_only_arrays():
    x = np.arange(1.0, 5.0)
    raw, ro = read_only_bytes(4)
    fwd, rev = autodiff_thunk(ReverseSplitWithPrimal, loss, Duplicated)
    _refused("the shadow of 'x'", lambda: fwd(Duplicated(x, ro)), raw)
    dx = np.zeros(4)
    tape, primal, _ = fwd(Duplicated(x, dx))
    assert primal == pytest.approx(np.sum(x * x))
    _refused("the shadow of 'x'", lambda: rev(Duplicated(x, ro), 1.0, tape), raw)
    # The primal written by the augmented call (a Const output of a kernel).
    kfwd, _ = autodiff_thunk(ReverseSplitWithPrimal, square, Duplicated, Const, ndrange=4)
    _refused("argument 'y' is written by square",
             lambda: kfwd(Duplicated(x, np.zeros(4)), Const(ro)), raw)


def test_a_vjp_pullback_refuses_a_read_only_primal_it_writes():
    raw, ro = read_only_bytes(4)
    with pytest.raises(ValueError, match="argument 'x' is written .*read-only"):
        adjit.vjp(squared_norm_after_scaling, ro, 2.0)     # the primal call refuses it first
    assert raw == np.ones(4).tobytes()


def test_read_only_arrays_that_are_only_read_are_accepted():
    """Tangents of inputs, Const inputs and a vjp's cotangent are read, never written: a
    read-only array there is fine, and the derivative is right."""
    x = np.linspace(-1.0, 2.0, 6)
    _, ro_tangent = read_only_bytes(6)              # ones
    t = autodiff(Forward, sin_loss, Duplicated(x, ro_tangent))
    analytic = np.sum(np.cos(x) * x + np.sin(x))    # d/dx sum(sin(x) x) along ones
    h = 1e-6
    fd = (np.sum(np.sin(x + h) * (x + h)) - np.sum(np.sin(x - h) * (x - h))) / (2 * h)
    assert t == pytest.approx(analytic, rel=1e-12) and t == pytest.approx(fd, rel=1e-7)
    ro_x = np.frombuffer(x.tobytes(), dtype=np.float64)
    dy = np.zeros(6)
    autodiff(Reverse, dot, Const(ro_x), Duplicated(np.ones(6), dy))
    np.testing.assert_allclose(dy, x, rtol=0)
    value, pullback = adjit.vjp(doubled, ro_x)
    np.testing.assert_allclose(value, 2 * x)
    (ct,) = pullback(np.frombuffer(np.full(6, 0.5).tobytes(), dtype=np.float64))
    np.testing.assert_allclose(ct, np.ones(6), rtol=0)


def test_entries_called_directly_refuse_read_only_arrays_too():
    """The compiled entries carry their written arguments (runtime/abi.py refuses there)."""
    x = np.arange(1.0, 5.0)
    autodiff(Reverse, loss, Duplicated(x, np.zeros(4)))
    (d,) = [d for key, d in loss._derivatives.items()
            if key[0] is Reverse and key[1] == ("dup",)]
    raw, ro = read_only_bytes(4)
    with pytest.raises(ValueError, match="read-only"):
        d.calls["rev_all"](x, ro, 1.0)
    assert raw == np.ones(4).tobytes()


# ---- 19.2: split-mode tapes -------------------------------------------------------------------
TAPE_CASE = """
    import numpy as np
    import adjit
    from adjit import *

    @adjit.jit
    def sin_loss(x):
        return adjit.sum(adjit.sin(x) * x)

    fwd, rev = autodiff_thunk(ReverseSplitWithPrimal, sin_loss, Duplicated)
    tape, _, _ = fwd(Duplicated(np.arange(4.0), np.zeros(4)))
    big = np.ones(2_000_000)
    try:
        rev(Duplicated(big, np.zeros_like(big)), 1.0, tape)
        print("NOT REFUSED")
    except ValueError as e:
        print("refused |", e)
"""


def test_a_tape_reversed_with_larger_arrays_is_refused(tmp_path):
    """The issue's crash: recorded for 4 elements, reversed with 2,000,000."""
    out = run_python(TAPE_CASE, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "refused |" in out.stdout, out.stdout
    message = out.stdout.split("refused | ", 1)[1]
    assert "argument 'x'" in message and "(4,)" in message and "(2000000,)" in message


def sin_loss_gradient(x):
    return np.cos(x) * x + np.sin(x)


def test_a_tape_serves_calls_with_its_shapes_and_scalars_only():
    x = np.linspace(0.1, 1.2, 5)
    dx = np.zeros(5)
    fwd, rev = autodiff_thunk(ReverseSplitWithPrimal, sin_loss, Duplicated)
    tape, primal, _ = fwd(Duplicated(x, dx))
    assert tape.recording.facts == (("shape", (5,)), ("shape", (5,)))
    with pytest.raises(ValueError, match=r"argument 'x' of shape \(5,\).*passes shape \(6,\)"):
        rev(Duplicated(np.ones(6), np.zeros(6)), 1.0, tape)
    with pytest.raises(TypeError, match="last argument of the reverse half is the Tape"):
        rev(Duplicated(x, dx), 1.0, tape.values)
    # The contents may change (the tape holds what the reverse pass needs): still right.
    expected = sin_loss_gradient(x)
    x[:] = 0.0
    rev(Duplicated(x, dx), 1.0, tape)
    np.testing.assert_allclose(dx, expected, rtol=1e-13)
    x0 = np.linspace(0.1, 1.2, 5)
    h = 1e-6
    fd = [(sin_loss(x0 + h * e) - sin_loss(x0 - h * e)) / (2 * h) for e in np.eye(5)]
    np.testing.assert_allclose(dx, fd, rtol=1e-7)


@adjit.jit
def power_loss(x, n: int):
    s = 0.0
    for i in range(x.shape[0]):
        p = x[i]
        for _ in range(n):
            p = p * x[i]
        s += p
    return s


def test_a_tape_refuses_other_scalar_arguments():
    """`n` sets how many values the loop tapes: a reverse call with a larger n would read past
    the tape's end."""
    x = np.linspace(0.5, 1.5, 4)
    dx = np.zeros(4)
    fwd, rev = autodiff_thunk(ReverseSplitWithPrimal, power_loss, Duplicated, Const)
    tape, _, _ = fwd(Duplicated(x, dx), Const(3))
    with pytest.raises(ValueError, match="recorded with argument 'n' = 3; this reverse call "
                                         "passes 1000"):
        rev(Duplicated(x, dx), Const(1000), 1.0, tape)
    rev(Duplicated(x, dx), Const(3), 1.0, tape)
    np.testing.assert_allclose(dx, 4 * x ** 3, rtol=1e-13)      # d/dx sum(x^4)


def test_a_tape_refuses_another_function_or_specialisation():
    x = np.linspace(0.1, 1.2, 5)
    fwd, _ = autodiff_thunk(ReverseSplitWithPrimal, sin_loss, Duplicated)
    tape, _, _ = fwd(Duplicated(x, np.zeros(5)))
    _, other_rev = autodiff_thunk(ReverseSplitWithPrimal, loss, Duplicated)
    with pytest.raises(ValueError, match="loss's thunk was given a tape recorded by the "
                                         "forward half of sin_loss's thunk"):
        other_rev(Duplicated(x, np.zeros(5)), 1.0, tape)
    _, same_rev = autodiff_thunk(ReverseSplitWithPrimal, sin_loss, Duplicated)
    x32 = x.astype(np.float32)
    with pytest.raises(ValueError, match=r"argument types \(adjit.Array\[adjit.f64, 1\]\), "
                                         r"not \(adjit.Array\[adjit.f32, 1\]\)"):
        same_rev(Duplicated(x32, np.zeros_like(x32)), 1.0, tape)
    dx = np.zeros(5)
    same_rev(Duplicated(x, dx), 1.0, tape)      # another thunk of the same derivative: fine
    np.testing.assert_allclose(dx, sin_loss_gradient(x), rtol=1e-13)


@adjit.kernel
def axpy(a: float, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


def test_a_kernel_tape_refuses_another_ndrange():
    x, y = np.arange(8.0), np.ones(8)
    fwd, _ = autodiff_thunk(ReverseSplitWithPrimal, axpy, Active, Duplicated, Duplicated,
                            ndrange=8)
    tape, _, _ = fwd(Active(2.0), Duplicated(x, np.zeros(8)), Duplicated(y, np.ones(8)))
    _, rev4 = autodiff_thunk(ReverseSplitWithPrimal, axpy, Active, Duplicated, Duplicated,
                             ndrange=4)
    with pytest.raises(ValueError, match=r"recorded with ndrange\[0\] = 8; this reverse call "
                                         "passes 4"):
        rev4(Active(2.0), Duplicated(x, np.zeros(8)), Duplicated(y, np.ones(8)), None, tape)


# ---- 19.7: aliasing ---------------------------------------------------------------------------
def test_the_same_array_as_input_and_output_is_refused():
    """k(x, x): the issue's silently wrong dx (2x^2 instead of 2x)."""
    x = np.arange(1.0, 5.0)
    dx = np.ones(4)
    with pytest.raises(ValueError, match="argument 'x' and argument 'y' share memory, and "
                                         "square writes argument 'y'"):
        autodiff(Reverse, square, Duplicated(x, dx), Duplicated(x, dx), ndrange=4)
    with pytest.raises(ValueError, match="argument 'x' and argument 'y' share memory"):
        autodiff(Reverse, square, Duplicated(x, np.zeros(4)), Duplicated(x, np.ones(4)),
                 ndrange=4)
    with pytest.raises(ValueError, match="share memory"):
        autodiff(Forward, square, Duplicated(x, np.ones(4)), Duplicated(x, np.zeros(4)),
                 ndrange=4)
    np.testing.assert_array_equal(x, np.arange(1.0, 5.0))     # nothing ran
    # Written in place through one argument, the derivative is right: dx = 2x.
    dx = np.ones(4)
    autodiff(Reverse, square_inplace, Duplicated(x, dx), ndrange=4)
    np.testing.assert_allclose(x, np.arange(1.0, 5.0) ** 2)
    np.testing.assert_allclose(dx, 2 * np.arange(1.0, 5.0), rtol=0)
    # And through two distinct arrays.
    x = np.arange(1.0, 5.0)
    dx, dy = np.zeros(4), np.ones(4)
    autodiff(Reverse, square, Duplicated(x, dx), Duplicated(np.zeros(4), dy), ndrange=4)
    np.testing.assert_allclose(dx, 2 * x, rtol=0)
    h = 1e-6
    np.testing.assert_allclose(dx, ((x + h) ** 2 - (x - h) ** 2) / (2 * h), rtol=1e-8)


@adjit.kernel
def shift_scale(x, y):
    i = adjit.index()
    y[i] = 2.0 * x[i]


def test_overlapping_views_are_refused():
    buffer = np.arange(6.0)
    with pytest.raises(ValueError, match="argument 'x' and argument 'y' share memory"):
        autodiff(Reverse, shift_scale, Duplicated(buffer[:-1], np.zeros(5)),
                 Duplicated(buffer[1:], np.ones(5)), ndrange=5)
    with pytest.raises(ValueError, match="argument 'x' and argument 'y' share memory"):
        autodiff(Reverse, shift_scale, Const(buffer[:-1]), Const(buffer[1:]), ndrange=5)
    np.testing.assert_array_equal(buffer, np.arange(6.0))
    # Views that do not overlap are distinct arguments.
    dx, dy = np.zeros(3), np.ones(3)
    autodiff(Reverse, shift_scale, Duplicated(buffer[:3], dx), Duplicated(buffer[3:], dy),
             ndrange=3)
    np.testing.assert_array_equal(buffer, [0.0, 1.0, 2.0, 0.0, 2.0, 4.0])
    np.testing.assert_array_equal(dx, 2.0)


def test_shadows_overlapping_anything_are_refused():
    x, y = np.arange(1.0, 5.0), np.arange(2.0, 6.0)
    d = np.zeros(4)
    with pytest.raises(ValueError, match="the shadow of 'x' and the shadow of 'y' share memory"
                                         ": each shadow"):
        autodiff(Reverse, dot, Duplicated(x, d), Duplicated(y, d))
    with pytest.raises(ValueError, match="argument 'x' and the shadow of 'x' share memory"):
        autodiff(Reverse, dot, Duplicated(x, x), Const(y))
    with pytest.raises(ValueError, match="the shadow of 'x' and argument 'y' share memory"):
        autodiff(Reverse, dot, Duplicated(x, y), Const(y))
    shadows = np.zeros(8)
    with pytest.raises(ValueError, match="the shadow of 'x' and the shadow of 'y'"):
        autodiff(Reverse, dot, Duplicated(x, shadows[:4]), Duplicated(y, shadows[3:7]))
    fwd, _ = autodiff_thunk(ReverseSplitWithPrimal, dot, Duplicated, Duplicated)
    with pytest.raises(ValueError, match="the shadow of 'x' and the shadow of 'y'"):
        fwd(Duplicated(x, d), Duplicated(y, d))
    np.testing.assert_array_equal(d, 0.0)


def test_the_same_array_read_twice_is_fine():
    """Aliasing that nothing writes changes nothing: f(x, x) with their own shadows, and the
    same tangent array for two inputs in forward mode."""
    x = np.linspace(-1.0, 1.0, 7)
    dx, dy = np.zeros(7), np.zeros(7)
    autodiff(Reverse, dot, Duplicated(x, dx), Duplicated(x, dy))
    np.testing.assert_allclose(dx, x, rtol=0)
    np.testing.assert_allclose(dy, x, rtol=0)
    gx, gy = adjit.grad(dot, argnums=(0, 1))(x, x)
    np.testing.assert_allclose(gx + gy, 2 * x, rtol=0)     # d/dx sum(x*x)
    t = np.linspace(0.5, 2.0, 7)
    primal, tangent = adjit.jvp(dot, (x, x), (t, t))
    assert primal == pytest.approx(np.sum(x * x))
    assert tangent == pytest.approx(np.sum(2 * x * t), rel=1e-13)
    h = 1e-6
    fd = (np.sum((x + h * t) ** 2) - np.sum((x - h * t) ** 2)) / (2 * h)
    assert tangent == pytest.approx(fd, rel=1e-7)


def test_plain_calls_keep_numpy_aliasing_semantics():
    x = np.arange(1.0, 5.0)
    square(x, x, ndrange=4)                # reads and writes x, as Numba would
    np.testing.assert_array_equal(x, np.arange(1.0, 5.0) ** 2)
    buffer = np.arange(6.0)
    shift_scale(buffer[:-1], buffer[1:], ndrange=5)   # order-dependent, allowed
    assert buffer[0] == 0.0


def test_written_primal_aliasing_a_read_one_is_refused_in_jit_code():
    x = np.arange(1.0, 5.0)
    with pytest.raises(ValueError, match="argument 'x' and argument 'y' share memory, and "
                                         "scaled_copy writes argument 'y'"):
        autodiff(Forward, scaled_copy, Duplicated(x, np.ones(4)), Duplicated(x, np.zeros(4)))


# ---- 8.12: integer arrays marked Duplicated -------------------------------------------------
@adjit.jit
def var_loss(a, idx):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * idx[i]
    return s


def test_duplicated_integer_array_is_a_clear_error_before_compiling():
    a, idx = np.arange(4.0), np.arange(4)
    var_loss.__dict__.pop("_derivatives", None)
    with pytest.raises(TypeError) as err:
        autodiff(Reverse, var_loss, Duplicated(a, np.zeros(4)),
                 Duplicated(idx, np.zeros(4, dtype=np.int64)))
    message = str(err.value)
    assert "var_loss(): argument 'idx' is an array of int64 marked Duplicated" in message
    assert "not differentiable" in message and "Const" in message
    assert "memref" not in message and "__" not in message and "<unknown>" not in message
    assert not var_loss.__dict__.get("_derivatives")        # refused before compiling
    with pytest.raises(TypeError, match="'idx' is an array of int64 marked DuplicatedNoNeed"):
        autodiff(Forward, var_loss, Duplicated(a, np.ones(4)),
                 DuplicatedNoNeed(idx, np.zeros(4, dtype=np.int64)))
    flags = np.ones(4, dtype=np.bool_)
    with pytest.raises(TypeError, match="'idx' is an array of bool marked Duplicated"):
        autodiff(Reverse, var_loss, Duplicated(a, np.zeros(4)), Duplicated(flags, flags.copy()))
    # As Const it differentiates: d/da sum(a * idx) = idx.
    da = np.zeros(4)
    autodiff(Reverse, var_loss, Duplicated(a, da), Const(idx))
    np.testing.assert_array_equal(da, idx)


# ---- device="cuda": the same checks, before any launch (the fake driver of tests/gpu) -------
@adjit.kernel
def square_f32(x, y):
    i = adjit.index()
    y[i] = x[i] * x[i]


@adjit.jit
def scale_then_norm(x, a: float):
    scale_kernel(x, a, ndrange=x.shape[0])
    return adjit.sum(x * x)


@adjit.kernel
def scale_kernel(x, a: float):
    i = adjit.index()
    x[i] = a * x[i]


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    pytest.importorskip("mlir", reason="compiling the derivative kernels needs MLIR")
    from fake_driver import install
    monkeypatch.setenv("ADJIT_CACHE_DIR", str(tmp_path / "cache"))
    for f in (square_f32, scale_kernel, scale_then_norm):
        monkeypatch.setattr(f, "_cache", {})
    return install(monkeypatch, {})      # no kernel may run: a launch would fail the test


def test_cuda_launch_derivatives_refuse_read_only_and_aliased_arrays(fake_gpu):
    x = np.arange(1.0, 5.0, dtype=np.float32)
    raw = np.zeros(4, np.float32).tobytes()
    ro = np.frombuffer(raw, dtype=np.float32)
    with pytest.raises(ValueError, match="the shadow of 'x' receives the derivative"):
        autodiff(Reverse, square_f32, Duplicated(x, ro), Duplicated(np.zeros(4, np.float32),
                                                                    np.ones(4, np.float32)),
                 ndrange=4, device="cuda")
    with pytest.raises(ValueError, match="argument 'y' is written by square_f32"):
        autodiff(Forward, square_f32, Duplicated(x, np.ones(4, np.float32)), Const(ro),
                 ndrange=4, device="cuda")
    with pytest.raises(ValueError, match="argument 'x' and argument 'y' share memory"):
        autodiff(Reverse, square_f32, Duplicated(x, np.zeros(4, np.float32)),
                 Duplicated(x, np.ones(4, np.float32)), ndrange=4, device="cuda")
    assert raw == bytes(16) and not fake_gpu.launches


def test_cuda_jit_derivatives_refuse_read_only_and_aliased_arrays(fake_gpu):
    import shutil
    if shutil.which("cc") is None:
        pytest.skip("building host programs needs a C compiler (cc)")
    raw, ro = read_only_bytes(4)
    x = np.arange(1.0, 5.0)
    with pytest.raises(ValueError, match="the shadow of 'x' receives the derivative"):
        autodiff(Reverse, scale_then_norm, Duplicated(x, ro), Active(2.0), device="cuda")
    with pytest.raises(ValueError, match="argument 'x' is written by scale_then_norm"):
        autodiff(Reverse, scale_then_norm, Duplicated(ro, np.zeros(4)), Active(2.0),
                 device="cuda")
    with pytest.raises(ValueError, match="argument 'x' and the shadow of 'x' share memory"):
        autodiff(Reverse, scale_then_norm, Duplicated(x, x), Active(2.0), device="cuda")
    assert raw == np.ones(4).tobytes() and not fake_gpu.launches
    np.testing.assert_array_equal(x, np.arange(1.0, 5.0))
