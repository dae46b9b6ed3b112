"""What `print(...)` and `adjit.debug.print_adjoint(x)` compile to (lang/debug.py documents
both for users).

A print is one `adj.print` op: a printf format and the 64-bit words it reads (the dialect
says how), lowered to printf on the CPU and vprintf on a GPU (passes/lower_print.py). What is
known while compiling (string constants, Python numbers, `sep=` and `end=`) is formatted here
by Python itself, `%` escaped; a scalar of the code becomes a conversion: an integer `%lld`,
a float `%.16g` (f32 `%.8g`) with Python's `.0` after a whole number (NumPy's `.` in an
array), a bool the string True or False. An f-string's
replacement fields map their format spec to printf's (`{x:.3f}` is `%.3f`, `{i:5d}`
`%5lld`, `{x:e}` `%e`); a spec printf cannot say is refused. Vectors and matrices print as
NumPy prints the array they are from Python (`[1 2 3]`, `[[1 0]\\n [0 1]]`), their components
as scalars; a 1-D array is a loop of prints, its elements as scalars, summarised as NumPy
does above 1000 elements (`[0 1 2 ... 997 998 999]`). Everything but arrays is one op, so a
work item's line is never split by another's.
"""
from __future__ import annotations

import ast
import re

from mlir import ir
from mlir.dialects import arith, math, scf

from ..core.errors import UserError
from ..core.types import f64, i64
from ..dialects import adj
from ..lang.debug import adjoint_printer, print_adjoint
from . import arrays as A
from . import callables
from . import scalar_ops as S
from .values import Array, ArrayExpr, Field, FString, Literal, PyObj, Scalar, Vec

# NumPy's threshold: an array of more elements prints its first and last 3 (np.set_printoptions)
SUMMARY_THRESHOLD = 1000
_EDGE = 3


def fstring(gen, node: ast.JoinedStr, stmt: ast.stmt | None) -> FString:
    """The f-string `node`, an argument of the call that is statement `stmt` (print's), its
    fields' values compiled; its specs must be constants."""
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if not (isinstance(call, ast.Call) and any(a is node for a in call.args)):
        raise gen.error(node, "an f-string (JoinedStr) is supported in compiled code only as "
                        "an argument of print(): compiled code has no strings")
    parts: list = []
    for part in node.values:
        if isinstance(part, ast.Constant):
            parts.append(part.value)
            continue
        spec = ""
        if part.format_spec is not None:
            pieces = part.format_spec.values
            if not all(isinstance(p, ast.Constant) for p in pieces):
                raise gen.error(part, "a format spec in compiled code must be a constant "
                                "(no {...} inside it)")
            spec = "".join(p.value for p in pieces)
        parts.append(Field(gen.visit(part.value), spec, part.conversion))
    return FString(parts)


# [[fill]align][sign][z][#][0][width][grouping][.precision][type], Python's format spec
_SPEC = re.compile(r"(?:(?P<fill>.)?(?P<align>[<>=^]))?(?P<sign>[-+ ])?(?P<z>z)?(?P<alt>#)?"
                   r"(?P<zero>0)?(?P<width>\d+)?(?P<group>[,_])?(?:\.(?P<prec>\d+))?"
                   r"(?P<type>.)?", re.S)
_INT_TYPES = {"d": "lld", "x": "llx", "X": "llX", "o": "llo"}
_FLOAT_TYPES = "eEfFgG"


def _conversion(spec: str, value_kind: str) -> tuple[str, str]:
    """The printf conversion for Python format spec `spec` of a value of `value_kind` ("int"
    or "float"), and the kind of word it reads ("i" or "f")."""
    m = _SPEC.fullmatch(spec)
    if m is None:
        raise UserError(f"invalid format spec {spec!r}")
    g = m.groupdict()
    for key, what in (("z", "'z'"), ("group", "a thousands separator")):
        if g[key]:
            raise UserError(f"format spec {spec!r}: {what} has no printf equivalent, so "
                            "compiled code cannot print it")
    if g["align"] in ("^", "=") or (g["fill"] not in (None, " ", "0")):
        raise UserError(f"format spec {spec!r}: printf pads with spaces or zeros, aligned "
                        "left or right only ('<' or '>')")
    flags = ("-" if g["align"] == "<" else "") + (g["sign"] if g["sign"] in ("+", " ") else "")
    flags += ("#" if g["alt"] else "") + ("0" if g["zero"] or g["fill"] == "0" else "")
    width = g["width"] or ""
    prec = f".{g['prec']}" if g["prec"] is not None else ""
    kind = g["type"]
    if kind is None:
        kind = "d" if value_kind == "int" else "g"
    if kind in _FLOAT_TYPES:
        return f"%{flags}{width}{prec}{kind}", "f"
    if kind in _INT_TYPES and value_kind == "int":
        if prec:
            raise UserError(f"format spec {spec!r}: precision not allowed in integer format "
                            "specifier")
        return f"%{flags}{width}{_INT_TYPES[kind]}", "i"
    raise UserError(f"format spec {spec!r}: format code {kind!r} "
                    f"{'is not supported for' if kind not in _INT_TYPES else 'does not apply to'}"
                    f" a {value_kind} in compiled code (supported: d x X o for integers, "
                    f"e E f F g G for numbers)")


