"""The functions the composition matrix differentiates (test_composition_matrix.py): each
is sum(sin(z) * z) over the real components z of its argument, so one reference (its
gradient sin(z) + z cos(z), its Hessian diag(2 cos(z) - z sin(z))) serves every argument
kind. adjit compiles from source, so they live in a module of their own."""
import numpy as np

import adjit


@adjit.jit
def arr(x):
    return np.sum(np.sin(x) * x)


@adjit.jit
def vec3f(v: adjit.vec3):
    return (adjit.sin(v[0]) * v[0] + adjit.sin(v[1]) * v[1]) + adjit.sin(v[2]) * v[2]


@adjit.jit
def vec3d(v: adjit.vec3d):
    return (adjit.sin(v[0]) * v[0] + adjit.sin(v[1]) * v[1]) + adjit.sin(v[2]) * v[2]


@adjit.jit
def mat22f(m: adjit.mat22):
    return ((adjit.sin(m[0, 0]) * m[0, 0] + adjit.sin(m[0, 1]) * m[0, 1])
            + (adjit.sin(m[1, 0]) * m[1, 0] + adjit.sin(m[1, 1]) * m[1, 1]))


@adjit.jit
def mat22d(m: adjit.mat22d):
    return ((adjit.sin(m[0, 0]) * m[0, 0] + adjit.sin(m[0, 1]) * m[0, 1])
            + (adjit.sin(m[1, 0]) * m[1, 0] + adjit.sin(m[1, 1]) * m[1, 1]))


@adjit.jit
def quatf(q: adjit.quat):
    return ((adjit.sin(q[0]) * q[0] + adjit.sin(q[1]) * q[1])
            + (adjit.sin(q[2]) * q[2] + adjit.sin(q[3]) * q[3]))


@adjit.jit
def quatd(q: adjit.quatd):
    return ((adjit.sin(q[0]) * q[0] + adjit.sin(q[1]) * q[1])
            + (adjit.sin(q[2]) * q[2] + adjit.sin(q[3]) * q[3]))


@adjit.struct
class PointF:
    x: adjit.Array[adjit.f32, 1]
    c: adjit.f32


@adjit.struct
class PointD:
    x: adjit.Array[adjit.f64, 1]
    c: adjit.f64


@adjit.jit
def structf(p: PointF):
    return np.sum(np.sin(p.x) * p.x) + adjit.sin(p.c) * p.c


@adjit.jit
def structd(p: PointD):
    return np.sum(np.sin(p.x) * p.x) + adjit.sin(p.c) * p.c


# The gradient taken inside compiled code, of each.
@adjit.jit
def arr_in_jit(x):
    return adjit.grad(arr)(x)


@adjit.jit
def vec3f_in_jit(v: adjit.vec3):
    return adjit.grad(vec3f)(v)


@adjit.jit
def vec3d_in_jit(v: adjit.vec3d):
    return adjit.grad(vec3d)(v)


@adjit.jit
def mat22f_in_jit(m: adjit.mat22):
    return adjit.grad(mat22f)(m)


@adjit.jit
def mat22d_in_jit(m: adjit.mat22d):
    return adjit.grad(mat22d)(m)


@adjit.jit
def quatf_in_jit(q: adjit.quat):
    return adjit.grad(quatf)(q)


@adjit.jit
def quatd_in_jit(q: adjit.quatd):
    return adjit.grad(quatd)(q)


@adjit.jit
def structf_in_jit(p: PointF):
    return adjit.grad(structf)(p)


@adjit.jit
def structd_in_jit(p: PointD):
    return adjit.grad(structd)(p)


# jvp and hvp taken inside compiled code, of each (t: the tangent).


@adjit.jit
def arr_jvp_in_jit(x, t):
    return adjit.jvp(arr, (x,), (t,))[1]


@adjit.jit
def arr_hvp_in_jit(x, t):
    return adjit.hvp(arr, (x,), (t,))


@adjit.jit
def vec3f_jvp_in_jit(x: adjit.vec3, t: adjit.vec3):
    return adjit.jvp(vec3f, (x,), (t,))[1]


@adjit.jit
def vec3f_hvp_in_jit(x: adjit.vec3, t: adjit.vec3):
    return adjit.hvp(vec3f, (x,), (t,))


@adjit.jit
def vec3d_jvp_in_jit(x: adjit.vec3d, t: adjit.vec3d):
    return adjit.jvp(vec3d, (x,), (t,))[1]


@adjit.jit
def vec3d_hvp_in_jit(x: adjit.vec3d, t: adjit.vec3d):
    return adjit.hvp(vec3d, (x,), (t,))


@adjit.jit
def mat22f_jvp_in_jit(x: adjit.mat22, t: adjit.mat22):
    return adjit.jvp(mat22f, (x,), (t,))[1]


@adjit.jit
def mat22f_hvp_in_jit(x: adjit.mat22, t: adjit.mat22):
    return adjit.hvp(mat22f, (x,), (t,))


@adjit.jit
def mat22d_jvp_in_jit(x: adjit.mat22d, t: adjit.mat22d):
    return adjit.jvp(mat22d, (x,), (t,))[1]


@adjit.jit
def mat22d_hvp_in_jit(x: adjit.mat22d, t: adjit.mat22d):
    return adjit.hvp(mat22d, (x,), (t,))


@adjit.jit
def quatf_jvp_in_jit(x: adjit.quat, t: adjit.quat):
    return adjit.jvp(quatf, (x,), (t,))[1]


@adjit.jit
def quatf_hvp_in_jit(x: adjit.quat, t: adjit.quat):
    return adjit.hvp(quatf, (x,), (t,))


@adjit.jit
def quatd_jvp_in_jit(x: adjit.quatd, t: adjit.quatd):
    return adjit.jvp(quatd, (x,), (t,))[1]


@adjit.jit
def quatd_hvp_in_jit(x: adjit.quatd, t: adjit.quatd):
    return adjit.hvp(quatd, (x,), (t,))


@adjit.jit
def structf_jvp_in_jit(x: PointF, t: PointF):
    return adjit.jvp(structf, (x,), (t,))[1]


@adjit.jit
def structf_hvp_in_jit(x: PointF, t: PointF):
    return adjit.hvp(structf, (x,), (t,))


@adjit.jit
def structd_jvp_in_jit(x: PointD, t: PointD):
    return adjit.jvp(structd, (x,), (t,))[1]


@adjit.jit
def structd_hvp_in_jit(x: PointD, t: PointD):
    return adjit.hvp(structd, (x,), (t,))
