"""The composition matrix: every derivative entry point x every argument kind x f32/f64.

Each cell differentiates sum(sin(z) * z) over the components z of one argument of that kind
(composition_functions.py) by that entry point, and compares the result with JAX's
(float64, on the same components). A cell's verdict:

- "works": the result agrees with JAX's (and an array derivative has the argument's
  precision);
- "refused": adjit raises a clear error (diff_oracle.INTERNAL: no internal symbol; an adjit
  error class, or the API's TypeError/ValueError/NotImplementedError naming the problem);
- "DEFECT": a wrong value, an unclear or internal error, anything else;
- "n/a": the kind has no such dtype (a Python float is a float64).

`python -m tests.differential.composition_table` writes the table to docs/composition.md;
test_composition_matrix.py walks the cells and checks that the committed table is current.
"""
from __future__ import annotations

import os
import re
import sys
import traceback
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

import composition_functions as cf  # noqa: E402
from diff_oracle import INTERNAL  # noqa: E402

import adjit  # noqa: E402
from adjit import (Active, Duplicated, Forward, Reverse, ReverseSplitWithPrimal,  # noqa: E402
                   autodiff, autodiff_thunk)

DTYPES = ("f32", "f64")
ENTRY_POINTS = ("autodiff Forward", "autodiff Reverse", "autodiff split", "grad",
                "value_and_grad", "jvp", "vjp", "hvp", "jacfwd", "jacrev", "hessian",
                "check_grad", "grad in @jit", "jvp in @jit", "hvp in @jit")
KINDS = ("Python float", "0-d array", "size-1 dims (1, 3)", "view x[1:4]",
         "Fortran order", "negative stride x[::-1]", "byte-swapped", "vec3", "mat22",
         "quat", "struct", "torch tensor", "JAX array")
COMPONENTS = {"Python float": 1, "0-d array": 1, "size-1 dims (1, 3)": 3, "view x[1:4]": 3,
              "Fortran order": 6, "negative stride x[::-1]": 3, "byte-swapped": 3, "vec3": 3,
              "mat22": 4, "quat": 4, "struct": 4, "torch tensor": 3, "JAX array": 3}
SMALL = ("vec3", "mat22", "quat")


def _np(dtype: str):
    return np.float32 if dtype == "f32" else np.float64


def make(kind: str, dtype: str, z: np.ndarray):
    """The argument of `kind` whose components are z."""
    t = _np(dtype)
    if kind == "Python float":
        return float(z[0])
    if kind == "0-d array":
        return np.array(z[0], t)
    if kind == "size-1 dims (1, 3)":
        return z.astype(t).reshape(1, 3)
    if kind == "view x[1:4]":
        base = np.zeros(6, t)
        base[1:4] = z
        return base[1:4]
    if kind == "Fortran order":
        return np.asfortranarray(z.astype(t).reshape(3, 2))
    if kind == "negative stride x[::-1]":
        return np.ascontiguousarray(z[::-1].astype(t))[::-1]
    if kind == "byte-swapped":
        return z.astype(np.dtype(t).newbyteorder(">"))
    if kind == "vec3":
        return z.astype(t)
    if kind == "mat22":
        return z.astype(t).reshape(2, 2)
    if kind == "quat":
        return z.astype(t)
    if kind == "struct":
        cls = cf.PointF if dtype == "f32" else cf.PointD
        return cls(x=z[:3].astype(t), c=float(z[3]))
    if kind == "torch tensor":
        import torch
        return torch.from_numpy(z.astype(t))
    if kind == "JAX array":
        import jax
        jax.config.update("jax_enable_x64", True)
        return jax.numpy.asarray(z.astype(t))
    raise ValueError(kind)


def components(v, kind: str) -> np.ndarray:
    """A result (shaped like the argument, or the argument's shape twice for a Hessian) as
    float64 numbers in the order of `make`'s components."""
    if kind == "struct":
        return np.concatenate([np.asarray(v.x, np.float64).ravel(), [float(v.c)]])
    if hasattr(v, "detach"):
        v = v.detach().numpy()
    return np.asarray(v, np.float64).ravel()   # logical (C) order, whatever the layout


def function(kind: str, dtype: str, in_jit: str = ""):
    """The function of `kind` (in_jit: "_in_jit", "_jvp_in_jit", "_hvp_in_jit": the one
    taking that derivative of it inside @jit)."""
    name = {"vec3": "vec3", "mat22": "mat22", "quat": "quat", "struct": "struct"}.get(kind)
    name = f"{name}{'f' if dtype == 'f32' else 'd'}" if name else "arr"
    return getattr(cf, name + in_jit)


