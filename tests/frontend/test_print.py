"""Python's `print` in compiled code (compiler/printing.py, passes/lower_print.py): what it
prints for each kind of value, f-string specs, sep/end, in @jit, @func and kernels (whose
work items print in no defined order), in derivatives (the primal prints once; the reverse
sweep does not), adjit.debug.print_adjoint's adjoints and tangents, and the forms it
refuses. Output goes through C's stdio, so the tests read it with capfd (file descriptor
1); each print is flushed, so it is there when the call returns. Each function compiles
once for the module."""
from __future__ import annotations

import inspect
import sys

import numpy as np
import pytest

import adjit
from adjit import i64

pytest.importorskip("mlir", reason="compiling needs MLIR")


@adjit.jit
def show(x, n: i64, a):
    print("plain", x, n, x > 1.0, x < 1.0, 7, 2.5, None, sep=", ")
    print(f"x={x:.3f} n={n:5d} e={x:e} g={x} {n:x} {n:<4}| {x:+08.2f} 100%", end="|\n")
    print(a, adjit.vec3(1.0, 2.0, 3.5), (n, x), sep=" ; ")
    print(adjit.mat22(1.0, 2.0, 3.0, 4.0), adjit.quat(0.0, 0.0, 0.0, 1.0), flush=True)
    print(f"{a:.1f}")
    print()
    return x * 2.0


def _g(v) -> str:
    return repr(float(v))          # (Python's repr for these values: 16 digits show them)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_what_print_prints(capfd, dtype):
    x = dtype(1.5)
    a = np.arange(5.0).astype(dtype)
    print("python before", flush=True)
    assert show(x, 42, a) == 3.0
    print("python after", flush=True)
    out = capfd.readouterr().out.splitlines()
    assert out == [
        "python before",
        "plain, 1.5, 42, True, False, 7, 2.5, None",
        "x=1.500 n=   42 e=1.500000e+00 g=1.5 2a 42  | +0001.50 100%|",
        "[0. 1. 2. 3. 4.] ; [1. 2. 3.5] ; (42, 1.5)",
        "[[1. 2.]",
        " [3. 4.]] [0. 0. 0. 1.]",
        "[0.0 1.0 2.0 3.0 4.0]",
        "",
        "python after"]


def test_an_array_above_numpy_threshold_is_summarised_and_an_empty_one_is_brackets(capfd):
    show(0.5, -3, np.arange(1001.0))
    show(0.5, -3, np.zeros(0))
    lines = capfd.readouterr().out.splitlines()
    arrays = [line.split(" ; ")[0] for line in lines if " ; " in line]
    assert arrays == ["[0. 1. 2. ... 998. 999. 1000.]", "[]"]
    assert "plain, 0.5, -3, False, True, 7, 2.5, None" in lines
    assert "x=0.500 n=   -3 e=5.000000e-01 g=0.5 fffffffffffffffd -3  | +0000.50 100%|" in lines


@adjit.func
def square(v):
    print("square of", v)
    return v * v


@adjit.kernel
def items(x, y):
    i = adjit.index()
    print(f"item {i}: {x[i]:.2f}")
    y[i] = square(x[i])


def test_kernel_work_items_each_print_one_line_in_any_order(capfd):
    x = np.array([1.0, 2.0, 3.0, 4.5])
    y = np.zeros(4)
    items(x, y, ndrange=4)
    np.testing.assert_array_equal(y, x * x)
    lines = capfd.readouterr().out.splitlines()
    assert sorted(lines) == sorted([f"item {i}: {v:.2f}" for i, v in enumerate(x)]
                                   + [f"square of {_g(v)}" for v in x])


def test_a_kernel_reverse_derivative_prints_in_its_primal_only(capfd):
    x = np.array([1.0, 2.0, 3.0])
    dx, y, dy = np.zeros(3), np.zeros(3), np.ones(3)
    adjit.autodiff(adjit.Reverse, items, adjit.Duplicated(x, dx), adjit.Duplicated(y, dy),
                   ndrange=3)
    np.testing.assert_array_equal(dx, 2 * x)
    lines = capfd.readouterr().out.splitlines()
    assert sorted(lines) == sorted([f"item {i}: {v:.2f}" for i, v in enumerate(x)]
                                   + [f"square of {_g(v)}" for v in x])


