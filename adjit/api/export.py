"""Ahead-of-time export: `adjit.export(fn, *example_args, path=...)` writes the code compiled
for one specialisation of `fn` (a `@jit` or `@func` function, a kernel's launch, a gradient
or another derivative transform) and its calling convention into one file
(runtime/artifact.py), and `adjit.load(path)` makes a callable of it in any process, without
MLIR: the machinery of a disk-cache hit (compiled.py's `Compiled` and `LoadedDerivative`
over a `CompiledModule`), fed from the file instead of the cache.

What is exported, by the manifest's `kind`:
- "call": a declaration's specialisation (service.cpu), as its own call runs it; a kernel's
  entry takes the ndrange's extents after the arguments, so a loaded kernel takes
  `ndrange=` at each call (its rank fixed by the export);
- "grad": `adjit.grad(f)`/`value_and_grad(f, argnums)` of a declaration: its reverse
  derivative (service.derivative), called as autodiff._grad_call calls it;
- "transform": a transform compiled whole (a Jacobian, a Hessian, a derivative of a
  derivative: service.transform);
- "gpu-kernel": a kernel's launch with device="cuda": its PTX and launch signature
  (service.gpu_kernels), launched by runtime/cuda.py as cuda_launch launches it;
- "host-program": a `device="cuda"` @jit function's call (service.host_program), run by
  cuda_jit.run.
GPU code is compiled for the chip gpu_target.chip names, on a machine without a GPU if need
be; loading it needs no GPU, a call does (runtime/cuda.py says so when there is none).
Tree arguments of a declaration go to its variant (Function.with_trees): the manifest keeps
each tree parameter's structure, which a loaded call flattens the same way.
"""
from __future__ import annotations

import os
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Sequence

from ..core.types import ArrayType, ScalarType, parse_type, type_code, type_of_value
from ..compiler.compiled import Compiled, LoadedDerivative, derivative_meta
from ..lang import pytrees
from ..core.kernel import GpuKernel
from ..lang.functions import Function, Kernel, ndrange_tuple, specialise, workgroup_tuple
from ..lang.modes import ReverseWithPrimal
from ..lang.pytrees import has_tree
from ..runtime import artifact, cpu_cache
from ..core.errors import ArtifactError
from ..runtime.compiled_module import CompiledModule
from ..runtime.foreign import host_values
from . import service
from .autodiff import Grad, Transform, _flatten_args, _prepare, _reverse_annotations

if TYPE_CHECKING:
    from ..runtime.host_program import LoadedProgram

__all__ = ["export", "load", "Exported"]

_SO, _ADJ, _PTX = "module.so", "module.adj", "kernel.ptx"


