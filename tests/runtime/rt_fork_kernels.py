"""Kernels the subprocesses of test_rt_threads_fork.py import (adjit compiles from a file)."""
import adjit


@adjit.kernel
def divide(x, d, out):
    i = adjit.index()
    out[i] = x[i] // d[i]


@adjit.kernel
def slow_divide(x, d, out, reps: int):
    # `reps` divisions per item: a launch long enough for a Ctrl-C to land in it
    i = adjit.index()
    s = 0
    for _ in range(reps):
        s += x[i] // d[i]
    out[i] = s // reps


@adjit.kernel
def scaled(x, y, a: float):
    i = adjit.index()
    y[i] = a * x[i]


@adjit.jit
def quotient(a: int, b: int):
    return a // b + 1
