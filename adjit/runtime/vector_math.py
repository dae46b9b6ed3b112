"""Vector math for LLVM's loop vectoriser: glibc's libmvec variants of every math function
libmvec has (tanh, sinh, erf, cbrt, atan2, ... as well as exp, log, sin), offered at each call.

`opt -vector-library=LIBMVEC` maps only some math calls to libmvec, and only its SSE and AVX2
variants: LLVM 22's table has sin, cos, tan, exp, log, pow (and no _ZGVe entries). Every other
call (llvm.tanh, llvm.sinh, llvm.asin, llvm.atan2, llvm.exp2, llvm.log10, erff, cbrtf...) was
vectorised into an intrinsic of a vector that the backend then split into one libm call a
lane: np.tanh of a 1024x256 float32 array ran 55x NumPy. `add_vector_variants` gives every call
of a function libmvec has the `vector-function-abi-variant` attribute naming its variants for
this CPU (`_ZGVdN8v_llvm.tanh.f32(_ZGVdN8v_tanhf),_ZGVeN16v_llvm.tanh.f32(_ZGVeN16v_tanhf)`:
SSE `b`, AVX2 `d`, AVX-512 `e`), declares them and keeps the declarations alive
(`llvm.compiler.used`: an unused declaration is dropped before the vectoriser runs, and the
attribute is then ignored). The vectoriser picks by cost among these and the table's; where
a 16-lane variant is offered, every function asks for 512-bit vectors (`prefer_512_bit_vectors`:
Intel cores would stay at the AVX2 variants, 1.2-2x slower). The scalar remainder keeps the
scalar call. libmvec's accuracy is the same for every width (4 ulp at
most: docs/accuracy.md measures each builtin). glibc before 2.35 has only exp, log, sin, cos
and pow: the others are not offered there (`vector_symbols` lists what the library exports).
log1p and expm1 do not get here: passes/cpu_math.py expands them in arith first.
"""
from __future__ import annotations

import re

from ..core.types import f32, f64

# Functions libmvec has (glibc 2.22+ for exp, log, sin, cos, pow; 2.35 for the rest): LLVM
# intrinsic or libm name -> the libmvec base name; unary, then binary.
_UNARY = ("exp", "log", "sin", "cos", "tan", "exp2", "exp10", "log2", "log10", "log1p",
          "expm1", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh",
          "cbrt", "erf", "erfc")
_BINARY = ("pow", "atan2", "hypot")
# The vector ISAs of the x86-64 vector function ABI: (mangling letter, float lanes, double
# lanes, the CPU feature its code needs; SSE is in every x86-64).
ISAS = (("b", 4, 2, None), ("d", 8, 4, "+avx2"), ("e", 16, 8, "+avx512f"))
# The float types by their LLVM names, with libm's suffix of their functions (expf, exp).
_TYPES = {t.llvm_name: (t, "f" if t == f32 else "") for t in (f32, f64)}
_CALL = re.compile(r"call (?:[a-z]+ )*(float|double) @(?:llvm\.([a-z0-9]+)\.(f32|f64)|"
                   r"([a-z0-9]+))\(([^)]*)\)")


def _lanes(isa: tuple, double: int) -> int:
    return isa[2] if double else isa[1]