class _Printer:
    """One print call's pieces, gathered into adj.print ops."""

    def __init__(self):
        self.format: list[str] = []
        self.words: list[ir.Value] = []
        self.kinds: list[str] = []

    def text(self, s: str) -> None:
        self.format.append(s.replace("%", "%%"))

    def emit(self) -> None:
        if self.format:
            adj.print_(self.words, "".join(self.format), "".join(self.kinds))
        self.format, self.words, self.kinds = [], [], []

    def scalar(self, s: Scalar, spec: str, element: bool = False) -> None:
        t = s.type
        if t.is_bool and not spec:
            self.format.append("%s")
            self.words.append(S.cast(s, i64).value)
            self.kinds.append("b")
            return
        if t.is_float and not spec:
            self._float(S.cast(s, f64).value, 8 if t.name == "f32" else 16, element)
            return
        conv, word = _conversion(spec, "float" if t.is_float else "int")
        if word == "f":
            bits = arith.bitcast(ir.IntegerType.get_signless(64), S.cast(s, f64).value)
        else:
            bits = S.cast(s, i64).value
        self.format.append(conv)
        self.words.append(bits)
        self.kinds.append(word)

    def _float(self, x: ir.Value, digits: int, element: bool) -> None:
        """A float as Python prints it (an array's element as NumPy does): `digits`
        significant digits (16 for f64 and 8 for f32 show the shortest repr of most values;
        C has no shortest round-trip conversion), and a whole number under 10**digits, which
        %g prints without a point, gets Python's `.0` (NumPy's `.` in an array)."""
        f64_t, i64_t = ir.F64Type.get(), ir.IntegerType.get_signless(64)
        bound = arith.constant(f64_t, 10.0 ** digits)
        inside = arith.cmpf(arith.CmpFPredicate.OLT, math.absf(x), bound)   # (false for NaN)
        # fptosi of a NaN or of a value past i64 is poison: convert only a value inside
        safe = arith.select(inside, x, arith.constant(f64_t, 0.0))
        whole = arith.cmpf(arith.CmpFPredicate.OEQ, arith.sitofp(f64_t, arith.fptosi(
            i64_t, safe)), x)
        flag = arith.extui(i64_t, arith.andi(inside, whole))
        self.format.append(f"%.{digits}g%s")
        self.words += [arith.bitcast(i64_t, x), flag]
        self.kinds += "f" + ("p" if element else "w")

    def value(self, v, spec: str = "", conversion: int = -1) -> None:
        if isinstance(v, FString):
            raise UserError("an f-string inside an f-string's field is not supported in "
                            "compiled code")
        if isinstance(v, Literal) or (isinstance(v, PyObj) and (
                v.obj is None or isinstance(v.obj, (str, int, float, bool)))):
            obj = v.value if isinstance(v, Literal) else v.obj
            if conversion != -1:
                obj = {ord("s"): str, ord("r"): repr, ord("a"): ascii}[conversion](obj)
            try:
                self.text(format(obj, spec))
            except ValueError as e:
                raise UserError(f"format spec {spec!r}: {e}") from None
            return
        if isinstance(v, Scalar):
            self.scalar(v, spec)
        elif isinstance(v, Vec):
            self._nested(list(v.items), v.type.shape, spec)
        elif isinstance(v, tuple):
            self.text("(")
            for k, item in enumerate(v):
                self.text(", " if k else "")
                self.value(item, spec)
            self.text(",)" if len(v) == 1 else ")")
        elif isinstance(v, (Array, ArrayExpr)):
            self._array(v, spec)
        else:
            raise UserError(f"print() in compiled code cannot print {S.describe(v)} (it "
                            "prints strings, numbers, bools, vectors, matrices and 1-D "
                            "arrays)")

    def _nested(self, items: list, shape: tuple, spec: str, depth: int = 0) -> None:
        """`items` in row-major order as NumPy prints an array of `shape`."""
        self.text("[")
        if len(shape) == 1:
            for k, item in enumerate(items):
                self.text(" " if k else "")
                self.scalar(item, spec, element=True)
        else:
            row = len(items) // shape[0]
            for k in range(shape[0]):
                self.text("\n" + " " * (depth + 1) if k else "")
                self._nested(items[k * row:(k + 1) * row], shape[1:], spec, depth + 1)
        self.text("]")

    def _array(self, a, spec: str) -> None:
        """A 1-D array: a loop of prints (0-d: its element)."""
        ndim = a.type.ndim
        if ndim == 0:
            self.scalar(A.load(a, [], False) if isinstance(a, Array) else a.at([]), spec)
            return
        if ndim != 1:
            raise UserError(f"print() in compiled code prints 1-D arrays, not "
                            f"{S.describe(a)}: print its rows (a[i]) or elements")
        element = ((lambda i: A.load(a, [i], False)) if isinstance(a, Array)
                   else (a.at and (lambda i: a.at([i]))) or a.element)
        n = A.dims(a)[0] if isinstance(a, Array) else a.shape[0]
        self.text("[")
        self.emit()
        idx = ir.IndexType.get()

        def c(k: int) -> ir.Value:
            return arith.constant(idx, k)

        summarise = arith.cmpi(arith.CmpIPredicate.ugt, n, c(SUMMARY_THRESHOLD))
        count = arith.select(summarise, c(2 * _EDGE), n)
        loop = scf.ForOp(c(0), count, c(1))
        with ir.InsertionPoint(loop.body):
            j = loop.induction_variable
            tail = arith.andi(summarise, arith.cmpi(arith.CmpIPredicate.uge, j, c(_EDGE)))
            i = arith.select(tail, arith.addi(j, arith.subi(n, c(2 * _EDGE))), j)
            gap = scf.IfOp(arith.andi(summarise, arith.cmpi(arith.CmpIPredicate.eq, j,
                                                            c(_EDGE))))
            with ir.InsertionPoint(gap.then_block):
                adj.print_([], " ...", "")
                scf.YieldOp([])
            x = element(i)
            first = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, j, c(0)), has_else=True)
            for block, lead in ((first.then_block, ""), (first.else_block, " ")):
                with ir.InsertionPoint(block):
                    self.text(lead)
                    self.scalar(x, spec, element=True)
                    self.emit()
                    scf.YieldOp([])
            scf.YieldOp([])
        self.text("]")


