"""The programs of test_found_regressions.py (adjit compiles from source)."""
import numpy as np

import adjit


@adjit.jit
def fd_0d(x0, x1):
    v2 = np.cbrt(2.0 + np.sin(x1))
    return np.power(1.5 + x1 * x1, np.sin(x0)) * 0.0 + v2 * 0.5 + np.cos(x1) * x0


@adjit.jit
def loss_0d(x0, x1):
    return np.sum(np.sin(fd_0d(x0, x1)))


@adjit.jit
def sin_x_x(x):
    return np.sum(np.sin(x) * x)


@adjit.jit
def grad_sin_x_x(x):
    return adjit.grad(sin_x_x)(x)


@adjit.jit
def loss_matmul_after_loop(x0, s0):
    # (the generator's program 45: the product's result is not used, and hvp failed on it)
    v1 = x0
    v2 = v1
    for i in range(3):
        v2 = np.sin(v2) * 0.9 + np.tanh(v1)
    v3 = x0 @ v1
    v5 = np.clip(s0, -0.5, 0.75)
    return np.sum(np.sin(v5 * 0.5 + np.cos(v2))) + 0.0 * v3


@adjit.jit
def loss_matmul_of_loop(x0, w):
    v2 = x0
    for i in range(3):
        v2 = np.sin(v2) * 0.9 + np.tanh(x0)
    return np.sum(np.sin(v2 @ w))


@adjit.jit
def assign_into_empty_slice(x, k):
    # (the generator's program 67 of seed 5: v = x[k:] has a dimension of 1 known only at
    # run time, broadcast into t[1:], of size 0)
    v = x[k:]
    t = x.copy()
    t[1:] = np.sin(v)
    return t


@adjit.jit
def ravel_of_a_scalar(s0):
    # (the CI budget's program 8: np.ravel of a Python float argument)
    return np.ravel(s0)