def export(fn, *example_args, path: str | os.PathLike, ndrange=None,
           device: str = "cpu") -> None:
    """Compiles ``fn`` for the types of ``example_args`` and writes the compiled code, with
    what calling it needs, to one file at ``path``, which :func:`adjit.load` makes callable
    in another process, without MLIR and without compiling.

    The example arguments' types (dtypes, ranks, scalar kinds, tree structures) are the
    specialisation exported, as JAX's export takes them: the loaded callable takes arguments
    of those types only. The code is built for this machine's CPU: it loads on machines
    whose CPU has the features it uses (the same CPU, or a newer one of its family).

    Args:
        fn: an ``@adjit.jit`` or ``@adjit.func`` function; an ``@adjit.kernel`` (give
            ``ndrange=``: the loaded kernel takes ``ndrange=`` of that rank at each call);
            ``adjit.grad(f)``, ``adjit.value_and_grad(f, argnums=...)``, ``adjit.jacfwd``,
            ``adjit.jacrev``, ``adjit.hessian`` of such a function, and derivatives of
            derivatives (``adjit.grad(adjit.grad(f))``).
        *example_args: arguments of the call to export (their values are not kept).
        path: the file to write (replaced if it exists).
        ndrange: a kernel's launch range (its rank is what is exported).
        device: ``"cuda"`` exports a kernel's launch on the GPU (its PTX) or an
            ``@adjit.jit`` function's call with ``device="cuda"`` (its host program; an
            ``@adjit.jit(device="cuda")`` function is exported so anyway), compiled for the
            chip ``ADJIT_CUDA_CHIP`` names (default sm_90), no GPU needed here; the loaded
            function launches through the CUDA driver of the machine that calls it.

    Raises:
        TypeError: ``fn`` is not something adjit compiles, or the arguments are not what it
            takes (struct arguments are not exported: pass their fields).
        RuntimeError: the C compiler or LLVM tools that build the shared object are missing.

    Example:
        ::

            import os, tempfile
            import numpy as np
            import adjit
            from adjit import Array, f64

            @adjit.jit
            def loss(w: Array[f64, 1], x: Array[f64, 1]) -> f64:
                return np.sum((w * x - 1.0) ** 2)

            w, x = np.array([0.5, 1.0]), np.array([1.0, 2.0])
            path = os.path.join(tempfile.mkdtemp(), "grad_loss.adjit")
            adjit.export(adjit.grad(loss), w, x, path=path)
            g = adjit.load(path)
            print(g)                          # what it is and the types it takes
            assert np.array_equal(g(w, x), adjit.grad(loss)(w, x))
    """
    if device not in ("cpu", "cuda"):
        raise ValueError(f"adjit.export: device must be 'cpu' or 'cuda', got {device!r}")
    if isinstance(fn, Function) and fn.kind == "jit" and fn.device == "cuda":
        device = "cuda"              # (@adjit.jit(device="cuda"): its calls are on the GPU)
    if device == "cuda":
        if isinstance(fn, Kernel):
            manifest, ptx = _export_gpu_launch(fn, example_args, ndrange)
            artifact.write(path, manifest, {_PTX: ptx.encode()})
        elif isinstance(fn, Function) and fn.kind == "jit" and ndrange is None:
            manifest, library = _export_host_program(fn, example_args)
            artifact.write(path, manifest, {_SO: library})
        else:
            raise TypeError(f"adjit.export(..., device='cuda') exports kernel launches and "
                            f"@adjit.jit functions; got {_name(fn)}")
        return
    if isinstance(fn, Kernel):
        manifest, module = _export_call(fn, example_args, ndrange)
    elif ndrange is not None:
        raise TypeError(f"adjit.export: ndrange= is for kernels; {_name(fn)} is not one")
    elif isinstance(fn, Function):
        manifest, module = _export_call(fn, example_args, None)
    elif isinstance(fn, Grad) and isinstance(fn.f, Function):
        manifest, module = _export_grad(fn, example_args)
    elif isinstance(fn, Transform):
        manifest, module = _export_transform(fn, example_args)
    else:
        raise TypeError(f"adjit.export exports @adjit.jit, @adjit.func and @adjit.kernel "
                        f"functions and adjit's derivative transforms of them, got {fn!r}")
    from ..compiler.engine import shared_object
    so, errors = shared_object(module.source, module.num_threads)
    manifest.update(threads=module.num_threads, errors=[list(e) for e in errors],
                    module_key=module.key, cpu=artifact.cpu_needs())
    artifact.write(path, manifest, {_SO: so, _ADJ: module.source.encode()})


def _name(fn) -> str:
    return getattr(fn, "__name__", repr(fn))


def _manifest(kind: str, name: str, declaration: str, params: Sequence[str],
              types: Sequence, call: dict, *, ndim: int | None = None, trees=None,
              leaf_params: Sequence[str] | None = None, **more) -> dict:
    """What an artifact says of the function it holds (Exported reads it): `kind` (the
    module docstring's), its name, what declared it, its Python parameters, the exported
    argument types (of `leaf_params`, the parameters of the variant taking tree
    arguments' leaves, where `trees` gives each parameter's tree structure record or None),
    a kernel's ndrange rank `ndim`, and `call`, the record that calling it needs."""
    return {"kind": kind, "name": name, "declaration": declaration, "params": list(params),
            "leaf_params": list(params if leaf_params is None else leaf_params),
            "types": [type_code(t) for t in types], "ndim": ndim, "trees": trees,
            "call": call, **more}


