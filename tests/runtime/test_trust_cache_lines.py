"""A failed check in compiled code names the line of the function actually called, also when
the disk cache holds code compiled from the same function text in another file (issue 29:
errors at the user's line). The cache's key leaves out where the code lives (so moved or
copied code is not compiled again): its records say where their sources were, and a hit
names the caller's lines (runtime/source_index.relocated).

Each case runs fresh Python processes sharing a cache folder of their own."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import adjit

# One module's text, `pad` blank lines moving everything down: a checked index in an @func
# called from @jit code that calls sin (its module is built at once, so the same process
# finds it on disk), and a run-time size check.
MODULE = """import numpy as np
import adjit
{pad}

@adjit.func
def helper(x, k):
    return x[k] * 2.0


@adjit.jit
def sine_at(x, k):
    return np.sin(helper(x, k))


@adjit.jit
def zeros_of(n):
    return np.zeros(n)
"""

# Imports the modules named on the command line in turn, makes each function fail, prints
# {module: {function: [error type, message]}} as JSON.
SCRIPT = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
seen = {}
for name in sys.argv[2:]:
    m = __import__(name)
    out = seen[name] = {}
    for fn, args in [("sine_at", (np.ones(3), 7)), ("zeros_of", (-1,))]:
        try:
            getattr(m, fn)(*args)
            out[fn] = None
        except Exception as e:
            out[fn] = [type(e).__name__, str(e)]
print(json.dumps(seen))
"""


def _environment(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ADJIT_CACHE_DIR", "ADJIT_DISK_CACHE")}
    env.update(ADJIT_CACHE_DIR=str(cache), ADJIT_DEBUG="1", ADJIT_NUM_THREADS="2")
    return env


def _run(folder: Path, cache: Path, *modules: str) -> dict:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(folder), *modules],
                          capture_output=True, text=True, env=_environment(cache), timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _line(path: Path, text: str) -> int:
    return path.read_text().splitlines().index(text) + 1


def _check_names_own_lines(folder: Path, seen: dict) -> None:
    for name, errors in seen.items():
        path = folder / f"{name}.py"
        kind, message = errors["sine_at"]
        assert kind == "IndexError", message
        assert message.endswith(f"(at {path}:{_line(path, '    return x[k] * 2.0')})"), message
        kind, message = errors["zeros_of"]
        assert kind == "ValueError", message
        assert message.endswith(f"(at {path}:{_line(path, '    return np.zeros(n)')})"), message


@pytest.fixture
def two_copies(tmp_path: Path) -> Path:
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "copy_a.py").write_text(MODULE.format(pad=""))
    (folder / "copy_b.py").write_text(MODULE.format(pad="\n" * 9))
    return folder


def test_one_process_each_copy_names_its_own_lines(two_copies: Path, tmp_path: Path) -> None:
    _check_names_own_lines(two_copies, _run(two_copies, tmp_path / "cache", "copy_a", "copy_b"))