def _constant_text(v, what: str) -> str | None:
    if isinstance(v, PyObj) and v.obj is None:
        return None
    if isinstance(v, PyObj) and isinstance(v.obj, str):
        return v.obj
    raise UserError(f"print(): {what} must be a string constant (or None), got {S.describe(v)}")


def _print(gen, args: list, kwargs: dict) -> PyObj:
    unknown = set(kwargs) - {"sep", "end", "flush"}
    if "file" in unknown:
        raise UserError("print(file=...) is not supported in compiled code: it prints to "
                        "the standard output only")
    if unknown:
        raise UserError(f"print() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    flush = kwargs.get("flush")
    if flush is not None and not (isinstance(flush, Literal) and isinstance(flush.value, bool)
                                  or isinstance(flush, PyObj) and flush.obj is None):
        raise UserError("print(): flush= must be a constant True or False (compiled code "
                        "flushes after every print anyway)")
    sep = _constant_text(kwargs.get("sep", PyObj(None)), "sep")
    end = _constant_text(kwargs.get("end", PyObj(None)), "end")
    out = _Printer()
    for k, a in enumerate(args):
        if k:
            out.text(" " if sep is None else sep)
        if isinstance(a, FString):
            for part in a.parts:
                if isinstance(part, Field):
                    out.value(part.value, part.spec, part.conversion)
                else:
                    out.text(part)
        else:
            out.value(a)
    out.text("\n" if end is None else end)
    out.emit()
    return PyObj(None)


def _print_adjoint(gen, args: list, kwargs: dict):
    unknown = set(kwargs) - {"label"}
    if unknown or len(args) != 1:
        raise UserError("print_adjoint(x, label=...) takes one value and a label")
    label = _constant_text(kwargs.get("label", PyObj(None)), "label") or ""
    x = args[0]
    if not isinstance(x, (Scalar, Literal)):
        raise UserError(f"print_adjoint takes a scalar, not {S.describe(x)} (print an "
                        "array's elements' adjoints one by one: print_adjoint(x[i]))")
    x = S.as_scalar(x)
    if not x.type.is_float:
        raise UserError(f"print_adjoint takes a float scalar (an integer has no adjoint), "
                        f"got {S.describe(x)}")
    return callables.call(gen, adjoint_printer(label), [x], {})


callables.register(print, _print, callables.How.VALUES)
callables.register(print_adjoint, _print_adjoint, callables.How.VALUES)
