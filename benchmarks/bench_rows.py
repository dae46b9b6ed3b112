"""Every row of docs/performance.md's table in one run: each row's own benchmark, one after the
other, each in a new process (so one row's threads, caches and compiled modules do not time
another's), adjit beside the peers each script compares (NumPy, Numba, JAX; Warp where
installed). Each script checks its results before it times anything and exits non-zero on a
wrong one; this run reports which rows failed and exits non-zero too.

    python benchmarks/bench_rows.py              # every row, the sizes of the table
    python benchmarks/bench_rows.py --small      # every row at a tiny size (seconds each)
    python benchmarks/bench_rows.py threads mlp  # only rows whose name starts so

Peers: pip install -e '.[bench]' (JAX, Numba, Warp). The machine's load is printed before
each row: on a shared machine compare rows of one run, and read them as ratios.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (row name, what the table calls it, arguments at full size, arguments at tiny size)
ROWS = [
    ("threads", "stencil and Jacobi solve on a busy machine / pinned to one CPU, vs one thread",
     ["bench_contention.py"], ["bench_contention.py", "--small"]),
    ("transcendentals", "every math builtin, 1024x256 f32 and f64, vs NumPy, Numba, JAX",
     ["bench_transcendentals.py"], ["bench_transcendentals.py", "--small"]),
    ("calls", "the fixed cost of a call returning a fresh array, vs NumPy, Numba, JAX",
     ["bench_calls.py"], ["bench_calls.py", "--small"]),
    ("softplus", "G3 softplus in a kernel, primal and gradient, vs JAX",
     ["bench_grad_workloads.py", "G3"], None),
    ("mlp", "f32 MLP 4-32-32-1 trained 50 SGD steps in one @jit call, vs NumPy, Numba, JAX",
     ["bench_mlp_train.py"], ["bench_mlp_train.py", "3", "16", "3"]),
    ("tapes", "G2b reaction-diffusion gradient / primal, and the stacked-state form",
     ["bench_grad_workloads.py", "G2b", "G2s"], None),
    ("slices", "heat equation written with slices in @jit, primal and gradient, vs JAX",
     ["bench_views.py"], ["bench_views.py", "64", "5"]),
    ("forward", "W3 stencil / W4 sum(x*x) f32 forward, vs Numba",
     ["bench_forward.py"], ["bench_forward.py", "--quick"]),
    ("first-calls", "first call in a new process, empty cache, stage by stage, vs JAX and Numba",
     ["bench_first_call.py"], ["bench_first_call.py", "--tiny"]),
    ("fixed-point", "gradient / primal of a fixed point whose step copies a Dirichlet boundary",
     ["bench_fixed_point.py"], ["bench_fixed_point.py", "--quick"]),
]


def main(argv: list[str]) -> int:
    small = "--small" in argv
    wanted = [a for a in argv if not a.startswith("--")]
    failed = []
    for name, title, full, tiny in ROWS:
        if wanted and not any(name.startswith(w) for w in wanted):
            continue
        args = tiny if small else full
        if args is None:    # no tiny form: the row's script has no size argument
            print(f"\n## {name}: {title}\n(no --small form; run without --small)", flush=True)
            continue
        load = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else []
        print(f"\n## {name}: {title}\n$ python benchmarks/{' '.join(args)}   (load {' '.join(load)})",
              flush=True)
        start = time.perf_counter()
        rc = subprocess.call([sys.executable, str(HERE / args[0]), *args[1:]], cwd=HERE)
        print(f"({name}: {time.perf_counter() - start:.0f} s, exit {rc})", flush=True)
        if rc:
            failed.append(name)
    if failed:
        print(f"\nrows that failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
