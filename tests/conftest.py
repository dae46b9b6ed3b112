"""Test modules are imported by path (`--import-mode=importlib`, see pyproject.toml) so that
folders may reuse file names; each folder's helper modules (fe_helpers, rt_helpers, ...)
are imported by plain name, so the folders go on sys.path."""
import sys
from pathlib import Path

for folder in sorted(p for p in Path(__file__).parent.iterdir() if p.is_dir()):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