def _zeros_like(kind: str, dtype: str, x):
    if kind == "struct":
        return adjit.zeros_like_struct(x)
    return make(kind, dtype, np.zeros(COMPONENTS[kind]))


def _ann_reverse(kind, dtype, x):
    if kind in ("Python float", *SMALL):
        return Active(x), None
    shadow = _zeros_like(kind, dtype, x)
    return Duplicated(x, shadow), shadow


def run(entry: str, kind: str, dtype: str, z: np.ndarray, d: np.ndarray):
    """(what the entry point gave, what kind of result it is): "grad" (a gradient, shaped
    like x), "dir" (a directional derivative, g . d), "hvp" (H d), "hess" (H), "err"
    (check_grad's error)."""
    f = function(kind, dtype)
    x, t = make(kind, dtype, z), make(kind, dtype, d)
    if entry == "autodiff Forward":
        return autodiff(Forward, f, Duplicated(x, t)), "dir"
    if entry == "autodiff Reverse":
        ann, shadow = _ann_reverse(kind, dtype, x)
        r = autodiff(Reverse, f, ann)
        return (r[0] if shadow is None else shadow), "grad"
    if entry == "autodiff split":
        ann, shadow = _ann_reverse(kind, dtype, x)
        fwd, rev = autodiff_thunk(ReverseSplitWithPrimal, f, type(ann))
        tape, _, _ = fwd(ann)
        r = rev(ann, 1.0, tape)
        return (r[0] if shadow is None else shadow), "grad"
    if entry == "grad":
        return adjit.grad(f)(x), "grad"
    if entry == "value_and_grad":
        value, g = adjit.value_and_grad(f)(x)
        if not np.isclose(float(value), float(np.sum(np.sin(z) * z)),
                          rtol=1e-5 if dtype == "f32" else 1e-12):
            raise AssertionError(f"value_and_grad's value {value}")
        return g, "grad"
    if entry == "jvp":
        return adjit.jvp(f, (x,), (t,))[1], "dir"
    if entry == "vjp":
        return adjit.vjp(f, x)[1](1.0)[0], "grad"
    if entry == "hvp":
        return adjit.hvp(f, (x,), (t,)), "hvp"
    if entry == "jacfwd":
        return adjit.jacfwd(f)(x), "grad"
    if entry == "jacrev":
        return adjit.jacrev(f)(x), "grad"
    if entry == "hessian":
        return adjit.hessian(f)(x), "hess"
    if entry == "check_grad":
        return adjit.check_grad(f, x), "err"
    if entry == "grad in @jit":
        return function(kind, dtype, "_in_jit")(x), "grad"
    if entry == "jvp in @jit":
        return function(kind, dtype, "_jvp_in_jit")(x, t), "dir"
    if entry == "hvp in @jit":
        return function(kind, dtype, "_hvp_in_jit")(x, t), "hvp"
    raise ValueError(entry)


def _reference(z: np.ndarray):
    import jax
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def f(w):
        return jnp.sum(jnp.sin(w) * w)

    return np.asarray(jax.grad(f)(z)), np.asarray(jax.hessian(f)(z))


# Messages that name a problem the user does not have: the refusal is a defect even though
# its words are plain (each is an item of issue 29).
MISLEADING = (
    # a transform makes its shadows itself: the user passed none
    (re.compile(r"the shadow must be an array of the same type"),
     lambda entry, kind: not entry.startswith("autodiff")),
    # a struct is not a scalar
    (re.compile(r"must be a real scalar, as primal"), lambda entry, kind: kind == "struct"),
)


def is_clear(e: BaseException, entry: str, kind: str, fname: str) -> bool:
    """A clear refusal: no internal symbol (diff_oracle.INTERNAL) and no misleading claim
    (MISLEADING); an adjit CompilationError (not an internal one) at a line of the
    function's file, or a TypeError/ValueError/NotImplementedError that adjit raised itself
    (its last frame in adjit/) naming adjit or the function."""
    message = str(e)
    if isinstance(e, adjit.InternalCompilerError) or INTERNAL.search(message):
        return False
    if any(p.search(message) and applies(entry, kind) for p, applies in MISLEADING):
        return False
    if isinstance(e, adjit.CompilationError):
        return "composition_functions.py:" in message
    if not isinstance(e, (TypeError, ValueError, NotImplementedError)):
        return False
    frames = traceback.extract_tb(e.__traceback__)
    raised_by_adjit = bool(frames) and f"{os.sep}adjit{os.sep}" in frames[-1].filename
    names = "adjit" in message or re.search(rf"\b{fname}\b(?!\.)", message)
    return raised_by_adjit and bool(names)


