"""runtime/vector_math.py: each math call that libmvec has a variant of is offered to LLVM's
loop vectoriser with those variants (its table has only some functions, and only their SSE and
AVX2 variants); on an AVX-512 machine a vectorised loop of exp and log then calls the 16-lane
variants. (tests/runtime/test_vectorised_builtins.py: every builtin, as the runtime builds it.)"""
import subprocess
from pathlib import Path

import llvm
import pytest

from adjit.runtime import cpu_cache
from adjit.runtime.vector_math import add_vector_variants, vector_symbols

OPT = Path(list(llvm.__path__)[0]) / "bin" / "opt"
ALL = {"_ZGVeN16v_expf", "_ZGVeN16v_logf", "_ZGVeN8v_exp", "_ZGVeN16vv_powf",
       "_ZGVeN16v_tanhf"}

LOOP = """
define void @f(ptr noalias %x, ptr noalias %y, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  %p = getelementptr float, ptr %x, i64 %i
  %v = load float, ptr %p
  %e = call float @llvm.exp.f32(float %v)
  %one = fadd float %e, 1.0
  %l = tail call fast float @llvm.log.f32(float %one)
  %t = call float @tanhf(float %l) #0
  %w = call float @llvm.pow.f32(float %t, float %v)
  %d = fpext float %w to double
  %ed = call double @llvm.exp.f64(double %d)
  %r = fptrunc double %ed to float
  %q = getelementptr float, ptr %y, i64 %i
  store float %r, ptr %q
  %i1 = add i64 %i, 1
  %c = icmp slt i64 %i1, %n
  br i1 %c, label %loop, label %exit
exit:
  ret void
}
declare float @llvm.exp.f32(float)
declare float @llvm.log.f32(float)
declare float @llvm.pow.f32(float, float)
declare double @llvm.exp.f64(double)
declare float @tanhf(float)
attributes #0 = { nounwind memory(none) }
"""


def test_calls_get_their_variant_and_the_declarations_stay_alive():
    out = add_vector_variants(LOOP, ALL)
    assert '"_ZGVeN16v_llvm.exp.f32(_ZGVeN16v_expf)"' in out
    assert '"_ZGVeN16v_llvm.log.f32(_ZGVeN16v_logf)"' in out
    assert '"_ZGVeN16v_tanhf(_ZGVeN16v_tanhf)"' in out          # a libm call by its name
    assert '"_ZGVeN16vv_llvm.pow.f32(_ZGVeN16vv_powf)"' in out   # two arguments
    assert '"_ZGVeN8v_llvm.exp.f64(_ZGVeN8v_exp)"' in out        # doubles: 8 lanes
    assert "declare <16 x float> @_ZGVeN16vv_powf(<16 x float>, <16 x float>)" in out
    assert "@llvm.compiler.used" in out
    # A call that has attributes already keeps them beside the new group; LLVM parses it.
    assert "call float @tanhf(float %l) #9" in out and out.count(" #0") >= 1
    subprocess.run([str(OPT), "-", "-o", "/dev/null"], input=out, text=True, check=True)


def test_every_width_is_offered_in_one_attribute():
    out = add_vector_variants(LOOP, {"_ZGVbN4v_tanhf", "_ZGVdN8v_tanhf", "_ZGVeN16v_tanhf"})
    assert ('"vector-function-abi-variant"="_ZGVbN4v_tanhf(_ZGVbN4v_tanhf),'
            '_ZGVdN8v_tanhf(_ZGVdN8v_tanhf),_ZGVeN16v_tanhf(_ZGVeN16v_tanhf)"') in out
    subprocess.run([str(OPT), "-", "-o", "/dev/null"], input=out, text=True, check=True)


def test_variants_libmvec_lacks_are_not_offered():
    out = add_vector_variants(LOOP, {"_ZGVeN16v_expf"})
    assert "_ZGVeN16v_logf" not in out and "_ZGVeN16v_expf" in out
    assert add_vector_variants(LOOP, set()) == LOOP


SOFTPLUS = """
define void @f(ptr noalias %x, ptr noalias %y, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  %p = getelementptr float, ptr %x, i64 %i
  %v = load float, ptr %p
  %e = call float @llvm.exp.f32(float %v)
  %one = fadd float %e, 1.0
  %l = call float @llvm.log.f32(float %one)
  %q = getelementptr float, ptr %y, i64 %i
  store float %l, ptr %q
  %i1 = add i64 %i, 1
  %c = icmp slt i64 %i1, %n
  br i1 %c, label %loop, label %exit
exit:
  ret void
}
declare float @llvm.exp.f32(float)
declare float @llvm.log.f32(float)
"""


def test_the_vectoriser_calls_the_16_lane_variants():
    # log(1 + exp(x)) of floats: the table's AVX2 variants ran 8 lanes a call. (Intel cores:
    # test_vectorised_builtins.py.)
    out = add_vector_variants(SOFTPLUS, ALL)
    done = subprocess.run([str(OPT), "-O3", "-mtriple=x86_64-unknown-linux-gnu",
                           "-mcpu=znver4", "-vector-library=LIBMVEC", "-", "-S",
                           "-o", "-"], input=out, text=True, capture_output=True, check=True)
    assert "call <16 x float> @_ZGVeN16v_expf" in done.stdout
    assert "call <16 x float> @_ZGVeN16v_logf" in done.stdout


def test_this_machines_libmvec():
    import ctypes.util
    path = ctypes.util.find_library("mvec")
    if path is None:
        pytest.skip("no libmvec here")
    found = vector_symbols(path, "+avx2,+avx512f")
    assert {"_ZGVeN16v_expf", "_ZGVeN16v_logf", "_ZGVeN8v_exp", "_ZGVdN8v_expf",
            "_ZGVbN2v_exp"} <= found
    # Only what the CPU runs: no AVX-512 variants without avx512f, SSE's everywhere
    assert not any(s.startswith(("_ZGVe", "_ZGVd")) for s in vector_symbols(path, ""))
    assert cpu_cache.vector_math()[0] == ("-vector-library=LIBMVEC",)