def _refuse_structs(f: Function | Kernel) -> None:
    if f.struct_layout is not None:
        raise TypeError(f"adjit.export: {f.__name__} takes a struct; export takes scalars, "
                        "arrays and trees of them (pass the struct's fields)")


def _export_call(f: Function | Kernel, args: Sequence, ndrange) -> tuple[dict, CompiledModule]:
    """A declaration's specialisation for `args` (launched over `ndrange`: a kernel)."""
    _refuse_structs(f)
    trees, target, args = None, f, tuple(args)
    tree_call = f._tree_call(args)
    if tree_call is not None:
        target, args = tree_call
        trees = [None if t is None else pytrees.to_record(t) for t in target.tree_layout]
        _refuse_structs(target)
    ndim = None
    if isinstance(f, Kernel):
        ndim = len(ndrange_tuple(ndrange, f.__name__))
    types, _ = specialise(f.__name__, target.params, target.annotations, host_values(args))
    _, compiled = service.cpu(target, types, ndim, None)
    return (_manifest("call", f.__name__, f.kind, f.struct_params, types, compiled.meta,
                      ndim=ndim, trees=trees, leaf_params=target.params), compiled.module)


def _export_gpu_launch(k: Kernel, args: Sequence, ndrange) -> tuple[dict, str]:
    """A kernel's launch with device="cuda": its GpuKernel (service.gpu_kernels: compiled
    for the chip that gpu_target.chip names, no GPU needed) and launch signature."""
    from .cuda_launch import gpu_kernel, specialise_cuda
    _refuse_structs(k)
    if k._tree_call(tuple(args)) is not None:
        raise TypeError(f"adjit.export of kernel {k.__name__} for device='cuda': export "
                        "takes its scalar and array arguments (trees are not exported here)")
    ndim = len(ndrange_tuple(ndrange, k.__name__))
    types, _ = specialise_cuda(k, args)
    record = gpu_kernel(k, types, ndim).to_dict()
    ptx = record.pop("ptx")
    # (no CPU needs: the driver compiles the PTX for the GPU it runs on)
    return _manifest("gpu-kernel", k.__name__, "kernel", k.params, types, record, ndim=ndim,
                     cpu=None), ptx


def _export_host_program(fn: Function, args: Sequence) -> tuple[dict, bytes]:
    """A @jit function's call with device="cuda": its host program (service.host_program:
    the host code built for cpu_cache.portable_target, its kernels' PTX)."""
    from ..runtime import host_program
    from .cuda_jit import specialise_host
    _refuse_structs(fn)
    if fn._tree_call(tuple(args)) is not None:
        raise TypeError(f"adjit.export of {fn.__name__} for device='cuda': export takes its "
                        "scalar and array arguments (trees are not exported here)")
    types, _ = specialise_host(fn, args)
    program = service.host_program(fn, types).program
    return _manifest("host-program", fn.__name__, "jit", fn.params, types,
                     host_program.to_record(program),
                     cpu=artifact.cpu_needs(portable=True)), program.library


