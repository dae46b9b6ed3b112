"""How many threads compiled CPU code uses: a setting the passes compile for and the
runtime's thread pool runs with.

Two numbers (docs/performance.md, "Threads"):
- `default_num_threads()`, what modules are compiled for (it is in the CPU cache's key):
  ADJIT_NUM_THREADS, else the CPUs this process may use, its CPU affinity bounded by its
  cgroup's CPU quota (a container given 2 CPUs of a 64-core host uses 2). Every process of
  one machine and container computes the same number, so they share cache entries.
- `thread_limit()`, the most threads the pool runs a loop on in this process (the runtime
  applies it to every module, whatever it was compiled for: loops are split into chunks
  taken dynamically, so any count gives the same results): ADJIT_NUM_THREADS, else the
  available CPUs divided among the adjit processes that the environment says share them
  (MPI ranks on this node, pytest-xdist workers), and 1 in a child of `multiprocessing`
  (a Pool's workers, by default one per core, would otherwise each start a thread per core).
"""
from __future__ import annotations

import math
import os
from pathlib import Path

from .environment import read

CGROUP_ROOT = "/sys/fs/cgroup"
PROC_CGROUP = "/proc/self/cgroup"

# Environment variables that launchers set to the number of processes they started on this
# node (Open MPI, MPICH/Hydra and Intel MPI, PMI/PMIx, MVAPICH, Slurm) or in this test run
# (pytest-xdist, whose workers share the machine).
LOCAL_PROCESS_HINTS = ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE",
                       "PMIX_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE",
                       "PYTEST_XDIST_WORKER_COUNT")


def _env_threads(environ=None) -> int | None:
    return read("ADJIT_NUM_THREADS", environ)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def cgroup_cpu_limit(root: str | os.PathLike = CGROUP_ROOT,
                     proc_cgroup: str | os.PathLike = PROC_CGROUP) -> float | None:
    """The CPUs this process's cgroup may use (quota / period, the smallest along its path
    to the root), or None without a quota. cgroup v2 (`cpu.max`: "max 100000" or
    "200000 100000") and v1 (`cpu/cpu.cfs_quota_us`, -1 for none, and `cpu.cfs_period_us`).
    `root` and `proc_cgroup` are parameters so that tests can give it files of their own."""
    root = Path(root)
    paths = {"v2": "/", "v1": "/"}
    for line in (_read(Path(proc_cgroup)) or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            paths["v2"] = parts[2]
        elif "cpu" in parts[1].split(","):
            paths["v1"] = parts[2]
    limits = []

    def along(base: Path, path: str):
        """base, and base/<each prefix of path> (a container sees its own cgroup as the
        root, its path naming the host's: then only `base` exists)."""
        yield base
        parts = [p for p in path.split("/") if p]
        for i in range(1, len(parts) + 1):
            yield base.joinpath(*parts[:i])

    for folder in along(root, paths["v2"]):
        text = _read(folder / "cpu.max")
        if text:
            quota, _, period = text.strip().partition(" ")
            if quota != "max" and period:
                try:
                    limits.append(int(quota) / int(period))
                except ValueError:
                    pass
    for base in (root / "cpu", root / "cpu,cpuacct"):
        for folder in along(base, paths["v1"]):
            quota, period = _read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us")
            try:
                if quota and period and int(quota) > 0 and int(period) > 0:
                    limits.append(int(quota) / int(period))
            except ValueError:
                pass
    return min(limits) if limits else None


# cgroup_cpu_limit's answers, read once per process and folder (~140 us of file reads, and
# default_num_threads is asked on every compile and cache lookup; a quota seldom changes).
_quotas: dict[tuple[str, str], float | None] = {}


def available_cpus(root: str | os.PathLike = CGROUP_ROOT,
                   proc_cgroup: str | os.PathLike = PROC_CGROUP) -> int:
    """The CPUs this process may run on (its affinity, read each time: it can change),
    bounded by its cgroup's CPU quota (read once), rounded down (a quota of 1.5 CPUs: 1
    thread; two would be throttled), at least 1."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    where = (str(root), str(proc_cgroup))
    if where not in _quotas:
        _quotas[where] = cgroup_cpu_limit(root, proc_cgroup)
    quota = _quotas[where]
    if quota is not None:
        cpus = min(cpus, max(1, math.floor(quota)))
    return max(1, cpus)


def default_num_threads() -> int:
    """ADJIT_NUM_THREADS, else available_cpus(). Modules are compiled for it: with 1, parallel
    loops stay serial loops; with more, they call the thread pool (runtime/native/parallel.cpp),
    which runs them on up to thread_limit() threads."""
    env = _env_threads()
    return env if env is not None else available_cpus()


def local_processes(environ=None) -> int:
    """How many processes the environment says share this machine's CPUs with this one
    (LOCAL_PROCESS_HINTS, the largest given), 1 without a hint."""
    environ = os.environ if environ is None else environ
    found = 1
    for name in LOCAL_PROCESS_HINTS:
        try:
            found = max(found, int(environ.get(name, "")))
        except ValueError:
            pass
    return found


def thread_limit(in_child: bool = False, environ=None) -> int:
    """The most threads the pool uses in this process (the module docstring): ADJIT_NUM_THREADS,
    else 1 in a child of `multiprocessing` (`in_child`), else available_cpus() divided among
    local_processes(), at least 1."""
    environ = os.environ if environ is None else environ
    env = _env_threads(environ)
    if env is not None:
        return env
    if in_child:
        return 1
    return max(1, available_cpus() // local_processes(environ))
