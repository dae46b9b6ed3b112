"""Differential testing against JAX (issue 29, the instrument, item 1): random NumPy-subset
programs (diff_programs.py) run by @adjit.jit and by jax.jit, values and dtypes compared
(dtypes with NumPy 2's, NEP 50), and their derivatives by grad, value_and_grad, jvp, jvp
with width=2, vjp, hvp, jacfwd, jacrev, hessian and grad inside @jit against JAX's
(diff_oracle.py). adjit runs in a worker process, so a crash is a defect of its program.

CI runs a fixed-seed budget (CI_EXAMPLES programs, derandomized); a long budget on demand:
    ADJIT_DIFFERENTIAL_EXAMPLES=5000 [ADJIT_DIFFERENTIAL_SEED=7] .venv/bin/python -m pytest \
        -q -s tests/differential/test_differential.py
(docs/differential.md). Every program runs to the end of the budget; the test then fails
listing each defect (its source, the check, what differed), and prints the tally.
"""
import collections
import json
import os
import re

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from diff_oracle import CHECKS, Worker, check_program, is_clear_refusal
from diff_programs import programs

CI_EXAMPLES = 20       # ~2 minutes on 2 cores shared; each program runs 4 of its 12 checks
EXAMPLES = int(os.environ.get("ADJIT_DIFFERENTIAL_EXAMPLES", CI_EXAMPLES))
SEED = os.environ.get("ADJIT_DIFFERENTIAL_SEED")


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()


def _budget(test):
    test = settings(max_examples=EXAMPLES, derandomize=SEED is None, deadline=None,
                    database=None, phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=list(HealthCheck))(test)
    return seed(int(SEED))(test) if SEED is not None else test


def test_random_programs_agree_with_jax(worker):
    tally = collections.Counter()
    features = collections.Counter()
    refusals = collections.Counter()      # what adjit refused (clearly), by message
    refused = {}                          # a program of each
    defects, invalid = [], []
    count = [0]

    @_budget
    @given(program=programs(), order=st.permutations(CHECKS[1:]), data_seed=st.integers(0, 2**16))
    def one(program, order, data_seed):
        count[0] += 1
        checks = ("value",) + tuple(order[:3])
        outcomes = check_program(worker, program, data_seed, checks, f"prog_{count[0]}")
        features.update(program.features)
        for o in outcomes:
            tally[o.verdict] += 1
        verdicts = {o.verdict for o in outcomes}
        tally["programs " + ("defect" if "defect" in verdicts else "invalid" if "invalid" in
                             verdicts else "refused" if "refused" in verdicts else "clean")] += 1
        defects.extend((program.source(), o) for o in outcomes if o.verdict == "defect")
        invalid.extend((program.source(), o) for o in outcomes if o.verdict == "invalid")
        for o in outcomes:
            if o.verdict == "refused":
                why = re.sub(r"\S*prog_\d+\.py(:\d+)+:? ?", "", o.detail.split(": ", 1)[-1])
                refusals[why.splitlines()[0]] += 1
                refused.setdefault(why.splitlines()[0], program.source())
        write_report()     # after every program: a long run stopped early keeps its tally

    def write_report():
        report.update({"programs": count[0], "tally": dict(tally), "features": dict(features),
                       "defects": [{"source": s, "check": o.check, "detail": o.detail}
                                   for s, o in defects],
                       "invalid": [{"source": s, "check": o.check, "detail": o.detail}
                                   for s, o in invalid],
                       "refusals": dict(refusals.most_common()),
                       "refused_examples": refused})
        if os.environ.get("ADJIT_DIFFERENTIAL_REPORT"):
            with open(os.environ["ADJIT_DIFFERENTIAL_REPORT"], "w") as fh:
                json.dump(report, fh, indent=1)

    report = {}
    one()
    write_report()
    print(f"\ndifferential: {count[0]} programs, {dict(sorted(tally.items()))}")
    assert count[0] >= min(EXAMPLES, 10)
    # A generator that JAX or NumPy keeps rejecting tests nothing: keep that rare.
    assert tally["invalid"] <= max(1, tally["clean"] // 20), report
    assert not defects, "\n\n".join(f"{src}\n--- {o.check}: {o.detail}" for src, o in defects)


# ---- the instrument's own rules ----------------------------------------------------------------
def _err(kind, message, origin="codegen.py"):
    return {"type": kind, "message": message, "origin": origin, "traceback": ""}


def test_clear_refusal_is_an_adjit_error_at_the_programs_line_without_internal_names():
    path = "/tmp/x/prog_3.py"
    assert is_clear_refusal(_err("CompilationError", "/tmp/x/prog_3.py:9:5: variable 'v3' "
                                 "holds an array before the loop and a value inside it"), path)
    # not at a line of the program, an internal error, an MLIR name, an internal symbol
    assert not is_clear_refusal(_err("CompilationError", "variable 'v3' changes type"), path)
    assert not is_clear_refusal(_err("InternalCompilerError", "prog_3.py:9:5: boom"), path)
    assert not is_clear_refusal(_err("CompilationError", "prog_3.py:9:5: reverse mode of an "
                                     "scf.while is not supported"), path)
    assert not is_clear_refusal(_err("CompilationError", "prog_3.py:9:5: @adj_gemm_f64 has "
                                     "no body"), path)
    # the derivative API's argument errors are clear; a TypeError from anywhere else is not
    assert is_clear_refusal(_err("TypeError", "jvp of f: tangent 0 has dtype float32",
                                 "autodiff.py"), path)
    assert not is_clear_refusal(_err("TypeError", "unsupported operand", "numpy_calls.py"),
                                path)
    assert not is_clear_refusal(_err("IndexError", "index 3 is out of bounds", "autodiff.py"),
                                path)
    # a run-time check in compiled code at the program's line is clear
    assert is_clear_refusal(_err("ValueError", "element-wise operation on arrays of "
                                 "different shapes (at /tmp/x/prog_3.py:10)", "compiled.py"),
                            path)
    assert not is_clear_refusal(_err("ValueError", "element-wise operation on arrays of "
                                     "different shapes", "compiled.py"), path)


def test_a_crash_of_the_worker_is_reported_not_fatal(worker):
    result = worker.call(os._exit, 3)
    assert "crash" in result and "died" in result["crash"]
    assert worker.call(int, "7") == 7          # a fresh worker serves the next program


def test_the_comparison_flags_a_wrong_value_shape_or_dtype():
    from diff_oracle import compare
    from diff_programs import Arg, Program
    import numpy as np
    for dtype, rel in (("float64", 1e-5), ("float32", 1e-2)):
        p = Program([Arg("x0", "array", (3,), dtype)], [], "x0", (3,), set())
        ref = np.array([0.5, -1.0, 2.0], dtype)
        assert compare(p, 0, "grad", (ref.copy(),), (ref,), None).verdict == "clean"
        assert compare(p, 0, "grad", (ref * (1 + rel),), (ref,), None).verdict == "defect"
        assert compare(p, 0, "grad", (ref[:2],), (ref,), None).verdict == "defect"
        assert compare(p, 0, "grad", (ref.astype(np.float16),), (ref,), None).verdict == \
            "defect"
        assert compare(p, 0, "grad", (ref, ref), (ref,), None).verdict == "defect"
