"""GPU benchmarks, one JSON object a line: saxpy and the heat stencil in GB/s against the
device's own copy bandwidth (a device-to-device memcpy: read + write), the gradient of the
heat step (reverse mode), the cost of a launch, and a loop of heat steps launched from Python
against the same loop in an `@adjit.jit` function run with device="cuda". Kernels are written and launched as users
do (device="cuda"), from the kernel cache (ADJIT_CACHE_DIR); timed with CUDA events around
each call, so a call's host-side cost counts.

    python benchmarks/bench_gpu.py             # on a GPU machine (scripts/gpu_check.sh run)
    python benchmarks/bench_gpu.py --compile   # compiles the kernels into the cache, no GPU
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np

import adjit
from adjit import Active, Duplicated
from adjit.api.cuda_launch import compile_only
from adjit.runtime import cuda

DT = 0.1


@adjit.kernel
def saxpy(a: adjit.f32, x, y):
    i = adjit.index()
    y[i] = a * x[i] + y[i]


@adjit.kernel
def heat_step(u, v, dt: adjit.f32):
    i, j = adjit.index_nd()
    n, m = u.shape[0], u.shape[1]
    if 0 < i < n - 1 and 0 < j < m - 1:
        lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        v[i, j] = u[i, j] + dt * lap
    else:
        v[i, j] = u[i, j]


def run_saxpy(x, y, workgroupsize=None) -> None:
    saxpy(2.0, x, y, ndrange=len(x), workgroupsize=workgroupsize, device="cuda")


def run_heat(u, v) -> None:
    heat_step(u, v, DT, ndrange=u.shape, device="cuda")


def run_heat_gradient(u, du, v, dv) -> float:
    """du += the gradient of sum(dv * heat_step(u)) (v holds the step afterwards); returns
    its derivative with respect to dt."""
    return adjit.autodiff(adjit.Reverse, heat_step, Duplicated(u, du), Duplicated(v, dv),
                          Active(DT), ndrange=u.shape, device="cuda")[2]


@adjit.jit
def heat_steps(u, steps: int):
    v = adjit.empty_like(u)
    for _ in range(steps):
        heat_step(u, v, DT, ndrange=u.shape)
        heat_step(v, u, DT, ndrange=u.shape)


def compile_kernels() -> None:
    """The calls main() makes, on small NumPy arrays of the same dtypes and ranks (so the
    same cache keys), under compile_only()."""
    x, u = np.zeros(4, np.float32), np.zeros((4, 4), np.float32)
    with compile_only():
        run_saxpy(x, x)
        run_heat(u, u)
        run_heat_gradient(u, u.copy(), u.copy(), u.copy())
        heat_steps(u, 1, device="cuda")


def event_time(fn, repeats: int = 10) -> float:
    """Median seconds of fn() on the default stream, after two warm-up calls."""
    api = cuda.driver().api
    times = []
    for k in range(repeats + 2):
        if k == 2:     # warm: CPU-cache builds in the background (adjit.wait_for_builds) done
            adjit.wait_for_builds()
        _, start = api.cuEventCreate(0)
        _, end = api.cuEventCreate(0)
        api.cuEventRecord(start, 0)
        fn()
        api.cuEventRecord(end, 0)
        api.cuEventSynchronize(end)
        err, ms = api.cuEventElapsedTime(start, end)
        cuda.check(err, "cuEventElapsedTime")
        api.cuEventDestroy(start)
        api.cuEventDestroy(end)
        if k >= 2:
            times.append(ms / 1e3)
    return float(np.median(times))


def report(**fields) -> None:
    print(json.dumps(fields), flush=True)


def bandwidth(bench: str, nbytes: int, seconds: float, copy_bw: float, **fields) -> None:
    report(bench=bench, **fields, seconds=seconds, GBps=nbytes / seconds / 1e9,
           fraction_of_copy=nbytes / seconds / copy_bw)


def copy_and_saxpy() -> float:
    """Reports the copy bandwidth and saxpy's; returns the copy bandwidth (bytes/s)."""
    api = cuda.driver().api
    n = 1 << 28
    a, b = adjit.DeviceArray.zeros(n, np.float32), adjit.DeviceArray.zeros(n, np.float32)
    copy = event_time(lambda: cuda.check(api.cuMemcpyDtoD(b.ptr, a.ptr, a.nbytes)[0], "copy"))
    copy_bw = 2 * a.nbytes / copy
    report(bench="copy", bytes=2 * a.nbytes, seconds=copy, GBps=copy_bw / 1e9)
    for wgs in (128, 256, 512, 1024):         # 12 bytes an element: read x and y, write y
        bandwidth("saxpy_f32", 12 * n, event_time(lambda: run_saxpy(a, b, wgs)), copy_bw, n=n,
                  workgroupsize=wgs)
    return copy_bw


def heat_and_gradient(copy_bw: float) -> None:
    side = 16384
    u, v = (adjit.to_device(np.random.default_rng(0).random((side, side), np.float32))
            for _ in range(2))
    # 8 bytes an element when the neighbours' reads hit in cache: read u, write v.
    step = event_time(lambda: run_heat(u, v))
    bandwidth("heat_f32", 8 * side * side, step, copy_bw, shape=[side, side])
    du = adjit.DeviceArray.zeros((side, side), np.float32)
    dv = adjit.to_device(np.ones((side, side), np.float32))
    # 36 bytes an element: the augmented kernel reads u and writes v; the reverse kernel reads
    # u and dv, updates du, zeroes dv and writes each item's d/d(dt); that is summed.
    gradient = event_time(lambda: run_heat_gradient(u, du, v, dv))
    bandwidth("heat_f32_gradient", 36 * side * side, gradient, copy_bw, shape=[side, side],
              gradient_over_step=gradient / step)


def launch_overhead() -> None:
    reps = 2000
    for name, x, y, calls in [
            ("launch_overhead_incl_sync", adjit.DeviceArray.zeros(1, np.float32),
             adjit.DeviceArray.zeros(1, np.float32), reps),
            ("launch_overhead_numpy_args", np.zeros(1, np.float32), np.zeros(1, np.float32),
             reps // 4)]:
        run_saxpy(x, y)
        adjit.wait_for_builds()
        start = time.perf_counter()
        for _ in range(calls):
            run_saxpy(x, y)
        report(bench=name, microseconds=(time.perf_counter() - start) / calls * 1e6)


def jit_loop() -> None:
    """2 * steps heat steps: launched one by one from Python, and by a host program (which
    also copies u into managed memory and back, and allocates its scratch array there)."""
    side, steps = 4096, 50
    u = adjit.to_device(np.random.default_rng(0).random((side, side), np.float32))
    v = adjit.DeviceArray.zeros((side, side), np.float32)

    def from_python() -> None:
        for _ in range(steps):
            run_heat(u, v)
            run_heat(v, u)

    python = event_time(from_python, repeats=3)
    jit = event_time(lambda: heat_steps(u, steps, device="cuda"), repeats=3)
    report(bench="heat_f32_loop", shape=[side, side], steps=2 * steps, python_launches_s=python,
           jit_cuda_s=jit, jit_over_python=jit / python)


def main() -> None:
    heat_and_gradient(copy_and_saxpy())
    launch_overhead()
    jit_loop()


if __name__ == "__main__":
    if sys.argv[1:] == ["--compile"]:
        compile_kernels()
    elif cuda.is_available():
        main()
    else:
        print("bench_gpu: no CUDA GPU or driver here; nothing to run", file=sys.stderr)