def _export_grad(g: Grad, args: Sequence) -> tuple[dict, CompiledModule]:
    """adjit.grad/value_and_grad of a declaration: its reverse derivative, as _grad_call
    takes it."""
    f = g.f
    _refuse_structs(f)
    args = host_values(args)
    if has_tree(args):
        raise TypeError(f"adjit.export of {g.__name__}: export takes the gradient with respect "
                        "to scalar and array arguments (trees are not exported here)")
    nums = g.nums(len(args))
    anns, _ = _reverse_annotations(args, nums)
    anns, types, _, _, _ = _prepare(f, anns, None, None, True, "cpu", flat=True)
    d = service.derivative(f, ReverseWithPrimal, anns, types, None, None)
    if len(d.results) != 1 or not (isinstance(d.results[0], ScalarType) and
                                   d.results[0].is_float):
        raise TypeError(f"grad of {f.__name__}: the function must return a float scalar")
    return _manifest("grad", g.__name__, f.kind, f.params, types, derivative_meta(d),
                     grad={"argnums": list(nums), "single": isinstance(g.argnums, int),
                           "with_value": g.with_value}), d.module


def _export_transform(g: Transform, args: Sequence) -> tuple[dict, CompiledModule]:
    """A transform compiled whole (service.transform), as its own call runs it."""
    args = host_values(args)
    if has_tree(args):
        raise TypeError(f"adjit.export of {g.__name__}: a Jacobian, Hessian or derivative of "
                        "a derivative is exported for scalar and array arguments")
    types = tuple(type_of_value(a) for a in args)
    compiled = service.transform(g, types)
    return (_manifest("transform", g.__name__, "transform", g.params, types, compiled.meta),
            compiled.module)


# ---- loading --------------------------------------------------------------------------------
def load(path: str | os.PathLike) -> Exported:
    """The function that :func:`adjit.export` wrote to ``path``, ready to call: in this or
    any process, without MLIR (the process never imports it) and without compiling.

    An artifact is code, like a pickle: **load only files you trust**. ``load`` refuses a
    file it cannot trust by the rule of adjit's caches: the file and every folder above it
    must be owned by you or root and not writable by group or others (a folder with the
    sticky bit, like ``/tmp``, excepted).

    The callable takes the exported specialisation only: arguments of the exported types
    (a scalar is converted as for an annotated parameter; arrays must have the dtype and
    rank), a kernel ``ndrange=`` of the exported rank; anything else raises ``TypeError``,
    since it cannot compile another.

    Raises:
        FileNotFoundError: no file at ``path``.
        adjit.ArtifactError: a file it cannot trust, not an artifact, of another format or
            adjit version, damaged (a member or the manifest not matching its SHA-256), or
            built for a CPU with features this one lacks; the message names which.

    Example:
        ::

            import os, tempfile
            import numpy as np
            import adjit
            from adjit import Array, f64

            @adjit.jit
            def energy(k: f64, x: Array[f64, 1]) -> f64:
                return 0.5 * k * np.sum(x * x)

            path = os.path.join(tempfile.mkdtemp(), "energy.adjit")
            adjit.export(adjit.value_and_grad(energy, argnums=(0, 1)), 2.0, np.ones(3),
                         path=path)
            f = adjit.load(path)
            value, (dk, dx) = f(2.0, np.array([1.0, 2.0, 3.0]))
            print(value, dk, dx)              # 14.0 7.0 [2. 4. 6.]
            try:
                f(2.0, np.ones(3, dtype=np.float32))
            except TypeError as e:
                print(e)                      # names the argument and the exported type
    """
    manifest, members = artifact.read(path)
    if manifest.get("kind") == "gpu-kernel":
        try:
            kernel = GpuKernel.from_dict({**manifest["call"], "ptx": members[_PTX].decode()})
        except (KeyError, TypeError, ValueError) as e:
            raise ArtifactError(f"adjit.load: {path} is not an artifact this adjit can call "
                                f"({type(e).__name__}: {e})") from None
        return Exported(os.fspath(path), manifest, kernel)
    if manifest.get("kind") == "host-program":
        from ..runtime.host_program import LoadedProgram, from_record
        try:
            program = from_record(manifest["call"], members[_SO])
        except (KeyError, TypeError, ValueError) as e:
            raise ArtifactError(f"adjit.load: {path} is not an artifact this adjit can call "
                                f"({type(e).__name__}: {e})") from None
        with artifact.extracted(program.library) as so:
            return Exported(os.fspath(path), manifest, LoadedProgram(program, so))
    try:
        so, source = members[_SO], members[_ADJ].decode()
        errors = tuple((str(k), str(m)) for k, m in manifest["errors"])
        library = artifact.load_library(so, manifest["name"])
        entry = cpu_cache.Entry(library, errors, manifest["module_key"])
        module = CompiledModule(entry.address, entry, errors, source,
                                int(manifest["threads"]), 3, entry.key)
        return Exported(os.fspath(path), manifest, module)
    except (KeyError, TypeError, ValueError, UnicodeDecodeError) as e:
        if isinstance(e, ArtifactError):
            raise
        raise ArtifactError(f"adjit.load: {path} is not an artifact this adjit can call "
                            f"({type(e).__name__}: {e})") from None


