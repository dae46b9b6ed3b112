"""The accuracy of every math builtin against NumPy (issue 29, the instrument's item 3).

For each unary and binary math builtin, in float32 and float64, compiled in a kernel (scalar
code, one element per work item) and in `@adjit.jit` (array expressions), over one fixed
sweep of inputs (zeros of both signs, subnormals, tiny, near 1 and the poles, moderate,
huge, the largest finite, infinities and NaN; every value with both signs; binary builtins
over the product of a smaller set): the largest error in ULPs of the result type against
NumPy's float64 result rounded to that type (for float32 this is the correctly rounded value
to within a float64 ulp, better than NumPy's own float32 functions), and of the derivative
against the exact derivative (mpmath, 40 digits; `exact_derivatives`, whose formulas the test
checks against JAX's float64 `grad`) rounded likewise (kernels: forward mode, one tangent per
argument; `@jit`: `adjit.grad`, reverse mode). Which points count: the docs' text
(`__doc_head__`); where a value's reference is not finite, NaN, infinities and signs must
agree exactly, and a disagreement is reported by point (`Row.special`).

`python tests/api/accuracy_sweep.py` prints the table; `--write` writes docs/accuracy.md,
which tests/api/test_accuracy_table.py checks against what this module computes.
Every function is compiled once per dtype: the builtins are all in one kernel and one `@jit`
function, generated as source text (adjit compiles from source) into a temporary module.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

DOC = Path(__file__).resolve().parents[2] / "docs" / "accuracy.md"

# name: (adjit spelling, @jit spelling (NumPy's where it has the function), JAX spelling)
UNARY = {
    "sin": ("adjit.sin", "np.sin", "jnp.sin"),
    "cos": ("adjit.cos", "np.cos", "jnp.cos"),
    "tan": ("adjit.tan", "np.tan", "jnp.tan"),
    "exp": ("adjit.exp", "np.exp", "jnp.exp"),
    "exp2": ("adjit.exp2", "np.exp2", "jnp.exp2"),
    "expm1": ("adjit.expm1", "np.expm1", "jnp.expm1"),
    "log": ("adjit.log", "np.log", "jnp.log"),
    "log2": ("adjit.log2", "np.log2", "jnp.log2"),
    "log10": ("adjit.log10", "np.log10", "jnp.log10"),
    "log1p": ("adjit.log1p", "np.log1p", "jnp.log1p"),
    "sqrt": ("adjit.sqrt", "np.sqrt", "jnp.sqrt"),
    "rsqrt": ("adjit.rsqrt", "adjit.rsqrt", "jax.lax.rsqrt"),
    "cbrt": ("adjit.cbrt", "np.cbrt", "jnp.cbrt"),
    "tanh": ("adjit.tanh", "np.tanh", "jnp.tanh"),
    "sinh": ("adjit.sinh", "np.sinh", "jnp.sinh"),
    "cosh": ("adjit.cosh", "np.cosh", "jnp.cosh"),
    "asin": ("adjit.asin", "np.arcsin", "jnp.arcsin"),
    "acos": ("adjit.acos", "np.arccos", "jnp.arccos"),
    "atan": ("adjit.atan", "np.arctan", "jnp.arctan"),
    "asinh": ("adjit.asinh", "np.arcsinh", "jnp.arcsinh"),
    "acosh": ("adjit.acosh", "np.arccosh", "jnp.arccosh"),
    "atanh": ("adjit.atanh", "np.arctanh", "jnp.arctanh"),
    "erf": ("adjit.erf", "adjit.erf", "jax.scipy.special.erf"),
    "floor": ("adjit.floor", "np.floor", "jnp.floor"),
    "ceil": ("adjit.ceil", "np.ceil", "jnp.ceil"),
    "abs": ("adjit.abs", "np.abs", "jnp.abs"),
    "degrees": ("adjit.degrees", "np.degrees", "jnp.degrees"),
    "radians": ("adjit.radians", "np.radians", "jnp.radians"),
}
BINARY = {
    "pow": ("adjit.pow", "np.power", "jnp.power"),
    "atan2": ("adjit.atan2", "np.arctan2", "jnp.arctan2"),
    "hypot": ("adjit.hypot", "np.hypot", "jnp.hypot"),
    "copysign": ("adjit.copysign", "np.copysign", "jnp.copysign"),
    "maximum": ("adjit.maximum", "np.maximum", "jnp.maximum"),
    "minimum": ("adjit.minimum", "np.minimum", "jnp.minimum"),
}
NAMES = [*UNARY, *BINARY]
DTYPES = (np.float32, np.float64)
PLACES = ("kernel", "jit")


def _numpy(name: str):
    """NumPy's function of builtin `name`, in float64 (the reference)."""
    if name == "erf":
        return np.vectorize(math.erf, otypes=[np.float64])
    if name == "rsqrt":
        return lambda x: 1.0 / np.sqrt(x)
    return eval(UNARY.get(name, BINARY.get(name))[1], {"np": np})


