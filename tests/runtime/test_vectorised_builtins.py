"""Every math builtin is vectorised (issue 30: `np.tanh` in `@jit` ran 55x NumPy, its
`llvm.tanh` a libm call a lane): in kernels, `@jit` array code and the derivative code of
both, in float32 and float64, the shared object the runtime builds (cpu_cache, with
runtime/vector_math.py's libmvec variants) calls a libmvec vector variant (`_ZGV...`) of each
transcendental the module computes, and no vector intrinsic that the backend would split
into scalar calls is left. Then the values, against NumPy (dtype included) at the
special points (0, -0, infinities, NaN, huge, tiny, subnormal) and a spread, through the
vector bodies and the scalar remainders."""
import ctypes.util
import math
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

import adjit
from adjit.dialects import make_context
from adjit.lang.builtins import UNARY_MATH
from adjit.runtime import cpu_cache

LIBMVEC = ctypes.util.find_library("mvec")
NEEDS_LIBMVEC = pytest.mark.skipif(
    LIBMVEC is None or not hasattr(ctypes.CDLL(LIBMVEC), "_ZGVbN4v_tanhf"),
    reason="needs x86-64 glibc 2.35+'s libmvec (tanh, erf, cbrt...)")

BINARY = ("pow", "atan2", "hypot")
# What each builtin calls once lowered: None where it is an instruction (sqrt; hypot is
# composed from sqrt). log1p and expm1 are libm calls where libmvec has them (glibc 2.35+,
# as for tanh: passes/cpu_math.py).
CALLS = {**{n: n for n in UNARY_MATH}, "sqrt": None, "rsqrt": None, "pow": "pow",
         "atan2": "atan2", "hypot": None}
TRANSCENDENTAL = {c for c in CALLS.values() if c is not None}


@adjit.func
def every_builtin(x, y):
    return (adjit.sin(x) + adjit.cos(x) + adjit.tan(x) + adjit.exp(x) + adjit.exp2(x)
            + adjit.expm1(x) + adjit.log(y) + adjit.log2(y) + adjit.log10(y) + adjit.log1p(y)
            + adjit.sqrt(y) + adjit.tanh(x) + adjit.sinh(x) + adjit.cosh(x) + adjit.asin(x)
            + adjit.acos(x) + adjit.atan(x) + adjit.erf(x) + adjit.rsqrt(y) + adjit.cbrt(x)
            + adjit.asinh(x) + adjit.acosh(y + 1.0) + adjit.atanh(x) + adjit.pow(y, x)
            + adjit.atan2(x, y) + adjit.hypot(x, y))


@adjit.kernel
def kernel_all(x, y, out):
    i = adjit.index()
    out[i] = every_builtin(x[i], y[i])


@adjit.kernel
def kernel_grad(x, y, out):
    i = adjit.index()
    out[i] = adjit.grad(every_builtin)(x[i], y[i])


@adjit.jit
def jit_all(x, y):
    return (np.sin(x) + np.cos(x) + np.tan(x) + np.exp(x) + np.exp2(x) + np.expm1(x)
            + np.log(y) + np.log2(y) + np.log10(y) + np.log1p(y) + np.sqrt(y) + np.tanh(x)
            + np.sinh(x) + np.cosh(x) + np.arcsin(x) + np.arccos(x) + np.arctan(x)
            + adjit.erf(x) + adjit.rsqrt(y) + np.cbrt(x) + np.arcsinh(x) + np.arccosh(y + 1.0)
            + np.arctanh(x) + np.power(y, x) + np.arctan2(x, y) + np.hypot(x, y))


@adjit.jit
def jit_loss(x, y):
    return adjit.sum(jit_all(x, y))


@adjit.jit
def jit_grad(x, y):
    return adjit.grad(jit_loss)(x, y)


def _shared_object_calls(lowered) -> set[str]:
    """The functions the shared object the runtime builds for `lowered` calls (its undefined
    symbols), and the math calls of its LLVM IR before LLVM's optimisations."""
    from mlir import ir
    from adjit.passes.pipeline import llvm_ir_text
    with make_context():
        llvm_ir = llvm_ir_text(ir.Module.parse(lowered.adj()), num_threads=1)
    data = cpu_cache.build_shared_object(llvm_ir, 3, cpu_cache.host_target())
    with tempfile.NamedTemporaryFile(suffix=".so") as so:
        so.write(data)
        so.flush()
        nm = subprocess.run(["nm", "-D", "--undefined-only", so.name], capture_output=True,
                            text=True, check=True).stdout
    return set(re.findall(r"U ([^@\s]+)", nm)), llvm_ir


