"""AVX-512 vector math for LLVM's loop vectoriser: glibc's libmvec 16-lane float (8-lane double)
variants of exp, log, sin, ... offered at each call, which LLVM's own LIBMVEC table lacks.

`opt -vector-library=LIBMVEC` maps math calls to libmvec's SSE and AVX2 variants only
(_ZGVbN4v_expf, _ZGVdN8v_expf: LLVM 22's table has no _ZGVe entries), so on an AVX-512
machine a vectorised `log(1 + exp(x))` ran 8 lanes a call while the loop around it ran 16.
`add_avx512_variants` gives every call of a function libmvec has an AVX-512 variant of the
`vector-function-abi-variant` attribute naming it (`_ZGVeN16v_llvm.exp.f32(_ZGVeN16v_expf)`),
declares the variant and keeps the declaration alive (`llvm.compiler.used`: an unused
declaration is dropped before the vectoriser runs, and the attribute is then ignored). The
vectoriser picks by cost between these and the table's; the scalar remainder keeps the
scalar call. libmvec's accuracy is the same for every width (4 ulp at most).
"""
from __future__ import annotations

import re

# Functions libmvec has AVX-512 variants of (glibc 2.22+ for exp, log, sin, cos, pow; 2.35 for
# the rest): LLVM intrinsic or libm name -> the libmvec base name; unary, then binary.
_UNARY = ("exp", "log", "sin", "cos", "tan", "exp2", "exp10", "log2", "log10", "log1p",
          "expm1", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh",
          "cbrt", "erf", "erfc")
_BINARY = ("pow", "atan2", "hypot")
_TYPES = {"float": ("f32", "f", 16), "double": ("f64", "", 8)}
_CALL = re.compile(r"call (?:[a-z]+ )*(float|double) @(?:llvm\.([a-z0-9]+)\.(f32|f64)|"
                   r"([a-z0-9]+))\(([^)]*)\)")


def add_avx512_variants(llvm_ir: str, available: set[str]) -> str:
    """`llvm_ir` with the AVX-512 variant of each vectorisable math call offered to the
    vectoriser (the module docstring); `available`: the libmvec symbols there are."""
    if "@llvm.compiler.used" in llvm_ir:
        return llvm_ir         # a module that keeps symbols itself: left as it is
    groups: dict[str, int] = {}
    declared: dict[str, str] = {}

    def offer(m: re.Match) -> str:
        t, intrinsic, suffix, libm = m.group(1), m.group(2), m.group(3), m.group(4)
        llvm_t, libm_suffix, lanes = _TYPES[t]
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
        variant = f"_ZGVeN{lanes}{'v' * arity}_{base}{libm_suffix}"
        if variant not in available:
            return m.group(0)
        scalar = f"llvm.{base}.{llvm_t}" if intrinsic is not None else libm
        vec = f"<{lanes} x {t}>"
        declared[variant] = f"declare {vec} @{variant}({', '.join([vec] * arity)})"
        attr = f'"vector-function-abi-variant"="_ZGVeN{lanes}{"v" * arity}_{scalar}({variant})"'
        group = groups.setdefault(attr, 9000 + len(groups))
        return f"{m.group(0)} #{group}"

    out = _CALL.sub(offer, llvm_ir)
    if not groups:
        return llvm_ir
    tail = ["", *declared.values()]
    tail += [f"attributes #{k} = {{ {attr} }}" for attr, k in groups.items()]
    used = ", ".join(f"ptr @{v}" for v in declared)
    tail.append(f'@llvm.compiler.used = appending global [{len(declared)} x ptr] [{used}], '
                f'section "llvm.metadata"')
    return out + "\n".join(tail) + "\n"


def avx512_symbols(library_path: str | None) -> set[str]:
    """The AVX-512 variants (`_ZGVe...`) that the libmvec at `library_path` exports."""
    if library_path is None:
        return set()
    import ctypes
    try:
        lib = ctypes.CDLL(library_path)
    except OSError:
        return set()
    names = set()
    for base in _UNARY + _BINARY:
        arity = 1 if base in _UNARY else 2
        for lanes, suffix in ((16, "f"), (8, "")):
            name = f"_ZGVeN{lanes}{'v' * arity}_{base}{suffix}"
            try:
                getattr(lib, name)
                names.add(name)
            except AttributeError:
                pass
    return names
