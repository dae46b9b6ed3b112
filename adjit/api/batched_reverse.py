"""Reverse mode with a batch of N cotangents (`BatchDuplicated(x, (dx1, ..., dxN))` given to
`adjit.autodiff(Reverse, ...)`): N vector-Jacobian products at one point. The primal and its
tape run once (split mode's augmented half, api/autodiff.py's `autodiff_thunk`); the reverse
sweep then runs once per lane on that one tape, lane k seeded by and adding into the k-th
shadow of every BatchDuplicated argument (the cotangent of an array the function writes is
its shadow's contents, as in reverse mode's Duplicated). So N products cost one primal and N
reverse sweeps, not N of each; results equal N separate reverse calls.
"""
from __future__ import annotations

from typing import Callable, Sequence

from ..lang.modes import (Active, Annotation, BatchDuplicated, Const, Duplicated, Mode,
                          ReverseSplitWithPrimal, batch_width)


def batched_reverse(mode: Mode, f, args: Sequence, thunk: Callable, ndrange, workgroupsize,
                    device: str):
    """`autodiff(mode, f, *args)` for a reverse `mode` where some arguments are
    BatchDuplicated: the derivative of each Active argument as an N-tuple (one per lane),
    None for the others; with the primal result for ReverseWithPrimal."""
    anns = [a if isinstance(a, Annotation) else Const(a) for a in args]
    width = batch_width(anns, f"autodiff of {f.__name__}")
    if device != "cpu":
        raise TypeError(f"autodiff of {f.__name__}: BatchDuplicated in reverse mode runs on "
                        "the CPU (device='cpu'); on the GPU, make one reverse call per "
                        "cotangent")
    lanes = [[Duplicated(a.val, a.dval[k]) if isinstance(a, BatchDuplicated) else a
              for a in anns] for k in range(width)]
    forward, reverse = thunk(ReverseSplitWithPrimal, f, *(type(a) for a in lanes[0]),
                             ndrange=ndrange, workgroupsize=workgroupsize)
    tape, primal, _ = forward(*lanes[0])
    per_lane = [reverse(*lane, 1.0, tape) for lane in lanes]
    grads = tuple(tuple(g[k] for g in per_lane) if isinstance(a, Active) else None
                  for k, a in enumerate(anns))
    return (grads, primal) if mode.with_primal else grads
