"""Cache hits without MLIR (runtime/source_index.py, compiler/compiled.py): a process whose
functions, kernels and derivatives an earlier process compiled loads them by their source
key without importing MLIR, with the same results and errors; a damaged record or module
entry is compiled again, never trusted; an edited function is never served its old code.

Each case runs fresh Python processes with a cache folder of its own."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BLOCK_MLIR = "import sys\nsys.modules['mlir'] = None     # any import of mlir now fails\n"

PROGRAM = """
import sys
import numpy as np
import adjit
from adjit import Duplicated, Active, ReverseWithPrimal

@adjit.func
def softplus(x):
    return adjit.log(1.0 + adjit.exp(x))

@adjit.kernel
def apply(x, out):
    i = adjit.index()
    out[i] = SCALE * softplus(x[i])

@adjit.jit
def loss(a: adjit.f64, x):
    out = adjit.empty_like(x)
    apply(x, out, ndrange=x.shape[0])
    return a * adjit.sum(out)

@adjit.jit
def stepped(n: int, s: int):
    t = 0
    for i in range(0, n, s):
        t += i
    return t

SCALE = 2.0
x = np.linspace(-3.0, 3.0, 1001)
out = np.zeros_like(x)
apply(x, out, ndrange=x.shape[0])
dx = np.zeros_like(x)
(da, _), value = adjit.autodiff(ReverseWithPrimal, loss, Active(1.5), Duplicated(x, dx))
try:
    stepped(10, 0)
    error = None
except ValueError as e:
    error = str(e)
try:
    apply(x, ndrange=3)
    count_error = None
except TypeError as e:
    count_error = str(e)
read_only = np.zeros_like(x)
read_only.setflags(write=False)
try:
    apply(x, read_only, ndrange=3)
    read_only_error = None
except ValueError as e:
    read_only_error = str(e)
print({"out": float(out.sum()), "value": float(value), "da": float(da), "dx": float(dx.sum()),
       "error": error, "count_error": count_error, "read_only_error": read_only_error,
       "mlir": "mlir.ir" in sys.modules})
if "--wait" in sys.argv:
    from adjit.runtime import cpu_cache
    assert cpu_cache.wait_for_builds(120)
"""


def run(tmp_path: Path, cache: Path, code: str, *args: str, block_mlir: bool = False) -> dict:
    script = tmp_path / "user_code.py"
    script.write_text((BLOCK_MLIR if block_mlir else "") + textwrap.dedent(code))
    env = {**os.environ, "ADJIT_CACHE_DIR": str(cache), "ADJIT_DISK_CACHE": "1"}
    result = subprocess.run([sys.executable, str(script), *args], capture_output=True,
                            text=True, cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    return eval(result.stdout.strip().splitlines()[-1])


@pytest.fixture
def filled(tmp_path):
    """A cache that a first process filled (waiting for its background builds)."""
    cache = tmp_path / "cache"
    first = run(tmp_path, cache, PROGRAM, "--wait")
    assert first["mlir"]
    return cache, first


def _records(cache: Path) -> list[Path]:
    return sorted((cache / "cpu").glob("src-*.json"))


def test_a_hit_runs_functions_kernels_and_gradients_without_mlir(tmp_path, filled):
    cache, first = filled
    assert len(_records(cache)) >= 3     # the kernel, loss's derivative, stepped
    again = run(tmp_path, cache, PROGRAM, block_mlir=True)
    assert not again["mlir"]
    # The hit's file has BLOCK_MLIR's lines above the same code: its compiled check names
    # the line in that file (test_trust_cache_lines.py); all else is the same.
    line = int(first["error"].rsplit(":", 1)[1].rstrip(")"))
    moved = f":{line + BLOCK_MLIR.count(chr(10))})"
    assert again["error"] == first["error"].replace(f":{line})", moved)
    assert {**again, "mlir": True, "error": first["error"]} == first
    # The errors of record, from compiled code's check and from the checks in Python (the
    # same on a hit: compared above).
    assert "range() arg 3 must not be zero" in first["error"]
    assert "apply() takes 2 arguments" in first["count_error"]
    assert "read-only" in first["read_only_error"]


def test_an_edited_function_is_compiled_again(tmp_path, filled):
    cache, first = filled
    edited = PROGRAM.replace("SCALE = 2.0", "SCALE = 3.0")    # a global compiled in
    with pytest.raises(AssertionError, match="mlir|No module"):
        run(tmp_path, cache, edited, block_mlir=True)   # no record: it must compile
    second = run(tmp_path, cache, edited)
    assert second["out"] == pytest.approx(1.5 * first["out"])
    assert second["dx"] == pytest.approx(1.5 * first["dx"])


@pytest.mark.parametrize("damage", ["record", "adj", "module"])
def test_a_damaged_record_or_entry_is_compiled_again(tmp_path, filled, damage):
    cache, first = filled
    for record in _records(cache):
        meta = json.loads(record.read_text())
        if damage == "record":
            meta["meta"] = {"entry": "nothing"}           # edited: the checksum fails
            record.write_text(json.dumps(meta))
        elif damage == "adj":
            record.with_suffix(".adj").write_text("func.func @other()")
        else:
            so = cache / "cpu" / f"{meta['module']}.so"
            so.write_bytes(so.read_bytes()[:100])
    again = run(tmp_path, cache, PROGRAM, "--wait")
    assert again["mlir"] and {**again, "mlir": True} == first
    # Written again: the next process hits.
    assert not run(tmp_path, cache, PROGRAM, block_mlir=True)["mlir"]