def _why(want, got) -> str:
    """What differs between two array types of one dtype and rank, in words."""
    if not (isinstance(want, ArrayType) and isinstance(got, ArrayType) and
            (want.dtype, want.ndim) == (got.dtype, got.ndim)):
        return ""
    if want.units != got.units:
        return (f": the dimensions of size 1 differ ({list(want.units) or 'none'} exported, "
                f"{list(got.units) or 'none'} given), and NumPy broadcasts a dimension of "
                "size 1, so each is a specialisation of its own")
    if got.strided and not want.strided:
        return ": a strided view (pass np.ascontiguousarray of it)"
    return ""


def _shown(t) -> str:
    if getattr(t, "weak", False):     # a Python scalar's type (NEP 50's weak type)
        return "float" if t.is_float else "int"
    return repr(t).replace("adjit.", "")


class Exported:
    """What :func:`adjit.load` returns: the exported function, called with arguments of the
    exported types (a kernel's with ``ndrange=`` of the exported rank, and on the GPU
    ``workgroupsize=``). ``name``, ``params`` and ``types`` say what it is; its repr says it
    all."""

    def __init__(self, path: str, manifest: dict,
                 module: CompiledModule | GpuKernel | LoadedProgram):
        self.path, self.name = path, manifest["name"]
        self.kind, self.declaration = manifest["kind"], manifest["declaration"]
        self.params = list(manifest["params"])
        self._leaf_params = list(manifest["leaf_params"])
        self.types = [parse_type(c) for c in manifest["types"]]
        self.ndim = manifest["ndim"]
        self._trees = ([None if r is None else pytrees.from_record(r)
                        for r in manifest["trees"]] if manifest["trees"] else None)
        target = SimpleNamespace(__name__=self.name, params=self._leaf_params)
        if self.kind == "gpu-kernel":
            self._kernel = module
        elif self.kind == "host-program":
            self._program = module
        elif self.kind == "grad":
            self._derivative = LoadedDerivative(module, manifest["call"], self.name)
            self._grad = manifest["grad"]
        else:
            self._compiled = Compiled.from_meta(module, manifest["call"], target,
                                                module.source)

    def __repr__(self) -> str:
        leaves = iter(self.types)
        shown = []
        for k, p in enumerate(self.params):
            tree = self._trees[k] if self._trees else None
            n = 1 if tree is None else len(pytrees.paths(tree))
            parts = [_shown(next(leaves)) for _ in range(n)]
            shown.append(f"{p}: {parts[0]}" if tree is None else
                         f"{p}: tree of {n} leaves ({', '.join(parts)})")
        over = f", ndrange= of rank {self.ndim}" if self.ndim is not None else ""
        if self.kind == "gpu-kernel":
            over += f"; on the GPU, {self._kernel.chip}"
        elif self.kind == "host-program":
            chips = sorted({k.chip for k in self._program.program.kernels})
            over += f"; device='cuda', kernels for {', '.join(chips) or 'no chip'}"
        what = "" if self.kind in ("grad", "transform") else f"{self.declaration} "
        return (f"<adjit.load {what}{self.name}({', '.join(shown)}{over}) "
                f"from {self.path!r}>")

    def _values(self, args: tuple, device: str = "cpu") -> list:
        """The arguments, checked against (and, for scalars, converted to) the exported
        types; TypeError naming the first that does not match."""
        if len(args) != len(self.params):
            raise TypeError(f"{self.name}() (exported) takes {len(self.params)} arguments "
                            f"({', '.join(self.params)}), got {len(args)}")
        if self._trees:
            flat = []
            for p, tree, a in zip(self.params, self._trees, args):
                if tree is None:
                    flat.append(a)
                    continue
                try:
                    got = pytrees.python_structure(a)
                except TypeError:
                    got = None
                if got != tree:
                    raise TypeError(f"{self.name}() (exported): argument {p!r} must be a tree "
                                    f"of the exported structure {tree}, got "
                                    f"{type(a).__name__}" +
                                    ("" if got is None else f" of structure {got}"))
                flat.extend(leaf for _, leaf in pytrees.leaves(tree, a))
            args = tuple(flat)
        if device == "cuda":
            from .cuda_launch import device_value
            args = tuple(device_value(a) for a in args)
        else:
            args = tuple(host_values(args))
        try:
            types, values = specialise(self.name, self._leaf_params, self.types, args,
                                       device)
        except (TypeError, ValueError, OverflowError) as e:
            raise TypeError(f"{e} (it was exported for ({self._signature()}) and cannot "
                            "compile another specialisation: export it again for these "
                            "arguments)") from None
        for p, want, got in zip(self._leaf_params, self.types, types):
            if got != want:
                raise TypeError(f"{self.name}() (exported): argument {p!r} must be "
                                f"{_shown(want)}, got {_shown(got)}{_why(want, got)} (it was "
                                f"exported for ({self._signature()}) and cannot compile "
                                "another specialisation: export it again for these "
                                "arguments)")
        return values

    def _signature(self) -> str:
        return ", ".join(f"{p}: {_shown(t)}" for p, t in zip(self._leaf_params, self.types))

    def __call__(self, *args, ndrange=None, workgroupsize=None) -> Any:
        on_gpu = self.kind in ("gpu-kernel", "host-program")
        values = self._values(args, "cuda" if on_gpu else "cpu")
        if self.ndim is not None:
            nd = ndrange_tuple(ndrange, self.name)
            if len(nd) != self.ndim:
                raise TypeError(f"kernel {self.name} (exported) was exported for a "
                                f"{self.ndim}-D ndrange, got {ndrange!r}")
            if on_gpu:      # (a GPU kernel reads its block size at run time: cuda_launch.py)
                from ..runtime import cuda
                cuda.launch(self._kernel, values, nd,
                            workgroup_tuple(workgroupsize, len(nd), self.name))
            elif workgroupsize is not None:
                raise TypeError(f"kernel {self.name} (exported) runs on the CPU, which takes "
                                "no workgroupsize=")
            else:
                self._compiled.call(*values, *nd)
            return None
        if ndrange is not None:
            raise TypeError(f"{self.name} (exported) is not a kernel: ndrange= is for kernels")
        if self.kind == "host-program":
            from .cuda_jit import run
            return run(self._program, values)
        if self.kind != "grad":
            return self._compiled.call(*values)
        # As autodiff._grad_call: zero shadows for arrays at argnums, scalars Active.
        nums = self._grad["argnums"]
        anns, shadows = _reverse_annotations(values, nums)
        primal, grads = self._derivative.reverse(
            _flatten_args(ReverseWithPrimal, anns, self.types, values))
        out = tuple(shadows[k] if k in shadows else grads[k] for k in nums)
        out = out[0] if self._grad["single"] else out
        return (primal[0], out) if self._grad["with_value"] else out