# --- the sweep -----------------------------------------------------------------------------

def unary_points(dtype) -> np.ndarray:
    """The unary sweep: fixed values, both signs, and a fixed-seed spread of magnitudes."""
    fi = np.finfo(dtype)
    fixed = [0.0, float(fi.smallest_subnormal), 3 * float(fi.smallest_subnormal),
             float(fi.tiny) / 3, float(fi.tiny), 1e-30, 1e-17, 1e-10, 1e-7, 1e-6, 1e-4, 1e-3,
             0.1, 0.25, 0.5, 0.7, 0.9, 0.99, 1 - float(fi.eps), 1.0, 1 + float(fi.eps), 1.5,
             2.0, math.e, 3.0, math.pi / 4, math.pi / 2, math.pi, 2 * math.pi, 10.0, 20.0,
             30.0, 50.0, 88.0, 89.0, 100.0, 700.0, 710.0, 1e4, 1e6, 1e10, 1e15, 1e20, 1e30,
             1e100, 1e300, float(fi.max) / 2, float(fi.max), math.inf, math.nan]
    rng = np.random.default_rng(29)
    spread = [*np.exp(rng.uniform(math.log(1e-20), math.log(1e20), 120)),
              *rng.uniform(0.0, 4.0, 60), *rng.uniform(0.0, 1.0, 40)]
    with np.errstate(over="ignore"):
        magnitudes = np.array(fixed + spread).astype(dtype)
    return np.concatenate([magnitudes, -magnitudes])


def binary_points(dtype) -> tuple[np.ndarray, np.ndarray]:
    """The binary sweep: every pair of a smaller set (powers: integer, half and large
    exponents among them)."""
    fi = np.finfo(dtype)
    small = [0.0, float(fi.smallest_subnormal), float(fi.tiny), 1e-10, 1e-3, 0.3, 0.5, 1.0,
             1 + float(fi.eps), 1.5, 2.0, 2.5, 3.0, 7.0, 10.0, 33.0, 100.0, 1e10, 1e30,
             float(fi.max), math.inf, math.nan]
    with np.errstate(over="ignore"):
        one = np.array(small).astype(dtype)
    both = np.concatenate([one, -one])
    x, y = np.meshgrid(both, both, indexing="ij")
    return x.ravel(), y.ravel()


# --- compiled once: every builtin in one kernel and one @jit function ---------------------

def _source() -> str:
    n_u, n_b = len(UNARY), len(BINARY)
    lines = ["import numpy as np", "import adjit", ""]
    lines += ["@adjit.kernel", "def values_kernel(x, bx, by, out, bout):",
              "    i = adjit.index()",
              "    if i < x.shape[0]:"]
    lines += [f"        out[{k}, i] = {spell[0]}(x[i])"
              for k, spell in enumerate(UNARY.values())]
    lines += ["    if i < bx.shape[0]:"]
    lines += [f"        bout[{k}, i] = {spell[0]}(bx[i], by[i])"
              for k, spell in enumerate(BINARY.values())]
    lines += ["", "", "@adjit.kernel", "def rows_kernel(xs, bxs, bys, out, bout):",
              "    # one row of inputs per builtin, so that tangents and adjoints stay apart",
              "    i = adjit.index()",
              "    if i < xs.shape[1]:"]
    lines += [f"        out[{k}, i] = {spell[0]}(xs[{k}, i])"
              for k, spell in enumerate(UNARY.values())]
    lines += ["    if i < bxs.shape[1]:"]
    lines += [f"        bout[{k}, i] = {spell[0]}(bxs[{k}, i], bys[{k}, i])"
              for k, spell in enumerate(BINARY.values())]
    results = ", ".join([f"{s[1]}(x)" for s in UNARY.values()]
                        + [f"{s[1]}(bx, by)" for s in BINARY.values()])
    lines += ["", "", "@adjit.jit", "def values_jit(x, bx, by):", f"    return ({results})"]
    terms = ([f"np.sum({s[1]}(xs[{k}]))" for k, s in enumerate(UNARY.values())]
             + [f"np.sum({s[1]}(bxs[{k}], bys[{k}]))" for k, s in enumerate(BINARY.values())])
    lines += ["", "", "@adjit.jit", "def loss_jit(xs, bxs, bys):",
              "    # each builtin on its own row: its derivative is the gradient's row",
              "    return (" + "\n            + ".join(terms) + ")"]
    assert len(terms) == n_u + n_b
    return "\n".join(lines) + "\n"


