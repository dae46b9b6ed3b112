"""The composition matrix (issue 29, the instrument, item 2; composition.py): every
derivative entry point x every argument kind x f32/f64 works (against JAX) or refuses
clearly; docs/composition.md is the table this code generates.

Cells that are open defects (OPEN_DEFECTS, each naming its issue-29 item and owner) are
strict xfails: reported, never green, and a fix turns them into a failure until the entry is
removed here and the table regenerated."""
import os

import pytest

from composition import DTYPES, ENTRY_POINTS, KINDS, cell, table

# (none open: the strided-shadow, 0-d Jacobian and check_grad cells were fixed in issue 29's
# derivative entry points work, tests/api/test_trust_entry_points.py)
OPEN_DEFECTS: dict[tuple[str, str, str], str] = {}

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