def _libm(name: str) -> tuple[str, str] | None:
    """(base name, "f" for float32 or "") of a libm function name, None if not one here."""
    if name in TRANSCENDENTAL:
        return name, ""
    if name.endswith("f") and name[:-1] in TRANSCENDENTAL:
        return name[:-1], "f"
    return None


def _math_calls(llvm_ir: str) -> set[tuple[str, str]]:
    """The transcendental functions the (unoptimised) LLVM IR calls, as _libm names them."""
    found = {(n, "f" if t == "32" else "") for n, t in
             re.findall(r"call (?:float|double) @llvm\.([a-z0-9]+)\.f(32|64)\(", llvm_ir)
             if n in TRANSCENDENTAL}
    found |= {_libm(n) for n in re.findall(r"call (?:float|double) @([a-z0-9]+)\(", llvm_ir)}
    return found - {None}


x64 = np.linspace(0.1, 0.9, 67)
PARTS = {
    "kernel": lambda x: kernel_all.lower(x, x, x, ndrange=x.shape[0]),
    "kernel derivative": lambda x: kernel_grad.lower(x, x, x, ndrange=x.shape[0]),
    "jit": lambda x: jit_all.lower(x, x),
    "jit derivative": lambda x: jit_grad.lower(x, x),
}


@NEEDS_LIBMVEC
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("part", list(PARTS))
def test_every_transcendental_calls_its_libmvec_variant(part, dtype):
    symbols, llvm_ir = _shared_object_calls(PARTS[part](x64.astype(dtype)))
    called = _math_calls(llvm_ir)
    if part in ("kernel", "jit"):
        assert {n for n, _ in called} == TRANSCENDENTAL, "the module computes every builtin"
    else:
        assert len(called) >= 8, called       # the derivatives call most of them again
    vector = {_libm(m.group(1)) for s in symbols
              if (m := re.fullmatch(r"_ZGV[bcde]N\d+v+_([a-z0-9]+)", s))}
    # The backend splits a vector intrinsic libmvec has no variant for into libm calls: then
    # the scalar function is called and no variant of it.
    assert called <= vector, f"called a lane at a time: {sorted(called - vector)}"


# ---- values ------------------------------------------------------------------------------

def _points(dtype) -> np.ndarray:
    info = np.finfo(dtype)
    base = [0.0, -0.0, np.inf, -np.inf, np.nan, info.max, -info.max, info.tiny, -info.tiny,
            info.smallest_subnormal, -info.smallest_subnormal, 1e-30, -1e-30, 1e-7, -1e-7,
            1e-3, -1e-3, 0.5, -0.5, 1.0, -1.0, 0.999, -0.999, 1.001, 2.0, -2.0, 3.0, 9.5, -9.5,
            20.0, -20.0, 88.0, -88.0, 100.0, -100.0, 710.0, -710.0, 1e10, -1e10, 1e30, -1e30]
    spread = np.linspace(-12, 12, 203)
    # 245 points in all: the vector body runs, and a scalar remainder
    return np.concatenate([np.array(base, dtype), spread.astype(dtype)])