@adjit.jit
def loss(x):
    u = adjit.debug.print_adjoint(x, label="x")
    print("primal", x)
    return 3.0 * u * u


@pytest.mark.parametrize("x", [2.0, -0.25])
def test_grad_prints_the_primal_once_and_print_adjoint_the_adjoint(capfd, x):
    assert adjit.grad(loss)(x) == 6.0 * x
    assert capfd.readouterr().out.splitlines() == [f"primal {_g(x)}", f"x adjoint: {_g(6 * x)}"]


def test_jvp_prints_the_primal_once_and_print_adjoint_the_tangent(capfd):
    value, tangent = adjit.jvp(loss, (2.0,), (0.5,))
    assert (value, tangent) == (12.0, 6.0)
    assert capfd.readouterr().out.splitlines() == ["x tangent: 0.5", "primal 2.0"]


def test_plain_calls_print_nothing_of_print_adjoint(capfd):
    assert loss(2.0) == 12.0
    assert adjit.debug.print_adjoint(1.5) == 1.5     # from Python: x, nothing printed
    assert capfd.readouterr().out.splitlines() == ["primal 2.0"]


def _to_file(x):
    print(x, file=sys.stderr)  # refused
    return x


def _matrix(a):
    print(a)  # refused
    return 0.0


def _centred(x):
    print(f"{x:^9}")  # refused
    return x


def _thousands(x):
    print(f"{x:,}")  # refused
    return x


def _int_code_of_float(x):
    print(f"{x:d}")  # refused
    return x


def _number_sep(x):
    print(x, x, sep=x)  # refused
    return x


def _nested_spec(x):
    w = 5
    print(f"{x:{w}}")  # refused
    return x


def _adjoint_of_array(a):
    return adjit.sum(adjit.debug.print_adjoint(a))  # refused


def _fstring_bound(x):
    s = f"{x}"  # refused
    return x


REFUSED = [
    (_to_file, (1.0,), "print(file=...) is not supported in compiled code"),
    (_matrix, (np.zeros((2, 2)),), "prints 1-D arrays, not an array"),
    (_centred, (1.0,), "aligned left or right only"),
    (_thousands, (1.0,), "a thousands separator has no printf equivalent"),
    (_int_code_of_float, (1.0,), "format code 'd' does not apply to a float"),
    (_number_sep, (1.0,), "sep must be a string constant"),
    (_nested_spec, (1.0,), "a format spec in compiled code must be a constant"),
    (_adjoint_of_array, (np.ones(2),), "print_adjoint takes a scalar"),
    (_fstring_bound, (1.0,), "f-string (JoinedStr) is supported in compiled code only as an "
                             "argument of print()"),
]


@pytest.mark.parametrize("fn, args, message", REFUSED, ids=[r[0].__name__ for r in REFUSED])
def test_unsupported_forms_are_refused_at_the_line_of_the_print(fn, args, message):
    with pytest.raises(adjit.CompilationError) as info:
        adjit.jit(fn)(*args)
    assert message in str(info.value)
    assert "internal error" not in str(info.value)
    lines, first = inspect.getsourcelines(fn)
    line = first + next(k for k, text in enumerate(lines) if text.endswith("# refused\n"))
    assert f"test_print.py:{line}:" in str(info.value)


@adjit.jit
def floats(x, y: adjit.f32):
    print(x, x / 3.0, -0.0 * x, x * 1e14, x * 1e16, np.nan * x, -np.inf * x, y, y / 3.0,
          y * 1e6, y * 1e9)
    return x


def test_floats_print_as_python_prints_them(capfd):
    # A whole number keeps its `.0` (C's %g drops it) below 10**16 (f32: 10**8), where
    # Python switches to an exponent too (NumPy's float32 switches at 10**6: the one
    # documented difference); 16 (f32: 8) significant digits show these values' shortest
    # repr. NaN and inf as Python spells them.
    floats(2.0, np.float32(0.1))
    y = np.float32(0.1)
    expected = " ".join(str(v) for v in (2.0, 2.0 / 3.0, -0.0, 2e14, 2e16, float("nan"),
                                        float("-inf"), y, y / np.float32(3.0),
                                        y * np.float32(1e6), y * np.float32(1e9)))
    assert capfd.readouterr().out.splitlines() == [expected]