def add_vector_variants(llvm_ir: str, available: set[str]) -> str:
    """`llvm_ir` with each vectorisable math call offered to the vectoriser with the libmvec
    variants of it in `available` (the module docstring): the symbols this CPU can run."""
    if "@llvm.compiler.used" in llvm_ir:
        return llvm_ir         # a module that keeps symbols itself: left as it is
    groups: dict[str, int] = {}
    declared: dict[str, str] = {}

    def offer(m: re.Match) -> str:
        t, intrinsic, suffix, libm = m.group(1), m.group(2), m.group(3), m.group(4)
        scalar_type, libm_suffix = _TYPES[t]
        llvm_t, double = scalar_type.name, scalar_type == f64   # (llvm.exp.f32: the name)
        base = intrinsic if intrinsic is not None else libm
        if intrinsic is None:     # a libm call: expf, or exp of doubles
            if libm_suffix and base.endswith(libm_suffix):
                base = base[:-len(libm_suffix)]
            elif libm_suffix:
                return m.group(0)
        elif suffix != llvm_t:
            return m.group(0)
        arity = 1 if base in _UNARY else 2 if base in _BINARY else 0
        n_args = len([a for a in m.group(5).split(",") if a.strip()])
        if arity == 0 or n_args != arity:
            return m.group(0)
        scalar = f"llvm.{base}.{llvm_t}" if intrinsic is not None else libm
        variants = []
        for isa in ISAS:
            lanes = _lanes(isa, double)
            prefix = f"_ZGV{isa[0]}N{lanes}{'v' * arity}_"
            variant = f"{prefix}{base}{libm_suffix}"
            if variant not in available:
                continue
            vec = f"<{lanes} x {t}>"
            declared[variant] = f"declare {vec} @{variant}({', '.join([vec] * arity)})"
            variants.append(f"{prefix}{scalar}({variant})")
        if not variants:
            return m.group(0)
        attr = f'"vector-function-abi-variant"="{",".join(variants)}"'
        group = groups.setdefault(attr, 9000 + len(groups))
        return f"{m.group(0)} #{group}"

    out = _CALL.sub(offer, llvm_ir)
    if not groups:
        return llvm_ir
    if any(v.startswith("_ZGVe") for v in declared):
        out = prefer_512_bit_vectors(out)
    tail = ["", *declared.values()]
    tail += [f"attributes #{k} = {{ {attr} }}" for attr, k in groups.items()]
    used = ", ".join(f"ptr @{v}" for v in declared)
    tail.append(f'@llvm.compiler.used = appending global [{len(declared)} x ptr] [{used}], '
                f'section "llvm.metadata"')
    return out + "\n".join(tail) + "\n"


# A definition whose function attributes end its header (what MLIR emits); one with a
# section, personality, !dbg... after them is left as it is (its loops keep 256 bits).
_DEFINE = re.compile(r"^(define [^\n]*\)(?: (?:local_)?unnamed_addr)?(?: #\d+)*) \{$",
                     re.MULTILINE)


def prefer_512_bit_vectors(llvm_ir: str) -> str:
    """`llvm_ir` with every function asking for 512-bit vectors: Intel's AVX-512 cores prefer
    256 bits (LLVM's `prefer-256-bit` tuning), which left a loop of math calls at the 8-lane
    AVX2 variants where the 16-lane ones take half the time (one core, 262144 floats:
    tanhf 0.176 -> 0.086 ms, expf 0.097 -> 0.069, f64 tanh 0.584 -> 0.379). Every function
    of the module: the launch loops are inlined into their thunks, and the vectoriser works
    with the attributes of the function it finds the loop in."""
    return _DEFINE.sub(r'\1 "prefer-vector-width"="512" {', llvm_ir)


def vector_symbols(library_path: str | None, features: str = "") -> set[str]:
    """The variants (`_ZGVb...`, `_ZGVd...`, `_ZGVe...`) that the libmvec at `library_path`
    exports and a CPU with `features` (LLVM's "+avx2,+avx512f,..." list) can run."""
    if library_path is None:
        return set()
    import ctypes
    try:
        lib = ctypes.CDLL(library_path)
    except OSError:
        return set()
    have = set(features.split(","))
    names = set()
    for isa in ISAS:
        if isa[3] is not None and isa[3] not in have:
            continue
        for base in _UNARY + _BINARY:
            arity = 1 if base in _UNARY else 2
            for double, suffix in ((0, "f"), (1, "")):
                name = f"_ZGV{isa[0]}N{_lanes(isa, double)}{'v' * arity}_{base}{suffix}"
                if hasattr(lib, name):
                    names.add(name)
    return names