def _reference(name: str, *args: np.ndarray) -> np.ndarray:
    """NumPy's float64 result rounded to the arguments' type."""
    wide = [a.astype(np.float64) for a in args]
    numpy_names = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "pow": "power",
                   "atan2": "arctan2", "asinh": "arcsinh", "acosh": "arccosh",
                   "atanh": "arctanh"}
    with np.errstate(all="ignore"):
        if name == "erf":
            out = np.array([math.erf(v) for v in wide[0]])
        elif name == "rsqrt":
            out = 1 / np.sqrt(wide[0])
        else:
            out = getattr(np, numpy_names.get(name, name))(*wide)
        return out.astype(args[0].dtype)


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in units of the last place of want (0 where both are equal or NaN)."""
    info = np.finfo(want.dtype)
    with np.errstate(all="ignore"):
        spacing = np.maximum(np.spacing(np.abs(want)), info.smallest_subnormal)
        d = np.abs(got.astype(np.float64) - want.astype(np.float64)) / spacing
    return np.where((got == want) | (np.isnan(got) & np.isnan(want)), 0, d)


def _value_functions(names: list[str], arity: int):
    """A kernel and a @jit function that compute every builtin of `names`, row k of their
    output the k-th (one module each: a few compilations rather than one a builtin)."""
    args = "x, y" if arity == 2 else "x"
    items = "x[i], y[i]" if arity == 2 else "x[i]"
    lines = ["import adjit", "", "", "@adjit.kernel", f"def kernel({args}, out):",
             "    i = adjit.index()"]
    lines += [f"    out[{k}, i] = adjit.{n}({items})" for k, n in enumerate(names)]
    lines += ["", "", "@adjit.jit", f"def jit({args}, out):"]
    lines += [f"    out[{k}] = adjit.{n}({args})" for k, n in enumerate(names)]
    folder = Path(tempfile.mkdtemp(prefix="adjit-vb-"))
    path = folder / f"vb_values_{arity}.py"
    path.write_text("\n".join(lines) + "\n")
    import importlib.util
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


UNARY_MODULE = _value_functions(list(UNARY_MATH), 1)
BINARY_MODULE = _value_functions(list(BINARY), 2)
# 4 ulp: docs/accuracy.md's bound (libmvec's accuracy, at every width); cbrt and its
# neighbours are held to it there too.
BOUND = 4


def _check(name, got, want):
    assert got.dtype == want.dtype, (name, got.dtype)
    same_special = ((np.isnan(got) == np.isnan(want)).all()
                    and (got[np.isinf(want)] == want[np.isinf(want)]).all())
    assert same_special, (name, [(g, w) for g, w in zip(got, want)
                                 if np.isnan(g) != np.isnan(w) or (np.isinf(w) and g != w)])
    finite = np.isfinite(want)
    worst = _ulps(got[finite], want[finite]).max()
    assert worst <= BOUND, (name, worst)
    zero = finite & (want == 0)        # the sign of a zero result, as NumPy gives it
    assert (np.signbit(got[zero]) == np.signbit(want[zero])).all(), name


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_unary_values_match_numpy(dtype):
    x = _points(dtype)
    for way in ("kernel", "jit"):
        out = np.zeros((len(UNARY_MATH), x.shape[0]), dtype)
        if way == "kernel":
            UNARY_MODULE.kernel(x, out, ndrange=x.shape[0])
        else:
            UNARY_MODULE.jit(x, out)
        for k, name in enumerate(UNARY_MATH):
            _check(f"{way} {name}", out[k], _reference(name, x))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_binary_values_match_numpy(dtype):
    p = _points(dtype)[:41]
    x, y = (a.ravel() for a in np.meshgrid(p, p))
    for way in ("kernel", "jit"):
        out = np.zeros((len(BINARY), x.shape[0]), dtype)
        if way == "kernel":
            BINARY_MODULE.kernel(x, y, out, ndrange=x.shape[0])
        else:
            BINARY_MODULE.jit(x, y, out)
        for k, name in enumerate(BINARY):
            _check(f"{way} {name}", out[k], _reference(name, x, y))


@NEEDS_LIBMVEC
def test_intel_avx512_cores_take_the_16_lane_variants():
    # LLVM's Intel tuning prefers 256-bit vectors, which kept a loop of tanh at the AVX2
    # variant (8 lanes, twice the time of the 16-lane one on this machine's cores).
    from adjit.passes.pipeline import llvm_ir_text
    from mlir import ir
    x = np.ones((8, 64), np.float32)
    with make_context():
        llvm_ir = llvm_ir_text(ir.Module.parse(UNARY_MODULE.jit.lower(
            x, np.zeros((len(UNARY_MATH), 8, 64), np.float32)).adj()), num_threads=1)
    features = "+avx,+avx2,+fma,+avx512f,+avx512dq,+avx512vl,+avx512bw"
    data = cpu_cache.build_shared_object(
        llvm_ir, 3, ("x86_64-unknown-linux-gnu", "icelake-server", features))
    with tempfile.NamedTemporaryFile(suffix=".so") as so:
        so.write(data)
        so.flush()
        nm = subprocess.run(["nm", "-D", "--undefined-only", so.name], capture_output=True,
                            text=True, check=True).stdout
    assert "_ZGVeN16v_tanhf" in nm and "_ZGVeN16v_expf" in nm


def test_512_bit_preference_goes_where_function_attributes_go():
    from adjit.runtime.vector_math import prefer_512_bit_vectors
    import llvm
    module = ("define internal void @g(ptr %0) #0 {\n  ret void\n}\n"
              "define void @h() local_unnamed_addr #0 {\n  call void @g(ptr null)\n"
              "  ret void\n}\n"
              "define { ptr, i64 } @e(ptr %0, i64 %1) {\n  ret { ptr, i64 } zeroinitializer\n}\n"
              "attributes #0 = { nounwind }\n")
    out = prefer_512_bit_vectors(module)
    assert out.count('"prefer-vector-width"="512" {') == 3
    opt = Path(list(llvm.__path__)[0]) / "bin" / "opt"
    subprocess.run([str(opt), "-", "-o", "/dev/null"], input=out, text=True, check=True)
    # a header with more after its attributes (here debug metadata) is left as it is
    dbg = "define void @k() !dbg !4 {\n  ret void\n}\n"
    assert prefer_512_bit_vectors(dbg) == dbg
