"""Weak scaling of the decomposed heat inverse problem (examples/heat_mpi.py) over 1, 2 and
4 MPI ranks: each rank holds an n x n block (one ghost layer), the loss runs `steps` explicit
steps with a halo exchange each and an allreduce at the end; the gradient is adjit.grad of
all of it. Primal and gradient medians, the slowest rank's; with perfect weak scaling they
stay flat as ranks are added.

    python benchmarks/bench_mpi.py [--n 256] [--steps 50] [--ranks 1 2 4]

Each rank count runs under its own `mpiexec -n P` (this script with --worker). Before
timing, each run checks its gradient against central differences of the decomposed loss
(along a random direction) and exits with status 1 if it is wrong. The ranks run with one
thread each (ADJIT_NUM_THREADS=1): on a machine with fewer cores than ranks they share
cores, and the times say so.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worker(n: int, steps: int, repeat: int) -> None:
    import numpy as np

    sys.path.insert(0, str(ROOT / "examples"))
    import adjit
    import heat_mpi as ex
    from adjit import mpi

    world = mpi.Comm()
    comm = world.cart((0, 0))
    rng = np.random.default_rng(comm.rank)
    shape = (n + 2, n + 2)
    u0 = np.zeros(shape)
    comm.owned(u0)[...] = rng.random((n, n))
    kappa = np.zeros(shape)
    comm.owned(kappa)[...] = 0.5 + 0.2 * rng.random((n, n))
    target = np.zeros(shape)
    owned = np.zeros(shape)
    comm.owned(owned)[...] = 1.0
    dt = 0.2
    args = (u0, target, owned, steps, dt, comm)
    grad = adjit.value_and_grad(ex.loss)

    # Correctness first: the gradient against central differences of the decomposed loss.
    value, g = grad(kappa, *args)
    d = rng.standard_normal(shape) * owned
    eps = 1e-6
    fd = (ex.loss(kappa + eps * d, *args) - ex.loss(kappa - eps * d, *args)) / (2 * eps)
    an = comm.mpi.allreduce(float(np.sum(g * d)))
    ok = bool(abs(fd - an) <= 1e-5 * abs(an))
    adjit.wait_for_builds()

    def timed(f):
        times = []
        for _ in range(repeat):
            comm.mpi.Barrier()
            t = time.perf_counter()
            f()
            times.append(time.perf_counter() - t)
        return comm.mpi.allreduce(statistics.median(times), op=__import__("mpi4py").MPI.MAX)

    primal = timed(lambda: ex.loss(kappa, *args))
    gradient = timed(lambda: grad(kappa, *args))
    if comm.rank == 0:
        print(json.dumps({"ranks": comm.size, "grid": list(comm.dims), "primal_s": primal,
                          "gradient_s": gradient, "ok": ok, "fd": fd, "an": an}), flush=True)


def mpiexec() -> str:
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if here.exists() else "mpiexec"


def run(ranks: int, n: int, steps: int, repeat: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), ADJIT_NUM_THREADS="1")
    out = subprocess.run([mpiexec(), "-n", str(ranks), sys.executable, __file__, "--worker",
                          "--n", str(n), "--steps", str(steps), "--repeat", str(repeat)],
                         capture_output=True, text=True, env=env, timeout=900)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{ranks} ranks failed:\n{out.stdout}\n{out.stderr[-3000:]}")
    return json.loads(lines[-1])


def main(n: int = 256, steps: int = 50, ranks=(1, 2, 4), repeat: int = 5) -> int:
    print(f"weak scaling: a {n}x{n} block per rank, {steps} steps with a halo exchange each; "
          f"{os.cpu_count()} cores on this machine")
    print("| ranks | grid | global grid | primal (ms) | gradient (ms) | gradient/primal "
          "| weak-scaling efficiency (gradient) |")
    print("|---|---|---|---|---|---|---|")
    base, status = None, 0
    for p in ranks:
        r = run(p, n, steps, repeat)
        if not r["ok"]:
            print(f"{p} ranks: WRONG gradient (finite differences {r['fd']:.6e}, adjit "
                  f"{r['an']:.6e}): not timed")
            status = 1
            continue
        base = base or r["gradient_s"]
        gx, gy = r["grid"]
        print(f"| {p} | {gx}x{gy} | {n * gx}x{n * gy} | {1e3 * r['primal_s']:.1f} | "
              f"{1e3 * r['gradient_s']:.1f} | {r['gradient_s'] / r['primal_s']:.1f} | "
              f"{base / r['gradient_s']:.2f} |", flush=True)
    return status


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    a = ap.parse_args()
    if a.worker:
        worker(a.n, a.steps, a.repeat)
    else:
        sys.exit(main(a.n, a.steps, tuple(a.ranks), a.repeat))
