"""The composition matrix (issue 29, the instrument, item 2; composition.py): every
derivative entry point x every argument kind x f32/f64 works (against JAX) or refuses
clearly; docs/composition.md is the table this code generates.

Cells that are open defects (OPEN_DEFECTS, each naming its issue-29 item and owner) are
strict xfails: reported, never green, and a fix turns them into a failure until the entry is
removed here and the table regenerated."""
import os

import pytest

from composition import DTYPES, ENTRY_POINTS, KINDS, cell, table

STRIDED = ("Fortran order", "negative stride x[::-1]")
OPEN_DEFECTS = {
    **{(e, k, d): "a transform makes the shadow of a strided argument contiguous and then "
                  "refuses it: 'the shadow must be an array of the same type, ... strided' "
                  "(issue 29: views/strided, as the size-1 shadow)"
       for e in ("hvp", "jacfwd", "jacrev", "hessian", "grad in @jit") for k in STRIDED
       for d in DTYPES},
    **{(e, "0-d array", d): "issue 29: jacfwd / hessian with respect to a 0-d array, an "
                            "internal error (MLIR parse error)"
       for e in ("jacfwd", "hessian") for d in DTYPES},
    **{("check_grad", k, "f32"): "check_grad takes float32 finite differences with eps=1e-6: "
                                 "it reports 1-9% error for a correct float32 gradient"
       for k in ("0-d array", "view x[1:4]", "Fortran order", "negative stride x[::-1]",
                 "vec3", "mat22")},
    **{("check_grad", k, d): "check_grad fails on the argument inside its finite "
                             "differences (float() of a struct, of a tensor, of a JAX "
                             "array): an unclear TypeError/ValueError"
       for k in ("struct", "torch tensor", "JAX array") for d in DTYPES},
}

CELLS = [pytest.param(e, k, d, id=f"{d}-{e}-{k}",
                      marks=([pytest.mark.xfail(strict=True, reason=OPEN_DEFECTS[(e, k, d)])]
                             if (e, k, d) in OPEN_DEFECTS else []))
         for d in DTYPES for e in ENTRY_POINTS for k in KINDS]


@pytest.mark.parametrize("entry, kind, dtype", CELLS)
def test_cell_works_or_refuses_clearly(entry, kind, dtype):
    verdict, detail = cell(entry, kind, dtype)
    assert verdict in ("works", "refused", "n/a"), f"{entry} of a {kind} ({dtype}): {detail}"


def test_docs_composition_table_is_current():
    path = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "composition.md")
    with open(path) as fh:
        committed = fh.read()
    assert committed == table(), ("docs/composition.md is out of date: run "
                                  "`python -m tests.differential.composition_table`")
