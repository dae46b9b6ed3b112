"""Suite-wide setup.

Test modules are imported by path (`--import-mode=importlib`, see pyproject.toml) so that
folders may reuse file names; each folder's helper modules (fe_helpers, rt_helpers, ...)
are imported by plain name, so the folders go on sys.path.

Compiled code is cached on disk. Unless the caller chose a folder (scripts/gpu_check.sh hands
kernels to the GPU machine through one), the suite uses a fresh one, never ~/.cache/adjit,
and the disk caches off (ADJIT_DISK_CACHE=0, CPU and GPU): building CPU entries in the
background would slow the suite for nothing. The tests of the caches turn them on
(test_rt_disk_cache.py in the processes it starts, test_cuda_launch.py, test_kernel_cache.py);
compile_only() and processes without MLIR use the GPU folder either way.
"""
import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

if "ADJIT_CACHE_DIR" not in os.environ:
    os.environ["ADJIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="adjit-tests-")
    atexit.register(shutil.rmtree, os.environ["ADJIT_CACHE_DIR"], ignore_errors=True)
os.environ.setdefault("ADJIT_DISK_CACHE", "0")

for folder in sorted(p for p in Path(__file__).parent.iterdir() if p.is_dir()):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


def pytest_collection_modifyitems(config, items):
    """In a parallel run (pytest-xdist's workers, `-n 2`), tests marked `exclusive` are
    deselected: they watch the thread pool hand work to idle cores, and the other worker
    keeps a core busy, so the pool rightly keeps the work (the README's second command,
    `pytest -m exclusive`, runs them alone). A serial run runs them with the rest."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    alone = [item for item in items if item.get_closest_marker("exclusive")]
    if alone:
        config.hook.pytest_deselected(items=alone)
        items[:] = [item for item in items if not item.get_closest_marker("exclusive")]
