"""The path of a cold `adjit.grad(loss)(x)` runs down the layers (api -> compiler, the
language's declarations read on the way) and calls back into a module waiting on the stack
in few places (scripts/call_path.py prints the whole path)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "call_path.py"
LAYER = {"adjit.lang": 0, "adjit.compiler": 1, "adjit.api": 2}


def _layer(module: str) -> int:
    return LAYER[".".join(module.split(".")[:2])]


def _traced(tmp_path) -> dict:
    # A new process: the first compile of the process and an empty disk cache.
    code = (f"import json, sys; sys.path.insert(0, {str(SCRIPT.parent)!r})\n"
            "import call_path\n"
            "calls = call_path.trace_cold_grad()\n"
            "print(json.dumps({'backs': sorted(call_path.call_backs(calls)),\n"
            "                  'modules': sorted({m for m, _, _ in calls})}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "ADJIT_CACHE_DIR": str(tmp_path)},
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_cold_gradient_calls_back_in_few_places_and_never_up_a_layer(tmp_path):
    found = _traced(tmp_path)
    assert {"adjit.api.autodiff", "adjit.api.service", "adjit.compiler.codegen",
            "adjit.compiler.derivative"} <= set(found["modules"])    # the path was traced
    backs = [tuple(b) for b in found["backs"]]
    assert len(backs) <= 5, backs
    upward = [b for b in backs if _layer(b[1]) > _layer(b[0])]
    assert not upward, f"a lower layer calls back into a higher one: {upward}"


def test_call_backs_are_found():
    # (so that the bound above cannot pass by finding nothing)
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import call_path
    finally:
        sys.path.remove(str(SCRIPT.parent))
    calls = [("adjit.api.a", "f", ()), ("adjit.compiler.b", "g", ("adjit.api.a",)),
             ("adjit.api.a", "h", ("adjit.api.a", "adjit.compiler.b")),
             ("adjit.compiler.b", "k", ("adjit.api.a",))]
    assert call_path.call_backs(calls) == {("adjit.compiler.b", "adjit.api.a", "h")}
    assert call_path.revisits(calls) == {"adjit.compiler.b": 1}