_compiled = None


def _module():
    """The generated module (written to a temporary file: adjit compiles from source)."""
    global _compiled
    if _compiled is None:
        folder = Path(tempfile.mkdtemp(prefix="adjit-accuracy-"))
        path = folder / "adjit_accuracy_builtins.py"
        path.write_text(_source())
        spec = importlib.util.spec_from_file_location("adjit_accuracy_builtins", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        _compiled = module
    return _compiled


# --- errors --------------------------------------------------------------------------------

def ulps(got: np.ndarray, want: np.ndarray, dtype) -> np.ndarray:
    """|got - want| in units of `dtype`'s spacing at `want` (the smallest subnormal at 0);
    0 where both are the same non-finite value (NaN and NaN included), inf where one is
    NaN or infinite and the other is not the same."""
    got, want = np.asarray(got, dtype), np.asarray(want, dtype)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    finite = np.isfinite(got) & np.isfinite(want)
    wide = np.longdouble
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(got.astype(wide) - want.astype(wide))
        spacing = np.abs(np.spacing(np.abs(want))).astype(wide)
        err = np.where(same, 0.0, np.where(finite, diff / spacing, np.inf))
    return err.astype(np.float64)


def _reference(name: str, args: tuple[np.ndarray, ...], dtype) -> np.ndarray:
    with np.errstate(all="ignore"):
        return _numpy(name)(*[a.astype(np.float64) for a in args]).astype(dtype)


def jax_derivatives(name: str, args: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    """d name / d each argument at the float64 values of `args`, by JAX in float64 (the
    test checks the exact derivatives' formulas against these)."""
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jax.scipy.special  # noqa: F401  (the spelling of erf names it)
    fn = eval(UNARY.get(name, BINARY.get(name))[2], {"jnp": jnp, "jax": jax})
    out = []
    for k in range(len(args)):
        d = jax.vmap(jax.grad(fn, argnums=k))(*[jnp.asarray(a, jnp.float64) for a in args])
        out.append(np.asarray(d, np.float64))
    return out


def _derivative_formulas():
    import mpmath as mp
    one = mp.mpf(1)
    sign = lambda v: one if v > 0 else -one          # noqa: E731  (the points skip 0)
    return {
        "sin": lambda x: [mp.cos(x)], "cos": lambda x: [-mp.sin(x)],
        "tan": lambda x: [1 / mp.cos(x) ** 2], "exp": lambda x: [mp.exp(x)],
        "exp2": lambda x: [mp.power(2, x) * mp.log(2)], "expm1": lambda x: [mp.exp(x)],
        "log": lambda x: [1 / x], "log2": lambda x: [1 / (x * mp.log(2))],
        "log10": lambda x: [1 / (x * mp.log(10))], "log1p": lambda x: [1 / (1 + x)],
        "sqrt": lambda x: [1 / (2 * mp.sqrt(x))], "rsqrt": lambda x: [-x ** mp.mpf(-1.5) / 2],
        "cbrt": lambda x: [1 / (3 * mp.cbrt(x) ** 2)], "tanh": lambda x: [mp.sech(x) ** 2],
        "sinh": lambda x: [mp.cosh(x)], "cosh": lambda x: [mp.sinh(x)],
        "asin": lambda x: [1 / mp.sqrt(1 - x * x)], "acos": lambda x: [-1 / mp.sqrt(1 - x * x)],
        "atan": lambda x: [1 / (1 + x * x)], "asinh": lambda x: [1 / mp.sqrt(x * x + 1)],
        "acosh": lambda x: [1 / (mp.sqrt(x - 1) * mp.sqrt(x + 1))], "atanh": lambda x: [1 / (1 - x * x)],
        "erf": lambda x: [2 / mp.sqrt(mp.pi) * mp.exp(-x * x)],
        "floor": lambda x: [0], "ceil": lambda x: [0], "abs": lambda x: [sign(x)],
        "degrees": lambda x: [180 / mp.pi], "radians": lambda x: [mp.pi / 180],
        "pow": lambda x, y: [y * mp.power(x, y - 1), mp.power(x, y) * mp.log(x)],
        "atan2": lambda a, b: [b / (a * a + b * b), -a / (a * a + b * b)],
        "hypot": lambda x, y: [x / mp.hypot(x, y), y / mp.hypot(x, y)],
        "copysign": lambda x, y: [sign(x) * y, 0],     # y: copysign(1, y), below
        "maximum": lambda x, y: [1, 0] if x > y else [0, 1],
        "minimum": lambda x, y: [1, 0] if x < y else [0, 1],
    }


_FORMULAS = None


def exact_derivatives(name: str, args: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    """d name / d each argument at `args` (exactly: mpmath at 40 digits, then to float64;
    NaN where the inputs are not finite or the derivative is not real)."""
    global _FORMULAS
    import mpmath as mp
    if _FORMULAS is None:
        _FORMULAS = _derivative_formulas()
    fn = _FORMULAS[name]
    out = np.full((len(args), len(args[0])), np.nan)
    with mp.workdps(40):
        for j in range(len(args[0])):
            point = [float(a[j]) for a in args]
            if not all(math.isfinite(v) for v in point):
                continue
            if name == "copysign":             # the sign of -0.0, which mpf loses
                point[1] = math.copysign(1.0, point[1])
            try:
                ds = fn(*[mp.mpf(v) for v in point])
            except (ZeroDivisionError, ValueError):
                continue
            for k, dv in enumerate(ds):
                if isinstance(dv, mp.mpc):
                    continue
                try:
                    out[k, j] = float(dv)
                except OverflowError:
                    out[k, j] = math.copysign(math.inf, float(mp.sign(dv)))
    return list(out)


def _skip_derivative(name: str, args: tuple[np.ndarray, ...]) -> np.ndarray:
    """Points where the derivative is not defined (a kink or a jump: every convention is
    right there), and subnormal operands (see the docs' text)."""
    x = args[0].astype(np.float64)
    fi = np.finfo(args[0].dtype)
    subnormal = np.zeros(x.shape, bool)
    for a in args:
        subnormal |= (a != 0) & (np.abs(a) < fi.tiny)
    return subnormal | _kinks(name, args)


def _kinks(name: str, args: tuple[np.ndarray, ...]) -> np.ndarray:
    x = args[0].astype(np.float64)
    if name in ("floor", "ceil"):
        return x == np.round(x)
    if name == "abs":
        return x == 0
    if name in ("maximum", "minimum"):
        return args[0] == args[1]
    if name == "copysign":
        return x == 0
    return np.zeros(x.shape, bool)


@dataclasses.dataclass
class Row:
    name: str
    value: dict            # (dtype name, place) -> max ULP over the points with a finite reference
    derivative: dict       # (dtype name, place) -> max ULP of the derivative
    special: list          # "f32 kernel: sin(-inf) = 0 (NumPy nan)": specials that disagree


def _flushed(got: np.ndarray, want: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both as zeros of their signs where both are below twice the smallest normal number
    (derivatives: results in the subnormal range are not compared, see the docs' text; a
    result 1 ulp off across that boundary is no error)."""
    tiny = np.finfo(got.dtype).tiny
    both = (np.abs(got) < 2 * tiny) & (np.abs(want) < 2 * tiny)
    return (np.where(both, np.copysign(np.zeros_like(got), got), got),
            np.where(both, np.copysign(np.zeros_like(want), want), want))


def _max_err(err: np.ndarray, counted: np.ndarray) -> float:
    err = err[counted]
    return float(err.max()) if err.size else 0.0


def _describe(name, args, got, want, dtype, place) -> list[str]:
    bad = ~np.isfinite(want) & (ulps(got, want, dtype) != 0)
    out = []
    for j in np.flatnonzero(bad)[:3]:
        at = ", ".join(repr(float(a[j])) for a in args)
        out.append(f"{np.dtype(dtype).name} {place}: {name}({at}) = {float(got[j])!r} "
                   f"(NumPy {float(want[j])!r})")
    return out


def measure() -> list[Row]:
    """Compiles the builtins (once per dtype) and measures every row of the table."""
    import adjit
    m = _module()
    rows = {n: Row(n, {}, {}, []) for n in NAMES}
    for dtype in DTYPES:
        dn = np.dtype(dtype).name
        x = unary_points(dtype)
        bx, by = binary_points(dtype)
        nu, nb = len(UNARY), len(BINARY)
        n = max(len(x), len(bx))
        # values: kernel (scalar code) and @jit (array code)
        out, bout = np.zeros((nu, len(x)), dtype), np.zeros((nb, len(bx)), dtype)
        with np.errstate(all="ignore"):
            m.values_kernel(x, bx, by, out, bout, ndrange=n)
            jit_results = m.values_jit(x, bx, by)
        for place, results in (("kernel", [*out, *bout]), ("jit", jit_results)):
            for name, got in zip(NAMES, results):
                args = (x,) if name in UNARY else (bx, by)
                assert got.dtype == dtype, (name, place, got.dtype)
                want = _reference(name, args, dtype)
                rows[name].value[(dn, place)] = _max_err(ulps(got, want, dtype),
                                                         np.isfinite(want))
                rows[name].special += _describe(name, args, got, want, dtype, place)
        # derivatives: kernels in forward mode (a tangent of ones on one argument), @jit by
        # adjit.grad (reverse mode), each builtin on its own row of inputs
        xs = np.tile(x, (nu, 1))
        bxs, bys = np.tile(bx, (nb, 1)), np.tile(by, (nb, 1))
        derivs = {"kernel": [], "jit": []}
        for k in range(2):           # d/dx, then d/dy of the binary builtins
            txs, tbx, tby = (np.full_like(xs, 1.0 - k), np.full_like(bxs, 1.0 - k),
                             np.full_like(bys, float(k)))
            out, bout = np.zeros((nu, len(x)), dtype), np.zeros((nb, len(bx)), dtype)
            dout, dbout = np.zeros_like(out), np.zeros_like(bout)
            with np.errstate(all="ignore"):
                adjit.autodiff(adjit.Forward, m.rows_kernel, adjit.Duplicated(xs.copy(), txs),
                               adjit.Duplicated(bxs.copy(), tbx),
                               adjit.Duplicated(bys.copy(), tby),
                               adjit.Duplicated(out, dout), adjit.Duplicated(bout, dbout),
                               ndrange=n)
            derivs["kernel"].append([*dout, *dbout])
        with np.errstate(all="ignore"):
            gx, gbx, gby = adjit.grad(m.loss_jit, argnums=(0, 1, 2))(xs, bxs, bys)
        derivs["jit"] = [[*gx, *gbx], [*gx, *gby]]
        for j, name in enumerate(NAMES):
            args = (x,) if name in UNARY else (bx, by)
            with np.errstate(all="ignore"):
                wants = exact_derivatives(name, args)
            skip = _skip_derivative(name, args)
            worst = {p: 0.0 for p in PLACES}
            for k, want64 in enumerate(wants):
                with np.errstate(over="ignore"):
                    want = want64.astype(dtype)
                for place in PLACES:
                    got = np.asarray(derivs[place][k][j], dtype)
                    assert got.dtype == dtype
                    err = ulps(*_flushed(got, want), dtype)
                    worst[place] = max(worst[place], _max_err(err, np.isfinite(want) & ~skip))
            for place in PLACES:
                rows[name].derivative[(dn, place)] = worst[place]
    return [rows[n] for n in NAMES]


# --- the documented bounds and the table ---------------------------------------------------

# The bound each builtin is held to (max ULP, value and derivative, kernel and @jit), with
# the reason where it is above the default.
DEFAULT_BOUND = 4
# (cbrt's derivative had 6, while it was computed as 1/(3 cbrt(x)^2), squaring cbrt's error:
# rules.py takes cbrt(x)/x/3.)
BOUNDS: dict[str, tuple[float, float, str]] = {}


def bound(name: str) -> tuple[float, float, str]:
    """(value bound, derivative bound, why) in ULPs."""
    return BOUNDS.get(name, (DEFAULT_BOUND, DEFAULT_BOUND, ""))


def _fmt(v: float) -> str:
    if v == math.inf:
        return "inf"
    return f"{v:.0f}" if v >= 10 else f"{v:.1f}".rstrip("0").rstrip(".") if v else "0"


def table(rows: list[Row]) -> str:
    """docs/accuracy.md: the table, its bounds and the disagreements on special values."""
    head = ["builtin"] + [f"{np.dtype(d).name} {p}" for d in DTYPES for p in PLACES]
    head += [f"d {np.dtype(d).name} {p}" for d in DTYPES for p in PLACES]
    head += ["bound (value / d)"]
    lines = [__doc_head__, "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    for r in rows:
        vb, db, _ = bound(r.name)
        cells = [f"`{r.name}`"]
        cells += [_fmt(r.value[(np.dtype(d).name, p)]) for d in DTYPES for p in PLACES]
        cells += [_fmt(r.derivative[(np.dtype(d).name, p)]) for d in DTYPES for p in PLACES]
        cells.append(f"{_fmt(vb)} / {_fmt(db)}")
        lines.append("| " + " | ".join(cells) + " |")
    notes = [(n, why) for n in NAMES for why in [bound(n)[2]] if why]
    if notes:
        lines += ["", "Bounds above the default, and why:", ""]
        lines += [f"- `{n}`: {why}" for n, why in notes]
    special = [s for r in rows for s in r.special]
    lines += ["", "Special values (NaN, infinities, signs) where adjit and the reference "
              "differ:", ""]
    lines += [f"- {s}" for s in special] if special else ["- none"]
    return "\n".join(lines) + "\n"


__doc_head__ = """# Accuracy of the math builtins

Generated by `python tests/api/accuracy_sweep.py --write`; tests/api/test_accuracy_table.py
measures the same table, checks that every builtin is within its bound and that this file
lists every builtin with the bounds the test holds it to. Each cell is the largest error in
ULPs (units in the last place of the result type) over one fixed sweep of inputs: zeros of
both signs, subnormals, tiny, values near 1 and the poles, a spread of magnitudes from 1e-20
to 1e20, huge values, the largest finite value, infinities and NaN, every one with both signs
(binary builtins: every pair of a smaller set of 44). Columns "d": the derivative with
respect to each argument (binary builtins: the worse of the two). Kernels run the builtins as scalar code
(derivatives in forward mode), `@jit` as array expressions, vectorised with libmvec where the
machine has it (derivatives by `adjit.grad`, reverse mode). The numbers are this machine's
(x86-64 with AVX-512, glibc 2.36); another libm or vector width may differ by an ulp or two,
within the bounds.

- Values: against NumPy's float64 result rounded to the type (for float32 that is the
  correctly rounded value to within a float64 ulp, better than NumPy's own float32
  functions). A cell counts the points where NumPy's result is finite; at every other point
  NaN, infinities and their signs must agree exactly (the list at the end).
- Derivatives: against the exact derivative (mpmath at 40 digits) rounded to the type; the
  test also checks those formulas against JAX's float64 `grad`. A cell counts the points
  where the exact derivative is finite and the inputs are finite and not subnormal, and does
  not compare results that are both below twice the smallest normal number (JAX's CPU
  backend, the project's float64 oracle, flushes subnormals to zero). Points where the
  function has a kink or a jump are skipped (floor and ceil at integers, abs and copysign at
  0, ties of maximum and minimum, where adjit gives the derivative to the returned operand
  and JAX splits it).

The GPU's expansions (adjit/passes/math_approx.py, also used for log1p and expm1 on CPUs
without glibc 2.35's libmvec) are measured by tests/gpu/test_math_approx.py."""


def main(argv: list[str]) -> None:
    text = table(measure())
    if "--write" in argv:
        DOC.write_text(text)
        print(f"wrote {DOC}")
    else:
        print(text)


if __name__ == "__main__":
    main(sys.argv[1:])