_CACHE: dict = {}


def cell(entry: str, kind: str, dtype: str) -> tuple[str, str]:
    """(verdict, detail) of one cell; computed once per process."""
    key = (entry, kind, dtype)
    if key not in _CACHE:
        _CACHE[key] = _cell(entry, kind, dtype)
    return _CACHE[key]


def _cell(entry: str, kind: str, dtype: str) -> tuple[str, str]:
    if kind == "Python float" and dtype == "f32":
        return "n/a", "a Python float is a float64"
    rng = np.random.default_rng(zlib.crc32(f"{entry}/{kind}".encode()))
    n = COMPONENTS[kind]
    z = rng.uniform(-1.0, 1.0, n).astype(_np(dtype)).astype(np.float64)
    d = rng.uniform(-1.0, 1.0, n).astype(_np(dtype)).astype(np.float64)
    try:
        got, what = run(entry, kind, dtype, z, d)
    except Exception as e:      # noqa: BLE001 (every error is judged: clear or a defect)
        message = f"{type(e).__name__}: {e}".splitlines()[0]
        clear = is_clear(e, entry, kind, function(kind, dtype).__name__)
        return ("refused" if clear else "DEFECT"), message
    g, h = _reference(z)
    rtol = 1e-4 if dtype == "f32" else 1e-10
    if what == "err":
        ok = float(got) < (1e-2 if dtype == "f32" else 1e-5)
        return ("works", "") if ok else ("DEFECT", f"check_grad reports error {got:.3g}")
    try:
        if what == "dir":
            value, ref = np.array([float(np.asarray(got))]), np.array([g @ d])
        elif what == "hess":
            value, ref = components(got, kind), h.ravel()
        else:
            value, ref = components(got, kind), (h @ d if what == "hvp" else g)
    except Exception as e:      # noqa: BLE001 (a result of the wrong kind)
        return "DEFECT", f"result {type(got).__name__}: {e}"
    if value.shape != ref.shape or not np.allclose(value, ref, rtol=rtol, atol=rtol):
        return "DEFECT", f"wrong value: {value} vs JAX's {ref}"
    if isinstance(got, np.ndarray) and got.dtype.itemsize != np.dtype(_np(dtype)).itemsize:
        return "DEFECT", f"a {got.dtype} derivative of a {dtype} argument"
    return "works", ""


def table() -> str:
    """docs/composition.md: the matrix, one table per dtype, and the refusals' messages."""
    lines = ["# The composition matrix", "",
             "Every derivative entry point against every kind of argument, float32 and "
             "float64: `works` (checked against JAX's float64 derivative), `refused` (a "
             "clear error naming the problem, no internal symbol; the messages are "
             "listed below the tables), `DEFECT` (a wrong value or an unclear error: an "
             "open bug), `n/a`.", "",
             "Generated by `python -m tests.differential.composition_table`; "
             "`tests/differential/test_composition_matrix.py` walks the cells and checks "
             "that this file is current.", ""]
    notes: dict[str, list[str]] = {}
    for dtype in DTYPES:
        lines += [f"## {dtype}", "", "| entry point | " + " | ".join(KINDS) + " |",
                  "|---|" + "---|" * len(KINDS)]
        for entry in ENTRY_POINTS:
            row = []
            for kind in KINDS:
                verdict, detail = cell(entry, kind, dtype)
                if verdict in ("refused", "DEFECT"):
                    if detail.startswith("wrong value"):
                        detail = "wrong value (against JAX's)"
                    detail = re.sub(r"(?<![\w.])/\S*/", "", detail)    # no machine's paths
                    detail = re.sub(r"0x[0-9a-f]+", "0x…", detail)
                    number = notes.setdefault(detail, [])
                    number.append(f"{entry} / {kind} / {dtype}")
                    row.append(f"{verdict} [{list(notes).index(detail) + 1}]")
                else:
                    row.append(verdict)
            lines.append(f"| {entry} | " + " | ".join(row) + " |")
        lines.append("")
    lines += ["## Messages", ""]
    for k, (detail, cells) in enumerate(notes.items(), 1):
        lines.append(f"{k}. `{detail.replace('`', chr(39))[:300]}`")
    lines.append("")
    return "\n".join(lines)
