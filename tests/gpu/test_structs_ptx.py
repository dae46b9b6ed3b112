"""Structs on the GPU path, without a GPU: a kernel taking an @adjit.struct (array fields of
vec3 written through, a scalar, a vector and a nested struct's fields read, a device
function taking the struct) compiles to PTX that ptxas accepts for sm_90, and so do its
forward and reverse derivative kernels for Duplicated(s, ds); and so does a kernel that
makes a struct, changes a vector field's component, passes it to a device function that
returns a new one and takes a gradient with respect to it, with its reverse kernels."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir", reason="compiling kernels needs MLIR")

import adjit                                                      # noqa: E402
from adjit import Array, Duplicated, Forward, Reverse             # noqa: E402
from adjit.api.cuda_launch import gpu_kernel                 # noqa: E402
from adjit.lang.functions import specialise                  # noqa: E402
from adjit.lang.structs import (flatten_annotations, flatten_args,  # noqa: E402
                                    zeros_like)
from test_ptx import assemble                                     # noqa: E402


@adjit.struct
class Wind:
    strength: adjit.f32
    direction: adjit.vec3


@adjit.struct
class Particles:
    x: Array[adjit.vec3, 1]
    v: Array[adjit.vec3, 1]
    mass: adjit.f32
    gravity: adjit.vec3
    wind: Wind


@adjit.func
def force(p: Particles, i):
    return p.gravity * p.mass + p.wind.direction * p.wind.strength - p.v[i] * 0.1


@adjit.kernel
def integrate(p: Particles, dt: adjit.f32):
    i = adjit.index()
    p.v[i] += force(p, i) * (dt / p.mass)
    p.x[i] = p.x[i] + p.v[i] * dt


def _particles(n=8):
    r = np.random.default_rng(0)
    return Particles(x=r.random((n, 3), np.float32), v=r.random((n, 3), np.float32),
                     mass=2.0, gravity=(0.0, -9.8, 0.0),
                     wind=Wind(strength=0.5, direction=(1.0, 0.0, 0.0)))


def _types(args):
    return specialise(integrate.__name__, integrate.params, integrate.annotations,
                      flatten_args(integrate, args))[0]


def test_a_kernel_taking_a_struct_assembles(tmp_path):
    kernel = gpu_kernel(integrate, _types((_particles(), 0.01)), 1)
    assert ".extern" not in kernel.ptx and "__nv_" not in kernel.ptx
    assemble(kernel.ptx, tmp_path)


@pytest.mark.parametrize("mode", [Forward, Reverse], ids=["forward", "reverse"])
def test_its_derivative_kernels_assemble(mode, tmp_path):
    from adjit.compiler.derivative import Derivative
    p = _particles()
    dp = zeros_like(p)
    anns, _ = flatten_annotations(integrate, [Duplicated(p, dp), 0.01], mode.reverse)
    d = Derivative(integrate, mode, anns, _types((p, 0.01)), (8,), None)
    _, program = d.host_program("t", "sm_90")
    assert program.kernels
    for k in program.kernels:
        assert ".entry" in k.ptx and ".extern" not in k.ptx and "__nv_" not in k.ptx, k.entry
        assemble(k.ptx, tmp_path)


@adjit.func
def drifted(w: Wind, dt: adjit.f32) -> Wind:
    return Wind(w.strength * 0.5, w.direction + w.direction * dt)


@adjit.func
def push(w: Wind) -> adjit.f32:
    return w.strength * adjit.dot(w.direction, w.direction)


@adjit.kernel
def makes_structs(xs: Array[adjit.f32, 1], out: Array[adjit.f32, 1]):
    i = adjit.index()
    w = Wind(strength=xs[i], direction=adjit.vec3(xs[i], 1.0, 0.0))
    w.direction.z = 2.0 * xs[i]
    w = drifted(w, 0.1)
    g = adjit.grad(push)(w)
    out[i] = push(w) + g.strength + g.direction[2]


@pytest.mark.parametrize("mode", [None, Reverse], ids=["primal", "reverse"])
def test_a_kernel_making_and_returning_structs_assembles(mode, tmp_path):
    from adjit.core.types import ArrayType
    types = [ArrayType(adjit.f32, 1), ArrayType(adjit.f32, 1)]
    if mode is None:
        kernels = [gpu_kernel(makes_structs, types, 1)]
    else:
        from adjit.compiler.derivative import Derivative
        xs, out = np.ones(8, np.float32), np.zeros(8, np.float32)
        anns = [Duplicated(xs, np.zeros_like(xs)), Duplicated(out, np.ones_like(out))]
        _, program = Derivative(makes_structs, mode, anns, types, (8,), None).host_program(
            "t", "sm_90")
        kernels = program.kernels
    assert kernels
    for k in kernels:
        assert ".extern" not in k.ptx and "__nv_" not in k.ptx
        assemble(k.ptx, tmp_path)
