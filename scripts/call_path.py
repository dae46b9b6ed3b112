"""The modules a cold `adjit.grad(loss)(x)` passes through, from the API to the compiled call.

Run it as `python scripts/call_path.py` (a fresh disk cache is made for it). It traces every
call into adjit's language, compiler and API packages (sys.setprofile; not what modules do
while the path imports them) and prints:

- the modules entered, in the order first entered;
- call-backs: a call into a module that is still waiting lower on the stack for a call it
  made (A -> ... -> B -> A), each distinct (caller module, module, function) once. These are
  the places where the path runs back up instead of down (a callback handed through a
  lower module, an interface installed from above); the code generator's mixin modules
  count as codegen's (one visitor: its recursion through `self.visit` is no call-back);
- revisits: the modules entered again after the path had left them altogether (none of their
  frames on the stack), with how often; the code generator calling its helper modules
  (values, scalar_ops) over and over is most of these, and is what small modules cost.

`tests/api/test_call_path.py` bounds the call-backs.
"""
from __future__ import annotations

import os
import sys
import tempfile
from collections import Counter

PACKAGES = ("adjit.lang", "adjit.compiler", "adjit.api")


def trace_cold_grad() -> list[tuple[str, str, tuple[str, ...]]]:
    """(module, function, the modules waiting on the stack) for each call into PACKAGES made
    by a cold `adjit.grad(loss)(x)` (this process's first compile; an empty disk cache)."""
    import numpy as np

    import adjit
    from adjit.lang.functions import jit

    def loss(x):
        return np.sum(x * x)

    g = adjit.grad(jit(loss))
    x = np.arange(4.0)
    stack: list[tuple[str | None, bool]] = []
    calls = []

    importing = [0]     # module bodies running (an import the path set off)

    def profile(frame, event, arg):
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            inside = module if module.startswith(PACKAGES) else None
            body = frame.f_code.co_name == "<module>"
            importing[0] += body
            # (what a module does while it is imported, registering its builtins say, is
            # loading code, not the path)
            if inside and not importing[0]:
                calls.append((inside, frame.f_code.co_name, tuple(m for m, _ in stack if m)))
            stack.append((inside, body))
        elif event == "return" and stack:
            importing[0] -= stack.pop()[1]

    sys.setprofile(profile)
    try:
        g(x)
    finally:
        sys.setprofile(None)
    return _as_visitor(calls)


def _as_visitor(calls):
    """`calls` with the code generator's mixin modules named as codegen: `CodeGenerator` is
    one visitor whose constructs sit in modules of their own (assignment, operators,
    returns, control flow...: compiler/codegen.py lists them), so a mixin's `self.visit(...)`
    is the visitor's own recursion, not a call back up the path."""
    from adjit.compiler.codegen import CodeGenerator   # (imported by the traced compile)
    visitor = {c.__module__ for c in CodeGenerator.__mro__
               if c.__module__.startswith("adjit.compiler.")}

    def named(m):
        return CodeGenerator.__module__ if m in visitor else m
    return [(named(m), f, tuple(named(w) for w in waiting)) for m, f, waiting in calls]


def call_backs(calls) -> set[tuple[str, str, str]]:
    """(caller module, module, function) of each call into a module still waiting below."""
    found = set()
    for module, function, waiting in calls:
        caller = waiting[-1] if waiting else None
        if caller and caller != module and module in waiting:
            found.add((caller, module, function))
    return found


def revisits(calls) -> Counter:
    """How often each module was entered again after the path had left it altogether."""
    seen, again = set(), Counter()
    for module, _, waiting in calls:
        if module in seen and module not in waiting and (not waiting or waiting[-1] != module):
            again[module] += 1
        seen.add(module)
    return again


def main() -> None:
    os.environ["ADJIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="adjit-call-path-")
    calls = trace_cold_grad()
    order = list(dict.fromkeys(m for m, _, _ in calls))
    print(f"{len(order)} modules entered, in order:")
    for m in order:
        print(f"  {m}")
    backs = sorted(call_backs(calls))
    print(f"{len(backs)} call-backs (a call into a module waiting lower on the stack):")
    for caller, module, function in backs:
        print(f"  {caller} -> {module}.{function}")
    again = revisits(calls)
    print(f"{len(again)} modules revisited after the path left them:")
    for m, n in again.most_common():
        print(f"  {n:4d}  {m}")


if __name__ == "__main__":
    main()
