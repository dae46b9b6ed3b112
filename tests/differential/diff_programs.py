"""A hypothesis strategy of NumPy-subset programs, rendered twice: for adjit (`@adjit.jit`,
NumPy spellings, in-place updates) and for JAX (the same text with `np` bound to
`jax.numpy`, and in-place updates written `t = t.at[idx].op(e)`).

A program has float array arguments (float32 or float64, shapes from two small sizes, with
size-1 and size-0 dimensions), Python float arguments (weak, NEP 50) and Python int
arguments (run-time indices, possibly negative). It is three functions of the same body:

    f(x0, ..., s0, ..., k0, ...)   the value, an array or a scalar (checked with its dtype)
    fd(x0, ..., s0, ...)           the same with the ints fixed in the body: what the
                                   derivative entry points differentiate
    loss(x0, ..., s0, ...)         np.sum(np.sin(fd's result)): a scalar for grad, hvp,
                                   hessian and the derivative taken inside @jit (dloss)

Shapes are tracked by evaluating each expression on NumPy arrays of the arguments' shapes as
the program is drawn, so a drawn expression is valid NumPy by construction (broadcasting,
slices, `@`, concatenation), and its result shape known to the statements after it.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
from hypothesis import strategies as st

# The unary builtins (adjit/lang/builtins.py UNARY_MATH, with NumPy's names where NumPy
# has them), each wrapped to stay inside its domain and away from its singular points, so
# that values and derivatives are finite and well conditioned for any finite input.
UNARY = {
    "sin": "np.sin({0})", "cos": "np.cos({0})", "tan": "np.tan(0.5 * np.sin({0}))",
    "exp": "np.exp(np.sin({0}))", "exp2": "np.exp2(np.cos({0}))",
    "expm1": "np.expm1(np.sin({0}))", "log": "np.log(1.5 + np.cos({0}))",
    "log2": "np.log2(1.5 + {0} * {0})", "log10": "np.log10(2.0 + np.sin({0}))",
    "log1p": "np.log1p({0} * {0})", "sqrt": "np.sqrt(1.0 + {0} * {0})",
    "tanh": "np.tanh({0})", "sinh": "np.sinh(np.sin({0}))", "cosh": "np.cosh(np.cos({0}))",
    "asin": "np.arcsin(0.9 * np.sin({0}))", "acos": "np.arccos(0.9 * np.cos({0}))",
    "atan": "np.arctan({0})", "erf": "adjit.erf({0})",
    "rsqrt": "adjit.rsqrt(1.0 + {0} * {0})", "cbrt": "np.cbrt(2.0 + np.sin({0}))",
    "asinh": "np.arcsinh({0})", "acosh": "np.arccosh(1.5 + {0} * {0})",
    "atanh": "np.arctanh(0.9 * np.sin({0}))",
    "neg": "-{0}", "square": "{0} ** 2", "abs": "np.abs(0.5 + {0} * {0})",
}
# Binary element-wise forms (BINARY_MATH and the operators), broadcasting. max/min/where
# never see the same operand twice (a tie has no agreed derivative).
BINARY = {
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}",
    "div": "{0} / (1.5 + {1} * {1})", "pow": "np.power(1.5 + {0} * {0}, np.sin({1}))",
    "atan2": "np.arctan2({0}, 1.5 + {1} * {1})", "hypot": "np.hypot({0}, 1.0 + {1} * {1})",
    "copysign": "np.copysign({0}, 0.5 + {1} * {1})",
    "maximum": "np.maximum({0}, {1})", "minimum": "np.minimum({0}, {1})",
    "where": "np.where({0} > {1}, {0} * {1}, {1} - {0})",
}
REDUCTIONS = ("sum", "mean", "max", "min", "prod")
SIZES = (3, 2)          # n, m: every dimension is one of these, 1 or 0


@dataclasses.dataclass
class Arg:
    name: str
    kind: str            # "array" | "float" | "int"
    shape: tuple = ()
    dtype: str = "float64"
    value: int = 0       # an int argument's value (the index it is)


@dataclasses.dataclass
class Program:
    args: list[Arg]
    body: list[tuple[str, str]]    # (adjit line, JAX line), indented one level
    result: str
    result_shape: tuple
    features: set

    @property
    def float_args(self) -> list[Arg]:
        return [a for a in self.args if a.kind != "int"]

    def _fn(self, decorator: str, name: str, params: list[Arg], ints_fixed: bool,
            jax: bool, ret: str) -> list[str]:
        lines = [decorator, f"def {name}({', '.join(a.name for a in params)}):"] if decorator \
            else [f"def {name}({', '.join(a.name for a in params)}):"]
        if ints_fixed:
            lines += [f"    {a.name} = {a.value}" for a in self.args if a.kind == "int"]
        lines += [jl if jax else al for al, jl in self.body]
        lines.append(f"    return {ret}")
        return lines

    def source(self, jax: bool = False) -> str:
        """The module text: the value `f`, `fd` and `loss` of float arguments, and `dloss`,
        the gradient of loss taken inside compiled code."""
        dec = "" if jax else "@adjit.jit"
        floats = self.float_args
        lines = ["import numpy as np", "import adjit", ""] if not jax else []
        lines.append("# " + ", ".join(f"{a.name}: {a.dtype} {a.shape}" if a.kind == "array" else
                                      f"{a.name}: {a.kind}" + (f" = {a.value}" if a.kind == "int"
                                                               else "") for a in self.args))
        lines += self._fn(dec, "f", self.args, False, jax, self.result) + [""]
        lines += self._fn(dec, "fd", floats, True, jax, self.result) + [""]
        lines += self._fn(dec, "loss", floats, True, jax, f"np.sum(np.sin({self.result}))")
        lines += [""]
        nums = tuple(range(len(floats)))
        lines += ([dec] if dec else []) + [
            f"def dloss({', '.join(a.name for a in floats)}):",
            f"    return adjit.grad(loss, argnums={nums!r})"
            f"({', '.join(a.name for a in floats)})", ""]
        return "\n".join(lines)


def _spread(draw, options):
    """One of `options`, near uniformly: hypothesis's sampled_from favours the first ones
    (it shrinks towards them), which would leave the later builtins rarely drawn."""
    options = list(options)
    return options[draw(st.integers(0, 2**20)) % len(options)]


class _Builder:
    """Draws statements over a pool of named values whose shapes are known (each checked by
    evaluating it on zeros of the arguments' shapes)."""

    def __init__(self, draw, args: list[Arg]):
        self.draw = draw
        self.args = args
        self.env = {"np": np, "adjit": _NumpyShim}
        for a in args:
            self.env[a.name] = (np.zeros(a.shape) if a.kind == "array" else
                                0.5 if a.kind == "float" else a.value)
        self.pool = [a.name for a in args if a.kind != "int"]
        self.ints = [a for a in args if a.kind == "int"]
        self.body: list[tuple[str, str]] = []
        self.features: set[str] = set()
        self.count = 0

    def shape(self, name: str) -> tuple:
        return np.shape(self.env[name])

    def try_shape(self, expr: str):
        try:
            with np.errstate(all="ignore"):
                return np.shape(eval(expr, dict(self.env)))
        except Exception:    # not valid NumPy for these shapes: the caller draws another
            return None

    def pick(self, names=None) -> str:
        return self.draw(st.sampled_from(names or self.pool))

    def bind(self, expr: str, feature: str, jax_expr: str | None = None,
             indent: str = "    ") -> str:
        self.count += 1
        name = f"v{self.count}"
        self.body.append((f"{indent}{name} = {expr}", f"{indent}{name} = {jax_expr or expr}"))
        with np.errstate(all="ignore"):
            self.env[name] = eval(expr, dict(self.env))
        self.pool.append(name)
        self.features.add(feature)
        return name

    # ---- the statement kinds -------------------------------------------------------------
    def unary(self):
        key = _spread(self.draw, sorted(UNARY))
        self.bind(UNARY[key].format(self.pick()), f"unary:{key}")

    def binary(self):
        key = _spread(self.draw, sorted(BINARY))
        for _ in range(4):
            a, b = self.pick(), self.pick()
            if a == b and key in ("maximum", "minimum", "where"):
                continue
            expr = BINARY[key].format(a, b)
            if self.try_shape(expr) is not None:
                self.bind(expr, f"binary:{key}")
                return
        self.unary()

    def scalar(self):
        """An array with a Python float argument or literal: NEP 50 keeps the array's dtype."""
        floats = [a.name for a in self.args if a.kind == "float"]
        s = self.pick(floats) if floats and self.draw(st.booleans()) else "0.75"
        op = self.draw(st.sampled_from(["{0} * {1}", "{1} - {0}", "{0} / (2.0 + {1} * {1})"]))
        self.bind(op.format(self.pick(), s), "scalar")

    def reduction(self):
        a = self.pick()
        shape = self.shape(a)
        key = _spread(self.draw, REDUCTIONS)
        size = math.prod(shape)
        if size == 0 and key != "sum":
            key = "sum"             # max/min/mean of nothing: an error or NaN in NumPy
        if len(shape) == 0:
            expr = f"np.{key}({a})"
        else:
            axis = self.draw(st.sampled_from([None, *range(-len(shape), len(shape))]))
            keep = self.draw(st.booleans())
            if axis is not None and shape[axis] == 0 and key != "sum":
                key = "sum"
            method = self.draw(st.booleans()) and key in ("sum", "mean", "max", "min")
            kw = "" if axis is None else f"axis={axis}"
            kw += (", " if kw else "") + "keepdims=True" if keep else ""
            if key == "prod":       # small values: a product of many stays tame
                a = f"np.tanh({a})"
            expr = f"{a}.{key}({kw})" if method else f"np.{key}({a}{', ' + kw if kw else ''})"
        self.bind(expr, f"reduce:{key}")

    def index(self):
        arrays = [n for n in self.pool if len(self.shape(n)) >= 1]
        if not arrays:
            return self.unary()
        a = self.pick(arrays)
        shape = self.shape(a)
        parts = []
        for d in shape:
            options = [":", "::-1", "1:", ":-1", "::2", "-2:", "1::2", "None, :"]
            if d > 0:
                options += ["0", "-1"]
                options += [k.name for k in self.ints if -d <= k.value < d]
            parts.append(self.draw(st.sampled_from(options)))
            if len(parts) > 1 and self.draw(st.booleans()):
                break
        expr = f"{a}[{', '.join(parts)}]"
        if self.try_shape(expr) is None:
            return self.unary()
        feature = ("index:runtime" if any(k.name in parts for k in self.ints) else
                   "index:step" if any("::" in p for p in parts) else "index:slice")
        self.bind(expr, feature)

    def matmul(self):
        pairs = [(a, b) for a in self.pool for b in self.pool
                 if 1 <= len(self.shape(a)) <= 2 and 1 <= len(self.shape(b)) <= 2
                 and self.shape(a)[-1] == self.shape(b)[0]]
        if not pairs:
            return self.binary()
        a, b = self.draw(st.sampled_from(pairs))
        self.bind(f"{a} @ {b}", "matmul")

    def runtime_slice(self):
        """A slice whose bound is a run-time int (JAX takes the int as static)."""
        arrays = [n for n in self.pool if len(self.shape(n)) >= 1]
        if not arrays or not self.ints:
            return self.index()
        a, k = self.pick(arrays), self.draw(st.sampled_from(self.ints)).name
        form = self.draw(st.sampled_from(["{a}[{k}:]", "{a}[:{k}]", "{a}[::-1][{k}:]",
                                          "{a}[{k}::2]"]))
        expr = form.format(a=a, k=k)
        if self.try_shape(expr) is None:
            return self.unary()
        self.bind(expr, "index:runtime-slice")

    def make(self):
        """Arrays made in the program, and the Python ints of shapes (weak, NEP 50)."""
        a = self.pick()
        shape = self.shape(a)
        forms = ["np.zeros_like({a}) + {a}", "np.ones_like({a}) * 0.5 - {a}",
                 "np.full_like({a}, 0.25) * {a}", "{a} * np.ones({shape!r})"]
        if shape:
            forms += ["{a} / {a}.shape[0] if {a}.shape[0] else {a}",
                      "{a} * len({a})", "np.linspace(-1.0, 1.0, {n}) + {a}",
                      "np.arange({n}) * {a}", "np.zeros({shape!r}) + {a}"]
        expr = self.draw(st.sampled_from(forms)).format(a=a, shape=shape,
                                                        n=shape[-1] if shape else 1)
        if "if" in expr:
            expr = f"{a} / max({a}.shape[0], 1)"
        if self.try_shape(expr) is None:
            return self.unary()
        self.bind(expr, "make:" + expr.split("(")[0].replace(f"{a} ", "").strip())

    def products(self):
        """np.dot / np.matmul / @, batched 3-D too."""
        pairs = [(a, b) for a in self.pool for b in self.pool
                 if len(self.shape(a)) >= 1 and len(self.shape(b)) >= 1
                 and self.try_shape(f"np.matmul({a}, {b})") is not None]
        if not pairs:
            return self.binary()
        a, b = self.draw(st.sampled_from(pairs))
        fn = self.draw(st.sampled_from(["np.dot", "np.matmul"]))
        if fn == "np.dot" and self.try_shape(f"np.dot({a}, {b})") != \
                self.try_shape(f"np.matmul({a}, {b})"):
            fn = "np.matmul"
        self.bind(f"{fn}({a}, {b})", f"matmul:{fn}")

    def batched(self):
        """A batched product: stack two 2-D arrays, multiply by a stacked transpose."""
        mats = [n for n in self.pool if len(self.shape(n)) == 2]
        if not mats:
            return self.matmul()
        a = self.pick(mats)
        self.bind(f"np.stack([{a}, np.sin({a})]) @ np.stack([{a}.T, {a}.T])", "matmul:batched")

    def argmax(self):
        arrays = [n for n in self.pool if math.prod(self.shape(n)) > 0 and self.shape(n)]
        if not arrays:
            return self.unary()
        a = self.pick(arrays)
        fn = self.draw(st.sampled_from(["argmax", "argmin"]))
        self.bind(f"np.ravel({a})[np.{fn}({a})] * {a}", f"reduce:{fn}")

    def alias(self):
        """An in-place update whose right side reads the memory it writes (NumPy computes the
        right side first; JAX's .at[] reads the old array)."""
        arrays = [n for n in self.pool if len(self.shape(n)) >= 1 and self.shape(n)[0] >= 2]
        if not arrays:
            return self.inplace()
        a = self.pick(arrays)
        form = _spread(self.draw, [("1:", "{t}[:-1]"), (":-1", "{t}[1:]"), ("...", "{t}[::-1]"),
                                   ("::-1", "np.sin({t})"), ("1:", "{t}[:-1] * {t}[1:]")])
        idx, rhs = form[0], form[1]
        op = _spread(self.draw, ["=", "+="])
        jax_op = {"=": "set", "+=": "add"}[op]
        self.count += 1
        t = f"v{self.count}"
        rhs = rhs.format(t=t)
        self.body.append((f"    {t} = {a}.copy()", f"    {t} = {a}.copy()"))
        self.body.append((f"    {t}[{idx}] {op} {rhs}", f"    {t} = {t}.at[{idx}].{jax_op}({rhs})"))
        self.env[t] = self.env[a].copy()
        self.pool.append(t)
        self.features.add("inplace:aliased")

    def view_chain(self):
        """A view of a view: steps, new axes and integers in two rounds."""
        arrays = [n for n in self.pool if len(self.shape(n)) >= 1]
        if not arrays:
            return self.unary()
        a = self.pick(arrays)
        first = _spread(self.draw, ["[None, ::2]", "[::-1]", "[1:]", "[None, ::2, None]",
                                    "[..., None]", "[::2, None]"])
        second = _spread(self.draw, ["[0]", "[0, 0:1:3]", "[:, ::-1]", "[-1]", "[..., 0]",
                                     "[1:, None]", "[::-2]"])
        expr = f"{a}{first}{second}"
        if self.try_shape(expr) is None:
            return self.index()
        self.bind(expr, "index:view-of-view")

    def clip(self):
        self.bind(f"np.clip({self.pick()}, -0.5, 0.75)", "clip")

    def join(self):
        a = self.pick()
        same = [b for b in self.pool if self.shape(b) == self.shape(a)]
        b = self.pick(same)
        kind = self.draw(st.sampled_from(["concatenate", "stack", "reshape", "ravel", "T"]))
        nd = len(self.shape(a))
        if kind == "concatenate" and nd >= 1:
            axis = self.draw(st.integers(-nd, nd - 1))
            expr = f"np.concatenate([{a}, {b}], axis={axis})"
        elif kind == "stack":
            expr = f"np.stack([{a}, {b}], axis={self.draw(st.integers(0, nd))})"
        elif kind == "reshape":
            size = math.prod(self.shape(a))
            target = self.draw(st.sampled_from(
                [(-1,), (size,), (1, -1), (-1, 1)] + ([(2, -1)] if size % 2 == 0 else [])))
            expr = f"{a}.reshape({target!r})" if self.draw(st.booleans()) else \
                f"np.reshape({a}, {target!r})"
        elif kind == "ravel":
            expr = f"np.ravel({a})"
        else:
            expr = f"{a}.T"
        if self.try_shape(expr) is None:
            return self.unary()
        self.bind(expr, f"join:{kind}")

    def inplace(self):
        arrays = [n for n in self.pool if len(self.shape(n)) >= 1]
        if not arrays:
            return self.unary()
        a = self.pick(arrays)
        shape = self.shape(a)
        idx = self.draw(st.sampled_from(
            ["...", "1:", "::-1", "::2", "-1", "0"] +
            [k.name for k in self.ints if -shape[0] <= k.value < shape[0]]))
        if shape[0] == 0 and idx in ("-1", "0"):
            idx = "1:"
        target_shape = np.zeros(shape)[eval(f"np.s_[{idx}]", {"np": np},
                                            {k.name: k.value for k in self.ints})].shape
        sources = [n for n in self.pool
                   if _broadcasts(self.shape(n), target_shape)]
        src = self.pick(sources) if sources else "1.0"
        op = self.draw(st.sampled_from(["=", "+=", "*=", "-="]))
        jax_op = {"=": "set", "+=": "add", "*=": "multiply", "-=": "subtract"}[op]
        self.count += 1
        t = f"v{self.count}"
        rhs = f"np.sin({src})"
        self.body.append((f"    {t} = {a}.copy()", f"    {t} = {a}.copy()"))
        self.body.append((f"    {t}[{idx}] {op} {rhs}", f"    {t} = {t}.at[{idx}].{jax_op}({rhs})"))
        with np.errstate(all="ignore"):
            self.env[t] = self.env[a].copy()
        self.pool.append(t)
        self.features.add("inplace")

    def loop(self):
        """A for loop carrying an array (or scalar), a checkpointed one writing in place, or
        one whose Python int counter enters the arithmetic (NEP 50: a weak int)."""
        a = self.pick()
        shape = self.shape(a)
        others = [n for n in self.pool if _broadcasts(self.shape(n), shape)]
        b = self.pick(others)
        kind = self.draw(st.sampled_from(["plain", "counter", "checkpointed"]))
        trips = self.draw(st.integers(0, 3))
        self.count += 1
        t = f"v{self.count}"
        step = f"np.sin({t}) * 0.9 + np.tanh({b})"
        if kind == "checkpointed" and len(shape) >= 1:
            self.body += [(f"    {t} = {a}.copy()", f"    {t} = {a}.copy()"),
                          (f"    for i in adjit.checkpointed(range({trips}), snapshots=2):",
                           f"    for i in range({trips}):"),
                          (f"        {t}[...] = {step}", f"        {t} = {t}.at[...].set({step})")]
        else:
            kind = "counter" if kind == "counter" else "plain"
            if kind == "counter":
                step += " + 0.125 * i"
            self.body += [(f"    {t} = {a}", f"    {t} = {a}"),
                          (f"    for i in range({trips}):", f"    for i in range({trips}):"),
                          (f"        {t} = {step}", f"        {t} = {step}")]
        self.env[t] = self.env[a] * 1.0
        self.pool.append(t)
        self.features.add(f"loop:{kind}")


class _NumpyShim:
    """adjit's names that NumPy lacks, for evaluating shapes while drawing."""
    erf = rsqrt = staticmethod(lambda x: x)


def _broadcasts(src: tuple, target: tuple) -> bool:
    try:
        return np.broadcast_shapes(src, target) == tuple(target)
    except ValueError:
        return False


SHAPES = [(), (3,), (2,), (1,), (0,), (3, 2), (2, 3), (1, 2), (3, 1), (2, 0), (1, 1)]
KINDS = ("unary", "binary", "scalar", "reduction", "index", "matmul", "clip", "join",
         "inplace", "loop", "runtime_slice", "make", "products", "batched", "argmax", "alias",
         "view_chain")


@st.composite
def programs(draw, kinds: tuple[str, ...] = KINDS, max_statements: int = 8):
    dtype = _spread(draw, ["float32", "float64"])
    args = []
    for k in range(_spread(draw, [1, 2, 2, 3])):
        shape = _spread(draw, SHAPES)
        mixed = draw(st.integers(0, 9)) == 0      # now and then a float64 beside float32
        args.append(Arg(f"x{k}", "array", shape, "float64" if mixed else dtype))
    if draw(st.booleans()):
        args.append(Arg("s0", "float"))
    if draw(st.booleans()):
        args.append(Arg("k0", "int", value=draw(st.integers(-2, 1))))
    b = _Builder(draw, args)
    for _ in range(_spread(draw, range(2, max_statements + 1))):
        getattr(b, _spread(draw, kinds))()
    # The result: the last value, or the last combined with an earlier one.
    result = b.pool[-1]
    if draw(st.booleans()):
        other = b.pick()
        combined = f"{result} * 0.5 + np.cos({other})"
        if b.try_shape(combined) is not None:
            result = combined
    if (b.try_shape(result) or ()) == () and result in [a.name for a in args]:
        result = f"{result} * 1.0"
    return Program(args, b.body, result, b.try_shape(result), b.features)


def arguments(program: Program, seed: int) -> list:
    """Values for the program's arguments: arrays in [-1, 1] of their dtype, floats, ints."""
    rng = np.random.default_rng(seed)
    values = []
    for a in program.args:
        if a.kind == "array":
            values.append(rng.uniform(-1.0, 1.0, a.shape).astype(a.dtype))
        elif a.kind == "float":
            values.append(float(rng.uniform(-1.0, 1.0)))
        else:
            values.append(a.value)
    return values
