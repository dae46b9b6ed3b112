"""`adjit.torch`: adjit functions and kernel launches as differentiable PyTorch operations.

    step = adjit.torch.function(simulate)             # an @adjit.jit function
    loss = step(u0, 50, 0.1)                           # tensors in, tensors out
    heat = adjit.torch.function(heat_step, outputs=("v",))   # a kernel: what it writes
    v = heat(u, v0, 0.1, ndrange=u.shape)              # a new tensor; v0 is unchanged

Each call is a `torch.autograd.Function`: its backward is adjit's reverse mode, its `jvp`
adjit's forward mode (torch.autograd.forward_ad, torch.func.jvp), and `requires_grad`
decides the activities (an argument that does not require grad is Const). Tensors are
passed without copies: a CPU tensor as a NumPy view of its memory (`Tensor.numpy()` of it
detached), a CUDA tensor as a DeviceArray viewing it (`__cuda_array_interface__`), the call
then running with device="cuda"; array results come back as tensors viewing adjit's arrays
(`torch.from_numpy`). A kernel's outputs are copies of the tensors passed for them (the
kernel may read them), which it fills and which are returned: torch's operations do not
change their inputs.

This module imports torch; `import adjit` does not import it (adjit/__init__.py loads this
module on first use of `adjit.torch`).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from torch.autograd import forward_ad

from ..core.types import SCALARS
from ..runtime.device_array import as_device_array
from ..api.autodiff import autodiff, grad
from ..lang.modes import Const, Duplicated, Forward
from .operation import Operation, float_result

WHO = "adjit.torch.function"
# The tensor dtypes adjit takes: its scalar types' (torch names them as NumPy does).
_DTYPES = {getattr(torch, t.np_dtype.name) for t in SCALARS}


def function(f: Any, *, outputs: Sequence[str | int] | str | int | None = None) -> "TorchFunction":
    """``f`` as a differentiable PyTorch operation: tensors in, tensors out.

    Each call is a ``torch.autograd.Function`` whose backward is adjit's reverse mode and
    whose ``jvp`` is adjit's forward mode (``torch.func.jvp``, ``torch.autograd.forward_ad``);
    an argument whose ``requires_grad`` is false is Const. CPU tensors are passed without
    copies (as NumPy views); CUDA tensors as DeviceArrays, the call then running with
    ``device="cuda"``. A kernel's outputs are copies of the tensors passed for them, filled
    by the kernel and returned (PyTorch operations do not change their inputs).

    Args:
        f: an ``@adjit.jit`` function, or an ``@adjit.kernel``.
        outputs: for a kernel, the parameters it writes (names or positions): they are its
            results.

    Returns:
        TorchFunction: call it with ``f``'s arguments (tensors, Python numbers); a kernel's
        also takes ``ndrange=`` (default: its first output's shape).

    Raises:
        TypeError: ``f`` neither an ``@adjit.jit`` function nor an ``@adjit.kernel``; a
            kernel without ``outputs=`` ("kernel k writes its results into arguments: name
            them, outputs=('y',) ..."); ``outputs=`` for a function.
        ValueError: ``outputs=`` naming a parameter the kernel does not have, or twice.

    Example:
        ::

            import torch
            import adjit
            from adjit import Array, f64

            @adjit.jit
            def energy(x: Array[f64, 1]) -> f64:
                return adjit.sum(x * x * x)

            @adjit.kernel
            def scale(a: f64, x: Array[f64, 1], y: Array[f64, 1]):
                i = adjit.index()
                y[i] = a * x[i]

            x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
            adjit.torch.function(energy)(x).backward()
            print(x.grad)                         # tensor([ 3., 12.], dtype=torch.float64)
            y = adjit.torch.function(scale, outputs=("y",))(3.0, x, torch.zeros(2, dtype=torch.float64))
            print(y)                              # 3 * x, with a grad_fn
    """
    return TorchFunction(f, outputs)


class TorchFunction:
    """What :func:`adjit.torch.function` returns: call it with the function's arguments
    (tensors, Python numbers); a kernel's also takes ``ndrange=`` (default: its first
    output's shape). The result is a tensor (a tuple of them for several results) that
    autograd differentiates through adjit.

    Example:
        ::

            import torch
            import adjit

            @adjit.jit
            def square(x: adjit.Array[adjit.f64, 1]) -> adjit.Array[adjit.f64, 1]:
                return x * x

            op = adjit.torch.function(square)
            print(op)                                        # <adjit.torch.function of square>
            x = torch.ones(3, dtype=torch.float64, requires_grad=True)
            print(torch.autograd.grad(op(x).sum(), x)[0])    # tensor([2., 2., 2.], ...)
    """

    def __init__(self, f: Any, outputs: Any):
        self.op = Operation(f, outputs, WHO)
        self.__name__ = self.op.name
        self.__doc__ = getattr(f, "__doc__", None)

    def __repr__(self) -> str:
        return f"<adjit.torch.function of {self.op.name}>"

    def __call__(self, *args, ndrange: Any = None):
        op = self.op
        if len(args) != len(op.params):
            raise TypeError(f"{op.name}() takes {len(op.params)} arguments "
                            f"({', '.join(op.params)}), got {len(args)}")
        nd = None
        if op.is_kernel:
            first = args[op.outputs[0]]
            if ndrange is None and not isinstance(first, torch.Tensor):
                raise TypeError(f"kernel {op.name}: ndrange= is needed (output "
                                f"{op.params[op.outputs[0]]!r} is no tensor)")
            nd = tuple(first.shape) if ndrange is None else ndrange
            nd = (nd,) if isinstance(nd, int) else tuple(int(n) for n in nd)
        elif ndrange is not None:
            raise TypeError(f"{op.name} is not a kernel: ndrange= is for kernels")
        # Without a gradient to record (no input requires grad, or grad mode is off, and no
        # forward-mode level is open), the autograd.Function machinery (~15 us) is skipped.
        # torch.func's transforms (vmap, grad, jvp) wrap tensors: those calls go through the
        # autograd.Function too, whose `vmap` rule gives adjit one batch row at a time.
        if forward_ad._current_level < 0 and not (
                torch.is_grad_enabled()
                and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)) and not (
                any(isinstance(a, torch.Tensor) and _wrapped(a) for a in args)):
            return _forward(self, nd, args)
        return _Call.apply(self, nd, *args)


# ---- tensors <-> what adjit takes -----------------------------------------------------------
def _device_of(op: Operation, a: torch.Tensor) -> str:
    if a.is_cuda:
        return "cuda"
    if a.is_cpu:
        return "cpu"
    raise ValueError(f"{WHO}: {op.name}: tensors on {a.device.type!r} are not supported "
                     "(CPU and CUDA tensors are)")


def _plain(t: torch.Tensor) -> torch.Tensor:
    """`t` without torch.func's wrappers (under torch.func.grad, backward and jvp see its
    tracking tensors, which have no storage): the tensor holding the data."""
    functorch = torch._C._functorch
    while functorch.is_functorch_wrapped_tensor(t):
        t = functorch.get_unwrapped(t)
    return t


def _wrapped(t: torch.Tensor) -> bool:
    return torch._C._functorch.is_functorch_wrapped_tensor(t)


def _batched(t: torch.Tensor) -> bool:
    """Whether `t` is (at any level of torch.func's wrappers) a vmap batch: its storage
    holds the whole batch, which adjit must not take as one argument."""
    functorch = torch._C._functorch
    while functorch.is_functorch_wrapped_tensor(t):
        if functorch.is_batchedtensor(t):
            return True
        t = functorch.get_unwrapped(t)
    return False


def _resolved(t: torch.Tensor) -> torch.Tensor:
    """`t` with its values in its memory: a tensor with the negative bit set (`c.conj().imag`,
    `torch._neg_view`) stores -value, which adjit, reading the memory, would take with the
    wrong sign; such a tensor is copied with the negation applied (others as they are)."""
    return t.resolve_neg() if t.is_neg() else t


def _view(t: torch.Tensor) -> Any:
    """A tensor as adjit takes it, without a copy (on the GPU a contiguous one), except a
    tensor with the negative bit, which is resolved (a copy: see `_resolved`)."""
    if _batched(t):
        # The only way a batch reaches here is a torch.func transform over adjit's backward
        # or jvp (jacrev, jacfwd, vmap of a vjp): the forward has a vmap rule, they have none.
        raise NotImplementedError(
            f"{WHO}: torch.func.vmap over the derivative of an adjit function (jacrev, "
            "jacfwd, vmap of vjp or jvp) is not supported; vmap over the function itself is, "
            "and torch.autograd.functional.jacobian (one reverse pass per row) works")
    t = _resolved(t)
    if t.is_cuda:
        return as_device_array(_plain(t.detach()))
    try:      # the fastest view (~1 us); detach() only where needed costs another
        return (t.detach() if t.requires_grad else t).numpy()
    except RuntimeError:      # under torch.func: its wrapped tensor's data, through DLPack
        return np.from_dlpack(_plain(t.detach()))


def _value(op: Operation, i: int, a: Any) -> Any:
    """Argument `i` as adjit takes it: tensors as views (a 0-d one as a scalar unless the
    parameter is annotated as an array), anything else as it is (adjit checks it)."""
    if not isinstance(a, torch.Tensor):
        return a
    if a.dtype not in _DTYPES:
        raise TypeError(f"{WHO}: {op.name}(): argument {op.params[i]!r} is a tensor of "
                        f"{a.dtype}; adjit takes float32, float64, int32, int64 and bool")
    if a.ndim == 0 and i not in op.array_params and i not in op.outputs:
        return _view(a)[()] if not a.is_cuda else np.asarray(a.item(), _np_dtype(a))[()]
    if a.is_cuda and not a.is_contiguous():    # (adjit's GPU arrays are C-contiguous)
        p = op.params[i]
        raise ValueError(f"{WHO}: {op.name}(): argument {p!r} is a non-contiguous CUDA "
                         f"tensor (shape {tuple(a.shape)}, strides {a.stride()}); pass "
                         f"{p}.contiguous(), which copies")
    return _view(a)     # (a strided CPU tensor is a strided NumPy view: no copy)


def _np_dtype(t: torch.Tensor) -> np.dtype:
    return np.dtype(str(t.dtype).removeprefix("torch."))


def _tensor(v: Any, device: str) -> torch.Tensor:
    """An adjit result as a tensor viewing it (a NumPy scalar: a 0-d tensor)."""
    if isinstance(v, np.ndarray):
        t = torch.from_numpy(v)
    elif getattr(type(v), "is_adjit_device_array", False):
        return torch.from_dlpack(v)
    else:
        t = torch.from_numpy(np.asarray(v))
    return t if device == "cpu" else t.to(device)


def _prepare(call: TorchFunction, nd: Any, args: Sequence) -> tuple[str, list, dict]:
    """(device, the values for adjit, the output tensors made for a kernel by position)."""
    op = call.op
    device, values, made = None, [], {}
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            where = _device_of(op, a)
            if device is not None and where != device:
                raise ValueError(f"{WHO}: {op.name}'s tensors are on several devices (cpu "
                                 "and cuda); move them to one")
            device = where
        if i in op.outputs:
            if not isinstance(a, torch.Tensor):
                raise TypeError(f"{WHO}: kernel {op.name}: output {op.params[i]!r} must be a "
                                f"tensor, got {type(a).__name__}")
            made[i] = _resolved(a.detach()).clone(memory_format=torch.contiguous_format)
            a = made[i]
        values.append(_value(op, i, a))
    return device or "cpu", values, made


def _forward(call: TorchFunction, nd: Any, args: Sequence) -> Any:
    device, values, made = _prepare(call, nd, args)
    result = call.op.call(values, nd, device)
    if call.op.is_kernel:
        outs = tuple(made[i] for i in call.op.outputs)
        return outs[0] if len(outs) == 1 else outs
    if isinstance(result, tuple):
        return tuple(_tensor(r, device) for r in result)
    return _tensor(result, device)


class _Call(torch.autograd.Function):
    """One call of a TorchFunction, recorded for autograd: inputs (the TorchFunction, the
    ndrange, the arguments)."""

    @staticmethod
    def forward(call: TorchFunction, nd: Any, *args) -> Any:
        return _forward(call, nd, args)

    @staticmethod
    def setup_context(ctx, inputs: tuple, output: Any) -> None:
        call, nd, *args = inputs
        ctx.call, ctx.nd = call, nd
        # Tensors are saved through ctx (autograd then refuses a backward after one of them
        # changed in place); other arguments are kept as they are.
        ctx.layout = [None if isinstance(a, torch.Tensor) else a for a in args]
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        ctx.save_for_backward(*tensors)
        ctx.save_for_forward(*tensors)
        ctx.tuple_result = isinstance(output, tuple) and not call.op.is_kernel
        outs = output if isinstance(output, tuple) else (output,)
        integer = [o for o in outs if not o.is_floating_point()]
        if integer:
            ctx.mark_non_differentiable(*integer)

    @staticmethod
    def backward(ctx, *cotangents) -> tuple:
        call, nd, op = ctx.call, ctx.nd, ctx.call.op
        args = _saved(ctx)
        wanted = ctx.needs_input_grad[2:]
        inputs = [*ctx.saved_tensors, *[c for c in cotangents if c is not None]]
        ct = cotangents[0]
        if (torch.is_grad_enabled() and any(t.requires_grad for t in inputs)
                and not op.is_kernel
                and not ctx.tuple_result and ct is not None and ct.ndim == 0
                and not ct.is_cuda):
            # create_graph=True on a scalar result: the gradient as an operation of its own
            # (_ScalarGrad), whose backward is adjit's Hessian-vector product, so that a
            # second derivative (a double backward) is adjit's; the seed scales it in torch.
            grads = _ScalarGrad.apply(call, nd, tuple(wanted), *args)
            return (None, None, *[None if g is None else g * ct.to(g.dtype) for g in grads])
        out = _reverse(call, nd, args, wanted, cotangents, ctx.tuple_result)
        if any(_wrapped(t) for t in inputs):
            _refuse_nested(op, inputs, "backward")      # (torch.func: refused now)
        elif torch.is_grad_enabled() and any(t is not None for t in out) and any(
                t.requires_grad for t in inputs):
            out = _second_order_refused(op, out, inputs)
        return (None, None, *out)

    @staticmethod
    def vmap(info, in_dims: tuple, call: TorchFunction, nd: Any, *args) -> tuple:
        """torch.func.vmap's rule: one call per batch row (adjit takes each argument as one
        array, so the batch cannot be handed over whole), the results stacked on dim 0."""
        dims = in_dims[2:]
        rows = [_Call.apply(call, nd, *[a if d is None else a.select(d, b)
                                        for a, d in zip(args, dims)])
                for b in range(info.batch_size)]
        if isinstance(rows[0], tuple):
            return tuple(torch.stack(r) for r in zip(*rows)), (0,) * len(rows[0])
        return torch.stack(rows), 0

    @staticmethod
    def jvp(ctx, *tangents) -> Any:
        return _jvp(ctx, *tangents)


def _reverse(call: TorchFunction, nd: Any, args: list, wanted: Sequence[bool],
             cotangents: Sequence, tuple_result: bool) -> list:
    """The cotangents of a call's arguments (torch tensors, None where not wanted), from
    adjit's reverse mode, outside autograd's sight."""
    op = call.op
    device, values, _ = _prepare(call, nd, args)
    made: dict[int, torch.Tensor] = {}

    def zeros(i: int) -> Any:
        made[i] = torch.zeros_like(args[i], memory_format=torch.contiguous_format)
        return _view(made[i])

    def copy(i: int) -> Any:
        return _view(_resolved(args[i].detach()).clone(
            memory_format=torch.contiguous_format))

    if op.is_kernel:
        seeds = []
        for k, i in enumerate(op.outputs):
            ct = cotangents[k]
            made[i] = (torch.zeros_like(args[i], memory_format=torch.contiguous_format)
                       if ct is None else _resolved(ct.detach()).clone(
                           memory_format=torch.contiguous_format))
            seeds.append(_view(made[i]))
        grads = op.reverse(values, wanted, seeds, nd, device, zeros, copy)
        scale = None
    else:
        ct = cotangents[0]
        if ct is None:
            return [None] * len(args)
        if tuple_result:
            float_result(tuple(cotangents), WHO, op.name)     # (refused: no derivative)
        value = ct.detach()
        if value.ndim == 0:     # a scalar result: unit seed, then scaled
            scale, seed = value, value
        else:
            scale, seed = None, _view(value.contiguous())
        grads = op.reverse(values, wanted, [seed], nd, device, zeros, copy)
    out = []
    for i, g in enumerate(grads):
        if g is None:
            out.append(None)
            continue
        t = made[i] if i in made else torch.as_tensor(g, dtype=args[i].dtype,
                                                      device=args[i].device)
        out.append(t if scale is None else t * scale.to(t.dtype))
    return out


class _ScalarGrad(torch.autograd.Function):
    """The gradient of a call with a scalar result (unit seed) as a differentiable
    operation: inputs (the TorchFunction, the ndrange, which arguments' gradients are
    wanted, the arguments), outputs one gradient per argument (None where not wanted). Its
    backward is the Hessian-vector product, adjit's forward mode over its reverse mode."""

    @staticmethod
    def forward(call: TorchFunction, nd: Any, wanted: tuple, *args) -> tuple:
        one = torch.ones((), dtype=torch.float64)
        return tuple(_reverse(call, nd, list(args), wanted, [one], False))

    @staticmethod
    def setup_context(ctx, inputs: tuple, output: Any) -> None:
        call, nd, wanted, *args = inputs
        ctx.call, ctx.nd, ctx.wanted = call, nd, wanted
        ctx.layout = [None if isinstance(a, torch.Tensor) else a for a in args]
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        ctx.save_for_backward(*tensors)
        ctx.save_for_forward(*tensors)

    @staticmethod
    def backward(ctx, *vs) -> tuple:
        op = ctx.call.op
        args = _saved(ctx)
        inputs = [*ctx.saved_tensors, *[v for v in vs if v is not None]]
        _refuse_nested(op, inputs, "backward")
        hv = _hvp(ctx.call, ctx.nd, args, vs)
        out = [torch.as_tensor(hv[i], dtype=a.dtype)
               if i in hv and ctx.needs_input_grad[3 + i] and isinstance(a, torch.Tensor)
               else None for i, a in enumerate(args)]
        if torch.is_grad_enabled() and any(t is not None for t in out) and any(
                t.requires_grad for t in inputs):
            out = _second_order_refused(op, out, inputs, third=True)
        return (None, None, None, *out)

    @staticmethod
    def vmap(info, in_dims: tuple, call: TorchFunction, nd: Any, wanted: tuple,
             *args) -> tuple:
        """One gradient per batch row (as _Call.vmap), stacked on dim 0."""
        dims = in_dims[3:]
        rows = [_ScalarGrad.apply(call, nd, wanted, *[a if d is None else a.select(d, b)
                                                     for a, d in zip(args, dims)])
                for b in range(info.batch_size)]
        outs = [None if r[0] is None else torch.stack(r) for r in zip(*rows)]
        return tuple(outs), tuple(None if o is None else 0 for o in outs)

    @staticmethod
    def jvp(ctx, *tangents) -> tuple:
        # The tangent of the gradient along the arguments' tangents: the same product H t.
        args = _saved(ctx)
        _refuse_nested(ctx.call.op, [*ctx.saved_tensors, *[
            t for t in tangents if isinstance(t, torch.Tensor)]], "jvp")
        hv = _hvp(ctx.call, ctx.nd, args, tangents[3:])
        return tuple(torch.as_tensor(hv[i], dtype=a.dtype) if i in hv and ctx.wanted[i]
                     else None for i, a in enumerate(args))


def _hvp(call: TorchFunction, nd: Any, args: list, directions: Sequence) -> dict:
    """The Hessian of a scalar-result call times `directions` (one per argument: a tensor,
    or None for zero), by adjit's forward mode over its reverse mode: {position: array} for
    each float argument (its row of H v, which the other float arguments' directions
    reach too)."""
    op = call.op
    _, values, _ = _prepare(call, nd, args)
    floats = [i for i, v in enumerate(values) if _is_float_value(v)]
    if not floats:
        return {}
    anns = []
    for i, v in enumerate(values):
        if i not in floats:
            anns.append(Const(v))
            continue
        t = directions[i] if i < len(directions) else None
        if isinstance(v, np.ndarray):
            v = np.ascontiguousarray(v)      # (a strided view's shadow would differ)
            tangent = (np.zeros_like(v) if t is None
                       else _view(t.detach().to(args[i].dtype).contiguous()).copy())
            anns.append(Duplicated(v, tangent))
        else:
            anns.append(Duplicated(v, type(v)(0.0 if t is None else t.item())))
    hv = autodiff(Forward, grad(op.f, tuple(floats)), *anns)
    return dict(zip(floats, hv if isinstance(hv, tuple) else (hv,)))


def _is_float_value(v: Any) -> bool:
    dtype = v.dtype if hasattr(v, "dtype") else np.asarray(v).dtype
    return np.issubdtype(dtype, np.floating)


def _jvp(ctx, *tangents) -> Any:
    """_Call's forward-mode rule (torch.autograd.forward_ad, torch.func.jvp)."""
    call, nd, op = ctx.call, ctx.nd, ctx.call.op
    args = _saved(ctx)
    _refuse_nested(op, [*ctx.saved_tensors, *[t for t in tangents
                                              if isinstance(t, torch.Tensor)]], "jvp")
    device, values, _ = _prepare(call, nd, args)
    made: dict[int, torch.Tensor] = {}
    dirs = []
    for i, (a, t) in enumerate(zip(args, tangents[2:])):
        if t is None or i in op.outputs or not isinstance(a, torch.Tensor):
            dirs.append(None)
        elif a.ndim == 0 and i not in op.array_params:
            dirs.append(t.item())
        else:
            dirs.append(_view(t.detach().contiguous()))

    def copy(i: int) -> Any:
        return _view(_resolved(args[i].detach()).clone(
            memory_format=torch.contiguous_format))

    def output_tangent(i: int) -> Any:
        t = tangents[2 + i]
        made[i] = (torch.zeros_like(args[i], memory_format=torch.contiguous_format)
                   if t is None else _resolved(t.detach()).clone(
                       memory_format=torch.contiguous_format))
        return _view(made[i])

    tangent = op.tangent(values, dirs, nd, device, copy, output_tangent)
    if op.is_kernel:
        outs = tuple(made[i] for i in op.outputs)
        return outs[0] if len(outs) == 1 else outs
    if tangent is None:
        return None
    return _tensor(tangent, device)


_SECOND_ORDER = ("{who}: {name}: a derivative of adjit's derivative ({what}) is not supported "
                 "(double backward after create_graph=True, torch.func.grad of a grad, jvp "
                 "of a grad, hessian); take second derivatives inside adjit (adjit.hvp, "
                 "adjit.hessian, adjit.grad of an adjit.grad) and wrap that function instead")


def _refuse_nested(op: Operation, tensors: list, what: str) -> None:
    """Refuses a backward or jvp that a torch.func transform will differentiate again: a
    tensor wrapped by two live derivative levels (torch.func.grad over torch.func.grad, jvp
    over grad): adjit computes the derivative outside torch's sight, so the outer level
    would silently see a constant (a zero second derivative)."""
    functorch = torch._C._functorch
    for t in tensors:
        levels = 0
        while functorch.is_functorch_wrapped_tensor(t):
            if not functorch.is_batchedtensor(t) and functorch.maybe_get_level(t) > 0:
                levels += 1
            t = functorch.get_unwrapped(t)
        if levels > 1:
            raise NotImplementedError(_SECOND_ORDER.format(who=WHO, name=op.name, what=what))


def _second_order_refused(op: Operation, grads: list, inputs: list,
                          third: bool = False) -> list:
    """`grads` (the backward's results, computed by adjit outside autograd's sight) made to
    raise a clear error if autograd differentiates them (backward of a backward:
    create_graph=True, then a derivative of the gradient): torch's own message would be
    "element 0 of tensors does not require grad", or, worse, a missing term would pass
    unnoticed. The first derivative itself is returned unchanged."""
    message = _SECOND_ORDER.format(who=WHO, name=op.name, what="backward")
    if third:
        message = (f"{WHO}: {op.name}: a third derivative (a backward of the second "
                   "derivative) is not supported; take it inside adjit and wrap that function")
    # The error node takes the backward's inputs too, so that autograd finds the path from
    # the gradient to them (and runs the node, which raises) rather than calling them unused.
    linked = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    present = [g for g in grads if g is not None]
    delayed = torch._C._functions.DelayedError(message.encode(), len(present) + len(linked))
    out = iter(delayed(*[g.detach() for g in present], *linked))
    return [None if g is None else next(out) for g in grads]


def _saved(ctx) -> list:
    """The call's arguments again: its saved tensors in their places."""
    tensors = iter(ctx.saved_tensors)
    return [next(tensors) if a is None else a for a in ctx.layout]


__all__ = ["function", "TorchFunction"]