def test_later_processes_name_the_callers_lines(two_copies: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _check_names_own_lines(two_copies, _run(two_copies, cache, "copy_a", "copy_b"))
    # Both now come from the disk's one record, compiled from one of the two files.
    for order in (["copy_a", "copy_b"], ["copy_b", "copy_a"]):
        _check_names_own_lines(two_copies, _run(two_copies, cache, *order))
    assert list((cache / "cpu").glob("src-*.json")), "nothing came from the disk cache"


def test_moved_sites_relocate_each_position() -> None:
    """relocated: a position in a recorded source moves with it (the innermost one where
    sources nest); one outside every source, and tables of sources that do not correspond,
    stay as they are."""
    from adjit.runtime.source_index import relocated
    recorded = [("/a.py", 10, 20), ("/a.py", 12, 14), ("/h.py", 1, 5)]
    sites = [("/b.py", 30, 40), ("/c.py", 2, 4), ("/h.py", 1, 5)]
    errors = [("IndexError", "index out of range (at /a.py:11)"),
              ("ValueError", "bad (at /a.py:13)"), ("ValueError", "x (at /h.py:3)"),
              ("ValueError", "y (at /a.py:25)"), ("ValueError", "no position")]
    assert relocated(errors, recorded, sites) == [
        ("IndexError", "index out of range (at /b.py:31)"), ("ValueError", "bad (at /c.py:3)"),
        ("ValueError", "x (at /h.py:3)"), ("ValueError", "y (at /a.py:25)"),
        ("ValueError", "no position")]
    assert relocated(errors, recorded, sites[:2]) == errors
    assert relocated(errors, recorded, [("/b.py", 30, 41), *sites[1:]]) == errors


# The GPU disk: a kernel's checks (compiled for the chip, no GPU needed) and a host program's.
KERNEL = """import adjit
{pad}

@adjit.kernel
def pick(x, out, k):
    i = adjit.index()
    out[i] = x[k] * 2.0
"""

KERNEL_SCRIPT = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from adjit.core.types import type_of_value
from adjit.api import service
seen = {}
for name in sys.argv[2:]:
    m = __import__(name)
    types = [type_of_value(a) for a in (np.ones(3), np.ones(3), 7)]
    seen[name] = [c for k in service.gpu_kernels(m.pick, types, 1).values() for c in k.checks]
print(json.dumps(seen))
"""


def test_gpu_kernels_from_the_disk_name_the_callers_lines(tmp_path: Path) -> None:
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "kernel_a.py").write_text(KERNEL.format(pad=""))
    (folder / "kernel_b.py").write_text(KERNEL.format(pad="\n" * 7))
    cache = tmp_path / "cache"
    for order in (["kernel_a", "kernel_b"], ["kernel_b", "kernel_a"]):
        done = subprocess.run([sys.executable, "-c", KERNEL_SCRIPT, str(folder), *order],
                              capture_output=True, text=True, env=_environment(cache),
                              timeout=300)
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        for name, checks in seen.items():
            path = folder / f"{name}.py"
            assert checks and all(kind == "IndexError" for kind, _ in checks), checks
            where = f"(at {path}:{_line(path, '    out[i] = x[k] * 2.0')})"
            assert all(message.endswith(where) for _, message in checks), checks
    assert len(list((cache / "gpu").glob("*.ptx"))) == 1     # one entry serves both


def test_a_host_program_from_the_disk_names_the_callers_lines() -> None:
    """A host program (a device="cuda" function) records its sites in its meta; loaded for
    the same text elsewhere, its own checks and its kernels' move there."""
    from dataclasses import replace

    from adjit.core.kernel import GpuKernel
    from adjit.api import service
    from adjit.runtime.host_program import HostProgram
    kernel = GpuKernel(name="k", entry="k", ptx="// fake", chip="sm_90", params=(), ndim=1,
                       checks=(("IndexError", "out of bounds (at /a.py:12)"),))
    program = HostProgram("f", {}, {}, (kernel,), (("ValueError", "negative (at /a.py:11)"),),
                          (), b"", {"tuple_result": False})
    at = service._host_programs().at
    recorded = at(program, (("/a.py", 10, 13),))
    assert recorded.meta["sites"] == [["/a.py", 10, 13]] and recorded.errors == program.errors
    moved = at(recorded, (("/b.py", 20, 23),))
    assert moved.errors == (("ValueError", "negative (at /b.py:21)"),)
    assert moved.kernels == (replace(kernel, checks=(("IndexError",
                                                       "out of bounds (at /b.py:22)"),)),)
    assert moved.meta == {"tuple_result": False, "sites": [["/b.py", 20, 23]]}


# ---- check_grad with integer arguments -----------------------------------------------------

@adjit.jit
def _indexed(x, k):
    return x[k] * x[k] + adjit.sin(x[0]) * x[k]


@adjit.jit
def _indexed_int(x, k: int):
    return x[k] * x[k] * x[1]


@adjit.jit
def _gathered(x, idx, scale):
    s = 0.0
    for j in range(idx.shape[0]):
        s += scale * x[idx[j]] * x[idx[j]]
    return s


def jax_sin(v):
    import jax.numpy as jnp
    return jnp.sin(v)


def _jax_grad(fn, x: np.ndarray, *consts) -> np.ndarray:
    import jax
    jax.config.update("jax_enable_x64", True)
    return np.asarray(jax.grad(fn)(jax.numpy.asarray(x, dtype=np.float64), *consts))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_check_grad_passes_integer_arguments_unchanged(dtype) -> None:
    """An index (a Python int, a NumPy integer, annotated int or not) or an int array is a
    constant that check_grad passes as it is: not differentiated, not made a float (an
    index must be an integer), as JAX's check_grads does; float arguments beside it are
    checked. The derivatives agree with JAX's float64 ones."""
    tol = 5e-3 if dtype == np.float32 else 1e-6
    x = np.linspace(0.5, 1.5, 5).astype(dtype)
    for k in (3, np.int64(3), np.int32(-2)):
        assert adjit.check_grad(_indexed, x, k) < tol
    assert adjit.check_grad(_indexed_int, x, 2) < tol
    idx = np.array([1, 3, 3, 4])
    assert adjit.check_grad(_gathered, x, idx, 0.75) < tol
    # (the float scale is checked beside the constant array: its derivative is the sum)
    assert adjit.check_grad(_gathered, x, idx, dtype(0.75)) < tol

    gx = adjit.grad(_indexed)(x, 3)
    assert gx.dtype == dtype
    expect = _jax_grad(lambda x: x[3] * x[3] + jax_sin(x[0]) * x[3], x)
    np.testing.assert_allclose(gx, expect, rtol=1e-5 if dtype == np.float32 else 1e-12)
    gx = adjit.grad(_gathered)(x, idx, 0.75)
    expect = _jax_grad(lambda x: 0.75 * (x[idx] ** 2).sum(), x)
    np.testing.assert_allclose(gx, expect, rtol=1e-5 if dtype == np.float32 else 1e-12)


@adjit.jit
def _cubed(x, k):
    return x[k] * x[k] * x[k]


def test_check_grad_moves_the_floats_beside_an_index() -> None:
    """The integer argument does not stop the float ones from being checked: with a huge
    step, the finite difference of a cube is off by the step squared, which check_grad
    reports (a check that moved nothing would report 0)."""
    x = np.linspace(0.5, 1.5, 4)
    assert adjit.check_grad(_cubed, x, 2) < 1e-6
    assert adjit.check_grad(_cubed, x, 2, eps=0.5) > 1e-2
