"""Vectors and quaternions on the GPU path, without a GPU: the cloth kernels of
examples/cloth_toss.py (arrays of vec3, a quat parameter, normalize/length/dot/quat_rotate,
atomic_add of vectors) compile to PTX that ptxas accepts for sm_90, and so do their forward
and reverse derivative kernels."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mlir", reason="compiling kernels needs MLIR")

import adjit                                                      # noqa: E402
from adjit import Const, Duplicated, Forward, Reverse            # noqa: E402
from adjit.core.types import ArrayType                            # noqa: E402
from adjit.api.cuda_launch import gpu_kernel                 # noqa: E402
from test_ptx import assemble                                     # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import cloth_toss as cloth                                        # noqa: E402

F32 = adjit.f32
V1 = ArrayType(F32, 2)      # an array of vec3 is an (n, 3) array


def _types(name):
    return {"place": [V1, ArrayType(F32, 1), ArrayType(F32, 1), V1, V1],
            "spring_forces": [V1, V1, ArrayType(adjit.i64, 2), ArrayType(F32, 1), adjit.f64,
                              adjit.f64, V1],
            "integrate": [V1, V1, V1, adjit.f64, adjit.f64, V1, V1]}[name]


@pytest.mark.parametrize("name", ["place", "spring_forces", "integrate"])
def test_the_cloth_kernels_assemble(name, tmp_path):
    kernel = gpu_kernel(getattr(cloth, name), _types(name), 1)
    assert ".extern" not in kernel.ptx and "__nv_" not in kernel.ptx
    assemble(kernel.ptx, tmp_path)


@pytest.mark.parametrize("mode", [Forward, Reverse], ids=["forward", "reverse"])
def test_the_spring_force_derivative_kernels_assemble(mode, tmp_path):
    from adjit.compiler.derivative import Derivative
    rest, springs, rest_length = cloth.cloth(3)
    x = rest + 0.1
    anns = [Duplicated(x, np.ones_like(x)), Duplicated(np.zeros_like(x), np.ones_like(x)),
            Const(springs), Const(rest_length), Const(50.0), Const(0.5),
            Duplicated(np.zeros_like(x), np.ones_like(x))]
    d = Derivative(cloth.spring_forces, mode, anns, _types("spring_forces"),
                   (len(springs),), None)
    _, program = d.host_program("t", "sm_90")
    assert program.kernels
    for k in program.kernels:
        assert ".entry" in k.ptx and ".extern" not in k.ptx and "__nv_" not in k.ptx, k.entry
        assemble(k.ptx, tmp_path)


# ---- what Warp users write (issue 33): component writes through elements, slices, a vector
# conditional expression, Warp's atomic_add(grid, i, j, v), quat_slerp / quat_to_axis_angle,
# transform_point, lerp, transforms
@adjit.kernel
def warp_habits(y: adjit.Array[adjit.vec3, 1], m: adjit.Array[adjit.mat44, 1],
                q: adjit.Array[adjit.quat, 1], grid: adjit.Array[F32, 2], t: F32,
                xf: adjit.Array[adjit.transform, 1]):
    i = adjit.index()
    p = y[i]
    y[i].x = p.y * 2.0
    y[i][2] += adjit.length(p[1:])
    m[i][1][2] = adjit.ddot(m[i], m[i])
    m[i][0, 3] += float(len(p))
    s = adjit.quat_slerp(q[i], adjit.quat(), t)
    axis, angle = adjit.quat_to_axis_angle(s)
    q[i] = s if angle > 0.1 else adjit.lerp(q[i], s, t)
    q[i].w = adjit.transform_point(m[i], axis).x + adjit.transform_vector(m[i], p).y
    adjit.atomic_add(grid, i % 2, 0, angle)
    adjit.atomic_sub(grid, 0, 1, p.z)
    xf[i] = adjit.transform_inverse(xf[i]) * adjit.transform(p, q[i])
    y[i] = adjit.transform_point(xf[i], y[i]) + xf[i].p
    xf[i].q.w += t
    xf[i].p = p


HABITS = [V1, ArrayType(F32, 3), V1, ArrayType(F32, 2), F32, V1]


def test_the_warp_habits_kernel_assembles(tmp_path):
    kernel = gpu_kernel(warp_habits, HABITS, 1)
    assert ".extern" not in kernel.ptx and "__nv_" not in kernel.ptx
    assemble(kernel.ptx, tmp_path)


@pytest.mark.parametrize("mode", [Forward, Reverse], ids=["forward", "reverse"])
def test_the_warp_habits_derivative_kernels_assemble(mode, tmp_path):
    from adjit.compiler.derivative import Derivative
    n = 3
    y, m = np.ones((n, 3), np.float32), np.ones((n, 4, 4), np.float32)
    q, grid = np.ones((n, 4), np.float32), np.zeros((2, 2), np.float32)
    anns = [Duplicated(y, np.ones_like(y)), Duplicated(m, np.ones_like(m)),
            Duplicated(q, np.ones_like(q)), Duplicated(grid, np.ones_like(grid)),
            Const(np.float32(0.5)), Duplicated(np.ones((n, 7), np.float32), np.ones((n, 7), np.float32))]
    d = Derivative(warp_habits, mode, anns, HABITS, (n,), None)
    _, program = d.host_program("t", "sm_90")
    assert program.kernels
    for k in program.kernels:
        assert ".entry" in k.ptx and ".extern" not in k.ptx and "__nv_" not in k.ptx, k.entry
        assemble(k.ptx, tmp_path)
