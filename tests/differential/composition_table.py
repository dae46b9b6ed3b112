"""Writes docs/composition.md, the composition matrix (composition.py):
`python -m tests.differential.composition_table` from the repository root."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from composition import table  # noqa: E402

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "composition.md")

if __name__ == "__main__":
    with open(DOC, "w") as fh:
        fh.write(table())
    print(f"wrote {os.path.normpath(DOC)}")
