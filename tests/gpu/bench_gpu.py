"""GPU bandwidth and launch cost, for scripts/gpu_check.sh (prints one JSON object a line).

saxpy (12 bytes an element) and the heat stencil (8 bytes an element when neighbours hit in
cache) against the device's own copy bandwidth (cuMemcpyDtoD, read + write); kernels come
from the test kernel cache like the tests'. Timed with CUDA events around each launch.
"""
from __future__ import annotations

import json
import time

import numpy as np

from adjit.runtime import cuda
from adjit.runtime.device_array import DeviceArray
from gpu_kernels import get_kernel


def event_time(fn, repeats: int = 10) -> float:
    """Median seconds of fn() on the default stream, after two warm-up calls."""
    api = cuda.driver().api
    times = []
    for k in range(repeats + 2):
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


def main() -> None:
    api = cuda.driver().api
    n = 1 << 28
    a, b = DeviceArray.zeros(n, np.float32), DeviceArray.zeros(n, np.float32)
    copy = event_time(lambda: cuda.check(api.cuMemcpyDtoD(b.ptr, a.ptr, a.nbytes)[0], "copy"))
    copy_bw = 2 * a.nbytes / copy
    report(bench="copy", bytes=2 * a.nbytes, seconds=copy, GBps=copy_bw / 1e9)

    saxpy = get_kernel("saxpy_f32")
    for wgs in (128, 256, 512, 1024):
        t = event_time(lambda: cuda.launch(saxpy, [2.0, a, b], n, workgroupsize=wgs))
        report(bench="saxpy_f32", n=n, workgroupsize=wgs, seconds=t, GBps=12 * n / t / 1e9,
               fraction_of_copy=12 * n / t / copy_bw)
    del a, b

    heat = get_kernel("heat_f32")
    side = 16384
    u, v = DeviceArray.zeros((side, side), np.float32), DeviceArray.zeros((side, side), np.float32)
    t = event_time(lambda: cuda.launch(heat, [u, v, 0.1], (side, side)))
    report(bench="heat_f32", shape=[side, side], seconds=t, GBps=8 * side * side / t / 1e9,
           fraction_of_copy=8 * side * side / t / copy_bw)
    del u, v

    x, y = DeviceArray.zeros(1, np.float32), DeviceArray.zeros(1, np.float32)
    cuda.launch(saxpy, [1.0, x, y], 1)
    reps = 2000
    start = time.perf_counter()
    for _ in range(reps):
        cuda.launch(saxpy, [1.0, x, y], 1)
    report(bench="launch_overhead_incl_sync", microseconds=(time.perf_counter() - start) / reps * 1e6)
    start = time.perf_counter()
    host_x, host_y = np.zeros(1, np.float32), np.zeros(1, np.float32)
    for _ in range(reps // 4):
        cuda.launch(saxpy, [1.0, host_x, host_y], 1)
    report(bench="launch_overhead_numpy_args", microseconds=(time.perf_counter() - start) / (reps // 4) * 1e6)


if __name__ == "__main__":
    main()
